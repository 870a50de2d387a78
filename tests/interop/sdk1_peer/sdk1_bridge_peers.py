# mypy: ignore-errors
# (this script runs in .venv-sdk1, where mcp 1.x is installed; the project's venv has 2.x)
"""The official Python SDK 1.x client (``mcp<2``, a 2025-11-25 client) against one URL: the
handshake, ``tools/list``, then each tool named on the command line; prints one JSON object a
line (the ``initialize`` result, the tools' names, each question its elicitation callback was
asked, each call's result) for tests/test_bridge_peers_legacy.py to read.

    python sdk1_bridge_peers.py URL TOOL[=JSON_ARGUMENTS]...
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


def emit(**fields: Any) -> None:
    print(json.dumps(fields, sort_keys=True), flush=True)


async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Answers a form by its fields (a confirmation, a colour, else a name), saying what it
    was asked first."""
    schema = getattr(params, "requestedSchema", {}) or {}
    props = schema.get("properties", {})
    emit(asked={"message": params.message, "fields": sorted(props)})
    if "ok" in props:
        return types.ElicitResult(action="accept", content={"ok": True})
    if "color" in props:
        return types.ElicitResult(action="accept", content={"color": "teal"})
    return types.ElicitResult(action="accept", content={"name": "Ada"})


def parse(spec: str) -> tuple[str, dict[str, Any]]:
    name, _, args = spec.partition("=")
    return name, json.loads(args) if args else {}


async def main(url: str, calls: list[str]) -> None:
    async with (
        streamablehttp_client(url) as (read, write, _),
        ClientSession(read, write, elicitation_callback=elicit) as session,
    ):
        init = await session.initialize()
        emit(initialize=init.model_dump(mode="json", by_alias=True, exclude_none=True))
        listed = await session.list_tools()
        emit(tools=sorted(tool.name for tool in listed.tools))
        for spec in calls:
            name, args = parse(spec)
            try:
                result = await session.call_tool(name, args)
            except Exception as exc:  # a JSON-RPC error: its code and message, as data
                error = getattr(exc, "error", None)
                code = getattr(error, "code", None)
                emit(call=name, error={"code": code, "message": str(exc)})
                continue
            texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
            emit(call=name, text=" ".join(texts), isError=bool(result.isError))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
