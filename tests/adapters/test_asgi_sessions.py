"""The ASGI app's legacy sessions (owner, expiry, caps), its mount under a prefix, answers a
handler gets wrong, and ambiguous framing; in process, under asyncio and trio."""

from __future__ import annotations

from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import anyio
import pytest
from http_harness import (
    Client,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from scale.semconv import violations

import mrtr_sansio as m
from helpers import Clock
from mrtr_sansio.adapters import RequestContext
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.otel import OtelObserver

pytestmark = pytest.mark.anyio

CAPS: dict[str, Any] = {"elicitation": {"form": {}}}
ENVELOPE = {m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28", m.protocol.CLIENT_CAPABILITIES: CAPS}
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


async def handle(request: m.RequestReceived, ctx: RequestContext) -> Any:
    if request.method != "tools/call":
        return {"tools": []} if request.method == "tools/list" else request.method_not_found()
    if request.name == "greet":
        answer = request.input_responses.accepted_content("who")
        if answer is None:
            return m.InputRequiredResult({"who": m.elicit_form("Name?", SCHEMA)}, "s")
        return {"content": [{"type": "text", "text": f"Hello {answer['name']}"}]}
    if request.name == "a_list":
        return [{"type": "text", "text": "not a result"}]
    return request.unknown()


def make_app(clock: Clock | None = None, **config: Any) -> McpHttpApp:
    cfg = m.ServerConfig(clock=clock if clock is not None else Clock(1000.0), **config)
    return McpHttpApp(handle, cfg, principal=_user)


def _user(scope: MutableMapping[str, Any]) -> str | None:
    for key, value in scope["headers"]:
        if key == b"x-user":
            return str(value.decode())
    return None


@pytest.fixture
async def tg() -> AsyncIterator[Any]:
    async with anyio.create_task_group() as group:
        yield group
        group.cancel_scope.cancel()


def initialize_body() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": CAPS,
            "clientInfo": {"name": "legacy", "version": "1"},
        },
    }


async def open_session(client: Client, user: str | None = None) -> dict[str, str]:
    who = {} if user is None else {"x-user": user}
    response = await client.send(initialize_body(), who)
    assert response.status == 200, response.body
    session = {"mcp-session-id": response.headers["mcp-session-id"], **who}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await client.send(initialized, session)).status == 202
    return session


LIST = {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}
GREET = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "greet"}}


# --- ownership (finding 4) ---------------------------------------------------------------------


async def test_another_principal_cannot_use_answer_or_delete_a_session(tg: Any) -> None:
    app = make_app()
    client = Client(app, tg)
    alice = await open_session(client, "alice")
    stream = client.start(GREET, alice)
    leg = await stream.response.next_message()
    assert leg is not None
    assert leg["method"] == "elicitation/create"
    as_bob = {**alice, "x-user": "bob"}
    anonymous = {"mcp-session-id": alice["mcp-session-id"]}
    answer = {"jsonrpc": "2.0", "id": leg["id"], "result": {"action": "accept", "content": {}}}
    bobs = {**answer, "result": {"action": "accept", "content": {"name": "Mallory"}}}
    for headers in (as_bob, anonymous):
        for body in (bobs, LIST):
            refused = await client.send(body, headers)
            assert refused.status == 404
            assert refused.json()["error"]["message"] == "Session not found"
        assert (await client.send(b"", headers, method="DELETE")).status == 404
    (peer,) = app._sessions.values()
    assert peer.conn.in_flight == {2}  # her request is untouched, still waiting on her leg
    mine = {**answer, "result": {"action": "accept", "content": {"name": "Alice"}}}
    assert (await client.send(mine, alice)).status == 202
    final = await stream.response.next_message()
    assert final is not None
    assert final["result"]["content"][0]["text"] == "Hello Alice"
    assert (await client.send(b"", alice, method="DELETE")).status == 204


async def test_an_unknown_and_a_foreign_session_look_the_same(tg: Any) -> None:
    client = Client(make_app(), tg)
    alice = await open_session(client, "alice")
    foreign = await client.send(LIST, {**alice, "x-user": "bob"})
    unknown = await client.send(LIST, {"mcp-session-id": "0" * 32, "x-user": "bob"})
    assert (foreign.status, foreign.body) == (unknown.status, unknown.body)


# --- idle expiry, caps and eviction (finding 3) -------------------------------------------------


async def test_an_idle_session_lives_until_its_timeout_then_is_404(tg: Any) -> None:
    clock = Clock(1000.0)
    client = Client(make_app(clock, session_idle_timeout=60.0), tg)
    session = await open_session(client)
    clock.now += 59.5
    assert (await client.send(LIST, session)).status == 200  # and that use restarts the timer
    clock.now += 59.5
    assert (await client.send(LIST, session)).status == 200
    clock.now += 60.0  # idle exactly the timeout: gone
    assert (await client.send(LIST, session)).status == 404
    assert (await client.send(b"", session, method="DELETE")).status == 404


async def test_a_busy_session_does_not_expire(tg: Any) -> None:
    clock = Clock(1000.0)
    app = make_app(clock, session_idle_timeout=60.0)
    client = Client(app, tg)
    session = await open_session(client)
    stream = client.start(GREET, session)
    leg = await stream.response.next_message()
    assert leg is not None
    clock.now += 600.0
    other = await open_session(client)  # a request comes: expiry is checked, the busy one stays
    assert len(app._sessions) == 2
    answer = {"jsonrpc": "2.0", "id": leg["id"], "result": {"action": "accept", "content": {}}}
    answer["result"]["content"] = {"name": "Zed"}
    assert (await client.send(answer, session)).status == 202
    assert (await stream.response.next_message()) is not None
    await stream.finished.wait()
    clock.now += 60.0
    assert (await client.send(LIST, session)).status == 404  # idle since the stream ended
    assert (await client.send(LIST, other)).status == 404


async def test_lifespan_sweeper_ends_abandoned_sessions_without_a_request() -> None:
    app = McpHttpApp(handle, m.ServerConfig(session_idle_timeout=0.2))
    shutdown = anyio.Event()
    sent: list[str] = []

    async def receive() -> dict[str, Any]:
        if not sent:
            return {"type": "lifespan.startup"}
        await shutdown.wait()
        return {"type": "lifespan.shutdown"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message["type"])

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(app, {"type": "lifespan"}, receive, send)
            client = Client(app, group)
            await open_session(client)
            await open_session(client)
            assert len(app._sessions) == 2
            while len(app._sessions):  # bounded by fail_after
                await anyio.sleep(0.05)
            await open_session(client)  # the sweeper sleeps on: a new session expires too
            while len(app._sessions):
                await anyio.sleep(0.05)
            shutdown.set()
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


async def test_global_cap_admits_up_to_it_then_the_longest_idle_gives_way(tg: Any) -> None:
    clock = Clock(1000.0)
    app = make_app(clock, max_sessions=3)
    client = Client(app, tg)
    sessions = []
    for _ in range(3):  # at the limit
        sessions.append(await open_session(client))
        clock.now += 1
    assert (await client.send(LIST, sessions[0])).status == 200  # the first is fresh again
    newest = await open_session(client)  # one past: the longest idle (the second) is ended
    assert len(app._sessions) == 3
    assert (await client.send(LIST, sessions[1])).status == 404
    for kept in (sessions[0], sessions[2], newest):
        assert (await client.send(LIST, kept)).status == 200


async def test_full_server_with_every_session_busy_refuses_with_503(tg: Any) -> None:
    app = make_app(max_sessions=1)
    client = Client(app, tg)
    session = await open_session(client)
    stream = client.start(GREET, session)
    assert await stream.response.next_message() is not None
    refused = await client.send(initialize_body())
    assert refused.status == 503
    assert "mcp-session-id" not in refused.headers
    assert len(app._sessions) == 1


async def test_a_503_refusal_is_a_server_span_and_its_dropped_session_is_ended(tg: Any) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    observer = OtelObserver(provider, MeterProvider(metric_readers=[reader]))
    app = make_app(max_sessions=1, observer=observer)
    client = Client(app, tg)
    session = await open_session(client)
    stream = client.start(GREET, session)
    assert await stream.response.next_message() is not None
    assert (await client.send(initialize_body())).status == 503
    (refused,) = [s for s in exporter.get_finished_spans() if s.name == "initialize"]
    attributes = refused.attributes or {}
    assert attributes["error.type"] == attributes["rpc.response.status_code"] == "-32603"
    assert attributes["http.response.status_code"] == 503
    assert attributes["mcp.protocol.version"] == "2025-11-25"
    assert violations(refused, wire=True) == []
    data = reader.get_metrics_data()
    assert data is not None
    ended = [
        point
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "mcp.server.session.duration"
        for point in metric.data.data_points
    ]
    (point,) = ended  # the refused one ended; the open one runs on
    assert isinstance(point, HistogramDataPoint)
    assert point.count == 1


async def test_per_principal_cap_makes_her_own_oldest_give_way(tg: Any) -> None:
    app = make_app(max_sessions_per_principal=2)
    client = Client(app, tg)
    bob = await open_session(client, "bob")
    first = await open_session(client, "alice")
    second = await open_session(client, "alice")  # at her limit
    third = await open_session(client, "alice")  # one past: her first goes
    assert (await client.send(LIST, first)).status == 404
    for kept in (bob, second, third):
        assert (await client.send(LIST, kept)).status == 200


async def test_one_principal_flooding_pushes_out_only_her_own_sessions(tg: Any) -> None:
    app = make_app(max_sessions=8, max_sessions_per_principal=4)
    client = Client(app, tg)
    alice = await open_session(client, "alice")
    for _ in range(40):  # bounded: 40 initializes from one principal
        response = await client.send(initialize_body(), {"x-user": "mallory"})
        assert response.status == 200
    assert len(app._sessions) == 5  # four of hers, one of alice's
    assert (await client.send(LIST, alice)).status == 200


async def test_guessed_session_ids_find_nothing(tg: Any) -> None:
    app = make_app()
    client = Client(app, tg)
    real = await open_session(client, "alice")
    tried = [real["mcp-session-id"][:-1] + c for c in "0123456789abcdef"]
    tried += ["", " ", "../", real["mcp-session-id"].upper(), real["mcp-session-id"] + "0"]
    for guess in [t for t in tried if t != real["mcp-session-id"]]:
        response = await client.send(LIST, {"mcp-session-id": guess, "x-user": "alice"})
        assert response.status == 404, guess
    assert len(app._sessions) == 1


async def test_deleting_a_session_withdraws_its_pending_legs(tg: Any) -> None:
    app = make_app()
    client = Client(app, tg)
    session = await open_session(client, "alice")
    stream = client.start(GREET, session)
    assert await stream.response.next_message() is not None
    (peer,) = app._sessions.values()
    assert peer.conn.next_deadline() is not None  # the leg's timeout
    assert (await client.send(b"", session, method="DELETE")).status == 204
    with anyio.fail_after(5):
        await stream.finished.wait()
    assert peer.conn.in_flight == frozenset()
    assert peer.conn.next_deadline() is None
    # The withdrawn leg is cancelled on the stream (as on stdio), and then the stream ends.
    withdrawn = await stream.response.next_message()
    assert withdrawn is not None
    assert withdrawn["method"] == "notifications/cancelled"
    assert await stream.response.next_message() is None


# --- small fixes ---------------------------------------------------------------------------------


async def test_a_handler_returning_a_list_gets_internal_error_on_both_eras(tg: Any) -> None:
    app = make_app()
    client = Client(app, tg)
    modern = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "a_list", "_meta": ENVELOPE},
    }
    headers = {"mcp-method": "tools/call", "mcp-name": "a_list"}
    headers["mcp-protocol-version"] = "2026-07-28"
    response = await client.send(modern, headers)
    assert response.status == 200  # an internal error keeps 200 on the modern wire
    assert response.json()["error"]["code"] == -32603
    session = await open_session(client)
    legacy = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "a_list"}}
    response = await client.send(legacy, session)
    assert response.json()["error"]["code"] == -32603
    (peer,) = app._sessions.values()
    assert peer.conn.in_flight == frozenset()  # not left in flight


async def test_content_length_with_transfer_encoding_is_refused_and_closed(tg: Any) -> None:
    client = Client(make_app(), tg)
    smuggling = {"content-length": "4", "transfer-encoding": "chunked"}
    response = await client.send(initialize_body(), smuggling)
    assert response.status == 400
    assert response.headers["connection"] == "close"


class Router:
    """A tiny ASGI router: mounts an app under a prefix as Starlette's ``Mount`` does (the
    full path stays in ``path``, the prefix goes into ``root_path``)."""

    def __init__(self, prefix: str, app: McpHttpApp) -> None:
        self.prefix = prefix
        self.app = app

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        path = scope["path"]
        if path == self.prefix or path.startswith(self.prefix + "/"):
            root = scope.get("root_path", "") + self.prefix
            await self.app({**scope, "root_path": root}, receive, send)
            return
        await send({"type": "http.response.start", "status": 418, "headers": []})
        await send({"type": "http.response.body", "body": b""})


@pytest.mark.parametrize(
    ("path", "status"),
    [("/tenant/mcp", 200), ("/tenant/mcp/", 200), ("/mcp", 418), ("/tenant/other", 404)],
)
async def test_mounted_under_a_prefix(tg: Any, path: str, status: int) -> None:
    client = Client(Router("/tenant", make_app()), tg)
    request = client.start(initialize_body())
    request.scope["path"] = path
    request.scope["raw_path"] = path.encode()
    await request.finished.wait()
    assert request.response.status == status


async def test_a_server_that_strips_the_prefix_itself_still_routes(tg: Any) -> None:
    client = Client(make_app(), tg)
    request = client.start(initialize_body())
    request.scope["root_path"] = "/tenant"  # path is already relative to it
    await request.finished.wait()
    assert request.response.status == 200
    mistaken = client.start(initialize_body())
    mistaken.scope["root_path"] = "/ten"
    mistaken.scope["path"] = "/tenant/mcp"  # "/ten" is not a path segment of it
    await mistaken.finished.wait()
    assert mistaken.response.status == 404
