"""Newline-delimited framing: line endings, blank lines, EOF, the bounded buffer, chunking."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterable
from typing import Any

import pytest

from helpers import (
    call,
    error,
    events,
    line,
    normalize,
    only,
    out_items,
    request,
    sent,
)
from mrtr_sansio import (
    ConnectionClosed,
    ErrorCode,
    InvalidMessage,
    JsonRpcError,
    Limits,
    LocalProtocolError,
    RequestReceived,
    ServerConfig,
    ServerConnection,
)
from mrtr_sansio._wire.framing import LineFramer, Oversized

Item = bytes | str  # a line, or "X" for an Oversized marker


def run(framer: LineFramer, chunks: Iterable[bytes], *, close: bool = True) -> list[Item]:
    out: list[Item] = []
    for chunk in chunks:
        out.extend(_plain(framer.feed(chunk)))
    if close:
        out.extend(_plain(framer.close()))
    return out


def _plain(items: Iterable[bytes | Oversized]) -> list[Item]:
    return ["X" if isinstance(item, Oversized) else item for item in items]


def split(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


# --- LineFramer ---------------------------------------------------------------------------------


def test_lines_and_line_endings() -> None:
    data = b'{"a":1}\n{"b":2}\r\n\n\r\n   \n\t\r\n{"c":3}'
    assert run(LineFramer(100), [data]) == [b'{"a":1}', b'{"b":2}', b'{"c":3}']


def test_final_line_without_newline_only_at_close() -> None:
    framer = LineFramer(100)
    assert run(framer, [b"abc"], close=False) == []
    assert framer.buffered == 3
    assert _plain(framer.close()) == [b"abc"]
    assert framer.buffered == 0
    assert _plain(LineFramer(100).close()) == []


def test_final_line_with_carriage_return_at_close() -> None:
    assert run(LineFramer(100), [b"abc\r"]) == [b"abc"]
    assert run(LineFramer(100), [b"\r"]) == []
    assert run(LineFramer(100), [b"  "]) == []


def test_line_at_the_limit_is_kept_and_one_past_it_is_not() -> None:
    limit = 10
    assert run(LineFramer(limit), [b"a" * limit + b"\n"]) == [b"a" * limit]
    assert run(LineFramer(limit), [b"a" * limit + b"\r\n"]) == [b"a" * limit]
    assert run(LineFramer(limit), [b"a" * (limit + 1) + b"\n"]) == ["X"]
    assert run(LineFramer(limit), [b"a" * (limit + 1) + b"\r\n"]) == ["X"]
    assert run(LineFramer(limit), [b"a" * (limit + 1)]) == ["X"]
    assert run(LineFramer(limit), [b"a" * limit + b"\r"]) == [b"a" * limit]


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 1000])
def test_oversized_line_is_reported_once_and_skipped(chunk: int) -> None:
    data = b"first\n" + b"x" * 500 + b"\nnext\n" + b"y" * 200
    assert run(LineFramer(50), split(data, chunk)) == [b"first", "X", b"next", "X"]


def test_huge_line_is_never_buffered() -> None:
    limit = 1000
    framer = LineFramer(limit)
    seen: list[Item] = []
    for _ in range(2000):  # 2 MB streamed in 1 KiB pieces, no newline
        seen.extend(_plain(framer.feed(b"z" * 1024)))
        assert framer.buffered <= limit + 1
    assert seen == ["X"]
    assert framer.buffered == 0
    assert _plain(framer.feed(b"tail\nok\n")) == [b"ok"]
    assert _plain(framer.close()) == []


@pytest.mark.parametrize("prefix", [b"", b"abc"])
def test_huge_line_in_one_chunk_is_neither_copied_nor_buffered(prefix: bytes) -> None:
    framer = LineFramer(1000)
    assert _plain(framer.feed(prefix)) == []
    chunk = b"x" * 5_000_000 + b"\nok\n"
    tracemalloc.start()
    try:
        got = _plain(framer.feed(chunk))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == ["X", b"ok"]
    assert peak < 100_000


def test_oversized_line_without_newline_at_close_reports_once() -> None:
    framer = LineFramer(5)
    assert _plain(framer.feed(b"abcdefghij")) == ["X"]
    assert _plain(framer.close()) == []


def test_buffer_holds_at_most_limit_plus_one() -> None:
    framer = LineFramer(4)
    assert _plain(framer.feed(b"abcd")) == []
    assert _plain(framer.feed(b"\r")) == []
    assert framer.buffered == 5
    assert _plain(framer.feed(b"e")) == ["X"]
    assert framer.buffered == 0


@pytest.mark.parametrize("size", [1, 2, 5, 13])
def test_any_chunking_gives_the_same_lines(size: int) -> None:
    data = b"a\r\n\nbb\n" + b"c" * 40 + b"\n\r\nddd\r\n" + b"e" * 9 + b"\nfff"
    whole = run(LineFramer(8), [data])
    assert whole == [b"a", b"bb", "X", b"ddd", "X", b"fff"]
    assert run(LineFramer(8), split(data, size)) == whole


def test_oversized_repr() -> None:
    assert repr(Oversized(7)) == "Oversized(limit=7)"


# --- through a connection -------------------------------------------------------------------


def small_conn(limit: int = 400) -> ServerConnection:
    return ServerConnection(ServerConfig(limits=Limits(max_message_bytes=limit)))


def test_crlf_blank_lines_and_eof_through_a_connection() -> None:
    conn = ServerConnection()
    conn.receive_data(line(call(1))[:-1] + b"\r\n\r\n\n" + line(call(2))[:-1])
    assert [e.request_id for e in events(conn) if isinstance(e, RequestReceived)] == [1]
    conn.receive_data(b"")
    got = events(conn)
    assert [type(e) for e in got] == [RequestReceived, ConnectionClosed]
    assert isinstance(got[0], RequestReceived)
    assert got[0].request_id == 2
    assert sent(conn) == []


def test_oversized_line_is_answered_once_and_the_next_message_served() -> None:
    conn = small_conn()
    big = request(1, "tools/call", {"name": "x", "arguments": {"blob": "b" * 5000}})
    data = line(big) + line(call(2))
    for i in range(0, len(data), 97):
        conn.receive_data(data[i : i + 97])
        assert conn._framer.buffered <= 401
    message = "Message exceeds the 400-byte limit"
    assert sent(conn) == [error(ErrorCode.INVALID_REQUEST, message)]
    got = events(conn)
    assert got[0] == InvalidMessage(JsonRpcError(ErrorCode.INVALID_REQUEST, message), None, True)
    assert isinstance(got[1], RequestReceived)
    assert got[1].request_id == 2
    assert len(got) == 2


def test_oversized_http_body_is_answered() -> None:
    conn = small_conn(50)
    conn.receive_message(b" " * 51)
    assert sent(conn) == [error(ErrorCode.INVALID_REQUEST, "Message exceeds the 50-byte limit")]
    conn.receive_message(b'{"jsonrpc":"2.0","method":"x"}' + b" " * 20)
    assert sent(conn) == []


def test_identical_events_and_bytes_under_any_chunking() -> None:
    data = (
        line(call(1))
        + b"\r\n"
        + b"{broken\n"
        + line(request("a", "tools/list"))[:-1]
        + b"\r\n"
        + b'{"jsonrpc":"2.0","id":"q","method":"x","params":{"pad":"'
        + b"p" * 600
        + b'"}}\n'
        + line({"jsonrpc": "2.0", "id": 77, "result": {}})
        + line(call(3))[:-1]
    )

    def outcome(pieces: list[bytes]) -> tuple[list[tuple[str, Any]], list[object]]:
        conn = small_conn()
        for piece in pieces:
            conn.receive_data(piece)
        conn.receive_data(b"")
        return [normalize(e) for e in events(conn)], list(out_items(conn.outgoing()))

    whole = outcome([data])
    assert [name for name, _ in whole[0]] == [
        "RequestReceived",
        "InvalidMessage",
        "RequestReceived",
        "InvalidMessage",
        "UnexpectedResponse",
        "RequestReceived",
        "ConnectionClosed",
    ]
    for size in (1, 2, 3, 10, 64, 333):
        assert outcome(split(data, size)) == whole


def test_receive_after_close_is_a_local_error() -> None:
    conn = ServerConnection()
    conn.receive_data(b"")
    assert only(events(conn)) == ConnectionClosed()
    with pytest.raises(LocalProtocolError):
        conn.receive_data(b"{}\n")
    with pytest.raises(LocalProtocolError):
        conn.receive_message(b"{}")


def test_data_to_send_joins_lines() -> None:
    conn = ServerConnection()
    assert conn.data_to_send() == b""
    conn.receive_data(b"{\n[]\n")
    data = conn.data_to_send()
    assert data.count(b"\n") == 2
    assert data.endswith(b"\n")
    assert conn.data_to_send() == b""
    assert conn.outgoing() == []


def test_single_blank_lines_are_skipped() -> None:
    conn = ServerConnection()
    for data in (b"\n", b"\r\n", b"   \n", b" \t\r\n"):
        conn.receive_data(data)
    assert events(conn) == []
    assert conn.data_to_send() == b""


def test_data_to_send_with_one_message() -> None:
    conn = ServerConnection()
    conn.receive_data(b"{\n")
    data = conn.data_to_send()
    assert data.endswith(b"\n")
    assert data.count(b"\n") == 1
    assert conn.data_to_send() == b""


TOO_LONG = error(ErrorCode.INVALID_REQUEST, "Message exceeds the 40-byte limit")
NOT_JSON = error(-32700, "Parse error: Invalid JSON")
NOTE = b'{"jsonrpc":"2.0","method":"n/a"}'


@pytest.mark.parametrize(
    ("data", "reply", "events_"),
    [
        (b"x" * 40 + b"\n", NOT_JSON, ["InvalidMessage"]),  # at the limit: read, not JSON
        (b"x" * 40 + b"\r\n", NOT_JSON, ["InvalidMessage"]),
        (b"x" * 41 + b"\n", TOO_LONG, ["InvalidMessage"]),
        (b"x" * 41 + b"\r\n", TOO_LONG, ["InvalidMessage"]),
        (b"x" * 42 + b"\n", TOO_LONG, ["InvalidMessage"]),
        (NOTE + b" " * 8 + b"\n", None, ["NotificationReceived"]),
        (NOTE + b" " * 8 + b"\r\n", None, ["NotificationReceived"]),
    ],
)
def test_one_line_chunks_respect_the_limit(
    data: bytes, reply: dict[str, object] | None, events_: list[str]
) -> None:
    """The one-line fast path gives what the general framer gives, at and around the limit."""
    for pieces in ([data], split(data, 1)):
        conn = small_conn(40)
        for piece in pieces:
            conn.receive_data(piece)
        assert [type(e).__name__ for e in events(conn)] == events_
        assert sent(conn) == ([] if reply is None else [reply])
