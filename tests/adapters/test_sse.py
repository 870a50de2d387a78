"""The SSE decoder of the HTTP client: the WHATWG event-stream rules, any chunking, bounds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr_sansio.adapters._sse import SseDecoder, SseEvent, SseEventTooLargeError


def decode(*chunks: bytes, limit: int = 1 << 20) -> list[SseEvent]:
    decoder = SseDecoder(limit)
    out: list[SseEvent] = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    out.extend(decoder.close())
    return out


def test_events_fields_comments_and_defaults() -> None:
    stream = (
        b": priming comment\n"
        b"id: 1\nretry: 1000\ndata:\n\n"  # a priming event: empty data
        b"id: 2\n\n"  # no data line at all: nothing dispatched
        b'event: message\ndata: {"a":1}\n\n'
        b'data: {"b":2}\n\n'  # no event line: a message
        b"event: ping\ndata: x\n\n"
        b"data:first\ndata: second\n\n"  # a space after the colon is dropped, one only
        b"data:  two spaces\n\n"
        b"data\n\n"  # a field with no colon has an empty value
        b"unknown: field\n\n"
    )
    assert decode(stream) == [
        SseEvent("message", b""),
        SseEvent("message", b'{"a":1}'),
        SseEvent("message", b'{"b":2}'),
        SseEvent("ping", b"x"),
        SseEvent("message", b"first\nsecond"),
        SseEvent("message", b" two spaces"),
        SseEvent("message", b""),
    ]


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending(end: bytes) -> None:
    stream = b"data: a" + end + b"data: b" + end + end + b"data: c" + end + end
    assert decode(stream) == [SseEvent("message", b"a\nb"), SseEvent("message", b"c")]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    assert decode(b"data: a\r", b"\n\r", b"\n") == [SseEvent("message", b"a")]


def test_a_final_cr_completes_the_last_event() -> None:
    assert decode(b"data: a\r\r") == [SseEvent("message", b"a")]


def test_an_unterminated_event_is_discarded_at_the_end() -> None:
    assert decode(b"data: a\n\ndata: b\n") == [SseEvent("message", b"a")]
    assert decode(b"data: a\n\ndata: b") == [SseEvent("message", b"a")]


def test_a_leading_bom_is_skipped_once_even_split() -> None:
    assert decode(b"\xef\xbb", b"\xbfdata: a\n\n") == [SseEvent("message", b"a")]
    assert decode(b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\n") == []  # a second BOM is a field name
    assert decode(b"\xef", b"data: a\n\n") == []  # not a BOM: the bytes stay in the name


def test_the_event_type_resets_after_each_event() -> None:
    assert decode(b"event: x\n\ndata: a\n\n") == [SseEvent("message", b"a")]


def test_an_event_over_the_limit_raises() -> None:
    decoder = SseDecoder(10)
    assert decoder.feed(b"data: 12345678\n") == []
    with pytest.raises(SseEventTooLargeError):
        decoder.feed(b"data: 9\n")
    with pytest.raises(SseEventTooLargeError):
        SseDecoder(10).feed(b"data: 0123456789")  # an endless line counts too


def test_the_limit_is_per_event() -> None:
    decoder = SseDecoder(10)
    for _ in range(5):
        assert decoder.feed(b"data: 12345678\n\n") == [SseEvent("message", b"12345678")]


_LINES = st.lists(
    st.sampled_from(
        [b"data: {}", b"data:x", b"event: message", b"event: other", b": c", b"", b"id: 3"]
    ),
    max_size=30,
)


@given(_LINES, st.sampled_from([b"\n", b"\r\n", b"\r"]), st.data())
def test_any_chunking_gives_the_same_events(
    lines: list[bytes], end: bytes, data: st.DataObject
) -> None:
    stream = b"".join(line + end for line in lines)
    whole = decode(stream)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    assert decode(*chunks) == whole


def test_ids_and_retry_are_kept_for_reconnecting() -> None:
    decoder = SseDecoder(1 << 20)

    def state() -> tuple[str | None, int | None]:
        return decoder.last_event_id, decoder.retry

    assert state() == (None, None)
    decoder.feed(b"id: 7\nretry: 500\ndata: a\n")
    assert state() == (None, 500)  # the id counts once the event is dispatched
    decoder.feed(b"\nid: 8\x00\nretry: soon\n\n")  # a NUL in the id, a non-number retry
    assert state() == ("7", 500)
    decoder.feed(b"id: 9\n\n")  # an event without data still moves the id
    assert state() == ("9", 500)
    decoder.feed(b"id\n\n")  # an empty id resets it
    assert state() == ("", 500)
