#!/usr/bin/env bash
# Watch an agent use memfs: mounts a fresh memory at ./memfs-demo/mnt and
# replays a scripted agent session (examples/demo/session.jsonl) through the
# daemon's socket, one tool call every few seconds. Watch it from another
# terminal (`watch -n 0.5 ls -lR memfs-demo/mnt`) or open a file in an editor.
# No API key needed.
#   usage: scripts/demo.sh [--pace SECONDS] [--no-wait]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
pace=3
wait_at_end=1
while [ $# -gt 0 ]; do
  case "$1" in
    --pace)
      if [ $# -lt 2 ] || ! [[ $2 =~ ^[0-9]+([.][0-9]+)?$ ]]; then
        echo "usage: scripts/demo.sh [--pace SECONDS] [--no-wait]  (--pace needs a number of seconds)" >&2
        exit 2
      fi
      pace=$2; shift 2 ;;
    --no-wait) wait_at_end=0; shift ;;
    *) echo "usage: scripts/demo.sh [--pace SECONDS] [--no-wait]" >&2; exit 2 ;;
  esac
done
(cd "$repo" && cargo build --locked --release --quiet)
memfs=$repo/target/release/memfs
demo=$PWD/memfs-demo
rm -rf "$demo/memory"
mkdir -p "$demo/mnt"
"$memfs" --data "$demo/memory" mount "$demo/mnt" 2> "$demo/memfs.log" &
pid=$!
stop() { kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; }
trap stop EXIT
for _ in $(seq 100); do [ -S "$demo/memory/.memfs/sock" ] && mountpoint -q "$demo/mnt" && break; sleep 0.1; done
if ! mountpoint -q "$demo/mnt"; then
  cat "$demo/memfs.log" >&2
  exit 1
fi
echo "The memory is mounted at $demo/mnt. In another terminal:"
echo "    watch -n 0.5 ls -lR $demo/mnt      (or: vim $demo/mnt/progress.md, once it exists)"
echo
sleep "$pace"
while IFS= read -r block; do
  [ -z "$block" ] && continue
  input=$(python3 -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1])["input"]))' "$block")
  echo "agent -> $(python3 -c 'import json,sys; i=json.loads(sys.argv[1]); print(i["command"], i.get("path") or i["old_path"] + " -> " + i["new_path"])' "$input")"
  answer=$("$memfs" --data "$demo/memory" exec "$input" || true)
  python3 -c 'import json,sys; a=json.loads(sys.argv[1]); t=a["content"] if isinstance(a["content"], str) else "[image]"; print(("   ERROR " if a["is_error"] else "   ") + t.replace("\n", "\n   "))' "$answer"
  echo
  sleep "$pace"
done < "$repo/examples/demo/session.jsonl"
echo "The session is over; the memory stays at $demo/memory/memories."
if [ "$wait_at_end" = 1 ] && [ -t 0 ]; then
  read -r -p "Press Enter to unmount. " _
fi
