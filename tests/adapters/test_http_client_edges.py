"""The HTTP client's edges: scripted servers that answer oddly (sessionless legacy servers,
bad session ids, oversized or oddly ended SSE, paginated tool lists), answers and handshakes
that do not get through, and cancellations at awkward moments."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import anyio
import pytest
from http_harness import (
    StreamingAsgi,
    User,
    connected,
    everything_app,
    methods,
    posts,
    texts,
)

import mrtr_sansio as m
from mrtr_sansio.adapters import (
    CallFailedError,
    ConnectionClosedError,
    HandshakeFailedError,
    _http_wire,
)
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


def scripted(
    reply: Callable[[str, dict[str, Any] | None, dict[bytes, bytes]], Reply], *, get: bool = False
) -> Any:
    """An ASGI app answering each request with ``reply(http method, body, headers)``; GET
    gets 405 (no standalone stream) unless ``get``."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] == "GET" and not get:
            await send({"type": "http.response.start", "status": 405, "headers": []})
            await send({"type": "http.response.body", "body": b""})
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


# --- the legacy standalone stream (GET) --------------------------------------------------------


async def test_the_standalone_stream_is_opened_once_and_a_405_ends_it() -> None:
    app = everything_app()
    get_statuses: list[int] = []

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        async def spy(message: Any) -> None:
            if message["type"] == "http.response.start" and scope.get("method") == "GET":
                get_statuses.append(message["status"])
            await send(message)

        await app(scope, receive, spy)

    async with connected(recording, "legacy") as (client, transport):
        assert texts(await client.call_tool("test_simple_text"))
        assert texts(await client.call_tool("test_simple_text"))  # still working, no new GET
        session = client.session_id
    assert get_statuses == [405]
    gets = [r for r in transport.requests if r.method == "GET"]
    assert len(gets) == 1
    (get,) = gets
    assert get.headers["accept"] == "text/event-stream"
    assert get.headers["mcp-session-id"] == session
    assert get.headers["mcp-protocol-version"] == "2025-11-25"
    kinds = [r.method for r in transport.requests]
    assert kinds.index("GET") > 1  # after initialize and notifications/initialized


async def test_the_standalone_stream_is_open_before_the_first_call() -> None:
    """The client is ready only once its GET stream has an answer: a server that delivers a
    pending answer on that stream (the conformance harness's sse-retry scenario does) must not
    see it open in the middle of a call. The server here takes 50 ms to answer the GET."""
    seen: list[str] = []

    def record(body: dict[str, Any]) -> None:
        seen.append(body.get("method", "response"))

    app = gate(everything_app(), record)  # lets every POST through, after noting its method

    async def slow_get(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            await anyio.sleep(0.05)

            async def mark(message: Any) -> None:
                if message["type"] == "http.response.start":
                    seen.append("GET answered")
                await send(message)

            await app(scope, receive, mark)
            return
        await app(scope, receive, send)

    async with connected(slow_get, "legacy") as (client, _transport):
        assert texts(await client.call_tool("test_simple_text"))
    assert seen.index("GET answered") < seen.index("tools/call")


async def test_no_standalone_stream_when_not_asked_or_on_the_modern_wire() -> None:
    for era, listen in (("legacy", False), ("modern", True), ("auto", True)):
        async with connected(everything_app(), era, listen=listen) as (client, transport):
            assert texts(await client.call_tool("test_simple_text"))
        assert "GET" not in [r.method for r in transport.requests]


class ListeningServer:
    """A legacy server that, like some SDK servers, asks for input on the standalone stream:
    a ``tools/call`` gets its answer only once the client answered the elicitation sent on
    the GET stream. The first GET ends at once with ``retry`` and an event id."""

    def __init__(self) -> None:
        self.push_send, self.push_receive = anyio.create_memory_object_stream[bytes](10)
        self.answered = anyio.Event()
        self.answer: Any = None
        self.gets: list[dict[bytes, bytes]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = dict(scope["headers"])
        if scope["method"] == "GET":
            self.gets.append(headers)
            await send({"type": "http.response.start", "status": 200, "headers": SSE})
            if len(self.gets) == 1:
                priming = b"id: e1\nretry: 10\ndata:\n\n"
                await send({"type": "http.response.body", "body": priming})
                return
            async for event in self.push_receive:
                await send({"type": "http.response.body", "body": event, "more_body": True})
            return
        if scope["method"] == "DELETE":
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        msg = json.loads((await receive())["body"])
        status, reply_headers, data = 202, [], b""
        if msg.get("method") == "initialize":
            status, reply_headers = 200, [*JSON, (b"mcp-session-id", b"s1")]
            data = answer(msg, INIT_RESULT)
        elif msg.get("method") == "tools/call":
            note = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
            ask = {
                "jsonrpc": "2.0",
                "id": 70,
                "method": "elicitation/create",
                "params": {
                    "message": "Name?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}},
                    },
                },
            }
            for sent in (note, ask):
                await self.push_send.send(b"data: " + json.dumps(sent).encode() + b"\n\n")
            await self.answered.wait()
            name = self.answer["result"]["content"]["name"]
            status, reply_headers = 200, JSON
            data = answer(msg, {"content": [{"type": "text", "text": f"Hello {name}"}]})
        elif "method" not in msg:
            self.answer = msg
            self.answered.set()
        await send({"type": "http.response.start", "status": status, "headers": reply_headers})
        await send({"type": "http.response.body", "body": data})


async def test_input_asked_on_the_standalone_stream_is_answered() -> None:
    server = ListeningServer()
    seen: list[str] = []
    user = User()
    async with connected(
        server, "legacy", user=user, on_notification=lambda method, _: seen.append(method)
    ) as (client, transport):
        with anyio.fail_after(5):
            result = await client.call_tool("t")
    server.push_send.close()
    server.push_receive.close()
    assert texts(result) == ["Hello Ada"]
    assert seen == ["notifications/tools/list_changed"]
    (event,) = user.asked
    assert event.key == 70
    assert event.call is not None  # the only call in flight: linked by timing
    assert event.call.params["name"] == "t"
    assert server.answer == {
        "jsonrpc": "2.0",
        "id": 70,
        "result": {"action": "accept", "content": {"name": "Ada"}},
    }
    first, second = server.gets[:2]
    assert b"last-event-id" not in first
    assert second[b"last-event-id"] == b"e1"  # resumed where the first stream ended
    assert "DELETE" in [r.method for r in transport.requests]


async def test_a_standalone_stream_that_fails_to_open_is_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_http_wire, "LISTEN_RETRY", 0.001)
    attempts: list[int] = []

    def refuse_twice(request: Any, body: bytes) -> bool:
        if request.method != "GET":
            return False
        attempts.append(1)
        return len(attempts) <= 2

    prepare = partial(StreamingAsgi.refuse, predicate=refuse_twice)
    async with connected(everything_app(), "legacy", prepare=prepare) as (client, transport):
        with anyio.fail_after(5):
            while "GET" not in [r.method for r in transport.requests]:
                await anyio.sleep(0.005)
        assert texts(await client.call_tool("test_simple_text"))
    assert len(attempts) == 3  # two refused, then a 405 ended it


async def test_a_standalone_stream_answered_404_means_the_session_is_gone() -> None:
    sessions: list[bytes] = []

    def reply(method: str, msg: Any, headers: Any) -> Reply:
        if method == "DELETE":
            return 204, [], b""
        if msg is None:  # the GET of the first session: that session is over
            return (404, [], b"") if headers[b"mcp-session-id"] == b"s1" else (405, [], b"")
        if msg.get("method") == "initialize":
            sessions.append(b"s%d" % (len(sessions) + 1))
            return 200, [*JSON, (b"mcp-session-id", sessions[-1])], answer(msg, INIT_RESULT)
        if "id" not in msg:
            return 202, [], b""
        return 200, JSON, answer(msg, {"content": [{"type": "text", "text": "ok"}]})

    async with connected(scripted(reply, get=True), "legacy") as (client, _):
        with anyio.fail_after(5):
            while client.session_id != "s2":
                await anyio.sleep(0.005)
        assert texts(await client.call_tool("t")) == ["ok"]


# --- resuming a legacy response stream (SEP-1699) ----------------------------------------------


def resuming_server(resumed: Callable[[dict[str, Any]], Reply]) -> tuple[Any, list[Any]]:
    """A legacy server whose ``tools/call`` stream sends a priming event (id ``p1``, retry
    5 ms) and ends; a GET with ``Last-Event-ID`` gets ``resumed(call)``; a GET without one
    gets 405. Returns the app and the GETs' headers."""
    gets: list[dict[bytes, bytes]] = []
    pending: list[dict[str, Any]] = []

    def reply(method: str, msg: Any, headers: Any) -> Reply:
        if method == "DELETE":
            return 204, [], b""
        if method == "GET":
            if b"last-event-id" not in headers:
                return 405, [], b""
            gets.append(headers)
            return resumed(pending[-1])
        if msg["method"] == "initialize":
            return 200, [*JSON, (b"mcp-session-id", b"s1")], answer(msg, INIT_RESULT)
        if "id" not in msg:
            return 202, [], b""
        pending.append(msg)
        return 200, SSE, b"id: p1\nretry: 5\ndata:\n\n"

    return scripted(reply, get=True), gets


async def test_a_legacy_stream_that_ends_early_is_resumed_where_it_stopped() -> None:
    def resumed(call: dict[str, Any]) -> Reply:
        result = {"content": [{"type": "text", "text": "resumed"}]}
        return 200, SSE, b"id: p2\ndata: " + answer(call, result) + b"\n\n"

    app, gets = resuming_server(resumed)
    async with connected(app, "legacy") as (client, _):
        assert texts(await client.call_tool("t")) == ["resumed"]
    (get,) = gets
    assert get[b"last-event-id"] == b"p1"
    assert get[b"mcp-session-id"] == b"s1"
    assert get[b"mcp-protocol-version"] == b"2025-11-25"


async def test_resuming_gives_up_when_the_streams_bring_nothing() -> None:
    app, gets = resuming_server(lambda call: (200, SSE, b"id: p1\nretry: 1\ndata:\n\n"))
    async with connected(app, "legacy") as (client, _):
        with pytest.raises(CallFailedError) as failed:
            await client.call_tool("t")
    assert failed.value.error.message == "the response stream kept ending without the answer"
    assert len(gets) == _http_wire.MAX_IDLE_RESUMES


async def test_a_stream_the_server_cannot_resume_fails_the_call() -> None:
    app, _ = resuming_server(lambda call: (405, [], b""))
    async with connected(app, "legacy") as (client, _):
        with pytest.raises(CallFailedError) as failed:
            await client.call_tool("t")
    assert failed.value.error.message == (
        "the response stream ended before the answer; resuming it: HTTP 405"
    )


async def test_modern_streams_are_not_resumed() -> None:
    def reply(method: str, msg: Any, headers: Any) -> Reply:
        return 200, SSE, b"id: p1\nretry: 5\ndata:\n\n"

    async with connected(scripted(reply, get=True)) as (client, transport):
        with pytest.raises(CallFailedError) as failed:
            await client.call_tool("t")
    assert (
        failed.value.error.message == "the server ended the response without answering the request"
    )
    assert [r.method for r in transport.requests] == ["POST"]


async def test_a_mismatch_whose_relisting_fails_raises_the_mismatch() -> None:
    def reply(method: str, msg: Any, headers: Any) -> Reply:
        code = -32603 if msg["method"] == "tools/list" else -32020
        error = {"code": code, "message": "no" if code == -32603 else "Header mismatch"}
        body = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": error})
        return 400, JSON, body.encode()

    async with connected(scripted(reply)) as (client, _):
        with pytest.raises(CallFailedError) as failed:
            await client.call_tool("q", {"region": "eu"})
    assert failed.value.code == -32020
    assert isinstance(failed.value.__cause__, CallFailedError)
    assert failed.value.__cause__.code == -32603
