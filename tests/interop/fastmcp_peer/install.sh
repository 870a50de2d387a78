#!/usr/bin/env bash
# Makes .venv-fastmcp (at the repository's root) with fastmcp-tasks 4.1.4 and its locked
# dependencies (requirements.txt here) from PyPI, for tests/interop/test_fastmcp_tasks.py. A venv
# of its own: fastmcp-tasks excludes the redis version the project's venv pins.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/../../../.venv-fastmcp"
python="${PYTHON:-python3}"
[[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$here/requirements.txt"
"$venv/bin/python" -c "import importlib.metadata as m; print('fastmcp-tasks', m.version('fastmcp-tasks'))"
