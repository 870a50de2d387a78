"""The example fixtures served over stdio by the asyncio adapter, both eras, sealed state.

    python tests/interop/stdio_server.py

(``examples/asyncio/server.py`` plays this part once it exists; this script keeps the interop
tests independent of it.)
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

from fixtures import Everything, server_config

import mrtr_sansio as m
from mrtr_sansio.adapters.anyio import serve_stdio


def main() -> None:
    config = server_config(request_state=m.sealing.RequestStateSecurity.ephemeral())
    asyncio.run(serve_stdio(Everything().handle, config))


if __name__ == "__main__":
    main()
