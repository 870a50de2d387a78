"""The ``mrtr-bridge`` command: the era bridge served on Streamable HTTP or stdio in front of
one upstream server (``mrtr-bridge --help``)."""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from collections.abc import Sequence

import anyio

from mrtr_sansio import ServerConfig
from mrtr_sansio.bridge import BridgeLimits

from ._bridge_handler import Bridge
from ._bridge_upstream import Upstream

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mrtr-bridge",
        description="Relay MCP between a client and a server of either era (2025-11-25, "
        "2026-07-28), translating multi round-trip requests both ways.",
    )
    parser.add_argument(
        "--listen",
        required=True,
        help="http://HOST:PORT/PATH (Streamable HTTP; PORT 0 takes a free port, and the bound URL "
        "is announced on stderr) or stdio",
    )
    parser.add_argument(
        "--upstream",
        help="the upstream server's URL; or end the options with -- COMMAND ARGS... for a "
        "stdio server",
    )
    parser.add_argument("--downstream-era", choices=("auto", "modern", "legacy"), default="auto")
    parser.add_argument("--upstream-era", choices=("auto", "modern", "legacy"), default="auto")
    parser.add_argument("--hold-timeout", type=float, default=BridgeLimits().hold_timeout)
    parser.add_argument("--max-held", type=int, default=BridgeLimits().max_held)
    parser.add_argument(
        "--max-held-per-principal", type=int, default=BridgeLimits().max_held_per_principal
    )
    parser.add_argument("--log-level", default="warning")
    return parser


def _downstream_base(era: str) -> ServerConfig:
    if era == "modern":
        return ServerConfig(legacy_versions=())
    if era == "legacy":  # no modern version: a modern request is refused -32022
        return ServerConfig(supported_versions=())
    return ServerConfig()


async def _serve(args: argparse.Namespace, command: Sequence[str]) -> None:
    upstream = Upstream(url=args.upstream, command=command, era=args.upstream_era)
    limits = BridgeLimits(
        max_held=args.max_held,
        max_held_per_principal=args.max_held_per_principal,
        hold_timeout=args.hold_timeout,
    )
    async with Bridge.open(upstream, limits) as bridge:
        config = bridge.use_config(bridge.server_config(_downstream_base(args.downstream_era)))
        if args.listen == "stdio":
            from .anyio import serve_stdio

            await serve_stdio(bridge.handle, config)
            return
        import urllib.parse

        import uvicorn

        from .asgi import McpHttpApp

        url = urllib.parse.urlsplit(args.listen)
        if url.scheme != "http" or url.hostname is None:
            raise SystemExit("--listen: give http://HOST:PORT/PATH or stdio")
        app = McpHttpApp(
            bridge.handle, config, path=url.path or "/mcp", legacy=args.downstream_era != "modern"
        )
        sock = _bind(url.hostname, 80 if url.port is None else url.port)
        host, port = sock.getsockname()[:2]
        bound = f"http://{f'[{host}]' if ':' in host else host}:{port}{url.path or '/mcp'}"
        print(f"mrtr-bridge: listening on {bound}", file=sys.stderr, flush=True)
        server = uvicorn.Server(uvicorn.Config(app, log_level=args.log_level, lifespan="on"))
        await server.serve(sockets=[sock])


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``; port 0 takes a free port, which the caller announces."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family)


def main(argv: Sequence[str] | None = None) -> None:
    """``mrtr-bridge``: run the bridge until interrupted (or, on stdio, until stdin ends)."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in args_in:
        at = args_in.index("--")
        args_in, command = args_in[:at], args_in[at + 1 :]
    args = _parser().parse_args(args_in)
    if (args.upstream is None) == (not command):
        raise SystemExit("mrtr-bridge: give --upstream URL or -- COMMAND ARGS... (one of them)")
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    anyio.run(_serve, args, command)
