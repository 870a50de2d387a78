"""``serve_http``'s connection hygiene and the app's session rules, against real uvicorn on
loopback (both of its HTTP parsers), with raw sockets where the bytes must be exactly ours.

Every timeout here is small and every wait bounded: a hung server fails the test, not the run.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager, suppress
from typing import Any

import httpx
import pytest

import mrtr_sansio as m
from mrtr_sansio.adapters import RequestContext
from mrtr_sansio.adapters import serve as serve_module
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.adapters.serve import ServeOptions, http_server

PARSERS = ["h11", "httptools"]
CAPS: dict[str, Any] = {"elicitation": {"form": {}}}
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
WAIT = 10.0  # the most any single wait below may take


class Recorder:
    """The handler, and the names of the tools it was asked to run."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    async def handle(self, request: m.RequestReceived, ctx: RequestContext) -> Any:
        if request.method == "tools/list":
            return {"tools": []}
        if request.method != "tools/call":
            return request.method_not_found()
        self.ran.append(str(request.name))
        answer = request.input_responses.accepted_content("who")
        if request.name == "greet" and answer is None:
            return m.InputRequiredResult({"who": m.elicit_form("Name?", SCHEMA)}, "s")
        who = answer["name"] if answer else "world"
        return {"content": [{"type": "text", "text": f"Hello {who}"}]}


def user(scope: MutableMapping[str, Any]) -> str | None:
    return next((v.decode() for k, v in scope["headers"] if k == b"x-user"), None)


@contextmanager
def served(app: Any, **options: Any) -> Iterator[int]:
    """``app`` under ``http_server`` in a thread on a free loopback port; yields the port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = http_server(app, options=ServeOptions(**options), log_level="error")
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT
    while not server.started:
        assert thread.is_alive(), "uvicorn did not start"
        assert time.monotonic() < deadline, "uvicorn did not start in time"
        time.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(WAIT)
        sock.close()
        assert not thread.is_alive()


OPEN: list[socket.socket] = []


@pytest.fixture(autouse=True)
def _close_sockets() -> Iterator[None]:
    yield
    while OPEN:
        OPEN.pop().close()


def connect(port: int) -> socket.socket:
    """A raw client connection, closed after the test."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    conn.settimeout(WAIT)
    OPEN.append(conn)
    return conn


def closed_after(conn: socket.socket) -> float:
    """Seconds until the server closes ``conn`` (reading and discarding what it sends)."""
    started = time.monotonic()
    try:
        while conn.recv(65536):
            pass
    except ConnectionResetError:
        pass
    return time.monotonic() - started


def read_response(conn: socket.socket) -> tuple[int, bytes]:
    """Status and everything the server sent until it closed the connection."""
    data = b""
    try:
        while chunk := conn.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return int(data.split(b" ", 2)[1]), data


def post(body: dict[str, Any], headers: dict[str, str] | None = None) -> bytes:
    raw = json.dumps(body).encode()
    lines = [
        "POST /mcp HTTP/1.1",
        "Host: localhost",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"Content-Length: {len(raw)}",
        *(f"{k}: {v}" for k, v in (headers or {}).items()),
    ]
    return "\r\n".join(lines).encode() + b"\r\n\r\n" + raw


def modern_call(rid: int, name: str) -> tuple[dict[str, Any], dict[str, str]]:
    meta = {m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28", m.protocol.CLIENT_CAPABILITIES: {}}
    body = {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": name, "arguments": {}, "_meta": meta},
    }
    headers = {"Mcp-Method": "tools/call", "Mcp-Name": name, "MCP-Protocol-Version": "2026-07-28"}
    return body, headers


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": CAPS,
        "clientInfo": {"name": "legacy", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}


def session(http: httpx.Client, url: str, who: str | None = None) -> dict[str, str]:
    headers = {} if who is None else {"x-user": who}
    response = http.post(url, json=INITIALIZE, headers=headers)
    assert response.status_code == 200, response.text
    out = {"mcp-session-id": response.headers["mcp-session-id"], **headers}
    assert http.post(url, json=INITIALIZED, headers=out).status_code == 202
    return out


# --- connections ---------------------------------------------------------------------------------


@pytest.mark.parametrize("parser", PARSERS)
def test_a_connection_that_sends_nothing_is_closed_after_the_request_timeout(
    parser: str,
) -> None:
    app = McpHttpApp(Recorder().handle)
    with served(app, http=parser, keep_alive_timeout=0.2, request_timeout=0.6) as port:
        conns = [connect(port) for _ in range(5)]
        waited = [closed_after(c) for c in conns]
    assert all(w < 3.0 for w in waited), waited
    assert waited[0] >= 0.5  # by the request deadline, not the (shorter) keep-alive one


@pytest.mark.parametrize("parser", PARSERS)
def test_a_keep_alive_connection_is_closed_when_idle_after_a_response(parser: str) -> None:
    with served(McpHttpApp(Recorder().handle), http=parser, keep_alive_timeout=0.3) as port:
        conn = connect(port)
        conn.sendall(b"GET /mcp HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert conn.recv(65536).startswith(b"HTTP/1.1 405")
        assert closed_after(conn) < 3.0


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize("part", ["head", "body"])
def test_a_trickling_request_is_cut_at_the_request_timeout_and_others_are_served(
    parser: str, part: str
) -> None:
    recorder = Recorder()
    app = McpHttpApp(recorder.handle)
    body, headers = modern_call(1, "hello")
    whole = post(body, headers)
    cut = whole.index(b"\r\n\r\n") + (4 if part == "body" else -10)
    with served(app, http=parser, keep_alive_timeout=0.3, request_timeout=1.0) as port:
        slow = [connect(port) for _ in range(3)]
        started = time.monotonic()
        sent = 0
        while time.monotonic() - started < 1.6 and sent < cut:  # one byte each 50 ms
            for conn in slow:
                with suppress(OSError):  # the server may have closed it already
                    conn.sendall(whole[sent : sent + 1])
            sent += 1
            time.sleep(0.05)
        legit = connect(port)  # meanwhile a whole request is answered at once
        legit.sendall(whole)
        assert legit.recv(65536).startswith(b"HTTP/1.1 200")
        waited = [closed_after(conn) + (time.monotonic() - started) for conn in slow]
    assert all(w < 4.0 for w in waited)  # not kept alive by the trickle
    assert recorder.ran == ["hello"]  # only the legitimate request ran


SMUGGLED = (
    b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    b"Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
)


@pytest.mark.parametrize("parser", PARSERS)
def test_a_request_smuggled_after_content_length_and_chunked_does_not_run(parser: str) -> None:
    recorder = Recorder()
    body, headers = modern_call(7, "smuggled")
    with served(McpHttpApp(recorder.handle), http=parser) as port:
        conn = connect(port)
        conn.sendall(SMUGGLED + post(body, headers))
        status, data = read_response(conn)  # the server answers once and closes
    assert status == 400
    assert data.count(b"HTTP/1.1 ") == 1
    assert recorder.ran == []


@pytest.mark.parametrize("limit", [2, 3])
def test_limit_concurrency_answers_503_past_it(limit: int) -> None:
    with served(McpHttpApp(Recorder().handle), limit_concurrency=limit) as port:
        connect(port)  # an idle connection, counted by the limit
        time.sleep(0.1)  # let the server accept it
        probe = connect(port)
        probe.sendall(b"GET /mcp HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        status, _ = read_response(probe)
    # two connections are open: under a limit of 3 the request runs (405), at 2 it is refused
    assert status == (405 if limit == 3 else 503)


# --- sessions over HTTP ----------------------------------------------------------------------


def test_an_abandoned_session_flood_does_not_lock_out_new_clients() -> None:
    config = m.ServerConfig(max_sessions=16)
    app = McpHttpApp(Recorder().handle, config)
    with served(app) as port, httpx.Client(timeout=WAIT) as http:
        url = f"http://127.0.0.1:{port}/mcp"
        flood = [http.post(url, json=INITIALIZE) for _ in range(64)]
        assert all(r.status_code == 200 for r in flood)  # each one pushes the oldest out
        assert len(app._sessions) == 16
        newcomer = session(http, url)
        assert http.post(url, json=LIST, headers=newcomer).status_code == 200
        first = {"mcp-session-id": flood[0].headers["mcp-session-id"]}
        assert http.post(url, json=LIST, headers=first).status_code == 404


def test_a_second_principal_cannot_touch_the_first_ones_session() -> None:
    recorder = Recorder()
    app = McpHttpApp(recorder.handle, principal=user)
    with served(app) as port, httpx.Client(timeout=WAIT) as http:
        url = f"http://127.0.0.1:{port}/mcp"
        alice = session(http, url, "alice")
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "greet"}}
        with http.stream("POST", url, json=call, headers=alice) as stream:
            lines = stream.iter_lines()
            leg = json.loads(next(line for line in lines if line.startswith("data: "))[6:])
            assert leg["method"] == "elicitation/create"
            bob = {**alice, "x-user": "bob"}
            content = {"action": "accept", "content": {"name": "Mallory"}}
            forged = {"jsonrpc": "2.0", "id": leg["id"], "result": content}
            assert http.post(url, json=forged, headers=bob).status_code == 404
            assert http.post(url, json=LIST, headers=bob).status_code == 404
            assert http.delete(url, headers=bob).status_code == 404
            mine = {**forged, "result": {"action": "accept", "content": {"name": "Alice"}}}
            assert http.post(url, json=mine, headers=alice).status_code == 202
            final = json.loads(next(line for line in lines if line.startswith("data: "))[6:])
        assert final["result"]["content"][0]["text"] == "Hello Alice"
        assert http.delete(url, headers=alice).status_code == 204


def test_an_idle_session_expires_and_is_404_over_http() -> None:
    app = McpHttpApp(Recorder().handle, m.ServerConfig(session_idle_timeout=0.3))
    with served(app) as port, httpx.Client(timeout=WAIT) as http:
        url = f"http://127.0.0.1:{port}/mcp"
        ids = session(http, url)
        deadline = time.monotonic() + WAIT
        while len(app._sessions) and time.monotonic() < deadline:  # the lifespan sweeper
            time.sleep(0.05)
        assert len(app._sessions) == 0
        assert http.post(url, json=LIST, headers=ids).status_code == 404


# --- options -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field",
    [
        "keep_alive_timeout",
        "request_timeout",
        "limit_concurrency",
        "backlog",
        "max_head_bytes",
        "graceful_shutdown_timeout",
    ],
)
def test_options_refuse_non_positive_values(field: str) -> None:
    values: dict[str, Any] = {field: 0}
    with pytest.raises(ValueError, match=rf"^{field}: must be positive"):
        ServeOptions(**values)


def test_options_refuse_an_unknown_parser() -> None:
    with pytest.raises(ValueError, match="'http' must be in"):
        ServeOptions(http="h2")  # type: ignore[arg-type]


def test_defaults_are_the_documented_ones() -> None:
    options = ServeOptions()
    assert (options.keep_alive_timeout, options.request_timeout) == (5.0, 30.0)
    assert (options.limit_concurrency, options.backlog) == (2048, 1024)
    server = http_server(McpHttpApp(Recorder().handle), options=options)
    assert server.config.timeout_keep_alive == 5.0
    assert server.config.backlog == 1024
    assert server.config.h11_max_incomplete_event_size == 16 * 1024
    assert server.config.loop == "auto"  # uvloop when installed


@pytest.mark.parametrize(("soft", "expected"), [(10_000, 2048), (2048 + 64, 2048), (1024, 960)])
def test_limit_concurrency_stays_below_the_open_file_limit(
    monkeypatch: pytest.MonkeyPatch, soft: int, expected: int
) -> None:
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda _which: (soft, soft))
    assert serve_module._fit_to_file_limit(2048) == expected


# --- the example server ------------------------------------------------------------------------


def _example_server() -> Any:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "http" / "server.py"
    spec = importlib.util.spec_from_file_location("example_http_server_serve", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_server_defaults_are_serve_https_and_the_configs() -> None:
    example = _example_server()
    args = example.parse_args(["--port", "1"])
    assert example.serve_options(args) == ServeOptions()
    app = example.build_app(None)
    defaults = m.ServerConfig()
    assert app.config.max_sessions == defaults.max_sessions
    assert app.config.session_idle_timeout == defaults.session_idle_timeout


def test_the_example_server_options_reach_the_app_and_the_server() -> None:
    example = _example_server()
    argv = ["--port", "1", "--keep-alive-timeout", "2.5", "--request-timeout", "7"]
    argv += ["--limit-concurrency", "99", "--backlog", "5", "--max-head-bytes", "4096"]
    argv += ["--http", "h11", "--max-sessions", "3", "--max-sessions-per-principal", "2"]
    argv += ["--session-idle-timeout", "60"]
    args = example.parse_args(argv)
    expected = ServeOptions(
        keep_alive_timeout=2.5,
        request_timeout=7.0,
        limit_concurrency=99,
        backlog=5,
        max_head_bytes=4096,
        http="h11",
    )
    assert example.serve_options(args) == expected
    sessions = {"max_sessions": 3, "max_sessions_per_principal": 2, "session_idle_timeout": 60.0}
    config = example.build_app(None, sessions=sessions).config
    assert (config.max_sessions, config.max_sessions_per_principal) == (3, 2)
    assert config.session_idle_timeout == 60.0
    with pytest.raises(ValueError, match="request_timeout"):
        example.serve_options(example.parse_args(["--port", "1", "--request-timeout", "0"]))


@pytest.mark.parametrize(
    ("level", "kept"),
    [("trace", True), ("debug", True), ("info", True), ("warning", False), ("critical", False)],
)
def test_access_log_is_kept_only_at_levels_that_log_it(level: str, kept: bool) -> None:
    """uvicorn formats each access line before its logger drops it: above "info" (where it
    would log nothing) the access log is turned off rather than paid for."""
    app = McpHttpApp(Recorder().handle)
    assert http_server(app, log_level=level).config.access_log is kept
