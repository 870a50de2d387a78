#!/usr/bin/env bash
# Sets up .venv (first run only) and runs the demo: the asyncio client books a trip through the
# asyncio stdio server (examples/), once on each wire, printing the MRTR transcript.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then "$python" -m venv .venv; fi
.venv/bin/python -m pip install --quiet -e '.[anyio]'
server=(.venv/bin/python examples/asyncio/server.py)
.venv/bin/python examples/asyncio/client.py --era modern -- "${server[@]}"
echo
.venv/bin/python examples/asyncio/client.py --era legacy -- "${server[@]}"
