"""The official MCP Python SDK's client (``mcp`` 2.3.0, from PyPI) against our servers: the
HTTP example under uvicorn and the fixtures over stdio, on the legacy wire (``mode="legacy"``),
the modern one (``mode="2026-07-28"``) and with the SDK's own probe (``mode="auto"``). The MRTR
fixtures complete with the SDK's callbacks answering: embedded input requests on the modern wire,
real server requests from our legacy shim on the legacy one."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import Client, types
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from pydantic import FileUrl
from servers import HTTP_SERVER, STDIO_SERVER, http_server

pytestmark = pytest.mark.anyio

MODES = ["legacy", "2026-07-28", "auto"]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """asyncio only: under trio the SDK's HTTP client leaves async generators (httpx2's
    ``Response.aiter_text``) to the garbage collector, which trio reports as ResourceWarning."""
    return "asyncio"


Content = dict[str, str | int | float | bool | list[str] | None]
DATES: Content = {"check_in": "2026-08-01", "check_out": "2026-08-05"}


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with http_server(HTTP_SERVER, "--log-level", "error") as (url, _):
        yield url


@pytest.fixture(params=["http", "stdio"])
def target(request: pytest.FixtureRequest, http_url: str) -> Any:
    if request.param == "http":
        return http_url
    return StdioServerParameters(command=sys.executable, args=[str(STDIO_SERVER)])


class User:
    """The SDK's callbacks, answering as a cooperative user; ``decline`` says no to forms."""

    def __init__(self, *, decline: bool = False) -> None:
        self.decline = decline
        self.asked: list[str] = []

    async def elicitation(
        self, context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        assert isinstance(params, types.ElicitRequestFormParams)
        props = params.requested_schema["properties"]
        self.asked.append("elicitation:" + ",".join(sorted(props)))
        if self.decline:
            return types.ElicitResult(action="decline")
        if "check_in" in props:
            return types.ElicitResult(action="accept", content=DATES)
        answers: Content = {
            "name": "Ada",
            "ok": True,
            "color": "teal",
            "context": "travel",
            "username": "ada",
            "email": "ada@example.com",
        }
        return types.ElicitResult(
            action="accept", content={k: v for k, v in answers.items() if k in props}
        )

    async def sampling(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.asked.append("sampling")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="Paris"),
            model="sdk-model",
            stop_reason="endTurn",
        )

    async def roots(self, context: Any) -> types.ListRootsResult:
        self.asked.append("roots")
        return types.ListRootsResult(
            roots=[types.Root(uri=FileUrl("file:///work/trips"), name="Trips")]
        )


@asynccontextmanager
async def sdk_client(target: Any, mode: str, user: User) -> AsyncIterator[Client]:
    async with Client(
        target,
        mode=mode,
        elicitation_callback=user.elicitation,
        sampling_callback=user.sampling,
        list_roots_callback=user.roots,
    ) as client:
        yield client


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


@pytest.mark.parametrize("mode", MODES)
async def test_the_sdk_negotiates_the_era_we_serve(target: Any, mode: str) -> None:
    async with sdk_client(target, mode, User()) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        tools = {tool.name for tool in (await client.list_tools()).tools}
    assert {"book_trip", "test_input_required_result_multi_round"} <= tools


@pytest.mark.parametrize("mode", MODES)
async def test_mrtr_fixtures_complete_through_the_sdk_callbacks(target: Any, mode: str) -> None:
    user = User()
    expected = {
        "test_input_required_result_elicitation": ["Hello, Ada!"],
        "test_input_required_result_sampling": ["The model says: Paris"],
        "test_input_required_result_list_roots": ["Roots: file:///work/trips"],
        "test_input_required_result_request_state": ["Confirmed (state-ok)."],
        "test_input_required_result_multiple_inputs": ["Paris Ada; roots: file:///work/trips"],
        "test_input_required_result_multi_round": ["Ada's favourite colour is teal."],
        "test_input_required_result_capabilities": ["Name: Ada"],
    }
    async with sdk_client(target, mode, user) as client:
        for name, want in expected.items():
            assert texts(await client.call_tool(name, {})) == want, name
        prompt = await client.get_prompt("test_input_required_result_prompt")
    assert prompt.messages[0].content == types.TextContent(
        type="text", text="Using this context: travel"
    )
    assert "sampling" in user.asked
    assert "roots" in user.asked


@pytest.mark.parametrize("mode", MODES)
async def test_book_trip_over_two_rounds(target: Any, mode: str) -> None:
    user = User()
    async with sdk_client(target, mode, user) as client:
        result = await client.call_tool("book_trip", {"destination": "Lisbon", "guests": 2})
    assert texts(result) == [
        "Booked Lisbon for 2: 2026-08-01 to 2026-08-05.\nWorkspace: file:///work/trips\n"
        "Summary: Paris"
    ]
    assert sorted(user.asked[:2]) == ["elicitation:check_in,check_out", "roots"]
    assert user.asked[2:] == ["sampling"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_declined_form_reaches_the_handler(target: Any, mode: str) -> None:
    async with sdk_client(target, mode, User(decline=True)) as client:
        result = await client.call_tool("test_input_required_result_elicitation", {})
        trip = await client.call_tool("book_trip", {"destination": "Lisbon"})
    assert texts(result) == ["No name given."]
    assert texts(trip) == ["Booking cancelled."]


@pytest.mark.parametrize("mode", MODES)
async def test_the_legacy_style_tools_run_on_every_wire(target: Any, mode: str) -> None:
    async with sdk_client(target, mode, User()) as client:
        sampled = await client.call_tool("test_sampling", {"prompt": "Capital of France?"})
        asked = await client.call_tool("test_elicitation", {"message": "Who are you?"})
    assert texts(sampled) == ["LLM response: Paris"]
    assert texts(asked) == ['User provided: {"username":"ada","email":"ada@example.com"}']


@pytest.mark.parametrize("mode", ["2026-07-28", "auto"])
async def test_mirrored_headers_and_errors_on_the_modern_wire(target: Any, mode: str) -> None:
    async with sdk_client(target, mode, User()) as client:
        result = await client.call_tool("execute_query", {"region": "eu-west", "query": "q"})
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("no_such_tool", {})
    assert texts(result) == ["Ran 'q' in eu-west."]
    assert unknown.value.code == -32602
