"""The era bridge with IO: a handler for any server adapter that relays every request to one
upstream MCP server through this package's own clients, on anyio (asyncio or trio).

Open it with :meth:`Bridge.open` (an async context manager: it reads the upstream's facts and
owns the upstream connections), build the downstream server with :meth:`Bridge.server_config`
and serve :meth:`Bridge.handle`::

    async with Bridge.open(Upstream(url="http://127.0.0.1:9000/mcp")) as bridge:
        app = McpHttpApp(bridge.handle, bridge.server_config())

The rules it follows are in :mod:`mrtr_sansio.bridge`; the ``mrtr-bridge`` command is
:func:`main`. A held call whose upstream asks for input is answered by the downstream's
retry (modern) or the shim's replay (legacy); see ``docs/bridge.md``.
"""

from __future__ import annotations

from ._bridge_cli import main
from ._bridge_handler import Bridge
from ._bridge_upstream import BRIDGE_INFO, UPSTREAMS_EXHAUSTED, Upstream

__all__ = ["BRIDGE_INFO", "UPSTREAMS_EXHAUSTED", "Bridge", "Upstream", "main"]

if __name__ == "__main__":
    main()
