#!/usr/bin/env bash
# Sets up .venv (first run, or after pyproject.toml changed: see scripts/_venv.sh) and runs the
# demo: the asyncio client books a trip through the asyncio stdio server (examples/), once on
# each wire, printing the MRTR transcript.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
ensure_venv demo --group demo
server=("$venv/bin/python" examples/asyncio/server.py)
"$venv/bin/python" examples/asyncio/client.py --era modern -- "${server[@]}"
echo
"$venv/bin/python" examples/asyncio/client.py --era legacy -- "${server[@]}"
