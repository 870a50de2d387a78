"""The ASGI side of one streamed answer: the exchange queue and its byte bound, SSE chunks,
JSON and plain responses, reading a request body, a disconnect watcher, and the trampoline that
resumes a handler coroutine already started in line (:class:`Resume`)."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Generator, MutableMapping
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from mrtr_sansio import Outgoing

__all__ = [
    "SSE_HEADERS",
    "DisconnectedError",
    "Exchange",
    "Message",
    "Receive",
    "Resume",
    "Scope",
    "Send",
    "read_body",
    "send_empty",
    "send_json",
    "send_plain",
    "sse_chunk",
    "watch_disconnect",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_JSON = (b"content-type", b"application/json")
SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class DisconnectedError(Exception):
    """The HTTP client went away before we finished answering."""


class Exchange:
    """One client request being answered on one streamed HTTP response.

    Its queue receives the outgoing items related to the request and the (replayed)
    :class:`RequestReceived` events the handler must run for, in order. (A modern request
    answered in one go needs none: its handler's output is read off the connection.) The
    messages queued are bounded in bytes (``limit``): one more (beyond the first, however
    large) and the exchange is ``dropped`` (nothing more is queued) and ``scope``, the
    streaming's, is cancelled.
    """

    __slots__ = ("dropped", "limit", "queued", "receive", "request_id", "scope", "send")

    send: MemoryObjectSendStream[Any]
    receive: MemoryObjectReceiveStream[Any]

    def __init__(self, request_id: Any, limit: float = math.inf) -> None:
        self.request_id = request_id
        self.send, self.receive = anyio.create_memory_object_stream[Any](math.inf)
        self.limit = limit
        self.queued = 0  # bytes of the messages queued and not yet taken
        self.dropped = False
        self.scope: anyio.CancelScope | None = None

    def put(self, item: Any) -> None:
        """Queue an item for whoever answers this request (dropped past the limit)."""
        if self.dropped:
            return
        if isinstance(item, Outgoing):
            size = len(item.data)
            # An empty queue takes any one message: the bound is on what the client leaves
            # unread, and a message larger than it (a big acknowledgement) is not a backlog.
            if self.queued and self.queued + size > self.limit:
                self.dropped = True
                if self.scope is not None:
                    self.scope.cancel()
                return
            self.queued += size
        self.send.send_nowait(item)

    async def take(self) -> Any:
        """The next item queued, waiting for it."""
        item = await self.receive.receive()
        if isinstance(item, Outgoing):
            self.queued -= len(item.data)
        return item

    def close(self) -> None:
        self.send.close()
        self.receive.close()


class Resume:
    """Await the rest of a coroutine that has already run up to its first suspension, and get
    what it returns.

    It forwards what the event loop sends or throws (cancellation included) to the coroutine
    and yields back whatever the coroutine yields, exactly as ``yield from`` would, so the
    coroutine's remaining work runs inside the caller's current cancel scope.
    """

    __slots__ = ("_first", "_running")

    def __init__(self, running: Generator[Any, Any, Any], first: Any) -> None:
        self._running = running
        self._first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        running, value = self._running, self._first
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                running.close()
                raise
            except BaseException as exc:  # delivered by the loop: hand it to the coroutine
                try:
                    value = running.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    value = running.send(sent)
                except StopIteration as done:
                    return done.value


async def watch_disconnect(receive: Receive, gone: anyio.Event, tg: TaskGroup) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
            tg.cancel_scope.cancel()
            return


async def read_body(receive: Receive, limit: int, length: str | None) -> bytes | None:
    """The request body, or None as soon as the declared length or the bytes read exceed
    ``limit`` (nothing more is read: the caller refuses and closes the connection)."""
    declared = length.strip() if length is not None else ""
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        return None
    message = await receive()
    if message["type"] == "http.request" and not message.get("more_body", False):
        body: bytes = message.get("body", b"")  # the usual case: the whole body at once
        return body if len(body) <= limit else None
    chunks: list[bytes] = []
    size = 0
    while True:
        if message["type"] == "http.disconnect":
            raise DisconnectedError
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
        message = await receive()


def sse_chunk(data: bytes, *, more: bool) -> Message:
    return {
        "type": "http.response.body",
        "body": b"event: message\ndata: " + data + b"\n\n",
        "more_body": more,
    }


async def send_json(
    send: Send, status: int, data: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [_JSON, (b"content-length", b"%d" % len(data))]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


async def send_plain(
    send: Send, status: int, text: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = text.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8")]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_empty(send: Send, status: int) -> None:
    """A response with no body (202, 204)."""
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b""})
