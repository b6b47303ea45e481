#!/usr/bin/env bash
# Makes (once) the Python venv the scripts share, with the pinned packages of
# tests/python/requirements.txt, and prints its python's path.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${MEMFS_PYENV:-target/py-venv}
stamp="$venv/.requirements"
if ! cmp -s tests/python/requirements.txt "$stamp" 2>/dev/null; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/python/requirements.txt >&2
  cp tests/python/requirements.txt "$stamp"
fi
echo "$venv/bin/python"
