#!/usr/bin/env bash
# POSIX conformance of the mount: pjdfstest on a tmpfs (the baseline) and on a
# memfs mount in the same run, then fsx on the memfs mount. Fails on any
# pjdfstest failure that docs/POSIX.md does not list, or on an fsx error.
# Needs root and /dev/fuse (it mounts, and pjdfstest switches users).
#   usage: scripts/posix.sh [FSX_OPS]      (default 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
fsx_ops=${1:-100000}
if [ "$(id -u)" != 0 ] || [ ! -e /dev/fuse ]; then
  echo "SKIPPED scripts/posix.sh: needs root and /dev/fuse"
  exit 0
fi

# Tools: the pjdfstest and fsx crates (built once, kept in target/), libacl for
# pjdfstest's build, and the dummy users pjdfstest switches to.
tools=$repo/target/posix-tools
if [ ! -x "$tools/bin/pjdfstest" ] || [ ! -x "$tools/bin/fsx" ]; then
  if ! dpkg -s libacl1-dev >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libacl1-dev >/dev/null
  fi
  echo "posix: building pjdfstest and fsx into target/posix-tools (once; a few minutes, then reused)"
  cargo install --quiet --locked --root "$tools" pjdfstest@0.2.2 fsx@0.3.2
fi
id tests >/dev/null 2>&1 || echo 'tests:x:::pjdfstest dummy user:/:/usr/sbin/nologin' | newusers
nobody_group=$(id -gn nobody)
cargo build --locked --release --quiet

work=$(mktemp -d)
chmod 755 "$work"   # pjdfstest's dummy users must reach both file systems
memfs_pid=
cleanup() {
  [ -n "$memfs_pid" ] && kill -TERM "$memfs_pid" 2>/dev/null && wait "$memfs_pid" 2>/dev/null || true
  umount -l "$work/tmpfs" 2>/dev/null || true
  umount -l "$work/mnt" 2>/dev/null || true
  [ -L /usr/local/bin/memfs ] && [ "$(readlink /usr/local/bin/memfs)" = "$repo/target/release/memfs" ] && rm -f /usr/local/bin/memfs
  rm -rf "$work"
}
trap cleanup EXIT

conf() {
  cat <<CONF
[features]
posix_fallocate = {}
utimensat = {}
utime_now = {}
rename_ctime = {}

[settings]
naptime = 0.02
allow_remount = true

[dummy_auth]
entries = [["nobody", "$nobody_group"], ["tests", "tests"]]
CONF
}
conf > "$work/pjdfstest.toml"

# The baseline: the kernel's own tmpfs, same settings, same run.
mkdir "$work/tmpfs"
mount -t tmpfs tmpfs "$work/tmpfs"
(cd "$work/tmpfs" && "$tools/bin/pjdfstest" -c "$work/pjdfstest.toml" -p "$work/tmpfs" > "$work/pjd-tmpfs.log" 2>&1) || true
tmpfs_summary=$(grep '^Summary' "$work/pjd-tmpfs.log")

# memfs. mount(8) remounts (pjdfstest's EROFS tests) run `memfs` as the FUSE
# mount helper, from root's PATH.
[ -e /usr/local/bin/memfs ] || ln -s "$repo/target/release/memfs" /usr/local/bin/memfs
mkdir "$work/mnt"
"$repo/target/release/memfs" --data "$work/data" --max-file-size 64M mount "$work/mnt" --allow-other 2> "$work/memfs.log" &
memfs_pid=$!
for _ in $(seq 100); do mountpoint -q "$work/mnt" && [ -S "$work/data/.memfs/sock" ] && break; sleep 0.1; done
mountpoint -q "$work/mnt" || { cat "$work/memfs.log"; echo "memfs did not mount"; exit 1; }
chmod 1777 "$work/mnt"   # the memory root is 0700; pjdfstest's users need to enter it
(cd "$work/mnt" && "$tools/bin/pjdfstest" -c "$work/pjdfstest.toml" -p "$work/mnt" > "$work/pjd-memfs.log" 2>&1) || true
memfs_summary=$(grep '^Summary' "$work/pjd-memfs.log" || echo "Summary: pjdfstest did not finish")

# The EROFS cases again, alone: in the whole run their remount to read-only
# is refused as busy (by files the harness' earlier cases leave open, on
# tmpfs too); alone, nothing is open, so they run, and must all pass.
(cd "$work/mnt" && "$tools/bin/pjdfstest" -c "$work/pjdfstest.toml" -p "$work/mnt" erofs > "$work/pjd-erofs.log" 2>&1) || true
erofs_summary=$(grep '^Summary' "$work/pjd-erofs.log" || echo "Summary: pjdfstest did not finish")

fsx_status=0
"$tools/bin/fsx" -N "$fsx_ops" -S 2025 -P "$work" "$work/mnt/fsx.file" > "$work/fsx.log" 2>&1 || fsx_status=$?
fsx_result=$(tail -n 1 "$work/fsx.log")

# A memfs failure is accepted when docs/POSIX.md lists it, when it is a
# remount the kernel refused as busy, or when tmpfs failed it in this run too.
failed() { grep -E 'FAILED$' "$1" | awk '{print $1}' | sort -u; }
documented=$(sed -n '/^<!-- expected-failures -->/,/^<!-- end -->/p' docs/POSIX.md | grep -oE '`[a-z_:0-9]+`' | tr -d '`' | sort -u)
unexpected=()
while read -r case; do
  [ -z "$case" ] && continue
  grep -qxF "$case" <<<"$documented" && continue
  grep -qxF "$case" <(failed "$work/pjd-tmpfs.log") && continue
  grep -A2 -F "$case" "$work/pjd-memfs.log" | grep -q 'Failed to remount.*busy' && continue
  unexpected+=("$case")
done < <(failed "$work/pjd-memfs.log")

echo "pjdfstest on tmpfs: $tmpfs_summary"
echo "pjdfstest on memfs: $memfs_summary"
echo "pjdfstest EROFS cases alone on memfs: $erofs_summary"
failed "$work/pjd-memfs.log" | sed 's/^/  memfs failed: /'
echo "fsx on memfs, $fsx_ops operations: $fsx_result"
if ! grep -qE '^Summary: 0 failed, 0 skipped, [1-9][0-9]* passed' "$work/pjd-erofs.log"; then
  echo "the EROFS cases, run alone on memfs, did not all pass:"
  grep -E 'FAILED|Summary' "$work/pjd-erofs.log" | head -20
  echo "posix: 0 passed, 1 failed"
  exit 1
fi
if [ ${#unexpected[@]} -gt 0 ] || ! grep -q '^Summary' "$work/pjd-memfs.log"; then
  echo "pjdfstest failures on memfs that docs/POSIX.md does not explain: ${unexpected[*]:-(no summary)}"
  grep -vE '^\s+([0-9]+:|at )' "$work/pjd-memfs.log" | grep -A3 FAILED | head -60
  echo "posix: $([ $fsx_status -eq 0 ] && echo 1 || echo 0) passed, $([ $fsx_status -eq 0 ] && echo 1 || echo 2) failed"
  exit 1
fi
if [ $fsx_status -ne 0 ]; then
  tail -n 30 "$work/fsx.log"
  echo "posix: 1 passed, 1 failed"
  exit 1
fi
# The two gates: pjdfstest (every failure explained) and fsx.
echo "posix: 2 passed, 0 failed"
