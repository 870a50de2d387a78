"""The fixtures on stdio (asyncio): every conformance fixture and the ``book_trip`` demo.

    python examples/asyncio/server.py

One JSON message per line on stdin/stdout, logs on stderr. It speaks both wires: a 2026-07-28
client gets ``input_required`` results and retries; a 2025-11-25 client (``initialize`` first)
gets real ``elicitation/create``, ``sampling/createMessage`` and ``roots/list`` requests from the
legacy shim, which runs the same handlers. ``requestState`` is sealed with a key made for this
process (a stdio server lives as long as its one client).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import mrtr_sansio as m
from mrtr_sansio.adapters.anyio import serve_stdio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fixtures import Everything, server_config


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    config = server_config(request_state=m.sealing.RequestStateSecurity.ephemeral())
    asyncio.run(serve_stdio(Everything().handle, config))


if __name__ == "__main__":
    main()
