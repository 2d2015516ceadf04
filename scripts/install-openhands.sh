#!/usr/bin/env bash
# The OpenHands SDK in a venv of its own (it needs Python >= 3.12; MegaFlow's
# venv is 3.11): VENV/openhands, where the `openhands` agent looks by default.
# Usage: bash scripts/install-openhands.sh [VENV]   (VENV defaults to .venv)
# Idempotent: a stamp named after the requirements' hash skips a done install.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv}
DIR=$VENV/openhands
REQS=scripts/openhands-requirements.txt
STAMP=$DIR/.installed-$(sha256sum "$REQS" | cut -c1-16)
[ -f "$STAMP" ] && exit 0

# A Python 3.12 or newer: OPENHANDS_PYTHON, else the newest pyenv 3.12 build
# (the requirements were resolved on 3.12), else python3.12 / python3.13 on PATH.
find_python() {
  if [ -n "${OPENHANDS_PYTHON:-}" ]; then echo "$OPENHANDS_PYTHON"; return; fi
  if command -v pyenv >/dev/null 2>&1; then
    local v
    v=$(pyenv versions --bare 2>/dev/null | grep -E '^3\.12(\.[0-9]+)?$' | sort -V | tail -1 || true)
    if [ -n "$v" ]; then echo "$(pyenv root)/versions/$v/bin/python3"; return; fi
  fi
  for p in python3.12 python3.13; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
      command -v "$p"; return
    fi
  done
  return 1
}
PY=$(find_python) || {
  echo "install-openhands: no Python >= 3.12 found; set OPENHANDS_PYTHON to one" >&2
  exit 1
}
"$PY" -c 'import sys; assert sys.version_info >= (3, 12), sys.version' || {
  echo "install-openhands: $PY is older than 3.12" >&2
  exit 1
}
rm -rf "$DIR"
"$PY" -m venv "$DIR"
"$DIR/bin/python" -m pip install -q --upgrade pip
"$DIR/bin/python" -m pip install -q --no-deps -r "$REQS"
OPENHANDS_SUPPRESS_BANNER=1 LITELLM_LOCAL_MODEL_COST_MAP=True "$DIR/bin/python" -c 'import openhands.sdk, openhands.tools.terminal, openhands.tools.file_editor'
touch "$STAMP"
echo "install-openhands: OpenHands SDK ready in $DIR ($("$DIR/bin/python" --version))"
