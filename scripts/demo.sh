#!/usr/bin/env bash
# Sets up .venv (first run only) and runs the main demo.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then "$python" -m venv .venv; fi
.venv/bin/python -m pip install --quiet -e .
.venv/bin/python examples/transcript.py
