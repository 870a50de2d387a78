"""Server-Sent Events parsing for HTTP clients: bytes in any chunking in, events out, no IO.

Follows the WHATWG event-stream rules: lines end with CRLF, LF or CR; ``:`` starts a comment;
``data`` lines of one event are joined with LF; a blank line dispatches the event (an event
with no data is dropped); an incomplete event at the end of the stream is discarded; one
leading byte-order mark is skipped. The bytes held for one event are bounded. ``id`` and
``retry`` are kept for reconnecting (:attr:`SseDecoder.last_event_id`, :attr:`SseDecoder.retry`).
"""

from __future__ import annotations

import re

import attrs

__all__ = ["SseDecoder", "SseEvent", "SseEventTooLargeError"]

_LINE_END = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"


class SseEventTooLargeError(ValueError):
    """An event (or a line of one) grew past the decoder's limit."""


@attrs.frozen
class SseEvent:
    """One dispatched event: its type (``message`` unless named) and its data, as bytes."""

    event: str
    data: bytes


class SseDecoder:
    """Incremental event-stream decoder; ``max_event_bytes`` bounds what one event may hold."""

    __slots__ = (
        "_buffer",
        "_data",
        "_event",
        "_id",
        "_limit",
        "_size",
        "_started",
        "last_event_id",
        "retry",
    )

    def __init__(self, max_event_bytes: int) -> None:
        self._limit = max_event_bytes
        self._buffer = b""  # an incomplete line
        self._data: list[bytes] = []
        self._size = 0  # bytes in _data
        self._event = ""
        self._id: str | None = None  # the id field seen last
        self._started = False  # the BOM check is done
        #: The id of the last event dispatched (sent back as ``Last-Event-ID`` to resume).
        self.last_event_id: str | None = None
        #: The reconnection delay the server asked for, in milliseconds.
        self.retry: int | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """The events completed by ``chunk``; :class:`SseEventTooLargeError` past the limit."""
        buffer = self._buffer + chunk if self._buffer else chunk
        if not self._started:
            if len(buffer) < len(_BOM) and _BOM.startswith(buffer):
                self._buffer = buffer
                return []
            self._started = True
            if buffer.startswith(_BOM):
                buffer = buffer[len(_BOM) :]
        events: list[SseEvent] = []
        start = 0
        for match in _LINE_END.finditer(buffer):
            if match.group() == b"\r" and match.end() == len(buffer):
                break  # maybe the first half of CRLF: wait for the next byte
            self._line(buffer[start : match.start()], events)
            start = match.end()
        rest = buffer[start:]
        if len(rest) + self._size > self._limit:
            raise SseEventTooLargeError(f"an SSE event exceeds {self._limit} bytes")
        self._buffer = rest
        return events

    def close(self) -> list[SseEvent]:
        """The stream ended: the events a final CR completes; the rest is discarded."""
        events = self.feed(b"\n") if self._buffer.endswith(b"\r") else []
        self._buffer = b""
        self._data = []
        self._size = 0
        self._event = ""
        return events

    def _line(self, line: bytes, events: list[SseEvent]) -> None:
        if not line:
            if self._id is not None:
                self.last_event_id = self._id
            if self._data:
                events.append(SseEvent(self._event or "message", b"\n".join(self._data)))
                self._data = []
                self._size = 0
            self._event = ""
            return
        if line[:1] == b":":
            return
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._size += len(value) + 1
            if self._size > self._limit:
                raise SseEventTooLargeError(f"an SSE event exceeds {self._limit} bytes")
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\x00" not in value:
                self._id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            self.retry = int(value)
