"""The booking demo against a stdio server, on the trio client, printing the transcript.

    python examples/trio/client.py --era modern -- python examples/trio/server.py
    python examples/trio/client.py --era legacy -- python examples/asyncio/server.py

``--era``: ``modern`` (2026-07-28: ``input_required`` results and retries), ``legacy``
(2025-11-25: ``initialize``, then the server's own requests) or ``auto`` (probe with
``server/discover``, the default). A scripted user answers (see ``examples/booking.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import trio

from mrtr_sansio.adapters.anyio import Client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from booking import ARGUMENTS, TOOL, Demo, parse_args


async def run(demo: Demo, command: Sequence[str]) -> None:
    demo.header("trio", command)
    async with Client.connect_stdio(command, demo.config, **demo.options()) as client:
        demo.connected(client)
        demo.result(await client.call_tool(TOOL, ARGUMENTS))


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv, __doc__.split("\n")[0])
    trio.run(run, Demo(args.era, full=args.full), args.command)


if __name__ == "__main__":
    main()
