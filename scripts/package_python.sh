#!/usr/bin/env bash
# Builds the Python package (packages/python: the memfs binary in a wheel,
# with memfs_memory) into target/wheels and prints the wheel's path.
# manylinux_2_28 through zig: glibc 2.28 is the oldest the Rust standard
# library links against here (2.17 fails on getrandom); it covers RHEL 8+,
# Debian 10+, Ubuntu 18.10+ and Amazon Linux 2023. The build venv
# (target/pkg-venv) holds the pinned maturin and ziglang.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/pkg-venv
if [ ! -x "$venv/bin/maturin" ]; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check maturin==1.16.0 ziglang==0.17.1 >&2
fi
rm -rf target/wheels
(cd packages/python && PATH="$PWD/../../$venv/bin:$PATH" maturin build --quiet --locked --release --zig \
  --compatibility manylinux_2_28 --out ../../target/wheels >&2)
ls "$PWD"/target/wheels/memfs_memory-*.whl
