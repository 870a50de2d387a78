# mypy: ignore-errors
# (this script runs in .venv-sdk1, where mcp 1.x is installed; the project's venv has 2.x)
"""The official Python SDK 1.x client (``mcp<2``, a 2025-11-25 client) against one URL: the
handshake, then the MRTR fixtures answered by its callbacks; prints one line per step.

    python sdk1_bridge_client.py URL        # run by tests/test_bridge_sdk.py in the SDK's venv
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

TOOLS = (
    "test_input_required_result_elicitation",
    "test_input_required_result_multiple_inputs",
    "test_input_required_result_request_state",
    "test_input_required_result_multi_round",
)


async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    schema = getattr(params, "requestedSchema", {}) or {}
    props = schema.get("properties", {})
    if "ok" in props:
        return types.ElicitResult(action="accept", content={"ok": True})
    if "color" in props:
        return types.ElicitResult(action="accept", content={"color": "teal"})
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def sample(
    context: Any, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    text = types.TextContent(type="text", text="Paris")
    return types.CreateMessageResult(role="assistant", content=text, model="m")


async def roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///work")])  # type: ignore[arg-type]


async def main(url: str) -> None:
    async with (
        streamablehttp_client(url) as (read, write, _),
        ClientSession(
            read,
            write,
            elicitation_callback=elicit,
            sampling_callback=sample,
            list_roots_callback=roots,
        ) as session,
    ):
        init = await session.initialize()
        print("server", init.serverInfo.name, init.protocolVersion)
        listed = await session.list_tools()
        print("tools", len(listed.tools))
        for name in TOOLS:
            result = await session.call_tool(name, {})
            block = result.content[0]
            print("call", name, block.text if isinstance(block, types.TextContent) else block)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
