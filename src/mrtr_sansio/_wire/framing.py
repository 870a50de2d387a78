"""Newline-delimited framing for stream transports (stdio, TCP), with a bounded buffer.

One JSON-RPC message per line. ``\\r\\n`` is tolerated, blank lines are skipped, and a line longer
than the limit is reported once and then discarded as it streams in, never buffered whole.
Feeding the same bytes in any chunking yields the same sequence of items.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["LineFramer", "Oversized"]


class Oversized:
    """Marker yielded in place of a line that exceeded the limit (its bytes are dropped)."""

    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def __repr__(self) -> str:
        return f"Oversized(limit={self.limit})"


class LineFramer:
    """Splits a byte stream into lines of at most ``max_line_bytes`` bytes (newline excluded)."""

    __slots__ = ("_buf", "_discarding", "_max", "idle")

    def __init__(self, max_line_bytes: int) -> None:
        self._buf = bytearray()
        self._max = max_line_bytes
        self._discarding = False
        #: True when no partial line is held or being discarded: the next chunk starts a line.
        self.idle = True

    @property
    def buffered(self) -> int:
        """Bytes held while waiting for the end of a line."""
        return len(self._buf)

    def feed(self, data: bytes) -> Iterator[bytes | Oversized]:
        """Consume ``data`` and yield each complete line (or an :class:`Oversized` marker)."""
        try:
            yield from self._lines(data)
        finally:
            self.idle = not (self._buf or self._discarding)

    def _lines(self, data: bytes) -> Iterator[bytes | Oversized]:
        buf = self._buf
        limit = self._max
        start = 0
        end = len(data)
        while start < end:
            nl = data.find(b"\n", start)
            if nl < 0:
                if self._discarding:
                    return
                if len(buf) + (end - start) > limit + 1:  # +1: room for a trailing \r
                    buf.clear()
                    self._discarding = True
                    yield Oversized(limit)
                    return
                buf += data[start:] if start else data
                return
            if self._discarding:
                self._discarding = False
                start = nl + 1
                continue
            if len(buf) + (nl - start) > limit + 1:
                # Too long even before a trailing \r is dropped: skip it without copying it.
                buf.clear()
                start = nl + 1
                yield Oversized(limit)
                continue
            if buf:
                buf += data[start:nl]
                line = bytes(buf)
                buf.clear()
            else:
                line = data[start:nl]
            start = nl + 1
            if line.endswith(b"\r"):
                line = line[:-1]
            if len(line) > limit:
                yield Oversized(limit)
            elif line and not line.isspace():
                yield line

    def close(self) -> Iterator[bytes | Oversized]:
        """End of stream: a final line without a newline still counts as a message."""
        self.idle = True
        if self._discarding:
            self._discarding = False
            return
        if self._buf:
            line = bytes(self._buf)
            self._buf.clear()
            if line.endswith(b"\r"):
                line = line[:-1]
            if len(line) > self._max:
                yield Oversized(self._max)
            elif line and not line.isspace():
                yield line
