"""The ASGI Streamable HTTP adapter, in process, under asyncio and trio (anyio's plugin).

Every JSON-RPC message the app sends is validated against the official schema of its era.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, MutableMapping
from functools import partial
from typing import Any

import anyio
import pytest
from http_harness import (
    Client,
)

import helpers
import mrtr_sansio as m
from helpers import check_message
from mrtr_sansio.adapters import RequestContext, SubscriptionHub
from mrtr_sansio.adapters.asgi import McpHttpApp

pytestmark = pytest.mark.anyio

CAPS: dict[str, Any] = {"elicitation": {"form": {}}}
ENVELOPE = {m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28", m.protocol.CLIENT_CAPABILITIES: CAPS}
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
INFO = {"name": "asgi-test", "version": "1.0"}


class Fixture:
    """Handlers plus hooks the tests use to observe and steer them."""

    def __init__(self) -> None:
        self.calls: list[m.RequestReceived] = []
        self.release = anyio.Event()
        self.running = 0
        self.hub = SubscriptionHub()

    async def handle(self, request: m.RequestReceived, ctx: RequestContext) -> Any:
        self.calls.append(request)
        name = request.name
        if request.method == "subscriptions/listen":
            return await self.hub.listen(ctx)
        if request.method != "tools/call":
            return request.method_not_found()
        if name == "greet":
            answer = request.input_responses.accepted_content("who")
            if answer is None:
                return m.InputRequiredResult({"who": m.elicit_form("Name?", SCHEMA)}, "step-1")
            ctx.progress(1, 2, "half way")
            ctx.log("info", "greeting")
            return {"content": [{"type": "text", "text": f"Hello {answer['name']}"}]}
        if name == "slow":
            self.running += 1
            try:
                await self.release.wait()
            finally:
                self.running -= 1
            return {"content": [{"type": "text", "text": "slow done"}]}
        if name == "trigger":
            self.hub.publish("notifications/tools/list_changed")
            self.hub.publish("notifications/resources/updated", {"uri": "test://a"})
            return {"content": [{"type": "text", "text": f"{len(self.hub)} streams"}]}
        if name == "boom":
            raise RuntimeError("kaboom")
        if name == "needs_roots":
            return m.InputRequiredResult({"roots": m.list_roots()})
        return request.unknown()


@pytest.fixture
def fixture() -> Fixture:
    return Fixture()


@pytest.fixture
def app(fixture: Fixture) -> McpHttpApp:
    # Unsealed: these tests look at the state on the wire (sealing has its own tests).
    config = m.ServerConfig(server_info=INFO, legacy_leg_timeout=30.0, request_state=m.UNSEALED)
    return McpHttpApp(fixture.handle, config)


@pytest.fixture
async def client(app: McpHttpApp) -> AsyncIterator[Client]:
    async with anyio.create_task_group() as tg:
        yield Client(app, tg)
        tg.cancel_scope.cancel()


def modern_headers(method: str, name: str | None = None) -> dict[str, str]:
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = m.http.encode_header_value(name)
    return headers


call = partial(helpers.call, arguments={}, envelope=ENVELOPE)


def valid(messages: list[dict[str, Any]], era: m.Era, method: str = "tools/call") -> None:
    for msg in messages:
        check_message(msg, era, method=method)


# --- modern -----------------------------------------------------------------------------------


async def test_modern_exchange_json(client: Client) -> None:
    first = await client.send(call(1, "greet"), modern_headers("tools/call", "greet"))
    assert first.status == 200
    assert first.content_type == "application/json"
    result = first.json()["result"]
    assert result["resultType"] == "input_required"
    assert result["requestState"] == "step-1"
    valid(first.messages(), m.Era.MODERN)

    retry = call(
        2,
        "greet",
        inputResponses={"who": {"action": "accept", "content": {"name": "Ann"}}},
        requestState="step-1",
    )
    second = await client.send(retry, modern_headers("tools/call", "greet"))
    assert second.status == 200
    assert second.json()["result"]["content"][0]["text"] == "Hello Ann"
    assert second.json()["result"]["resultType"] == "complete"
    valid(second.messages(), m.Era.MODERN)


async def test_modern_progress_and_logs_go_over_sse(client: Client) -> None:
    retry = call(
        2,
        "greet",
        inputResponses={"who": {"action": "accept", "content": {"name": "Ann"}}},
        envelope={**ENVELOPE, "progressToken": "p1", m.protocol.LOG_LEVEL: "info"},
    )
    response = await client.send(retry, modern_headers("tools/call", "greet"))
    assert response.status == 200
    assert response.content_type.startswith("text/event-stream")
    messages = response.messages()
    assert [msg.get("method") for msg in messages] == [
        "notifications/progress",
        "notifications/message",
        None,
    ]
    assert messages[0]["params"] == {
        "progressToken": "p1",
        "progress": 1,
        "total": 2,
        "message": "half way",
    }
    assert messages[-1]["id"] == 2
    valid(messages, m.Era.MODERN)


async def test_modern_logs_without_log_level_are_dropped(client: Client) -> None:
    retry = call(
        2,
        "greet",
        inputResponses={"who": {"action": "accept", "content": {"name": "Ann"}}},
        envelope={**ENVELOPE, "progressToken": "p1"},
    )
    response = await client.send(retry, modern_headers("tools/call", "greet"))
    methods = [msg.get("method") for msg in response.messages()]
    assert methods == ["notifications/progress", None]


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        (modern_headers("tools/call", "other"), -32020),
        (modern_headers("tools/list", "greet"), -32020),
        ({"mcp-method": "tools/call", "mcp-name": "greet"}, -32020),
        (
            {"mcp-protocol-version": "2025-11-25", "mcp-method": "tools/call", "mcp-name": "greet"},
            -32020,
        ),
    ],
)
async def test_header_mismatch_is_400(client: Client, headers: dict[str, str], code: int) -> None:
    response = await client.send(call(1, "greet"), headers)
    assert response.status == 400
    assert response.json()["error"]["code"] == code
    valid(response.messages(), m.Era.MODERN)


async def test_base64_header_value_is_decoded(client: Client) -> None:
    response = await client.send(call(1, "grüß"), modern_headers("tools/call", "grüß"))
    assert response.status == 400
    assert response.json()["error"]["code"] == -32602  # unknown tool, not a header mismatch


@pytest.mark.parametrize(
    ("body", "code", "status"),
    [
        (
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "greet"}},
            -32602,
            400,
        ),
        (
            call(1, "greet", envelope={**ENVELOPE, m.protocol.PROTOCOL_VERSION_KEY: "1999-01-01"}),
            -32022,
            400,
        ),
        (call(1, "needs_roots"), -32021, 400),
        (call(1, "nope"), -32602, 400),
        (
            {"jsonrpc": "2.0", "id": 5, "method": "frobnicate", "params": {"_meta": ENVELOPE}},
            -32601,
            404,
        ),
        (b"{not json", -32700, 400),
        (b"[]", -32600, 400),
        (call(1, "boom"), -32603, 200),
    ],
)
async def test_modern_error_statuses(client: Client, body: Any, code: int, status: int) -> None:
    headers: dict[str, str] = {}
    if isinstance(body, dict):
        params = body["params"]
        version = params.get("_meta", {}).get(m.protocol.PROTOCOL_VERSION_KEY, "2026-07-28")
        headers = {"mcp-protocol-version": version, "mcp-method": body["method"]}
        if "name" in params:
            headers["mcp-name"] = params["name"]
    response = await client.send(body, headers)
    assert response.status == status, response.body
    assert response.json()["error"]["code"] == code
    valid(response.messages(), m.Era.MODERN)


async def test_modern_discover_answered_by_the_connection(client: Client) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": ENVELOPE}}
    response = await client.send(body, modern_headers("server/discover"))
    assert response.status == 200
    result = response.json()["result"]
    assert result["supportedVersions"][0] == "2026-07-28"
    assert result["_meta"][m.protocol.SERVER_INFO] == INFO
    valid(response.messages(), m.Era.MODERN, "server/discover")


async def test_notification_gets_202(client: Client) -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}
    response = await client.send(body)
    assert response.status == 202
    assert response.body == b""


async def test_modern_requests_run_concurrently(client: Client, fixture: Fixture) -> None:
    slow = client.start(call(1, "slow"), modern_headers("tools/call", "slow"))
    while fixture.running == 0:
        await anyio.sleep(0)
    fast = await client.send(call(2, "greet"), modern_headers("tools/call", "greet"))
    assert fast.status == 200
    assert not slow.finished.is_set()
    fixture.release.set()
    await slow.finished.wait()
    assert slow.response.json()["result"]["content"][0]["text"] == "slow done"


async def test_modern_disconnect_cancels_a_waiting_handler(
    client: Client, fixture: Fixture, app: McpHttpApp
) -> None:
    # No progress token and no log level: the response would be plain JSON, yet closing the
    # stream must still cancel the request (2026-07-28 Streamable HTTP, Cancellation).
    slow = client.start(call(1, "slow"), modern_headers("tools/call", "slow"))
    while fixture.running == 0:
        await anyio.sleep(0)
    slow.disconnect()
    with anyio.fail_after(5):  # without the watcher the handler would wait forever
        await slow.finished.wait()
    assert fixture.running == 0  # the handler was cancelled, not left running
    assert slow.response.status is None  # nothing was sent for it
    assert not fixture.release.is_set()


async def test_modern_suspending_handler_still_answers_json(
    client: Client, fixture: Fixture
) -> None:
    slow = client.start(call(1, "slow"), modern_headers("tools/call", "slow"))
    while fixture.running == 0:
        await anyio.sleep(0)
    fixture.release.set()
    await slow.finished.wait()
    assert slow.response.content_type == "application/json"
    assert slow.response.json()["result"]["content"][0]["text"] == "slow done"
    valid(slow.response.messages(), m.Era.MODERN)


# --- legacy -----------------------------------------------------------------------------------


async def initialize(client: Client, caps: dict[str, Any] | None = None) -> dict[str, str]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": CAPS if caps is None else caps,
            "clientInfo": {"name": "legacy", "version": "1"},
        },
    }
    response = await client.send(body)
    assert response.status == 200
    valid(response.messages(), m.Era.LEGACY, "initialize")
    session = response.headers["mcp-session-id"]
    assert session
    assert all(0x21 <= ord(c) <= 0x7E for c in session)
    headers = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await client.send(initialized, headers)).status == 202
    return headers


async def test_legacy_shim_over_sse(client: Client, fixture: Fixture) -> None:
    session = await initialize(client)
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "greet"}}
    stream = client.start(body, session)
    leg = await stream.response.next_message()
    assert leg is not None
    assert stream.response.status == 200
    assert stream.response.content_type.startswith("text/event-stream")
    assert leg["method"] == "elicitation/create"
    assert leg["params"] == {"message": "Name?", "requestedSchema": SCHEMA}
    check_message(leg, m.Era.LEGACY)

    answer = {
        "jsonrpc": "2.0",
        "id": leg["id"],
        "result": {"action": "accept", "content": {"name": "Bob"}},
    }
    accepted = await client.send(answer, session)
    assert accepted.status == 202

    log_message = await stream.response.next_message()
    assert log_message == {
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "data": "greeting"},
    }  # a legacy session without logging/setLevel gets every level
    final = await stream.response.next_message()
    assert final == {
        "jsonrpc": "2.0",
        "id": 2,
        "result": {"content": [{"type": "text", "text": "Hello Bob"}]},
    }
    check_message(final, m.Era.LEGACY, method="tools/call")
    assert await stream.response.next_message() is None
    await stream.finished.wait()
    assert [c.round for c in fixture.calls] == [1, 2]
    assert fixture.calls[1].request_state == "step-1"


async def test_legacy_capability_gate_fails_before_any_leg(client: Client) -> None:
    session = await initialize(client)
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "needs_roots"}}
    response = await client.send(body, session)
    assert response.status == 200
    (msg,) = response.messages()
    assert msg["error"]["code"] == -32603
    assert msg["error"]["data"]["requiredCapabilities"] == {"roots": {}}
    valid([msg], m.Era.LEGACY)


async def test_legacy_disconnect_mid_shim_cleans_up(client: Client, app: McpHttpApp) -> None:
    session = await initialize(client)
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "greet"}}
    stream = client.start(body, session)
    leg = await stream.response.next_message()
    assert leg is not None
    (peer,) = app._sessions.values()
    assert peer.conn.in_flight == {2}
    assert peer.conn.next_deadline() is not None
    stream.disconnect()
    await stream.finished.wait()
    assert peer.conn.in_flight == frozenset()
    assert peer.conn.next_deadline() is None  # the leg is gone
    assert peer.exchanges == {}
    late = {
        "jsonrpc": "2.0",
        "id": leg["id"],
        "result": {"action": "accept", "content": {"name": "Bob"}},
    }
    assert (await client.send(late, session)).status == 202  # ignored, reported as an event
    gc.collect()


async def test_legacy_cancellation_ends_the_stream(client: Client, fixture: Fixture) -> None:
    session = await initialize(client)
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "slow"}}
    stream = client.start(body, session)
    while fixture.running == 0:
        await anyio.sleep(0)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
    assert (await client.send(cancel, session)).status == 202
    await stream.finished.wait()
    assert stream.response.messages() == []
    assert fixture.running == 0


async def test_legacy_session_errors(client: Client) -> None:
    session = await initialize(client)
    listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
    unknown = await client.send(listing, {"mcp-session-id": "nope"})
    assert unknown.status == 404
    wrong_version = await client.send(listing, {**session, "mcp-protocol-version": "2020-01-01"})
    assert wrong_version.status == 400
    deleted = await client.send(b"", session, method="DELETE")
    assert deleted.status == 204
    after = await client.send(listing, session)
    assert after.status == 404
    again = await client.send(b"", session, method="DELETE")
    assert again.status == 404


async def test_legacy_request_without_session_is_refused(client: Client) -> None:
    listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
    response = await client.send(listing, {"mcp-protocol-version": "2025-11-25"})
    assert response.status == 400
    assert response.json()["error"]["code"] == -32602
    told = "Not initialized: send initialize first (protocol 2025-11-25)"
    assert response.json()["error"]["message"].startswith(told)
    # A tools/call with neither a session nor _meta (nor the version header) is told the same.
    calling = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "echo"}}
    response = await client.send(calling)
    assert response.status == 400
    assert response.json()["error"]["message"].startswith(told)


async def test_modern_only_app_refuses_initialize_and_delete(fixture: Fixture) -> None:
    app = McpHttpApp(fixture.handle, m.ServerConfig(server_info=INFO), legacy=False)
    async with anyio.create_task_group() as tg:
        client = Client(app, tg)
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"},
            },
        }
        response = await client.send(body)
        assert response.status == 404
        assert response.json()["error"]["code"] == -32601
        assert "mcp-session-id" not in response.headers
        assert (await client.send(b"", {}, method="DELETE")).status == 405


# --- HTTP rules -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"host": "evil.example:8000"}, 421),
        ({"host": "localhost.evil.example"}, 421),
        ({"origin": "http://evil.example"}, 403),
        ({"origin": "null"}, 403),
        ({"origin": "http://localhost:3000"}, 200),
        ({"host": "127.0.0.1:9", "origin": "http://127.0.0.1"}, 200),
        ({"host": "[::1]:8000", "origin": "http://[::1]:8000"}, 200),
        # Host is parsed strictly (RFC 3986 host, optional numeric port): what follows an
        # allowed host cannot smuggle another one past the check.
        ({"host": "[::1]evil.example"}, 421),
        ({"host": "localhost:evil"}, 421),
        ({"host": "localhost:99999"}, 421),
        ({"host": "evil.example@localhost"}, 421),
        ({"host": "localhost:8000:1"}, 421),
        ({"host": "[::1"}, 421),
        ({"host": ""}, 421),
        ({"host": "LocalHost:8000"}, 200),
        ({"origin": "http://localhost:evil"}, 403),
        ({"origin": "http://[::1]evil.example"}, 403),
    ],
)
async def test_dns_rebinding_protection(
    client: Client, headers: dict[str, str], status: int
) -> None:
    response = await client.send(
        call(1, "greet"), {**modern_headers("tools/call", "greet"), **headers}
    )
    assert response.status == status


async def test_transport_errors(client: Client) -> None:
    assert (await client.send(b"{}", method="GET")).status == 405
    assert (await client.send(b"{}", {"content-type": "text/plain"})).status == 415
    assert (await client.send(b"{}", {"accept": "text/html"})).status == 406
    response = await client.send(call(1, "greet"), {"host": "localhost"}, method="PUT")
    assert response.status == 405
    other_path = client.start(call(1, "greet"))
    other_path.scope["path"] = "/elsewhere"
    await other_path.finished.wait()


async def test_body_limit(fixture: Fixture) -> None:
    config = m.ServerConfig(limits=m.Limits(max_message_bytes=64))
    app = McpHttpApp(fixture.handle, config)
    async with anyio.create_task_group() as tg:
        client = Client(app, tg)
        response = await client.send(call(1, "greet", pad="x" * 100))
        assert response.status == 413


async def test_unknown_path_is_404(app: McpHttpApp) -> None:
    async with anyio.create_task_group() as tg:
        client = Client(app, tg)
        request = client.start(call(1, "greet"))
        request.scope["path"] = "/other"
        await request.finished.wait()
        assert request.response.status == 404


async def test_lifespan(app: McpHttpApp) -> None:
    messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return next(messages)

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    await app({"type": "lifespan"}, receive, send)
    assert [s["type"] for s in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


async def test_subscriptions_listen_stream(client: Client, fixture: Fixture) -> None:
    def listen(rid: int, wanted: dict[str, Any]) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "subscriptions/listen",
            "params": {"notifications": wanted, "_meta": ENVELOPE},
        }

    tools = client.start(
        listen(1_700_000_000_000, {"toolsListChanged": True}),
        modern_headers("subscriptions/listen"),
    )
    prompts = client.start(
        listen(2, {"promptsListChanged": True, "resourceSubscriptions": ["test://a"]}),
        modern_headers("subscriptions/listen"),
    )
    ack = await tools.response.next_message()
    assert ack == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {
            "notifications": {"toolsListChanged": True},
            "_meta": {m.protocol.SUBSCRIPTION_ID: 1_700_000_000_000},
        },
    }
    assert tools.response.content_type.startswith("text/event-stream")
    ack2 = await prompts.response.next_message()
    assert ack2 is not None
    assert ack2["params"]["_meta"] == {m.protocol.SUBSCRIPTION_ID: 2}
    valid([ack, ack2], m.Era.MODERN)

    trigger = await client.send(call(3, "trigger"), modern_headers("tools/call", "trigger"))
    assert trigger.json()["result"]["content"][0]["text"] == "2 streams"
    changed = await tools.response.next_message()
    assert changed == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {"_meta": {m.protocol.SUBSCRIPTION_ID: 1_700_000_000_000}},
    }
    updated = await prompts.response.next_message()  # the tools change is filtered out
    assert updated == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "test://a", "_meta": {m.protocol.SUBSCRIPTION_ID: 2}},
    }
    valid([changed, updated], m.Era.MODERN)
    tools.disconnect()
    prompts.disconnect()
    await tools.finished.wait()
    await prompts.finished.wait()
    assert len(fixture.hub) == 0
