"""Check an MRTR server against the spec: ``mrtr-check server``, with our fixtures as default.

    python examples/testing/check_server.py                             # our fixtures, in process
    python examples/testing/check_server.py http://127.0.0.1:8000/mcp   # any server over HTTP

The same as ``mrtr-check server`` (installed with the ``testing`` extra), except that without a
URL or ``--handler`` it drives the fixtures of ``examples/fixtures.py`` (the conformance
"everything" server, plus the booking demo) on a :class:`~mrtr_sansio.ServerConnection` in this
process. ``--tool``/``--prompt``/``--resource`` replace the default operations; see ``--help``.
Exit status 0: no rule broken.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mrtr_sansio.testing import InProcessServer, cli, in_process_server, tool

#: Our fixtures also have the booking demo, which takes arguments.
IN_PROCESS_EXTRA = (tool("book_trip", {"destination": "Lisbon", "guests": 2}, mrtr=True),)
_operation = cli.parse_operation  # NAME[:mrtr|:plain][=JSON], as the command reads it


def _in_process() -> InProcessServer:
    """The conformance fixtures on our ServerConnection, state sealed with a random key."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from fixtures import Everything, server_config

    import mrtr_sansio as m

    security = m.sealing.RequestStateSecurity.ephemeral()
    return in_process_server(Everything().handle, server_config(request_state=security))


def main(argv: list[str] | None = None) -> int:
    """``mrtr-check server`` with the fixtures as the default server."""
    return cli.main(
        ["server", *(sys.argv[1:] if argv is None else argv)],
        default_server=_in_process,
        default_operations=cli.CONFORMANCE_OPERATIONS + IN_PROCESS_EXTRA,
    )


if __name__ == "__main__":
    raise SystemExit(main())
