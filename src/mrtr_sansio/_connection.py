"""The machinery both roles share: framing, the codec, the event queue and the outgoing queue.

A connection never does IO. Bytes go in through ``receive_data`` (stream transports) or one
message at a time through ``receive_message`` (HTTP bodies, or messages an embedding SDK has
already decoded); events come out of ``next_event``; what must be written comes out of
``outgoing`` (typed items) or ``data_to_send`` (newline-delimited bytes).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Literal

from ._config import Limits
from ._errors import ErrorCode, JsonRpcError, LocalProtocolError, RemoteProtocolError
from ._events import (
    NEED_DATA,
    ConnectionClosed,
    Event,
    InvalidMessage,
    Outgoing,
    OutgoingError,
    Sentinel,
)
from ._pending import Pending, item
from ._wire.bounds import JsonBoundsError, bounded_loads, check_value
from ._wire.codec import JsonCodec
from ._wire.framing import LineFramer, Oversized
from ._wire.jsonrpc import error_message, parse_error
from .observe import Transport

__all__ = ["Connection"]

#: What a decode failure can raise, across codecs (orjson's error is a ValueError).
DECODE_ERRORS = (ValueError, UnicodeDecodeError, RecursionError, TypeError)
#: What an encode failure can raise, across codecs (orjson's error is a TypeError).
ENCODE_ERRORS = (TypeError, ValueError, OverflowError, RecursionError)


def unserializable(exc: Exception) -> LocalProtocolError:
    """The error for a message of ours the codec cannot write (the application's values)."""
    return LocalProtocolError(f"message cannot be serialized as JSON: {exc}")


def _scrub(value: Any) -> Any:
    """``value`` with every string made valid UTF-8 (lone surrogates become ``?``)."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, Mapping):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub(v) for v in value]
    return value


def _parse_failure(data: bytes, exc: Exception) -> str:
    """Why ``data`` failed to decode, worded the same whichever codec failed on it."""
    if isinstance(exc, JsonBoundsError):
        return str(exc)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "invalid UTF-8"
    return "Invalid JSON"


class Connection:
    """Base of :class:`ServerConnection` and :class:`ClientConnection`."""

    #: What the adapter knows of the wire (:class:`~mrtr_sansio.observe.Transport`), only
    #: reported to an observer; None until an adapter sets it.
    transport: Transport | None = None

    def __init__(self, limits: Limits, codec: JsonCodec) -> None:
        self._limits = limits
        # Refuses JSON nested or sized past the limits (``_wire/bounds.py``).
        self._loads = bounded_loads(codec.loads, limits.max_json_depth, limits.max_json_nodes)
        self._dumps = codec.dumps
        self._raw_loads = codec.loads
        self._framer = LineFramer(limits.max_message_bytes)
        # The stream fast path decodes a line directly when it cannot be past the JSON limits
        # (the cheap half of ``bounded_loads``, inlined: it runs for every message).
        self._fast_line = min(limits.max_message_bytes, 2 * limits.max_json_nodes - 1)
        self._max_depth = limits.max_json_depth
        self._events: deque[Event] = deque()
        # The typed item of each entry is built only if the transport asks for it, so
        # byte-stream transports never pay for it. Entries enter only through ``_send``.
        self._out: deque[Pending] = deque()
        self._closed = False

    # --- input ------------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Feed bytes from a newline-delimited stream; ``b""`` means the peer closed it."""
        if self._closed:
            raise LocalProtocolError("receive_data after the stream was closed")
        if not data:
            for item in self._framer.close():
                self._receive_line(item)
            self._closed = True
            self._on_close()
            self._events.append(ConnectionClosed())
            return
        # The common case: nothing is buffered and ``data`` is one whole line within the limits.
        # It is decoded as it is (codecs skip the trailing newline); a line that fails to decode
        # (a blank one, say) goes through the framer like any other chunk. ``91 in data`` asks
        # whether a ``[`` is there: an int operand is one memchr, while a bytes one is first
        # tried as an int (a TypeError made and dropped each time).
        if (
            self._framer.idle
            and data.find(b"\n") == len(data) - 1 <= self._fast_line
            and data.count(b"{") + (data.count(b"[") if 91 in data else 0) <= self._max_depth
        ):
            try:
                msg = self._raw_loads(data)
            except DECODE_ERRORS:
                pass
            else:
                self._dispatch(msg, None)
                return
        for item in self._framer.feed(data):
            self._receive_line(item)

    def _receive_line(self, item: bytes | Oversized) -> None:
        if type(item) is Oversized:
            self._reject_oversized()
            return
        assert isinstance(item, bytes)
        self._receive_bytes(item, None)

    def _reject_oversized(self) -> None:
        limit = self._limits.max_message_bytes
        self._invalid(
            RemoteProtocolError(
                JsonRpcError(ErrorCode.INVALID_REQUEST, f"Message exceeds the {limit}-byte limit")
            ),
            answer=True,
        )

    def _receive_bytes(self, data: bytes, context: Any) -> None:
        """Decode one message and hand it to the role; undecodable input gets -32700."""
        try:
            msg = self._loads(data)
        except DECODE_ERRORS as exc:
            self._invalid(parse_error(_parse_failure(data, exc)), answer=True)
            return
        self._dispatch(msg, context)

    def _receive_decoded(self, message: bytes | str | Mapping[str, Any], context: Any) -> None:
        """Shared body of the roles' ``receive_message``."""
        if self._closed:
            raise LocalProtocolError("receive_message after the stream was closed")
        if isinstance(message, str):
            message = message.encode("utf-8", "surrogatepass")
        if isinstance(message, (bytes, bytearray, memoryview)):
            if len(message) > self._limits.max_message_bytes:
                self._reject_oversized()
                return
            self._receive_bytes(bytes(message), context)
        elif isinstance(message, Mapping):
            limits = self._limits
            try:
                check_value(message, limits.max_json_depth, limits.max_json_nodes)
            except JsonBoundsError as exc:
                self._invalid(parse_error(str(exc)), answer=True)
                return
            self._dispatch(message if type(message) is dict else dict(message), context)
        else:
            raise TypeError(
                f"message must be bytes, str or a mapping, not {type(message).__name__}"
            )

    def _dispatch(self, msg: Any, context: Any) -> None:
        raise NotImplementedError

    def _on_close(self) -> None:
        """Hook: the stream ended (roles drop what can no longer complete)."""

    # --- output -----------------------------------------------------------------------------

    def next_event(self) -> Event | Literal[Sentinel.NEED_DATA]:
        """The next event, or :data:`NEED_DATA` when nothing more can happen without input."""
        events = self._events
        return events.popleft() if events else NEED_DATA

    def events(self) -> list[Event]:
        """Every pending event, oldest first (drains the queue)."""
        out = list(self._events)
        self._events.clear()
        return out

    def outgoing(self) -> list[Outgoing]:
        """Every message waiting to be written, oldest first (drains the queue)."""
        out = [item(entry) for entry in self._out]
        self._out.clear()
        return out

    def data_to_send(self) -> bytes:
        """The pending messages as newline-delimited bytes, for stream transports."""
        out = self._out
        if not out:
            return b""
        if len(out) == 1:
            _, data, _, _, _ = out.popleft()
            return data + b"\n"
        data = b"".join([data + b"\n" for _, data, _, _, _ in out])
        out.clear()
        return data

    def _send(
        self,
        kind: Callable[..., Outgoing],
        data: bytes,
        message: Mapping[str, Any],
        related: Any,
        extra: tuple[Any, ...] = (),
    ) -> None:
        """Queue a message to be written, as the :class:`Pending` entry of these fields: the
        one way anything enters the outgoing queue (a pure part's entry goes in as
        ``_send(*entry)``)."""
        self._out.append((kind, data, message, related, extra))

    def _encode(self, message: Mapping[str, Any]) -> bytes:
        try:
            return self._dumps(message)
        except ENCODE_ERRORS as exc:
            raise unserializable(exc) from exc

    def _invalid(self, exc: RemoteProtocolError, *, answer: bool) -> None:
        """Report invalid input, answering it with an error response when ``answer``."""
        if answer:
            rid, error = exc.request_id, exc.error
            msg = error_message(rid, error)
            try:
                data = self._dumps(msg)
            except ENCODE_ERRORS:
                # A message handed over already decoded can hold text this codec cannot write
                # (orjson: lone surrogates) in its id or in what the error echoes back. An id
                # that cannot be written is left out, as for one that could not be read.
                if _scrub(rid) != rid:
                    rid = None
                error = JsonRpcError(error.code, _scrub(error.message), _scrub(error.data))
                msg = error_message(rid, error)
                data = self._dumps(msg)
            self._send(OutgoingError, data, msg, self._refusal_relates_to(rid), (error,))
        self._events.append(InvalidMessage(exc.error, exc.request_id, answer))

    def _refusal_relates_to(self, request_id: Any) -> Any:
        """The ``related_request_id`` of the error refusing a message with ``request_id``."""
        return request_id
