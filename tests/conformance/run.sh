#!/usr/bin/env bash
# The official MCP conformance suite against examples/http/server.py: every leg (see runner.py),
# then the negative control (the runner must fail against a deliberately broken server).
#   tests/conformance/run.sh [runner.py options, e.g. --leg mrtr]
# Needs npm (Node.js and the pinned harness are installed from the npm registry into a cache).
set -euo pipefail
cd "$(dirname "$0")/../.."
python="${PYTHON:-.venv/bin/python}"
[[ -x "$python" ]] || python=python3
"$python" tests/conformance/runner.py "$@"
echo "== negative control"
MRTR_CONFORMANCE=1 "$python" -m pytest -q -p no:cacheprovider -m conformance tests/conformance
