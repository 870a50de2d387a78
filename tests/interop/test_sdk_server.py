"""Our HTTP client against a server written with the official Python SDK (``mcp`` 2.3.0,
``tests/interop/sdk_server.py`` under uvicorn), on both wires and auto, under asyncio and trio.

What that SDK's server itself does not do is pinned too, so that a change shows: it has no
legacy shim (a handler returning ``InputRequiredResult`` fails on the 2025-11-25 wire), and its
legacy-style ``ctx.elicit`` has no channel on the 2026-07-28 wire.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from servers import SDK_SERVER, http_server

import mrtr_sansio as m
from mrtr_sansio.adapters import CallFailedError
from mrtr_sansio.adapters.http import HttpClient

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def sdk_url() -> Iterator[str]:
    with http_server(SDK_SERVER) as (url, _):
        yield url


async def elicitation(event: m.InputNeeded) -> Mapping[str, Any]:
    assert event.params["message"] == "Your name?"
    return {"action": "accept", "content": {"name": "Ada"}}


def connect(url: str, era: str) -> Any:
    config = m.ClientConfig(era=era, client_info={"name": "interop", "version": "1"})
    return HttpClient.connect(url, config, elicitation=elicitation)


def texts(result: Mapping[str, Any]) -> list[str]:
    return [block["text"] for block in result["content"] if block["type"] == "text"]


@pytest.mark.parametrize("era", ["modern", "auto"])
async def test_modern_wire_mrtr_through_our_callbacks(sdk_url: str, era: str) -> None:
    async with connect(sdk_url, era) as client:
        assert client.era is m.Era.MODERN
        assert client.protocol_version == "2026-07-28"
        tools = [tool["name"] for tool in (await client.list_tools())["tools"]]
        added = await client.call_tool("add", {"a": 2, "b": 3})
        greeted = await client.call_tool("greet")
        with pytest.raises(CallFailedError) as inline:  # the SDK's own limit (see above)
            await client.call_tool("ask")
    assert sorted(tools) == ["add", "ask", "greet"]
    assert texts(added) == ["5"]
    assert texts(greeted) == ["Hello Ada (round-1)"]  # the state came back as it was sent
    assert inline.value.code == -32600
    assert not inline.value.local


async def test_legacy_wire_server_requests_through_our_callbacks(sdk_url: str) -> None:
    async with connect(sdk_url, "legacy") as client:
        assert client.era is m.Era.LEGACY
        assert client.session_id is not None
        added = await client.call_tool("add", {"a": 2, "b": 3})
        asked = await client.call_tool("ask")
        with pytest.raises(CallFailedError) as no_shim:  # the SDK's own limit (see above)
            await client.call_tool("greet")
    assert texts(added) == ["5"]
    assert texts(asked) == ["Hi Ada"]
    assert no_shim.value.code == -32603
