#!/usr/bin/env bash
# Builds the npm packages into target/npm and prints the two tarballs' paths:
# memfs-memory (the betaMemoryTool handlers, types, and a `memfs` command)
# and memfs-memory-linux-x64 (the binary, an optional dependency of the
# first, as esbuild and biome ship theirs). The binary is the Python wheel's
# (scripts/package_python.sh: built with zig for glibc 2.28, stripped), so
# both packages carry the same one. Another platform is one more package
# directory beside packages/npm/memfs-memory-linux-x64 and one more entry in
# memfs-memory's optionalDependencies and src/binary.ts's BUILT_FOR.
set -euo pipefail
cd "$(dirname "$0")/.."
wheel=$(scripts/package_python.sh)
platform=packages/npm/memfs-memory-linux-x64
mkdir -p "$platform/bin"
python3 - "$wheel" "$platform/bin/memfs" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith(".data/scripts/memfs"))
    with z.open(name) as src, open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
chmod 755 "$platform/bin/memfs"
main=packages/npm/memfs-memory
(cd "$main" && npm install --silent --no-audit --no-fund >&2 && npx tsc -p . >&2)
mkdir -p target/npm
rm -f target/npm/*.tgz
(cd "$platform" && npm pack --silent --pack-destination ../../../target/npm >&2)
(cd "$main" && npm pack --silent --pack-destination ../../../target/npm >&2)
ls "$PWD"/target/npm/memfs-memory-linux-x64-*.tgz "$PWD"/target/npm/memfs-memory-[0-9]*.tgz
