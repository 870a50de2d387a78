"""The HTTP client's edges: scripted servers that answer oddly (sessionless legacy servers,
bad session ids, oversized or oddly ended SSE, paginated tool lists), answers and handshakes
that do not get through, and cancellations at awkward moments."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import pytest
from http_kit import User, connected, everything_app, methods, posts, texts

import mrtr_sansio as m
from mrtr_sansio.adapters import CallFailedError, ConnectionClosedError, HandshakeFailedError
from mrtr_sansio.adapters import http as http_adapter
from mrtr_sansio.adapters.http import HttpClient

pytestmark = pytest.mark.anyio

Reply = tuple[int, list[tuple[bytes, bytes]], bytes]
JSON = [(b"content-type", b"application/json")]
SSE = [(b"content-type", b"text/event-stream")]
INIT_RESULT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "scripted", "version": "1"},
}


def scripted(reply: Callable[[str, dict[str, Any] | None, dict[bytes, bytes]], Reply]) -> Any:
    """An ASGI app answering each request with ``reply(http method, body, headers)``."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        message = await receive()
        body = json.loads(message["body"]) if message.get("body") else None
        status, headers, data = reply(scope["method"], body, dict(scope["headers"]))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    return app


def answer(msg: dict[str, Any], result: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode()


def gate(app: Any, refuse: Callable[[dict[str, Any]], int | None]) -> Any:
    """``app``, except that POSTs whose body ``refuse`` picks get that status and no body."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        message = await receive()
        status = refuse(json.loads(message["body"]))
        if status is not None:
            await send({"type": "http.response.start", "status": status, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        replay = [message]

        async def again() -> Any:
            return replay.pop() if replay else await receive()

        await app(scope, again, send)

    return wrapped


def is_answer(msg: dict[str, Any]) -> bool:
    return "method" not in msg


# --- servers that answer oddly ---------------------------------------------------------------


async def test_a_legacy_server_without_sessions() -> None:
    def reply(method: str, msg: Any, headers: Any) -> Reply:
        if msg["method"] == "initialize":
            return 200, JSON, answer(msg, INIT_RESULT)
        if "id" not in msg:
            return 202, [], b""
        return 200, JSON, answer(msg, {"content": [{"type": "text", "text": "done"}]})

    async with connected(scripted(reply), "legacy") as (client, transport):
        assert client.session_id is None
        assert texts(await client.call_tool("t")) == ["done"]
    assert all("mcp-session-id" not in r.headers for r in transport.requests)
    assert methods(transport) == ["initialize", "notifications/initialized", "tools/call"]


async def test_a_session_id_that_is_not_visible_ascii_fails_the_handshake() -> None:
    def reply(method: str, msg: Any, headers: Any) -> Reply:
        return 200, [*JSON, (b"mcp-session-id", b"two words")], answer(msg, INIT_RESULT)

    with pytest.raises(HandshakeFailedError) as failed:
        async with connected(scripted(reply), "legacy"):
            pytest.fail("connected with an unusable session id")
    assert "Mcp-Session-Id is not visible ASCII" in failed.value.error.message


async def test_an_sse_event_over_the_limit_fails_the_call() -> None:
    def reply(method: str, msg: Any, headers: Any) -> Reply:
        return 200, SSE, b"data: " + b"x" * 5000 + b"\n\n"

    limits = m.Limits(max_message_bytes=1024)
    async with connected(scripted(reply), config={"limits": limits}) as (client, _):
        with pytest.raises(CallFailedError) as failed:
            await client.call_tool("t")
    assert failed.value.error.message == "an SSE event exceeds 1024 bytes"


async def test_an_answer_ended_by_a_lone_cr_at_the_end_of_the_stream_counts() -> None:
    def reply(method: str, msg: Any, headers: Any) -> Reply:
        result = {"resultType": "complete", "content": [{"type": "text", "text": "cr"}]}
        return 200, SSE, b": comment\r\revent: message\rdata: " + answer(msg, result) + b"\r\r"

    async with connected(scripted(reply)) as (client, _):
        assert texts(await client.call_tool("t")) == ["cr"]


async def test_tool_listings_skip_odd_names_and_every_page_is_read_on_a_mismatch() -> None:
    tool = {
        "name": "q",
        "inputSchema": {
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
        },
    }

    def reply(method: str, msg: Any, headers: Any) -> Reply:
        if msg["method"] == "tools/list":
            if msg["params"].get("cursor") == "p2":
                return 200, JSON, answer(msg, {"resultType": "complete", "tools": [tool]})
            page = {"resultType": "complete", "tools": [{"name": 42}], "nextCursor": "p2"}
            return 200, JSON, answer(msg, page)
        if headers.get(b"mcp-param-region") != b"eu":
            error = {"code": -32020, "message": "Missing required header Mcp-Param-Region"}
            body = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": error})
            return 400, JSON, body.encode()
        result = {"resultType": "complete", "content": [{"type": "text", "text": "ok"}]}
        return 200, JSON, answer(msg, result)

    async with connected(scripted(reply)) as (client, transport):
        first = await client.list_tools()
        assert first["tools"] == [{"name": 42}]  # not a tool we can judge: passed on
        assert texts(await client.call_tool("q", {"region": "eu"})) == ["ok"]
    assert methods(transport) == [
        "tools/list",
        "tools/call",
        "tools/list",
        "tools/list",
        "tools/call",
    ]


async def test_the_refresh_after_a_mismatch_reads_a_bounded_number_of_pages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http_adapter, "MAX_TOOL_PAGES", 3)

    def reply(method: str, msg: Any, headers: Any) -> Reply:
        if msg["method"] == "tools/list":
            page = {"resultType": "complete", "tools": [], "nextCursor": "again"}
            return 200, JSON, answer(msg, page)
        error = {"code": -32020, "message": "Header mismatch"}
        return 400, JSON, json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": error}).encode()

    async with connected(scripted(reply)) as (client, transport):
        with pytest.raises(CallFailedError) as failed:
            await client.call_tool("q", {"region": "eu"})
    assert failed.value.code == -32020
    assert methods(transport) == ["tools/call", "tools/list", "tools/list", "tools/list"]


# --- what does not get through --------------------------------------------------------------


@pytest.mark.parametrize("how", ["status", "connect"])
async def test_an_answer_that_does_not_get_through_fails_its_call(
    how: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = everything_app()
    if how == "status":
        app = gate(app, lambda msg: 500 if is_answer(msg) else None)
    async with connected(app, "legacy") as (client, transport):
        if how == "connect":
            transport.refuse(lambda request, body: b'"result"' in body)
        with pytest.raises(CallFailedError) as failed:
            await client.call_tool("test_input_required_result_elicitation")
        assert texts(await client.call_tool("test_simple_text"))  # the client goes on
    assert failed.value.local
    message = failed.value.error.message
    assert message.startswith("the answer to server request 0 did not get through: ")
    assert message.endswith("HTTP 500" if how == "status" else "ConnectError: connection refused")
    assert "did not get through" in caplog.text


async def test_a_refused_notification_is_only_logged(caplog: pytest.LogCaptureFixture) -> None:
    app = gate(everything_app(), lambda msg: 400 if msg.get("method", "").endswith("zed") else None)
    with caplog.at_level(logging.WARNING, "mrtr_sansio.adapters.http"):
        async with connected(app, "legacy") as (client, _):
            assert texts(await client.call_tool("test_simple_text"))
    assert "notifications/initialized did not get through: HTTP 400" in caplog.text


async def test_a_delete_that_fails_is_only_logged() -> None:
    app = everything_app()
    async with connected(app, "legacy") as (client, transport):
        transport.refuse(lambda request, body: request.method == "DELETE")
        session = client.session_id
    assert session in app._sessions  # never told; the server's own expiry will end it


async def test_a_failed_handshake_deletes_the_session_without_a_version() -> None:
    seen: list[tuple[str, dict[bytes, bytes]]] = []

    def reply(method: str, msg: Any, headers: Any) -> Reply:
        seen.append((method, headers))
        if method == "DELETE":
            return 204, [], b""
        result = {**INIT_RESULT, "protocolVersion": "1999-01-01"}
        return 200, [*JSON, (b"mcp-session-id", b"s1")], answer(msg, result)

    with pytest.raises(HandshakeFailedError):
        async with connected(scripted(reply), "legacy"):
            pytest.fail("connected to a server speaking another version")
    (delete,) = [headers for method, headers in seen if method == "DELETE"]
    assert delete[b"mcp-session-id"] == b"s1"
    assert b"mcp-protocol-version" not in delete


# --- cancellations at awkward moments --------------------------------------------------------


async def test_a_call_cancelled_at_once_is_not_sent_or_its_stream_is_closed() -> None:
    async with connected(everything_app()) as (client, transport):
        with anyio.CancelScope() as scope:
            scope.cancel()  # the caller is cancelled at its first wait
            await client.call_tool("test_simple_text")
        assert texts(await client.call_tool("test_input_required_result_elicitation"))
    names = [msg["params"]["name"] for _, msg in posts(transport)]
    # trio: the POST task sees the cancellation before it starts; asyncio may have started it
    assert names[-2:] == ["test_input_required_result_elicitation"] * 2
    assert names[:-2] in ([], ["test_simple_text"])
    if names[:-2]:
        assert transport.closed_early == [transport.requests[0]]


async def test_a_failing_callback_cancels_the_other_callbacks_of_its_round() -> None:
    stopped = anyio.Event()

    async def broken(event: m.InputNeeded) -> Mapping[str, Any]:
        await anyio.sleep(0.01)
        raise KeyError("no name")

    async def waits(event: m.InputNeeded) -> Mapping[str, Any]:
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        raise AssertionError("unreachable")

    user = User()
    async with connected(
        everything_app(), elicitation=broken, sampling=waits, roots=user.roots
    ) as (
        client,
        _,
    ):
        with pytest.raises(KeyError):
            await client.call_tool("test_input_required_result_multiple_inputs")
        with anyio.fail_after(5):
            await stopped.wait()


async def test_closing_cancels_the_callbacks_still_running() -> None:
    started, stopped = anyio.Event(), anyio.Event()

    async def waits(event: m.InputNeeded) -> Mapping[str, Any]:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        raise AssertionError("unreachable")

    outcome: list[BaseException] = []

    async def call(client: HttpClient) -> None:
        try:
            await client.call_tool("test_input_required_result_elicitation")
        except ConnectionClosedError as exc:
            outcome.append(exc)

    async with (
        anyio.create_task_group() as tg,
        connected(everything_app(), elicitation=waits) as (client, _),
    ):
        tg.start_soon(call, client)
        await started.wait()
        # leaving the client's block closes it while the callback waits
    assert stopped.is_set()
    assert len(outcome) == 1
