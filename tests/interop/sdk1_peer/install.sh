#!/usr/bin/env bash
# Makes .venv-sdk1 (at the repository's root) with the official Python SDK 1.x (mcp<2) from PyPI,
# for tests/test_bridge_sdk.py. A venv of its own: the project's venv holds mcp 2.x.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/../../../.venv-sdk1"
python="${PYTHON:-python3}"
[[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "mcp==1.30.0"
"$venv/bin/python" -c "import importlib.metadata as m; print('mcp', m.version('mcp'))"
