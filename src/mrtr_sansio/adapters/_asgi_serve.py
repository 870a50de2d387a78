"""Answering one request of a POST: in line (a modern request that streams nothing), or on
a streamed response fed by an :class:`Exchange` (progress, logs, the legacy shim's rounds),
with the client's disconnect or slowness cancelling the request."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from mrtr_sansio import Outgoing, OutgoingResponse, RequestCancelled, RequestReceived
from mrtr_sansio.events import OutgoingError
from mrtr_sansio.http._names import http_status

from ._asgi_peer import Peer
from ._asgi_stream import (
    SSE_HEADERS,
    Exchange,
    Receive,
    Resume,
    Send,
    send_empty,
    send_json,
    sse_chunk,
    watch_disconnect,
)
from ._common import Handler, HandlerResult, RequestContext, call_handler
from ._slow_reader import log_dropped, too_slow

__all__ = ["Responder"]

log = logging.getLogger("mrtr_sansio.adapters.asgi")


def _later() -> None:
    """A stateless request's flush: nothing is sent before its handler returns."""


class Responder:
    """Runs ``handler`` for a request and writes its HTTP response; ``answer`` is the app's
    one answer path (the task pool's admission, store calls); a streamed response drops a
    client that leaves more than ``limit`` bytes unread."""

    __slots__ = ("answer", "handler", "limit")

    def __init__(
        self,
        handler: Handler,
        answer: Callable[[Peer, RequestReceived, HandlerResult], Awaitable[None]],
        limit: int,
    ) -> None:
        self.handler = handler
        self.answer = answer
        self.limit = limit

    def status(self, item: OutgoingError, peer: Peer) -> int:
        if peer.session_id is None:
            return item.http_status
        return http_status(item.error.code, legacy=True)

    async def serve(
        self,
        peer: Peer,
        event: RequestReceived,
        receive: Receive,
        send: Send,
        extra_headers: list[tuple[bytes, bytes]],
    ) -> None:
        """Answer a request whose response may be streamed (see :meth:`_serve_streaming`)."""
        exchange = Exchange(event.request_id, self.limit)
        peer.exchanges[event.request_id] = exchange
        try:
            await self._serve_streaming(peer, exchange, event, receive, send, extra_headers)
        finally:
            del peer.exchanges[event.request_id]
            exchange.close()

    async def serve_inline(
        self, peer: Peer, event: RequestReceived, receive: Receive, send: Send
    ) -> None:
        """Modern request that asked for no progress and no logs: the handler runs in line and
        its output is read off the connection and sent when it returns (the connection is this
        POST's alone). Only when the handler suspends does a disconnect watcher run beside it,
        because closing the response stream MUST cancel the request (2026-07-28 Streamable
        HTTP)."""
        conn = peer.conn
        # What the handler queues on the connection stays there until it returns (_later).
        running = call_handler(self.handler, RequestContext(conn, event, _later, anyio.sleep))
        steps = running.__await__()
        try:
            suspended_on = steps.send(None)  # most handlers finish without suspending
        except StopIteration as done:
            result = done.value
        else:  # it waits on something: watch the client only now (a task group costs ~50 µs)
            gone = anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch_disconnect, receive, gone, tg)
                result = await Resume(steps, suspended_on)
                tg.cancel_scope.cancel()
            if gone.is_set():
                conn.cancel(event.request_id, "The HTTP client disconnected")
                peer.pump()  # nothing goes out for a request nobody waits for
                return
        await self.answer(peer, event, result)
        _, pending = peer.pump()  # everything the request produced, and task runs to do
        if len(pending) == 1 and isinstance(pending[0], OutgoingResponse):
            only = pending[0]
            status = only.http_status if isinstance(only, OutgoingError) else 200
            await send_json(send, status, only.data)
            return
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        for item in pending:
            await send(sse_chunk(item.data, more=True))
        await send({"type": "http.response.body", "body": b""})

    async def _serve_streaming(
        self,
        peer: Peer,
        exchange: Exchange,
        event: RequestReceived,
        receive: Receive,
        send: Send,
        extra_headers: list[tuple[bytes, bytes]],
    ) -> None:
        """Run the handler (and its replays) while streaming what the request produces.

        The response starts as JSON and turns into SSE when anything but the final answer
        comes first. If the client disconnects, the request is cancelled in the connection
        (legacy legs are withdrawn) and every task of the exchange is cancelled.
        """
        streaming = False
        answered = False
        gone = anyio.Event()
        async with anyio.create_task_group() as tg:
            exchange.scope = tg.cancel_scope
            tg.start_soon(watch_disconnect, receive, gone, tg)
            tg.start_soon(self._run_handler, peer, event)
            while True:
                item = await self._next_item(peer, exchange)
                if item is None:
                    continue
                if type(item) is RequestReceived:
                    tg.start_soon(self._run_handler, peer, item)
                    continue
                if type(item) is RequestCancelled:
                    break
                assert isinstance(item, Outgoing)
                final = isinstance(item, OutgoingResponse)
                if final and not streaming:
                    status = self.status(item, peer) if isinstance(item, OutgoingError) else 200
                    await send_json(send, status, item.data, extra_headers)
                    answered = True
                    break
                if not streaming:
                    headers = SSE_HEADERS + extra_headers
                    await send({"type": "http.response.start", "status": 200, "headers": headers})
                    streaming = True
                await send(sse_chunk(item.data, more=not final))
                if final:
                    answered = True
                    break
            tg.cancel_scope.cancel()
        if exchange.dropped and not answered:
            # Its client does not read: it gets nothing more (a write would wait for it too).
            log_dropped(log, event.method, event.request_id, self.limit)
            peer.conn.cancel(event.request_id, too_slow(self.limit))
            peer.flush()
            if not streaming:  # nothing was sent yet: end the response rather than none
                await send_empty(send, 503)
        elif gone.is_set():
            peer.conn.cancel(event.request_id, "The HTTP client disconnected")
            peer.flush()
        elif not answered:  # cancelled: end the HTTP response without a JSON-RPC answer
            if streaming:
                await send({"type": "http.response.body", "body": b""})
            else:
                await send_empty(send, 204)

    async def _next_item(self, peer: Peer, exchange: Exchange) -> Any:
        """The next queued item, waking for the connection's timers (legacy leg timeouts)."""
        conn = peer.conn
        deadline = conn.next_deadline()
        if deadline is None:
            return await exchange.take()
        with anyio.move_on_after(max(0.0, deadline - conn.config.clock())):
            return await exchange.take()
        conn.handle_timer(conn.config.clock())
        peer.flush()
        return None

    async def _run_handler(self, peer: Peer, event: RequestReceived) -> None:
        conn = peer.conn
        ctx = RequestContext(conn, event, peer.flush, anyio.sleep)
        try:
            await self.answer(peer, event, await call_handler(self.handler, ctx))
        finally:
            peer.flush()
