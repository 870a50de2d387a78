"""The ASGI app's cheap stateless path: idle connections serve the next POSTs, one pass reads
the headers (raw lists, repeats and odd cases included), and nothing of a request outlives it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, MutableMapping
from functools import partial
from typing import Any

import anyio
import pytest
from http_harness import (
    Client,
    scope,
)

import helpers
import mrtr_sansio as m
from mrtr_sansio.adapters import RequestContext
from mrtr_sansio.adapters import asgi as asgi_module
from mrtr_sansio.adapters.asgi import McpHttpApp

pytestmark = pytest.mark.anyio

V = "2026-07-28"
ENVELOPE = {m.protocol.PROTOCOL_VERSION_KEY: V, m.protocol.CLIENT_CAPABILITIES: {}}


class Recorder:
    """A handler that records the connection and principal each request ran with; tool
    ``slow`` waits for ``release``."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str | None, Any]] = []  # (connection id, principal, rid)
        self.release = anyio.Event()
        self.waiting = 0

    async def handle(self, request: m.RequestReceived, ctx: RequestContext) -> Any:
        self.seen.append((id(ctx.connection), ctx.connection.principal, request.request_id))
        if request.name == "slow":
            self.waiting += 1
            try:
                await self.release.wait()
            finally:
                self.waiting -= 1
        return {"content": [{"type": "text", "text": f"{request.name} for {request.principal}"}]}


call = partial(helpers.call, arguments={}, envelope=ENVELOPE)


def headers(name: str = "quick", user: str | None = None) -> dict[str, str]:
    out = {"mcp-protocol-version": V, "mcp-method": "tools/call", "mcp-name": name}
    if user is not None:
        out["x-user"] = user
    return out


def principal(scope: Any) -> str | None:
    return dict(scope["headers"]).get(b"x-user", b"").decode() or None


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def app(recorder: Recorder) -> McpHttpApp:
    config = m.ServerConfig(request_state=m.UNSEALED)
    return McpHttpApp(recorder.handle, config, principal=principal)


@pytest.fixture
async def client(app: McpHttpApp) -> AsyncIterator[Client]:
    async with anyio.create_task_group() as tg:
        yield Client(app, tg)
        tg.cancel_scope.cancel()


def text(response: Any) -> str:
    return str(response.json()["result"]["content"][0]["text"])


async def test_one_idle_connection_serves_posts_one_after_another(
    client: Client, recorder: Recorder
) -> None:
    for rid, user in [(1, "alice"), (1, "bob"), (2, None)]:
        response = await client.send(call(rid, "quick"), headers(user=user))
        assert text(response) == f"quick for {user}"
    connections = {conn for conn, _, _ in recorder.seen}
    assert len(connections) == 1  # the same id 1 twice, on the same connection: nothing kept
    # each request ran with its own principal, on the connection as on the request
    assert [p for _, p, _ in recorder.seen] == ["alice", "bob", None]


async def wait_for(recorder: Recorder, count: int) -> None:
    with anyio.fail_after(5):
        while recorder.waiting < count:
            await anyio.sleep(0)


async def test_concurrent_posts_each_get_a_connection_of_their_own(
    client: Client, recorder: Recorder
) -> None:
    first = client.start(call(1, "slow"), headers("slow", "alice"))
    second = client.start(call(1, "slow"), headers("slow", "bob"))  # the same id, at once
    await wait_for(recorder, 2)
    recorder.release.set()
    with anyio.fail_after(5):
        await first.finished.wait()
        await second.finished.wait()
    assert {text(first.response), text(second.response)} == {"slow for alice", "slow for bob"}
    assert len({conn for conn, _, _ in recorder.seen}) == 2


async def test_idle_connections_are_capped(
    client: Client, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(asgi_module, "IDLE_CONNECTIONS", 2)
    burst = [client.start(call(i, "slow"), headers("slow")) for i in range(3)]
    await wait_for(recorder, 3)
    recorder.release.set()
    with anyio.fail_after(5):
        for request in burst:
            await request.finished.wait()
    first = {conn for conn, _, _ in recorder.seen}
    assert len(first) == 3
    recorder.seen.clear()
    recorder.release = anyio.Event()
    again = [client.start(call(i, "slow"), headers("slow")) for i in range(3)]
    await wait_for(recorder, 3)
    recorder.release.set()
    with anyio.fail_after(5):
        for request in again:
            await request.finished.wait()
    second = {conn for conn, _, _ in recorder.seen}
    assert len(second) == 3
    assert len(second & first) == 2  # at the cap: two were kept; the third was new


async def test_a_connection_whose_client_went_away_is_not_reused(
    client: Client, recorder: Recorder
) -> None:
    slow = client.start(call(1, "slow"), headers("slow"))
    await wait_for(recorder, 1)
    slow.disconnect()
    with anyio.fail_after(5):
        await slow.finished.wait()
    assert recorder.waiting == 0  # cancelled
    response = await client.send(call(1, "quick"), headers())  # the cancelled id again: served
    assert text(response) == "quick for None"
    (abandoned, _, _), (fresh, _, _) = recorder.seen
    assert abandoned != fresh


async def test_a_session_connection_never_serves_stateless_posts(
    client: Client, recorder: Recorder
) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"n": 1}},
    }
    opened = await client.send(init)
    session = opened.headers["mcp-session-id"]
    legacy_call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "quick", "arguments": {}},
    }
    in_session = await client.send(
        legacy_call, {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    )
    assert in_session.status == 200
    await client.send(call(3, "quick"), headers())
    await client.send(call(4, "quick"), headers())
    session_conn, stateless_a, stateless_b = (conn for conn, _, _ in recorder.seen)
    assert stateless_a == stateless_b
    assert session_conn != stateless_a


# --- the raw header list -------------------------------------------------------------------


async def post_raw(app: McpHttpApp, raw_headers: list[tuple[bytes, bytes]], body: bytes) -> Any:
    """POST with exactly ``raw_headers`` (repeats and case as given); (status, body)."""
    request = scope("POST", {})
    request["headers"] = raw_headers
    sent = [{"type": "http.request", "body": body, "more_body": False}]
    out: dict[str, Any] = {"body": b""}

    async def receive() -> dict[str, Any]:
        if sent:
            return sent.pop()
        await anyio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            out["status"] = message["status"]
        else:
            out["body"] += message.get("body", b"")

    with anyio.fail_after(5):
        await app(request, receive, send)
    return out["status"], out["body"]


BASE = [
    (b"host", b"localhost:8000"),
    (b"content-type", b"application/json"),
    (b"mcp-protocol-version", V.encode()),
    (b"mcp-method", b"tools/call"),
    (b"mcp-name", b"quick"),
]


@pytest.mark.parametrize(
    ("accepts", "status"),
    [
        ([b"text/html", b"application/json"], 200),  # one list over two lines
        ([b"application/json", b"text/html"], 200),
        ([b"text/html", b"image/png"], 406),
    ],
)
async def test_repeated_accept_lines_are_one_list(
    app: McpHttpApp, accepts: list[bytes], status: int
) -> None:
    got, _ = await post_raw(
        app, [*BASE, *((b"accept", a) for a in accepts)], json.dumps(call(1, "quick")).encode()
    )
    assert got == status


async def test_header_names_in_any_case_are_read(app: McpHttpApp) -> None:
    """A server that does not lower-case names (ASGI only says they should be) still works."""
    raw = [(name.title(), value) for name, value in BASE]
    status, body = await post_raw(app, raw, json.dumps(call(1, "quick")).encode())
    assert status == 200
    assert json.loads(body)["result"]["content"][0]["text"] == "quick for None"


async def test_a_repeated_single_header_in_another_case_is_refused(app: McpHttpApp) -> None:
    raw = [*BASE, (b"Content-Type", b"application/json")]
    status, body = await post_raw(app, raw, json.dumps(call(1, "quick")).encode())
    assert status == 400
    assert b"content-type sent more than once" in body


async def test_a_repeated_mirror_header_in_another_case_is_refused(
    app: McpHttpApp, recorder: Recorder
) -> None:
    raw = [*BASE, (b"MCP-METHOD", b"tools/call")]
    status, body = await post_raw(app, raw, json.dumps(call(1, "quick")).encode())
    assert status == 400
    assert json.loads(body)["error"]["code"] == -32020
    assert recorder.seen == []


async def test_an_unknown_session_error_uses_the_configured_codec() -> None:
    class Marking:
        def loads(self, data: bytes) -> Any:
            return json.loads(data)

        def dumps(self, obj: Any) -> bytes:
            return json.dumps(obj).encode() + b" "  # trailing whitespace marks this codec

    app = McpHttpApp(Recorder().handle, m.ServerConfig(request_state=m.UNSEALED, codec=Marking()))
    legacy_call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    raw = [*BASE[:2], (b"mcp-session-id", b"0" * 32)]
    status, body = await post_raw(app, raw, json.dumps(legacy_call).encode())
    assert status == 404
    assert body.endswith(b" ")
    assert json.loads(body)["error"]["message"] == "Session not found"
