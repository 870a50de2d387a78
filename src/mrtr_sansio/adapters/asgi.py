"""Streamable HTTP as a plain ASGI 3 app, serving both eras on one URL (``server`` extra).

* **Modern** (2026-07-28): each POST is one stateless request on a fresh
  :class:`~mrtr_sansio.ServerConnection`, answered ``application/json``, or ``text/event-stream``
  when the handler sends notifications (progress, logs) before its result. Mirror headers are
  checked by the core (-32020); error statuses follow the spec (400, 404).
* **Legacy** (2025-11-25): ``initialize`` creates a session (``Mcp-Session-Id``); later POSTs
  carry it (unknown id: 404) and share the session's connection; DELETE ends it. A request whose
  handler needs input gets an SSE response carrying the shim's server-to-client requests and then
  the final result; the client's answers arrive as POSTs answered 202.
* ``Host`` and ``Origin`` must name an allowed host (DNS-rebinding protection: 421 / 403), the
  body is size-limited (413), GET is 405.

Runs under any ASGI server, on asyncio (uvicorn) or trio (hypercorn), through ``anyio``.
"""

from __future__ import annotations

import logging
import math
import secrets
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping, MutableMapping
from typing import Any
from urllib.parse import urlsplit

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from mrtr_sansio import (
    INTERNAL_ERROR,
    Era,
    HttpRequestFacts,
    JsonRpcError,
    LocalProtocolError,
    Outgoing,
    OutgoingError,
    OutgoingResponse,
    RequestCancelled,
    RequestReceived,
    ServerConfig,
    ServerConnection,
)

from ._common import Handler, RequestContext, announce_state_key, call_handler

__all__ = ["McpHttpApp"]

log = logging.getLogger("mrtr_sansio.adapters.asgi")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")
SESSION_HEADER = "mcp-session-id"
_JSON = (b"content-type", b"application/json")
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class _DisconnectedError(Exception):
    """The HTTP client went away before we finished answering."""


class _Exchange:
    """One client request being answered on one HTTP response.

    Its queue receives the outgoing items related to the request and the (replayed)
    :class:`RequestReceived` events the handler must run for, in order. An ``inline`` exchange
    (a modern request answered in one go, nothing waiting on it) collects them in a plain list
    instead of a memory stream, which costs about as much as the rest of the request.
    """

    __slots__ = ("inbox", "receive", "request_id", "send")

    send: MemoryObjectSendStream[Any]
    receive: MemoryObjectReceiveStream[Any]

    def __init__(self, request_id: Any, *, inline: bool = False) -> None:
        self.request_id = request_id
        self.inbox: list[Any] | None = [] if inline else None
        if not inline:
            self.send, self.receive = anyio.create_memory_object_stream[Any](math.inf)

    def put(self, item: Any) -> None:
        """Queue an item for whoever answers this request."""
        if self.inbox is not None:
            self.inbox.append(item)
        else:
            self.send.send_nowait(item)

    def close(self) -> None:
        if self.inbox is None:
            self.send.close()
            self.receive.close()


class _Peer:
    """A connection plus the exchanges currently answering on it (one POST, or a session)."""

    __slots__ = ("conn", "exchanges", "session_id")

    def __init__(self, conn: ServerConnection, session_id: str | None = None) -> None:
        self.conn = conn
        self.session_id = session_id
        self.exchanges: dict[Any, _Exchange] = {}

    def pump(self) -> tuple[list[RequestReceived], list[Outgoing]]:
        """Route what the connection produced: outgoing items and replays to their exchanges.

        Returns what no exchange owns: new requests (from the POST just fed) and items such as
        the connection's own answers (``initialize``, ``server/discover``, refusals).
        """
        conn = self.conn
        fresh: list[RequestReceived] = []
        unrouted: list[Outgoing] = []
        for event in conn.events():
            if type(event) is RequestReceived:
                exchange = self.exchanges.get(event.request_id)
                if exchange is None:
                    fresh.append(event)
                else:
                    exchange.put(event)
            elif type(event) is RequestCancelled:
                exchange = self.exchanges.get(event.request_id)
                if exchange is not None:
                    exchange.put(event)
            else:
                log.debug("event: %r", event)
        for item in conn.outgoing():
            exchange = self.exchanges.get(item.related_request_id)
            if exchange is not None:
                exchange.put(item)
            else:
                unrouted.append(item)
        return fresh, unrouted

    def flush(self) -> None:
        """Route what can be routed (used while handlers run); log what cannot."""
        fresh, unrouted = self.pump()
        for item in unrouted:
            log.debug("no stream for %r", item.message)
        if fresh:  # pragma: no cover - requests only arrive with a POST, which pumps itself
            log.warning("requests arrived outside a POST: %r", fresh)


class McpHttpApp:
    """The ASGI application.

    ``handler`` answers every request the core passes up (see :mod:`mrtr_sansio.adapters`).
    ``allowed_hosts`` are host names accepted in ``Host`` and ``Origin`` (None disables the
    check: only do that behind a proxy that validates them). ``principal`` maps an ASGI scope to
    the authenticated caller, bound into sealed request state. ``legacy=False`` makes a
    modern-only server (no sessions; ``initialize`` is refused).
    """

    def __init__(
        self,
        handler: Handler,
        config: ServerConfig | None = None,
        *,
        path: str = "/mcp",
        allowed_hosts: Iterable[str] | None = LOCAL_HOSTS,
        legacy: bool = True,
        max_sessions: int = 1024,
        principal: Callable[[Scope], str | None] | None = None,
    ) -> None:
        self.handler = handler
        self.config = config if config is not None else ServerConfig()
        if not legacy:
            self.config = _modern_only(self.config)
        self.path = path
        self.allowed_hosts = None if allowed_hosts is None else frozenset(allowed_hosts)
        self.max_body = self.config.limits.max_message_bytes
        self.max_sessions = max_sessions
        self.legacy = legacy
        self._principal = principal
        self._sessions: dict[str, _Peer] = {}
        announce_state_key(self.config)

    # --- ASGI entry -------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                for peer in list(self._sessions.values()):
                    self._end_session(peer)
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if scope["path"].rstrip("/") != self.path.rstrip("/"):
            await _plain(send, 404, "Not Found")
            return
        rejection = self._check_origin(headers)
        if rejection is not None:
            await _plain(send, *rejection)
            return
        method = scope["method"]
        if method == "POST":
            await self._post(scope, headers, receive, send)
        elif method == "DELETE" and self.legacy:
            await self._delete(headers, send)
        else:
            allow = b"POST, DELETE" if self.legacy else b"POST"
            await _plain(send, 405, "Method Not Allowed", [(b"allow", allow)])

    def _check_origin(self, headers: Mapping[str, str]) -> tuple[int, str] | None:
        """DNS-rebinding protection: Host and Origin must name an allowed host."""
        allowed = self.allowed_hosts
        if allowed is None:
            return None
        host = headers.get("host", "")
        if _hostname(host) not in allowed:
            return 421, "Misdirected Request: Host not allowed"
        origin = headers.get("origin")
        if origin is not None:
            try:
                origin_host = urlsplit(origin).hostname or ""
            except ValueError:
                origin_host = ""
            if origin_host not in allowed and f"[{origin_host}]" not in allowed:
                return 403, "Forbidden: Origin not allowed"
        return None

    # --- POST -------------------------------------------------------------------------------

    async def _post(
        self, scope: Scope, headers: Mapping[str, str], receive: Receive, send: Send
    ) -> None:
        content_type = headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "application/json":
            await _plain(send, 415, "Unsupported Media Type: expected application/json")
            return
        accept = headers.get("accept")
        if accept is not None and not _accepts(accept):
            await _plain(send, 406, "Not Acceptable: accept application/json, text/event-stream")
            return
        try:
            body = await _read_body(receive, self.max_body)
        except _DisconnectedError:
            return
        if body is None:
            await _plain(send, 413, f"Payload Too Large: the limit is {self.max_body} bytes")
            return
        principal = self._principal(scope) if self._principal is not None else None
        session_id = headers.get(SESSION_HEADER) if self.legacy else None
        if session_id is not None:
            peer = self._sessions.get(session_id)
            if peer is None:
                await _json_error(send, 404, JsonRpcError(-32600, "Session not found"))
                return
            version = headers.get("mcp-protocol-version")
            if version is not None and version != _session_version(peer):
                await _json_error(
                    send, 400, JsonRpcError(-32600, f"Unsupported MCP-Protocol-Version: {version}")
                )
                return
            peer.conn.receive_message(body, principal=principal)
        else:
            peer = _Peer(ServerConnection(self.config, principal=principal))
            peer.conn.receive_message(body, http=HttpRequestFacts.from_headers(headers))
            if peer.conn.session is not None:  # an initialize: this connection is a session now
                if len(self._sessions) >= self.max_sessions:
                    await _json_error(send, 503, JsonRpcError(INTERNAL_ERROR, "Too many sessions"))
                    return
                peer.session_id = secrets.token_hex(16)
                self._sessions[peer.session_id] = peer
        extra = [] if peer.session_id is None else [(b"mcp-session-id", peer.session_id.encode())]
        fresh, unrouted = peer.pump()
        if fresh:
            await self._serve(peer, fresh[0], receive, send, extra)
            return
        for item in unrouted:
            if isinstance(item, OutgoingResponse):
                status = self._status(item, peer) if isinstance(item, OutgoingError) else 200
                await _json(send, status, item.data, extra)
                return
            log.debug("no stream for %r", item.message)
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    def _status(self, item: OutgoingError, peer: _Peer) -> int:
        if peer.session_id is None:
            return item.http_status
        return 400 if item.error.code in (-32700, -32600) else 200

    # --- answering one request --------------------------------------------------------------

    async def _serve(
        self,
        peer: _Peer,
        event: RequestReceived,
        receive: Receive,
        send: Send,
        extra_headers: list[tuple[bytes, bytes]],
    ) -> None:
        inline = peer.session_id is None and not _may_stream(event)
        exchange = _Exchange(event.request_id, inline=inline)
        peer.exchanges[event.request_id] = exchange
        try:
            if inline:
                await self._serve_inline(peer, exchange, event, receive, send)
            else:
                await self._serve_streaming(peer, exchange, event, receive, send, extra_headers)
        finally:
            del peer.exchanges[event.request_id]
            exchange.close()

    async def _serve_inline(
        self,
        peer: _Peer,
        exchange: _Exchange,
        event: RequestReceived,
        receive: Receive,
        send: Send,
    ) -> None:
        """Modern request that asked for no progress and no logs: the handler runs in line and
        its output is sent when it returns; only a disconnect watcher runs beside it, because
        closing the response stream MUST cancel the request (2026-07-28 Streamable HTTP)."""
        running = self._run_handler(peer, event).__await__()
        try:
            suspended_on = running.send(None)  # most handlers finish without suspending
        except StopIteration:
            pass
        else:  # it waits on something: watch the client only now (a task group costs ~50 µs)
            gone = anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(_watch_disconnect, receive, gone, tg)
                await _Resume(running, suspended_on)
                tg.cancel_scope.cancel()
            if gone.is_set():
                peer.conn.cancel(event.request_id, "The HTTP client disconnected")
                peer.flush()
                return
        assert exchange.inbox is not None
        pending = [item for item in exchange.inbox if isinstance(item, Outgoing)]
        if len(pending) == 1 and isinstance(pending[0], OutgoingResponse):
            only = pending[0]
            status = only.http_status if isinstance(only, OutgoingError) else 200
            await _json(send, status, only.data)
            return
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        for item in pending:
            await send(_sse_chunk(item.data, more=True))
        await send({"type": "http.response.body", "body": b""})

    async def _serve_streaming(
        self,
        peer: _Peer,
        exchange: _Exchange,
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
            tg.start_soon(_watch_disconnect, receive, gone, tg)
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
                    status = self._status(item, peer) if isinstance(item, OutgoingError) else 200
                    await _json(send, status, item.data, extra_headers)
                    answered = True
                    break
                if not streaming:
                    headers = _SSE_HEADERS + extra_headers
                    await send({"type": "http.response.start", "status": 200, "headers": headers})
                    streaming = True
                await send(_sse_chunk(item.data, more=not final))
                if final:
                    answered = True
                    break
            tg.cancel_scope.cancel()
        if gone.is_set():
            peer.conn.cancel(event.request_id, "The HTTP client disconnected")
            peer.flush()
        elif not answered:  # cancelled: end the HTTP response without a JSON-RPC answer
            if streaming:
                await send({"type": "http.response.body", "body": b""})
            else:
                await send({"type": "http.response.start", "status": 204, "headers": []})
                await send({"type": "http.response.body", "body": b""})

    async def _next_item(self, peer: _Peer, exchange: _Exchange) -> Any:
        """The next queued item, waking for the connection's timers (legacy leg timeouts)."""
        conn = peer.conn
        deadline = conn.next_deadline()
        if deadline is None:
            return await exchange.receive.receive()
        with anyio.move_on_after(max(0.0, deadline - conn.config.clock())):
            return await exchange.receive.receive()
        conn.handle_timer(conn.config.clock())
        peer.flush()
        return None

    async def _run_handler(self, peer: _Peer, event: RequestReceived) -> None:
        conn = peer.conn
        ctx = RequestContext(conn, event, peer.flush, anyio.sleep)
        try:
            result = await call_handler(self.handler, ctx)
            try:
                conn.respond(event.request_id, result)
            except LocalProtocolError as exc:
                log.error("handler answer refused for %r: %s", event.request_id, exc)
                conn.respond(event.request_id, JsonRpcError(INTERNAL_ERROR, "Internal error"))
        finally:
            peer.flush()

    # --- sessions ---------------------------------------------------------------------------

    async def _delete(self, headers: Mapping[str, str], send: Send) -> None:
        session_id = headers.get(SESSION_HEADER)
        peer = self._sessions.get(session_id) if session_id is not None else None
        if peer is None:
            await _json_error(send, 404, JsonRpcError(-32600, "Session not found"))
            return
        self._end_session(peer)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    def _end_session(self, peer: _Peer) -> None:
        if peer.session_id is not None:
            self._sessions.pop(peer.session_id, None)
        for request_id in list(peer.conn.in_flight):
            peer.conn.cancel(request_id, "Session ended")
        peer.flush()


# --- helpers ---------------------------------------------------------------------------------


class _Resume:
    """Await the rest of a coroutine that has already run up to its first suspension.

    It forwards what the event loop sends or throws (cancellation included) to the coroutine
    and yields back whatever the coroutine yields, exactly as ``yield from`` would, so the
    coroutine's remaining work runs inside the caller's current cancel scope.
    """

    __slots__ = ("_first", "_running")

    def __init__(self, running: Generator[Any, Any, None], first: Any) -> None:
        self._running = running
        self._first = first

    def __await__(self) -> Generator[Any, Any, None]:
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
                except StopIteration:
                    return
            else:
                try:
                    value = running.send(sent)
                except StopIteration:
                    return


async def _watch_disconnect(receive: Receive, gone: anyio.Event, tg: TaskGroup) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
            tg.cancel_scope.cancel()
            return


def _modern_only(config: ServerConfig) -> ServerConfig:
    import attrs

    return attrs.evolve(config, legacy_versions=())


def _session_version(peer: _Peer) -> str | None:
    session = peer.conn.session
    return session.protocol_version if session is not None else None


def _may_stream(event: RequestReceived) -> bool:
    """Whether a modern request could get notifications before its result."""
    meta = event.meta
    return (
        "progressToken" in meta
        or "io.modelcontextprotocol/logLevel" in meta
        or event.method == "subscriptions/listen"
        or event.era is Era.LEGACY
    )


def _hostname(host: str) -> str:
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end > 0 else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _accepts(accept: str) -> bool:
    kinds = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    return bool(kinds & {"application/json", "text/event-stream", "*/*", "application/*"})


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The request body, or None when it exceeds ``limit`` (the rest is drained unread)."""
    chunks: list[bytes] = []
    size = 0
    too_big = False
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _DisconnectedError
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            too_big = True
            chunks.clear()
        elif not too_big:
            chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return None if too_big else b"".join(chunks)


def _sse_chunk(data: bytes, *, more: bool) -> Message:
    return {
        "type": "http.response.body",
        "body": b"event: message\ndata: " + data + b"\n\n",
        "more_body": more,
    }


async def _json(
    send: Send, status: int, data: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [_JSON, (b"content-length", str(len(data)).encode())]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


async def _json_error(send: Send, status: int, error: JsonRpcError) -> None:
    import json

    await _json(send, status, json.dumps({"jsonrpc": "2.0", "error": error.to_wire()}).encode())


async def _plain(
    send: Send, status: int, text: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = text.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8")]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
