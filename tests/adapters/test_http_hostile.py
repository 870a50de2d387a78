"""The ASGI app under real uvicorn on loopback, attacked as a tenant of a shared MCP gateway would:
raw sockets carry what no HTTP library sends (repeated headers, lying lengths, endless chunked
bodies, bytes that are not UTF-8). Each test says what it tried and what must come back; the
first group pins the request findings of issue 15 (1, 2, 5, 6, 8), the rest is the battery.

Every socket read is bounded by a timeout; every loop by a count.
"""

from __future__ import annotations

import json
import select
from collections.abc import Iterator
from typing import Any

import pytest
from http_harness import (
    RawConnection,
    RawResponse,
    SseReader,
    post,
)

import mrtr_sansio as m
from mrtr_sansio.adapters import RequestContext
from mrtr_sansio.adapters.asgi import McpHttpApp
from test_testing_http import Served

V = "2026-07-28"
LEGACY = "2025-11-25"
LIMIT = 64 * 1024
CAPS: dict[str, Any] = {"elicitation": {}}
ENVELOPE = {m.protocol.PROTOCOL_VERSION_KEY: V, m.protocol.CLIENT_CAPABILITIES: CAPS}
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
TOOLS = [
    {
        "name": "weather",
        "inputSchema": {
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
        },
    },
    {"name": "ask", "inputSchema": {"type": "object"}},
]


class Probe:
    """The handler, and the requests it ran (a refused request must never get here)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []

    async def handle(self, request: m.RequestReceived, ctx: RequestContext) -> Any:
        self.calls.append((request.method, request.name))
        if request.method == "tools/list":
            return {"tools": TOOLS}
        if request.method != "tools/call":
            return request.method_not_found()
        if request.name == "weather":
            return _text(f"sunny in {request.arguments.get('region')}")
        if request.name == "ask":
            answer = request.input_responses.accepted_content("who")
            if answer is None:
                return m.InputRequiredResult({"who": m.elicit_form("Name?", SCHEMA)})
            return _text(f"Hello {answer['name']}")
        return request.unknown()


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


@pytest.fixture(scope="module")
def probe() -> Probe:
    return Probe()


@pytest.fixture(scope="module")
def port(probe: Probe) -> Iterator[int]:
    config = m.ServerConfig(
        server_info={"name": "hostile", "version": "1"},
        param_headers=m.http.param_headers_for(TOOLS),
        limits=m.Limits(max_message_bytes=LIMIT),
    )
    served = Served(McpHttpApp(probe.handle, config))
    yield int(served.url.split(":")[2].split("/")[0])
    served.close()


@pytest.fixture
def raw(port: int) -> Iterator[RawConnection]:
    with RawConnection(port) as c:
        yield c


# --- building requests --------------------------------------------------------------------------


def modern(rid: Any, method: str, params: dict[str, Any] | None = None) -> bytes:
    body = {"jsonrpc": "2.0", "id": rid, "method": method}
    body["params"] = {**(params or {}), "_meta": ENVELOPE}
    return json.dumps(body).encode()


def weather(rid: int = 1, region: str = "us") -> bytes:
    return modern(rid, "tools/call", {"name": "weather", "arguments": {"region": region}})


def weather_headers(region: str = "us") -> list[tuple[str, str]]:
    return [
        ("MCP-Protocol-Version", V),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "weather"),
        ("Mcp-Param-Region", region),
    ]


def without(headers: list[tuple[str, str]], name: str) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k.lower() != name.lower()]


def legacy(rid: Any, method: str, params: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        body["params"] = params
    return json.dumps(body).encode()


def exchange(port: int, data: bytes) -> RawResponse:
    with RawConnection(port) as c:
        c.send(data)
        return c.response()


def refused(response: RawResponse, status: int, code: int) -> str:
    """Assert a JSON-RPC refusal; return its message."""
    assert response.status == status, (response.status, response.body)
    error = response.json()["error"]
    assert error["code"] == code, error
    return str(error["message"])


def served_text(response: RawResponse) -> str:
    assert response.status == 200, (response.status, response.body)
    return str(response.json()["result"]["content"][0]["text"])


class Session:
    """A legacy session opened over raw POSTs: ``initialize`` then ``initialized``."""

    def __init__(self, port: int) -> None:
        self.port = port
        init = legacy(
            0,
            "initialize",
            {
                "protocolVersion": LEGACY,
                "capabilities": CAPS,
                "clientInfo": {"name": "raw", "version": "1"},
            },
        )
        answer = exchange(port, post(init))
        assert answer.status == 200
        session_id = answer.header("mcp-session-id")
        assert session_id is not None
        self.id = session_id
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
        assert self.post(note).status == 202

    def headers(self) -> list[tuple[str, str]]:
        return [("Mcp-Session-Id", self.id), ("MCP-Protocol-Version", LEGACY)]

    def post(self, body: bytes, headers: list[tuple[str, str]] | None = None) -> RawResponse:
        return exchange(self.port, post(body, self.headers() if headers is None else headers))

    def open_call(self, stream: RawConnection, rid: int) -> tuple[SseReader, dict[str, Any]]:
        """Start the shimmed ``ask`` call ``rid`` on ``stream``; return its SSE stream and the
        elicitation leg it carried first."""
        stream.send(post(legacy(rid, "tools/call", {"name": "ask"}), self.headers()))
        status, headers = stream.head()
        assert status == 200
        assert dict(headers)["content-type"] == "text/event-stream"
        reader = SseReader(stream)
        leg = reader.next()
        assert leg is not None
        assert leg["method"] == "elicitation/create"
        return reader, leg


# === the findings of issue 15 ====================================================================

# --- finding 1: a repeated mirror header is refused like a mismatch -----------------------------


@pytest.mark.parametrize(
    ("name", "first", "second"),
    [
        ("Mcp-Method", "tools/list", "tools/call"),
        ("Mcp-Name", "ask", "weather"),
        ("MCP-Protocol-Version", LEGACY, V),
        ("Mcp-Param-Region", "eu", "us"),
        ("Mcp-Method", "tools/call", "tools/call"),  # even two equal copies
    ],
)
def test_repeated_mirror_header_is_refused_like_a_mismatch(
    port: int, probe: Probe, name: str, first: str, second: str
) -> None:
    """The wrong copy first, the right one last: a dict keeping the last copy let it through."""
    headers = [*without(weather_headers(), name), (name, first), (name.lower(), second)]
    before = len(probe.calls)
    message = refused(exchange(port, post(weather(), headers)), 400, -32020)
    assert "more than once" in message
    assert name.lower() in message.lower()
    assert len(probe.calls) == before


def test_the_same_request_with_each_header_once_is_served(port: int) -> None:
    assert served_text(exchange(port, post(weather(), weather_headers()))) == "sunny in us"


# --- finding 2: a modern request inside a legacy session is header-checked ---------------------


def test_modern_request_inside_a_session_with_wrong_headers_is_refused(
    port: int, probe: Probe
) -> None:
    """A session id, a modern tools/call body, Mcp-Method: tools/list and no version header:
    it used to run (answering input_required); it gets the -32020 it gets outside a session."""
    session = Session(port)
    before = len(probe.calls)
    body = modern(5, "tools/call", {"name": "ask"})
    headers = [("Mcp-Session-Id", session.id), ("Mcp-Method", "tools/list"), ("Mcp-Name", "ask")]
    assert "MCP-Protocol-Version" in refused(session.post(body, headers), 400, -32020)
    legacy_header = [*headers, ("MCP-Protocol-Version", LEGACY)]
    refused(session.post(body, legacy_header), 400, -32020)
    assert len(probe.calls) == before


@pytest.mark.parametrize("session_header", ["current", "unknown"])
def test_modern_request_with_a_session_id_is_served_as_without_it(
    port: int, session_header: str
) -> None:
    """The chosen rule: a request whose MCP-Protocol-Version is modern ignores Mcp-Session-Id
    (as 2026-07-28 says), so it is checked and answered exactly like one without it."""
    session_id = Session(port).id if session_header == "current" else "0" * 32
    plain = exchange(port, post(weather(), weather_headers()))
    inside = exchange(port, post(weather(), [*weather_headers(), ("Mcp-Session-Id", session_id)]))
    assert (inside.status, inside.json()) == (plain.status, plain.json())
    assert inside.header("mcp-session-id") is None
    bad = [*without(weather_headers(), "Mcp-Name"), ("Mcp-Name", "ask")]
    refused(exchange(port, post(weather(), [*bad, ("Mcp-Session-Id", session_id)])), 400, -32020)


# --- finding 5: a duplicate id inside a session is refused on its own POST ----------------------


def test_duplicate_id_in_a_session_is_refused_and_the_pending_call_completes(port: int) -> None:
    session = Session(port)
    with RawConnection(port) as stream:
        reader, leg = session.open_call(stream, 7)
        duplicate = session.post(legacy(7, "tools/list"))
        assert "already in use" in refused(duplicate, 400, -32600)
        answer = {"action": "accept", "content": {"name": "Ada"}}
        reply = json.dumps({"jsonrpc": "2.0", "id": leg["id"], "result": answer}).encode()
        assert session.post(reply).status == 202
        rest = reader.rest()
    assert [msg.get("id") for msg in rest] == [7]
    assert rest[0]["result"]["content"][0]["text"] == "Hello Ada"


# --- finding 6: oversized bodies are refused at once and the connection closed -----------------


def test_declared_length_past_the_limit_is_refused_before_the_body(raw: RawConnection) -> None:
    raw.send(post(b"{" + b" " * 1000, length=1024**3))  # 1 GiB announced, 1 KB sent
    response = raw.response()
    assert response.status == 413
    assert response.header("connection") == "close"
    assert raw.closed_by_peer()


def test_endless_chunked_body_is_refused_once_past_the_limit(raw: RawConnection) -> None:
    head = (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    )
    raw.send(head.encode())
    chunk = b"%x\r\n" % 16384 + b" " * 16384 + b"\r\n"
    sent = 0
    for _ in range(256):  # at most 4 MiB, 64 times the limit; the answer comes far sooner
        try:
            raw.send(chunk)
        except OSError:
            break
        sent += 16384
        if select.select([raw.sock], [], [], 0.01)[0]:
            break
    assert sent <= 4 * LIMIT  # answered soon after the limit, not at the end of the body
    response = raw.response()
    assert response.status == 413
    assert raw.closed_by_peer()


@pytest.mark.parametrize(("size", "status"), [(LIMIT, 200), (LIMIT + 1, 413)])
def test_body_at_the_limit_is_read_and_one_byte_past_is_refused(
    port: int, size: int, status: int
) -> None:
    body = weather()
    padded = body + b" " * (size - len(body))
    for chunked in (False, True):
        with RawConnection(port) as c:
            if chunked:
                head = post(b"", weather_headers()).replace(b"Content-Length: 0\r\n", b"")
                head = head.replace(b"\r\n\r\n", b"\r\nTransfer-Encoding: chunked\r\n\r\n")
                half = len(padded) // 2
                parts = [padded[:half], padded[half:]]
                c.send(head + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n")
            else:
                c.send(post(padded, weather_headers()))
            assert c.response().status == status


def test_refusal_before_the_body_closes_instead_of_draining(raw: RawConnection) -> None:
    """A wrong Content-Type is refused before the body is read: uvicorn would read and drop a
    1 GiB body to keep the connection alive; the app closes it instead."""
    raw.send(post(b"x" * 100, content_type="text/plain", length=1024**3))
    response = raw.response()
    assert response.status == 415
    assert response.header("connection") == "close"
    # At once: uvicorn's keep-alive timer (5 s) would close an idle connection too, later.
    assert raw.closed_by_peer(timeout=2.0)


# --- finding 8: cancelling a shimmed request cancels its legs on the wire -----------------------


def test_cancelling_a_shimmed_call_sends_cancelled_for_its_leg(port: int) -> None:
    session = Session(port)
    with RawConnection(port) as stream:
        reader, leg = session.open_call(stream, 9)
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}
        assert session.post(json.dumps(note).encode()).status == 202
        rest = reader.rest()
    assert rest == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": leg["id"], "reason": "The original request was cancelled"},
        }
    ]


def test_ending_the_session_cancels_the_legs_of_its_calls(port: int) -> None:
    session = Session(port)
    with RawConnection(port) as stream:
        reader, leg = session.open_call(stream, 3)
        delete = f"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: {session.id}\r\n\r\n"
        with RawConnection(port) as c:
            c.send(delete.encode())
            assert c.response().status == 204
        rest = reader.rest()
    assert [(msg["method"], msg["params"]["requestId"]) for msg in rest] == [
        ("notifications/cancelled", leg["id"])
    ]


# === the battery =================================================================================


@pytest.mark.parametrize(
    "headers",
    [
        [("MCP-PROTOCOL-VERSION", V), ("MCP-METHOD", "tools/call"), ("mcp-name", "weather")],
        [
            ("mcp-protocol-version", f"  {V} "),
            ("Mcp-Method", "\ttools/call "),
            ("Mcp-Name", "weather"),
        ],
    ],
    ids=["upper-case-names", "surrounding-whitespace"],
)
def test_header_name_case_and_surrounding_whitespace_do_not_matter(
    port: int, headers: list[tuple[str, str]]
) -> None:
    assert served_text(exchange(port, post(weather(), [*headers, ("Mcp-Param-Region", "us")])))


def test_base64_mcp_method_is_refused_over_http(port: int) -> None:
    """The encoded form is only for Mcp-Name and Mcp-Param-*: a gateway filtering on the raw
    Mcp-Method must not be bypassed."""
    headers = [
        ("MCP-Protocol-Version", V),
        ("Mcp-Method", "=?base64?dG9vbHMvY2FsbA==?="),
        ("Mcp-Name", "weather"),
        ("Mcp-Param-Region", "us"),
    ]
    response = exchange(port, post(weather(), headers))
    assert response.status == 400
    assert b"-32020" in response.body
    assert b"Mcp-Method must be sent as is" in response.body


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("Mcp-Method", "tools/list, tools/call"),  # what a proxy joining two copies sends
        ("Mcp-Method", "tools/call, tools/call"),
        ("Mcp-Name", "weather,ask"),
        ("Mcp-Param-Region", "us, eu"),
        ("MCP-Protocol-Version", f"{V}, {LEGACY}"),
        ("Mcp-Name", "=?base64?YXNr?="),  # base64 of "ask"
        ("Mcp-Param-Region", "=?base64?!!!?="),  # not base64
        ("Mcp-Param-Region", "=?base64?/w==?="),  # base64 of a byte that is not UTF-8
        ("Mcp-Name", "WEATHER"),
    ],
)
def test_comma_joined_encoded_and_case_changed_values_are_mismatches(
    port: int, probe: Probe, name: str, value: str
) -> None:
    before = len(probe.calls)
    headers = [*without(weather_headers(), name), (name, value)]
    refused(exchange(port, post(weather(), headers)), 400, -32020)
    assert len(probe.calls) == before


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("Mcp-Name", b"weath\xe9r"),
        ("Mcp-Param-Region", b"\xff\xfe"),
        ("Mcp-Method", b"tools/call\x7f"),
        ("MCP-Protocol-Version", b"2026-07-28\xa0"),
    ],
)
def test_header_bytes_outside_visible_ascii_are_invalid_characters(
    port: int, name: str, raw: bytes
) -> None:
    head = post(weather(), without(weather_headers(), name))
    data = head.replace(b"\r\n\r\n", b"\r\n" + name.encode() + b": " + raw + b"\r\n\r\n", 1)
    assert "invalid characters" in refused(exchange(port, data), 400, -32020)


def test_body_with_latin1_text_does_not_match_raw_header_bytes(port: int) -> None:
    """The body names the tool 'caf\u00e9' (not a tool): its raw Latin-1 bytes in the header
    are not the base64 form the spec requires, so they are refused, not decoded into a match."""
    body = modern(1, "tools/call", {"name": "caf\u00e9"})
    head = post(body, without(weather_headers(), "Mcp-Name"))
    data = head.replace(b"\r\n\r\n", b"\r\nMcp-Name: caf\xe9\r\n\r\n", 1)
    refused(exchange(port, data), 400, -32020)


@pytest.mark.parametrize("name", ["Host", "Origin", "Content-Type", "Mcp-Session-Id"])
def test_repeated_single_valued_transport_headers_are_refused(port: int, name: str) -> None:
    values = {
        "Host": "127.0.0.1",
        "Origin": "http://127.0.0.1",
        "Content-Type": "application/json",
        "Mcp-Session-Id": "0" * 32,
    }
    data = post(weather(), [*weather_headers(), (name, values[name])])
    if name in ("Origin", "Mcp-Session-Id"):  # not in post()'s own headers: send it twice
        data = post(weather(), [*weather_headers(), (name, values[name]), (name, values[name])])
    response = exchange(port, data)
    assert response.status == 400
    if name != "Host":  # h11 itself refuses a second Host before the app sees the request
        assert b"more than once" in response.body


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        (None, 415),
        ("text/plain", 415),
        ("application/json-patch+json", 415),
        ("application/x-www-form-urlencoded", 415),
        ("APPLICATION/JSON; charset=utf-8", 200),
    ],
)
def test_only_a_json_content_type_is_read(port: int, content_type: str | None, status: int) -> None:
    response = exchange(port, post(weather(), weather_headers(), content_type=content_type))
    assert response.status == status


def test_json_batch_is_refused(port: int, probe: Probe) -> None:
    before = len(probe.calls)
    batch = b"[" + weather(1) + b"," + weather(2) + b"]"
    assert "batch" in refused(exchange(port, post(batch, weather_headers())), 400, -32600)
    assert len(probe.calls) == before


@pytest.mark.parametrize("depth", [1000, 30_000])
def test_deeply_nested_json_is_refused_and_the_server_lives_on(port: int, depth: int) -> None:
    nested = b"[" * depth + b"]" * depth
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"weather",'
    body += b'"arguments":{"region":"us","deep":' + nested + b'},"_meta":'
    body += json.dumps(ENVELOPE).encode() + b"}}"
    assert len(body) <= LIMIT
    response = exchange(port, post(body, weather_headers()))
    assert response.status in (200, 400)  # a codec may read it (1000) or refuse it (-32700)
    if response.status == 400:
        assert response.json()["error"]["code"] == -32700
    assert served_text(exchange(port, post(weather(), weather_headers()))) == "sunny in us"


def test_duplicate_json_keys_cannot_smuggle_another_method(port: int, probe: Probe) -> None:
    """A gateway whose JSON parser keeps the first key sees tools/list; the server's keeps the
    last (tools/call). Mcp-Method names what the gateway saw, so the mirror check refuses it."""
    before = len(probe.calls)
    body = weather().replace(
        b'"method": "tools/call"', b'"method": "tools/list", "method": "tools/call"'
    )
    headers = [("MCP-Protocol-Version", V), ("Mcp-Method", "tools/list")]
    refused(exchange(port, post(body, headers)), 400, -32020)
    assert len(probe.calls) == before


def test_thousands_of_headers_do_not_confuse_the_checks(port: int) -> None:
    """uvicorn's h11 reads a whole head of this size; the app then picks its headers out in one
    pass, and a repeated or mismatched mirror header hidden among them is still found."""
    extra = [(f"X-Filler-{i}", "y" * 20) for i in range(500)]  # twice: about 30 KB of headers
    response = exchange(port, post(weather(), [*extra, *weather_headers(), *extra]))
    assert response.status in (200, 400, 431)  # served, or refused by the HTTP server
    if response.status == 200:
        assert served_text(response) == "sunny in us"
        hidden = [*weather_headers(), *extra, ("Mcp-Name", "ask")]
        refused(exchange(port, post(weather(), hidden)), 400, -32020)


def test_unmirrored_param_headers_in_bulk_are_ignored(port: int) -> None:
    extra = [(f"Mcp-Param-Extra{i}", "1") for i in range(300)]
    assert served_text(exchange(port, post(weather(), [*weather_headers(), *extra])))


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"\xff\xfe{}", -32700),  # not UTF-8
        (b'{"jsonrpc":"2.0","id":1.5,"method":"tools/list","params":{}}', -32600),
        (b'{"jsonrpc":"2.0","id":' + b"9" * 30 + b',"method":"tools/list","params":{}}', -32600),
        (b'{"jsonrpc":"2.0","id":true,"method":"tools/list","params":{}}', -32600),
        (b'"just a string"', -32600),
        (b"", -32700),
    ],
)
def test_malformed_bodies_get_their_json_rpc_error(port: int, body: bytes, code: int) -> None:
    refused(exchange(port, post(body, [("MCP-Protocol-Version", V)])), 400, code)


def test_an_id_beyond_any_float_is_refused(port: int) -> None:
    body = b'{"jsonrpc":"2.0","id":1e400,"method":"tools/list","params":{}}'
    response = exchange(port, post(body, [("MCP-Protocol-Version", V)]))
    assert response.status == 400
    assert response.json()["error"]["code"] in (-32600, -32700)  # stdlib reads inf, orjson fails


def test_malformed_notification_gets_no_json_rpc_answer(port: int) -> None:
    """Nothing to answer: the POST is taken (202), no JSON-RPC error is written back."""
    body = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":"x"}'
    response = exchange(port, post(body, [("MCP-Protocol-Version", V)]))
    assert response.body == b""


@pytest.mark.parametrize(
    ("request_line", "status"),
    [
        ("GET /mcp HTTP/1.1", 405),
        ("POST /MCP HTTP/1.1", 404),
        ("POST /mcp/../mcp HTTP/1.1", 404),
        ("POST /mcp/ HTTP/1.1", 200),
    ],
)
def test_paths_and_methods(port: int, request_line: str, status: int) -> None:
    data = post(weather(), weather_headers())
    data = data.replace(b"POST /mcp HTTP/1.1", request_line.encode(), 1)
    with RawConnection(port) as c:
        c.send(data)
        assert c.response().status == status


@pytest.mark.parametrize(
    ("name", "value", "status"),
    [
        ("Origin", "null", 403),
        ("Origin", "http://127.0.0.1.evil.example", 403),
        ("Origin", "http://[::1", 403),
    ],
)
def test_origins_that_are_not_ours_are_forbidden(
    port: int, name: str, value: str, status: int
) -> None:
    assert exchange(port, post(weather(), [*weather_headers(), (name, value)])).status == status


def test_foreign_host_is_misdirected(port: int) -> None:
    assert exchange(port, post(weather(), weather_headers(), host="evil.example")).status == 421


def test_a_session_id_guess_is_not_found(port: int) -> None:
    response = exchange(port, post(legacy(1, "tools/list"), [("Mcp-Session-Id", "f" * 32)]))
    refused(response, 404, -32600)
