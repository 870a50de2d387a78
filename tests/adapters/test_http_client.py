"""The Streamable HTTP client (``adapters.http``) against our ASGI app, in process, under
asyncio and trio: both eras and auto, the exact headers, SSE notifications, shim legs answered
through callbacks, sessions, cancellation, errors and a server that goes away."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from typing import Any

import anyio
import pytest
from fixtures import Everything, server_config
from http_harness import (
    DATES,
    INFO,
    ROOTS,
    User,
    connected,
    everything_app,
    methods,
    posts,
    sampled,
    texts,
)

import mrtr_sansio as m
from mrtr_sansio.adapters import (
    CallFailedError,
    ConnectionClosedError,
    HandlerResult,
    HandshakeFailedError,
    InputRejectedError,
    RequestContext,
    RoundsExhaustedError,
)
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.adapters.http import SessionExpiredError

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


SIMPLE = "This is a simple text response for testing."
BOOKED = [
    "Booked Lisbon for 2: 2026-08-01 to 2026-08-05.\nWorkspace: file:///work/trips\nSummary: Paris"
]


# --- modern -----------------------------------------------------------------------------------


async def test_modern_book_trip_over_two_rounds_with_exact_headers() -> None:
    user = User()
    async with connected(everything_app(), user=user) as (client, transport):
        assert client.era is m.Era.MODERN
        assert client.session_id is None
        result = await client.call_tool("book_trip", {"destination": "Lisbon", "guests": 2})
    assert texts(result) == BOOKED
    asked = [(e.round, e.method) for e in user.asked]
    assert sorted(asked[:2]) == [(1, "elicitation/create"), (1, "roots/list")]  # concurrently
    assert asked[2:] == [(2, "sampling/createMessage")]
    sent = posts(transport)
    assert [msg["id"] for _, msg in sent] == [0, 1, 2]  # a fresh id on every retry
    for headers, msg in sent:
        assert headers["content-type"] == "application/json"
        assert headers["accept"] == "application/json, text/event-stream"
        assert headers["mcp-protocol-version"] == "2026-07-28"
        assert headers["mcp-method"] == "tools/call"
        assert headers["mcp-name"] == "book_trip"
        assert "mcp-session-id" not in headers
        assert msg["params"]["_meta"][m.protocol.CLIENT_INFO] == INFO
        assert msg["params"]["arguments"] == {"destination": "Lisbon", "guests": 2}
    first, second, third = (msg["params"] for _, msg in sent)
    assert "inputResponses" not in first
    assert "requestState" not in first
    assert set(second["inputResponses"]) == {"dates", "workspace"}
    assert second["inputResponses"]["workspace"] == ROOTS
    assert set(third["inputResponses"]) == {"summary"}  # this round's answers only
    assert third["requestState"] != second["requestState"]  # each round's state, echoed
    assert [r.method for r in transport.requests] == ["POST"] * 3  # no GET, no DELETE


async def test_modern_capabilities_follow_the_callbacks() -> None:
    async with connected(everything_app(), sampling=None, roots=None) as (client, transport):
        result = await client.call_tool("test_input_required_result_capabilities")
        assert texts(result) == ["Name: Ada"]
        with pytest.raises(CallFailedError) as failed:
            await client.call_tool("test_missing_capability")
    assert failed.value.code == -32021
    assert failed.value.required_capabilities == {"sampling": {}}
    assert not failed.value.local
    (_, msg), *_ = posts(transport)
    assert msg["params"]["_meta"][m.protocol.CLIENT_CAPABILITIES] == {"elicitation": {"form": {}}}


async def test_modern_errors_come_back_typed_with_their_statuses() -> None:
    async with connected(everything_app()) as (client, _):
        with pytest.raises(CallFailedError) as unknown_tool:
            await client.call_tool("no_such_tool")
        with pytest.raises(CallFailedError) as unknown_method:
            await client.request("no/such/method")
        result = await client.call_tool("test_error_handling")
    assert unknown_tool.value.code == -32602  # HTTP 400 with the JSON-RPC error
    assert unknown_method.value.code == -32601  # HTTP 404 with the JSON-RPC error
    assert not unknown_method.value.local
    assert result["isError"] is True  # a tool execution error is a result


async def test_modern_progress_notifications_arrive_in_order_before_the_result() -> None:
    seen: list[tuple[str, Any]] = []
    async with connected(everything_app(), on_notification=lambda *n: seen.append(n)) as (
        client,
        _,
    ):
        result = await client.call_tool("test_tool_with_progress", meta={"progressToken": "p1"})
        seen.append(("result", texts(result)))
    assert seen == [
        (
            "notifications/progress",
            {"progressToken": "p1", "progress": p, "total": 100, "message": f"{p}% done"},
        )
        for p in (0, 50, 100)
    ] + [("result", ["Progress test completed"])]


async def test_modern_prompt_and_resource_rounds_carry_mcp_name() -> None:
    async with connected(everything_app()) as (client, transport):
        prompt = await client.get_prompt("test_input_required_result_prompt")
        resource = await client.read_resource("test://static-text")
    assert prompt["messages"][0]["content"]["text"] == "Using this context: travel"
    assert resource["contents"][0]["text"].startswith("This is the content")
    names = [(h["mcp-method"], h["mcp-name"]) for h, _ in posts(transport)]
    assert names == [
        ("prompts/get", "test_input_required_result_prompt"),
        ("prompts/get", "test_input_required_result_prompt"),
        ("resources/read", "test://static-text"),
    ]


async def test_modern_non_ascii_names_travel_base64_wrapped() -> None:
    async with connected(everything_app()) as (client, transport):
        with pytest.raises(CallFailedError) as failed:
            await client.call_tool("café ☕")
    assert failed.value.code == -32602  # reached the handler: the header matched the body
    ((headers, _),) = posts(transport)
    assert headers["mcp-name"] == m.http.encode_header_value("café ☕")
    assert headers["mcp-name"].startswith("=?base64?")


async def test_mirrored_arguments_after_listing_tools() -> None:
    async with connected(everything_app()) as (client, transport):
        await client.list_tools()
        assert client.param_headers["execute_query"] == {"Region": ("region",)}
        result = await client.call_tool("execute_query", {"region": "eu-west", "query": "q"})
    assert texts(result) == ["Ran 'q' in eu-west."]
    headers, _ = posts(transport)[-1]
    assert headers["mcp-param-region"] == "eu-west"


async def test_a_header_mismatch_refreshes_the_tools_and_retries_once() -> None:
    async with connected(everything_app()) as (client, transport):
        result = await client.call_tool("execute_query", {"region": "日本", "query": "q"})
    assert texts(result) == ["Ran 'q' in 日本."]
    assert methods(transport) == ["tools/call", "tools/list", "tools/call"]
    headers = [h for h, _ in posts(transport)]
    assert "mcp-param-region" not in headers[0]  # not listed yet: refused with -32020
    assert headers[2]["mcp-param-region"] == m.http.encode_header_value("日本")


async def test_a_header_mismatch_that_listing_cannot_fix_is_raised() -> None:
    # The server wants a header its tools/list does not announce: refreshing changes nothing.
    config = server_config(param_headers={"test_simple_text": {"X": ("x",)}})
    app = McpHttpApp(Everything().handle, config)
    async with connected(app) as (client, transport):
        with pytest.raises(CallFailedError) as failed:
            await client.call_tool("test_simple_text", {"x": "1"})
    assert failed.value.code == -32020
    assert methods(transport) == ["tools/call", "tools/list"]


async def test_tools_with_invalid_header_annotations_are_left_out() -> None:
    tools = [
        {"name": "ok", "inputSchema": {"type": "object", "properties": {}}},
        {
            "name": "bad",
            "inputSchema": {
                "type": "object",
                "properties": {"n": {"type": "number", "x-mcp-header": "N"}},
            },
        },
        {
            "name": "dup",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "a": {"type": "string", "x-mcp-header": "A"},
                    "b": {"type": "string", "x-mcp-header": "a"},
                },
            },
        },
    ]

    async def lister(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        return {"tools": tools}

    app = McpHttpApp(lister, server_config())
    for era, kept in (("modern", ["ok"]), ("legacy", ["ok", "bad", "dup"])):
        async with connected(app, era) as (client, _):
            listed = await client.list_tools()
        assert [t["name"] for t in listed["tools"]] == kept  # the rule is the modern wire's


async def test_state_only_rounds_are_retried_by_the_timer() -> None:
    async def patient(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        rounds = request.request_state or 0
        if rounds < 3:
            return m.InputRequiredResult(None, rounds + 1)
        return {"content": [{"type": "text", "text": f"ready after {rounds}"}]}

    app = McpHttpApp(
        patient, server_config(request_state=m.sealing.RequestStateSecurity.ephemeral())
    )
    config = {"retry_backoff": 0.01, "max_retry_backoff": 0.02}
    async with connected(app, config=config) as (client, transport):
        with anyio.fail_after(5):
            result = await client.call_tool("wait")
    assert texts(result) == ["ready after 3"]
    assert [msg["id"] for _, msg in posts(transport)] == [0, 1, 2, 3]


# --- legacy -----------------------------------------------------------------------------------


async def test_legacy_session_shim_legs_answered_and_deleted_on_close() -> None:
    user = User()
    app = everything_app()
    async with connected(app, "legacy", user=user) as (client, transport):
        assert client.era is m.Era.LEGACY
        session = client.session_id
        assert session is not None
        assert list(app._sessions) == [session]
        result = await client.call_tool("book_trip", {"destination": "Lisbon", "guests": 2})
    assert texts(result) == BOOKED
    assert len(app._sessions) == 0  # DELETEd
    assert methods(transport) == [
        "initialize",
        "notifications/initialized",
        "tools/call",
        "answer",
        "answer",
        "answer",
        "DELETE",
    ]
    sent = posts(transport)
    init_headers, init = sent[0]
    assert "mcp-session-id" not in init_headers
    assert "mcp-protocol-version" not in init_headers
    assert init["params"]["capabilities"] == {
        "elicitation": {"form": {}},
        "sampling": {},
        "roots": {},
    }
    for headers, msg in sent[1:]:
        assert headers["mcp-session-id"] == session
        assert headers["mcp-protocol-version"] == "2025-11-25"
        assert "mcp-method" not in headers
        assert "_meta" not in msg.get("params", {})
    answers = [msg for _, msg in sent if "method" not in msg]
    assert [a["result"] for a in answers] == [
        {"action": "accept", "content": DATES},
        ROOTS,
        sampled("Paris"),
    ]
    delete = transport.requests[-1]
    assert delete.headers["mcp-session-id"] == session
    assert delete.headers["mcp-protocol-version"] == "2025-11-25"
    assert all(e.call is not None and e.call.params["name"] == "book_trip" for e in user.asked)


async def test_legacy_parallel_calls_get_their_own_requests() -> None:
    """Each server request is tied to the call whose stream carried it, however many run."""
    asked: list[tuple[str, Any]] = []

    async def elicitation(event: m.InputNeeded) -> Mapping[str, Any]:
        assert event.call is not None
        asked.append((event.call.params["name"], event.key))
        await anyio.sleep(0.01)
        return {"action": "accept", "content": {"name": event.call.params["name"][-3:]}}

    async with connected(everything_app(), "legacy", elicitation=elicitation) as (client, _):
        results: dict[str, list[str]] = {}

        async def run(name: str) -> None:
            results[name] = texts(await client.call_tool(name))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "test_input_required_result_elicitation")
            tg.start_soon(run, "test_streaming_elicitation")
    assert results == {
        "test_input_required_result_elicitation": ["Hello, ion!"],
        "test_streaming_elicitation": ["Streaming for ion."],
    }
    assert len(asked) == 2


async def test_legacy_progress_and_logs_ride_the_call_stream() -> None:
    seen: list[str] = []
    async with connected(
        everything_app(), "legacy", on_notification=lambda method, _: seen.append(method)
    ) as (client, _):
        await client.request("logging/setLevel", {"level": "info"})
        result = await client.call_tool("test_tool_with_logging")
    assert texts(result) == ["Logging test completed"]
    assert seen == ["notifications/message"] * 3


async def test_legacy_rejected_input_is_an_error_answer_and_the_call_goes_on() -> None:
    async def refuse(event: m.InputNeeded) -> Mapping[str, Any]:
        raise InputRejectedError

    async with connected(everything_app(), "legacy", sampling=refuse) as (client, transport):
        with pytest.raises(CallFailedError) as failed:
            await client.call_tool("test_sampling", {"prompt": "hi"})
    answer = posts(transport)[-1][1]
    assert answer["error"] == {"code": -1, "message": "User rejected the request"}
    # the server decided what a refusal means (our shim fails the original request)
    assert not failed.value.local
    assert "User rejected the request" in failed.value.error.message


async def test_modern_rejected_input_abandons_the_call() -> None:
    async def refuse(event: m.InputNeeded) -> Mapping[str, Any]:
        raise InputRejectedError

    async with connected(everything_app(), sampling=refuse) as (client, transport):
        with pytest.raises(InputRejectedError):
            await client.call_tool("test_sampling", {"prompt": "hi"})
    assert methods(transport) == ["tools/call"]  # no retry


async def test_a_failing_callback_ends_its_call_with_its_exception() -> None:
    async def broken(event: m.InputNeeded) -> Mapping[str, Any]:
        raise LookupError("no roots here")

    for era in ("modern", "legacy"):
        async with connected(everything_app(), era, roots=broken) as (client, _):
            with pytest.raises(LookupError):
                await client.call_tool("test_input_required_result_list_roots")
            assert texts(await client.call_tool("test_simple_text"))  # the client goes on


async def test_rounds_are_capped_on_both_wires() -> None:
    for era in ("modern", "legacy"):
        async with connected(everything_app(), era, config={"max_rounds": 1}) as (client, _):
            with pytest.raises(RoundsExhaustedError) as capped:
                await client.call_tool("test_input_required_result_multi_round")
        assert capped.value.rounds == 1


# --- auto -------------------------------------------------------------------------------------


async def test_auto_finds_our_dual_era_server_modern() -> None:
    async with connected(everything_app(), "auto") as (client, transport):
        assert client.era is m.Era.MODERN
        assert client.server_info == {"name": "mrtr-sansio-everything", "version": m.__version__}
        await client.call_tool("test_simple_text")
    assert methods(transport) == ["server/discover", "tools/call"]


async def test_auto_stays_modern_on_a_recognised_modern_error() -> None:
    config = {"protocol_version": "2099-01-01"}
    async with connected(everything_app(), "auto", config=config) as (client, transport):
        assert client.era is m.Era.MODERN
        assert client.protocol_version == "2026-07-28"  # chosen from data.supported
        await client.call_tool("test_simple_text")
    headers = [h["mcp-protocol-version"] for h, _ in posts(transport)]
    assert headers == ["2099-01-01", "2026-07-28"]


def legacy_only(
    app: McpHttpApp, status: int, body: bytes, content_type: bytes = b"application/json"
) -> Any:
    """``app`` behind a gate that refuses every POST but a legacy one, as a 2025 server
    does: ``initialize`` or a request in a session pass; anything else gets ``status``."""

    async def gate(scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope["headers"])
        if scope["type"] == "http" and scope["method"] == "POST":
            message = await receive()
            msg = json.loads(message["body"])
            if msg.get("method") != "initialize" and b"mcp-session-id" not in headers:
                start = {"type": "http.response.start", "status": status}
                start["headers"] = [(b"content-type", content_type)]
                await send(start)
                await send({"type": "http.response.body", "body": body})
                return
            replay = [message]

            async def again() -> Any:
                return replay.pop() if replay else await receive()

            await app(scope, again, send)
            return
        await app(scope, receive, send)

    return gate


TS_SDK_REFUSAL = (
    b'{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},'
    b'"id":null}'
)


@pytest.mark.parametrize(
    ("status", "body", "content_type"),
    [
        (400, TS_SDK_REFUSAL, b"application/json"),
        (400, b"", b"application/json"),
        (400, b"Bad Request: Missing session ID", b"text/plain"),
        (404, b"Not Found", b"text/plain"),
        (405, b"", b"text/plain"),
        (200, b'{"jsonrpc":"2.0","id":0,"result":{}}', b"application/json"),
    ],
)
async def test_auto_falls_back_to_initialize_on_any_unrecognised_answer(
    status: int, body: bytes, content_type: bytes
) -> None:
    app = legacy_only(everything_app(), status, body, content_type)
    async with connected(app, "auto") as (client, transport):
        assert client.era is m.Era.LEGACY
        assert client.session_id is not None
        result = await client.call_tool("test_input_required_result_elicitation")
    assert texts(result) == ["Hello, Ada!"]
    assert methods(transport)[:3] == ["server/discover", "initialize", "notifications/initialized"]


async def test_auto_falls_back_when_the_probe_gets_no_answer_in_time() -> None:
    async def silent(scope: Any, receive: Any, send: Any) -> None:
        await anyio.sleep_forever()

    app = everything_app()

    async def hangs_on_discover(scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        if b"server/discover" in message["body"]:
            await silent(scope, receive, send)
        replay = [message]

        async def again() -> Any:
            return replay.pop() if replay else await receive()

        await app(scope, again, send)

    config = {"probe_timeout": 0.05}
    async with connected(hangs_on_discover, "auto", config=config) as (client, transport):
        assert client.era is m.Era.LEGACY
        assert methods(transport)[:2] == ["server/discover", "initialize"]
        assert texts(await client.call_tool("test_simple_text")) == [SIMPLE]


async def test_a_handshake_the_server_refuses_raises_from_connect() -> None:
    async def refuses(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 503, "headers": []})
        await send({"type": "http.response.body", "body": b"down for maintenance"})

    for era in ("legacy", "auto"):
        with pytest.raises(HandshakeFailedError) as failed:
            async with connected(refuses, era):
                pytest.fail("connected to a server that refused")
        assert "HTTP 503: down for maintenance" in str(failed.value)


# --- sessions, cancellation and failures ----------------------------------------------------


async def test_a_session_the_server_ended_raises_and_a_new_one_opens() -> None:
    app = everything_app()
    async with connected(app, "legacy") as (client, transport):
        first = client.session_id
        _forget_sessions(app)  # the server forgot the session
        with pytest.raises(SessionExpiredError) as expired:
            await client.call_tool("test_simple_text")
        assert expired.value.local
        await anyio.sleep(0.01)  # the new session is opened at once
        second = client.session_id
        assert second is not None
        assert second != first
        assert texts(await client.call_tool("test_simple_text")) == [SIMPLE]
    assert methods(transport) == [
        "initialize",
        "notifications/initialized",
        "tools/call",
        "initialize",
        "notifications/initialized",
        "tools/call",
        "DELETE",
    ]


async def test_a_session_ended_while_answering_fails_the_open_call() -> None:
    app = everything_app()

    async def forget_then_answer(event: m.InputNeeded) -> Mapping[str, Any]:
        _forget_sessions(app)
        return {"action": "accept", "content": {"name": "Ada"}}

    async with connected(app, "legacy", elicitation=forget_then_answer) as (client, _):
        with pytest.raises(SessionExpiredError):
            await client.call_tool("test_input_required_result_elicitation")


class Gate:
    """A handler that holds ``slow`` until cancelled, and says what it saw."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.cancelled = anyio.Event()
        self.everything = Everything()

    async def handle(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        if request.name != "slow":
            return await self.everything.handle(request, ctx)
        self.started.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.cancelled.set()
        raise AssertionError("unreachable")


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_cancelling_the_caller_cancels_the_request_on_the_wire(era: str) -> None:
    gate = Gate()
    app = McpHttpApp(gate.handle, server_config())
    async with connected(app, era) as (client, transport):
        async with anyio.create_task_group() as tg:
            # (a progress token makes our server stream, and so watch for the disconnect)
            tg.start_soon(partial(client.call_tool, "slow", meta={"progressToken": 7}))
            await gate.started.wait()
            tg.cancel_scope.cancel()
        with anyio.fail_after(5):
            await gate.cancelled.wait()  # the server stopped the handler
        assert texts(await client.call_tool("test_simple_text"))  # the client goes on
    (closed,) = transport.closed_early
    assert b'"slow"' in closed.content
    sent = methods(transport)
    if era == "modern":
        assert "notifications/cancelled" not in sent  # closing the stream is the signal
    else:
        (note,) = [msg for _, msg in posts(transport) if msg.get("method", "").endswith("led")]
        assert note["params"]["requestId"] == 1


async def test_a_stream_cut_before_the_answer_fails_the_call_only() -> None:
    async with connected(everything_app()) as (client, transport):
        transport.cut(lambda _, body: b"test_tool_with_progress" in body)
        with pytest.raises(CallFailedError) as failed:
            await client.call_tool("test_tool_with_progress", meta={"progressToken": 1})
        assert failed.value.local
        assert "HTTP request failed: RemoteProtocolError" in str(failed.value)
        assert texts(await client.call_tool("test_simple_text"))


async def test_responses_that_answer_nothing_fail_the_call_with_the_reason() -> None:
    replies = iter(
        [
            (500, b"text/html", b"<h1>Internal Server Error</h1>"),
            (202, b"application/json", b""),
            (200, b"application/json", b"not json"),
            (200, b"application/json", b'{"jsonrpc":"2.0","id":99,"result":{}}'),
            (200, b"application/json", b"[" * 5000),
            (200, b"text/event-stream", b"event: message\ndata: {}\n\n"),
            (200, b"application/json", b'{"jsonrpc":"2.0","id":null,"error":{"code":-32000,'),
        ]
    )

    async def odd(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        status, kind, body = next(replies)
        await send(
            {"type": "http.response.start", "status": status, "headers": [(b"content-type", kind)]}
        )
        await send({"type": "http.response.body", "body": body})

    reasons = []
    async with connected(odd) as (client, _):
        for _ in range(7):
            with pytest.raises(CallFailedError) as failed:
                await client.call_tool("t")
            assert failed.value.local
            reasons.append(failed.value.error.message)
    assert reasons == [
        "HTTP 500: <h1>Internal Server Error</h1>",
        "HTTP 202 (application/json) without a JSON-RPC response",
        "HTTP 200 (application/json) without a JSON-RPC response",
        "HTTP 200 (application/json) without a JSON-RPC response",
        "HTTP 200 (application/json) without a JSON-RPC response",
        "the server ended the response without answering the request",
        "HTTP 200 (application/json) without a JSON-RPC response",
    ]


async def test_an_error_without_id_answers_the_request_it_came_back_on() -> None:
    async def refuses(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        body = b'{"jsonrpc":"2.0","error":{"code":-32600,"message":"Session required"}}'
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async with connected(refuses) as (client, _):
        with pytest.raises(CallFailedError) as failed:
            await client.call_tool("t")
    assert failed.value.code == -32600
    assert failed.value.error.message == "Session required"
    assert not failed.value.local


async def test_a_response_over_the_size_limit_is_refused() -> None:
    limits = m.Limits(max_message_bytes=512)
    async with connected(everything_app(), config={"limits": limits}) as (client, _):
        with pytest.raises(CallFailedError) as failed:
            await client.list_tools()
    assert "exceeds 512 bytes" in failed.value.error.message


async def test_closing_with_calls_open_fails_them() -> None:
    gate = Gate()
    app = McpHttpApp(gate.handle, server_config())
    outcome: list[BaseException] = []
    async with anyio.create_task_group() as tg, connected(app, "legacy") as (client, _):

        async def call() -> None:
            try:
                await client.call_tool("slow")
            except ConnectionClosedError as exc:
                outcome.append(exc)

        tg.start_soon(call)
        await gate.started.wait()
        # leaving the block closed the client
    assert len(outcome) == 1
    with anyio.fail_after(5):
        await gate.cancelled.wait()  # the DELETE ended the session and its handler


async def test_extra_headers_and_the_trace_see_every_message() -> None:
    traced: list[tuple[str, bytes]] = []
    async with connected(
        everything_app(),
        "legacy",
        headers={"authorization": "Bearer t0k3n", "mcp-session-id": "ignored"},
        trace=lambda direction, data: traced.append((direction, data)),
    ) as (client, transport):
        await client.call_tool("test_input_required_result_elicitation")
    assert all(r.headers["authorization"] == "Bearer t0k3n" for r in transport.requests)
    assert "mcp-session-id" not in transport.requests[0].headers  # ours win
    kinds = [(d, json.loads(data).get("method", "response")) for d, data in traced]
    assert kinds == [
        ("send", "initialize"),
        ("recv", "response"),
        ("send", "notifications/initialized"),
        ("send", "tools/call"),
        ("recv", "elicitation/create"),
        ("send", "response"),
        ("recv", "response"),
    ]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_trace_that_raises_is_logged_and_the_call_goes_on(
    era: str, caplog: pytest.LogCaptureFixture
) -> None:
    def broken_trace(direction: str, data: bytes) -> None:
        raise ValueError("the application's trace is broken")

    async with connected(everything_app(), era, trace=broken_trace) as (client, _):
        result = await client.call_tool("test_input_required_result_elicitation")
    assert result["content"]
    assert "a client hook failed" in caplog.text


def test_the_default_http_client_expires_idle_connections_before_servers_do() -> None:
    from mrtr_sansio.adapters.http import DEFAULT_KEEPALIVE_EXPIRY

    assert 0 < DEFAULT_KEEPALIVE_EXPIRY < 5.0  # uvicorn's default keep-alive is 5 s


def _forget_sessions(app: McpHttpApp) -> None:
    """Make the server forget every session, as an expiry or a restart would."""
    for session_id in app._sessions:
        app._sessions.close(session_id)
