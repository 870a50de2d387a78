"""The JSON depth and value-count limits (``Limits.max_json_depth``/``max_json_nodes``) on the
core's parse paths: a stream line, an HTTP body (bytes) and an already decoded message, with
both codecs; at the limit the request is served, one past it is -32700 naming the limit."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helpers import call, drain
from mrtr_sansio import (
    UNSEALED,
    ClientConfig,
    ClientConnection,
    Era,
    InvalidMessage,
    Limits,
    RequestReceived,
    ServerConfig,
    ServerConnection,
)
from mrtr_sansio._wire.bounds import JsonBoundsError, check_bytes, check_value
from mrtr_sansio.config import OrjsonCodec, StdlibJsonCodec

CODECS = [StdlibJsonCodec(), OrjsonCodec()]
DEPTH_ERROR = "Parse error: JSON nested deeper than the 128-level limit (Limits.max_json_depth)"


def depth(value: Any) -> int:
    """Nesting depth, computed the obvious (recursive) way."""
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


def nodes(value: Any) -> int:
    """Values in a JSON value, object keys included."""
    if isinstance(value, dict):
        return 1 + sum(1 + nodes(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(map(nodes, value))
    return 1


def deep_call(rid: int, levels: int) -> dict[str, Any]:
    """A ``tools/call`` whose whole message is ``levels`` deep (its arguments start at 3)."""
    inner: Any = []
    for _ in range(levels - 4):
        inner = [inner]
    msg = call(rid, "echo", {"a": inner})
    assert levels > 200 or depth(msg) == levels  # (the recursive depth() has a stack limit)
    return msg


def wide_call(rid: int, total: int) -> dict[str, Any]:
    """A ``tools/call`` holding exactly ``total`` JSON values."""
    msg = call(rid, "echo", {"a": []})
    msg["params"]["arguments"]["a"] = [0] * (total - nodes(msg))
    assert nodes(msg) == total
    return msg


def server(codec: Any, limits: Limits | None = None) -> ServerConnection:
    return ServerConnection(
        ServerConfig(codec=codec, request_state=UNSEALED, limits=limits or Limits())
    )


def outcome(conn: ServerConnection) -> Any:
    """The request served, or the error the connection answered."""
    (event,) = conn.events()
    if isinstance(event, RequestReceived):
        return event
    assert isinstance(event, InvalidMessage)
    (item,) = drain(conn, Era.MODERN)
    return item.message["error"]


def feed(conn: ServerConnection, msg: dict[str, Any], path: str) -> None:
    if path == "decoded":
        conn.receive_message(msg)
        return
    data = json.dumps(msg).encode()
    if path == "stream":
        conn.receive_data(data + b"\n")
    elif path == "stream-split":  # not one whole line: through the framer
        conn.receive_data(data[:10])
        conn.receive_data(data[10:] + b"\n")
    else:
        conn.receive_message(data)


PATHS = ["stream", "stream-split", "bytes", "decoded"]


@pytest.mark.parametrize("codec", CODECS, ids=["stdlib", "orjson"])
@pytest.mark.parametrize("path", PATHS)
def test_depth_at_the_limit_is_served_and_answered(codec: Any, path: str) -> None:
    conn = server(codec)
    feed(conn, deep_call(1, 128), path)
    request = outcome(conn)
    assert isinstance(request, RequestReceived)
    # The answer echoes the arguments: as deep as the request, and it is sent.
    conn.respond(1, {"content": [], "structuredContent": request.arguments})
    (item,) = drain(conn, Era.MODERN)
    assert depth(item.message) == 128


@pytest.mark.parametrize("codec", CODECS, ids=["stdlib", "orjson"])
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("levels", [129, 990, 1000, 50_000])
def test_depth_past_the_limit_is_a_parse_error(codec: Any, path: str, levels: int) -> None:
    conn = server(codec)
    if levels > 200 and path != "decoded":  # raw text: json.dumps cannot write it
        feed_raw(conn, levels, path)
    else:
        feed(conn, deep_call(1, min(levels, 1000)), path)
    assert outcome(conn) == {"code": -32700, "message": DEPTH_ERROR}
    # The connection serves on.
    feed(conn, call(2, "echo"), path)
    assert isinstance(outcome(conn), RequestReceived)


def feed_raw(conn: ServerConnection, levels: int, path: str) -> None:
    data = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"a":%s}}' % (
        b"[" * levels + b"]" * levels
    )
    if path == "bytes":
        conn.receive_message(data)
    else:
        conn.receive_data(data + b"\n")


@pytest.mark.parametrize("codec", CODECS, ids=["stdlib", "orjson"])
@pytest.mark.parametrize("path", PATHS)
def test_value_count_at_and_past_the_limit(codec: Any, path: str) -> None:
    conn = server(codec, Limits(max_json_nodes=500))
    feed(conn, wide_call(1, 500), path)
    assert isinstance(outcome(conn), RequestReceived)
    feed(conn, wide_call(2, 501), path)
    assert outcome(conn) == {
        "code": -32700,
        "message": "Parse error: JSON holds more than the 500-value limit (Limits.max_json_nodes)",
    }


@pytest.mark.parametrize("codec", CODECS, ids=["stdlib", "orjson"])
def test_a_body_of_many_empty_objects_is_refused_before_decoding(codec: Any) -> None:
    # 3.9 MB of [{},{},...]: about 1.3 million objects (~93 MiB once decoded) under the
    # default 4 MiB message limit; the value limit refuses it from its bytes.
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"a":[%s]}}' % b",".join(
        [b"{}"] * 1_300_000
    )
    conn = server(codec)
    conn.receive_message(body)
    assert outcome(conn)["message"] == (
        "Parse error: JSON holds more than the 100000-value limit (Limits.max_json_nodes)"
    )


def test_a_client_refuses_a_too_deep_response() -> None:
    conn = ClientConnection(ClientConfig(limits=Limits(max_json_depth=8)))
    conn.receive_message(b'{"jsonrpc":"2.0","id":1,"result":{"a":[[[[[[[[]]]]]]]]}}')
    (event,) = conn.events()
    assert isinstance(event, InvalidMessage)
    assert event.error.message == (
        "Parse error: JSON nested deeper than the 8-level limit (Limits.max_json_depth)"
    )


# --- the counting itself ---------------------------------------------------------------------

TEXTS = [
    "0",
    '""',
    "[]",
    "{}",
    "[[]]",
    '{"a": [1, 2]}',
    '[{}, {}, [], [[]], "x"]',
    '{"a": {"b": {"c": []}}, "d": "[[[{{{", "e": "\\"]]\\\\"}',
    '[ [ ] , { } , [ 1 , { "k" : null } ] ]',
    '{"s": "a,b:c[d{e", "t": [true, false, null, -1.5e3]}',
]


@pytest.mark.parametrize("text", TEXTS)
def test_byte_and_value_counts_agree_exactly(text: str) -> None:
    value = json.loads(text)
    d, n = depth(value), nodes(value)
    check_bytes(text.encode(), max(d, 1), n)  # at both limits
    check_value(value, max(d, 1), n)
    stricter = [(max(d, 1), n - 1)] + ([(d - 1, n)] if d > 1 else [])
    for limits in stricter:
        with pytest.raises(JsonBoundsError):
            check_bytes(text.encode(), *limits)
        with pytest.raises(JsonBoundsError):
            check_value(value, *limits)
