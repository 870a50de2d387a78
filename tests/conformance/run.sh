#!/usr/bin/env bash
# The official MCP conformance suite against examples/http/server.py: every leg (see runner.py),
# the requirement sets again through the era bridge (docs/bridge.md), then the negative control
# (the runner must fail against a deliberately broken server).
#   tests/conformance/run.sh [runner.py options, e.g. --leg mrtr]   (options: the direct run only)
# Needs npm (Node.js and the pinned harness are installed from the npm registry into a cache).
set -euo pipefail
cd "$(dirname "$0")/../.."
python="${PYTHON:-.venv/bin/python}"
[[ -x "$python" ]] || python=python3
"$python" tests/conformance/runner.py "$@"
# Through the bridge, each requirement set one scenario at a time (runner.py --help); the
# 2026-07-28 set holds the 14 MRTR scenarios, the 2025-11-25 set the legacy-shim ones.
bridged=(--via-bridge --expected-failures tests/conformance/expected-failures-bridge.txt)
echo "== a modern client through mrtr-bridge to the dual-era server"
"$python" tests/conformance/runner.py "${bridged[@]}" --leg 2026-07-28
echo "== a legacy client through a legacy-only mrtr-bridge to the server made modern-only"
"$python" tests/conformance/runner.py "${bridged[@]}" --bridge-arg=--downstream-era=legacy \
  --server "$python examples/http/server.py --modern-only --port {port}" --leg 2025-11-25
echo "== negative control"
MRTR_CONFORMANCE=1 "$python" -m pytest -q -p no:cacheprovider -m conformance tests/conformance
