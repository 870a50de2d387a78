"""The fixtures on stdio (trio): every conformance fixture and the ``book_trip`` demo.

    python examples/trio/server.py

The trio twin of ``examples/asyncio/server.py``: the same handlers, both wires, one JSON
message per line on stdin/stdout, logs on stderr, ``requestState`` sealed with a key made for
this process.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import trio

import mrtr_sansio as m
from mrtr_sansio.adapters.anyio import serve_stdio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fixtures import Everything, server_config


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    config = server_config(request_state=m.sealing.RequestStateSecurity.ephemeral())
    trio.run(serve_stdio, Everything().handle, config)


if __name__ == "__main__":
    main()
