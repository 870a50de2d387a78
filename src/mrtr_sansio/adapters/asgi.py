"""Streamable HTTP as a plain ASGI 3 app, serving both eras on one URL (``server`` extra).

* **Modern** (2026-07-28): each POST is one stateless request on a fresh
  :class:`~mrtr_sansio.ServerConnection`, answered ``application/json``, or ``text/event-stream``
  when the handler sends notifications (progress, logs) before its result. Mirror headers are
  checked by the core (-32020); error statuses follow the spec (400, 404).
* **Legacy** (2025-11-25): ``initialize`` creates a session (``Mcp-Session-Id``); later POSTs
  carry it (unknown id: 404) and share the session's connection; DELETE ends it. A request whose
  handler needs input gets an SSE response carrying the shim's server-to-client requests and then
  the final result; the client's answers arrive as POSTs answered 202.
* Sessions belong to the principal that opened them: any other principal gets 404 for that
  id. Idle sessions expire, and caps per principal and per server make the longest-idle session
  give way (``ServerConfig.max_sessions``, ``max_sessions_per_principal``,
  ``session_idle_timeout``; the rules are the core's ``SessionRegistry``).
* ``Host`` and ``Origin`` must name an allowed host (DNS-rebinding protection: 421 / 403), GET
  is 405, a request with both ``Content-Length`` and ``Transfer-Encoding`` is refused (400)
  and its connection closed (request smuggling). The body is size-limited: a declared
  ``Content-Length`` or the bytes read passing ``Limits.max_message_bytes`` get 413 at once,
  and the connection is closed rather than the rest drained (so is every refusal sent before
  the body was read). ``Host``, ``Origin``, ``Content-Type`` and ``Mcp-Session-Id`` sent twice
  are 400; repeated MCP headers are the core's -32020 (the headers reach it as the raw list).
* A request whose ``MCP-Protocol-Version`` names a modern version is served statelessly even
  when it carries ``Mcp-Session-Id`` (the 2026-07-28 transport says to ignore that header), so
  it is header-checked exactly as outside a session; a modern body sent inside a session with a
  legacy or no version header fails those checks in the core.
* Mounted under a prefix, the app honours ``scope["root_path"]``.
* A streamed response whose client reads too slowly is dropped: once more than
  ``stream_queue_bytes`` (default :data:`STREAM_QUEUE_BYTES`) of its messages wait to be
  written, its request is cancelled and the response ends without them (the connection is
  closed). A ``subscriptions/listen`` stream whose reader stalls ends this way.

Runs under any ASGI server, on asyncio (uvicorn) or trio (hypercorn), through ``anyio``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping, MutableMapping
from typing import Any

import attrs

from mrtr_sansio._extras import raise_missing_extra

try:
    import anyio
    from anyio.abc import TaskGroup
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
except ModuleNotFoundError as exc:
    raise_missing_extra(exc, __name__, "server")

from mrtr_sansio import (
    Era,
    ErrorCode,
    JsonRpcError,
    LocalProtocolError,
    Outgoing,
    OutgoingResponse,
    RequestCancelled,
    RequestReceived,
    ServerConfig,
    ServerConnection,
)
from mrtr_sansio._errors import RemoteProtocolError
from mrtr_sansio._server.connection import refusal
from mrtr_sansio._server.registry import SessionRegistry
from mrtr_sansio._wire.jsonrpc import is_valid_id
from mrtr_sansio.events import OutgoingError
from mrtr_sansio.http import HttpRequestFacts
from mrtr_sansio.http._facts import HeaderReader, host_name, origin_host
from mrtr_sansio.observe import RequestRefused, Transport, connection_key
from mrtr_sansio.tasks import TaskCancelled, TaskStoreError

from ._common import Handler, HandlerResult, RequestContext, announce_state_key, call_handler
from ._loop import answer
from ._tasks import StoreCalls, TaskRunner, TaskRunOptions

__all__ = ["McpHttpApp", "TaskRunOptions"]

log = logging.getLogger("mrtr_sansio.adapters.asgi")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")
SESSION_HEADER = "mcp-session-id"
#: Headers whose second copy would let an intermediary and this app read different requests.
_SINGLE_HEADERS = frozenset({"host", "origin", "content-type", SESSION_HEADER})
#: The app's headers, read with the MCP ones in one pass over the scope's list. (A repeated
#: ``Accept`` or ``Transfer-Encoding`` is one list; a repeated ``Content-Length`` is for the
#: HTTP server's parser, which refuses one that disagrees.)
_HEADERS = HeaderReader(
    [*_SINGLE_HEADERS, "accept", "content-length", "transfer-encoding"],
    lists=["accept", "transfer-encoding"],
)
#: Idle stateless connections kept for the POSTs to come: a connection that answered its
#: request and holds nothing of it serves the next one instead of a new one being built.
#: Beyond this many idle at once (after a burst), a finished connection is dropped.
IDLE_CONNECTIONS = 64
#: Bytes of messages one streamed response may have waiting for its client to read them
#: (``McpHttpApp(stream_queue_bytes=...)``); past it the client is dropped as too slow.
STREAM_QUEUE_BYTES = 1024 * 1024
_CLOSE = (b"connection", b"close")
_JSON = (b"content-type", b"application/json")
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class _DisconnectedError(Exception):
    """The HTTP client went away before we finished answering."""


class _Exchange:
    """One client request being answered on one streamed HTTP response.

    Its queue receives the outgoing items related to the request and the (replayed)
    :class:`RequestReceived` events the handler must run for, in order. (A modern request
    answered in one go needs none: its handler's output is read off the connection.) The
    messages queued are bounded in bytes (``limit``): one more and the exchange is
    ``dropped`` (nothing more is queued) and ``scope``, the streaming's, is cancelled.
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
            if self.queued + size > self.limit:
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


class _Peer:
    """A connection plus the exchanges currently answering on it (one POST, or a session)."""

    __slots__ = ("broken", "conn", "exchanges", "session_id", "task_cancels", "task_runs")

    def __init__(self, conn: ServerConnection, session_id: str | None = None) -> None:
        self.conn = conn
        self.session_id = session_id
        #: A store fault interrupted a call on the connection: never reuse it.
        self.broken = False
        self.exchanges: dict[Any, _Exchange] = {}
        #: Runs of tasks (tasks extension) to do once the POST is answered, and task ids
        #: the client cancelled.
        self.task_runs: list[RequestReceived] = []
        self.task_cancels: list[str] = []

    def pump(self) -> tuple[list[RequestReceived], list[Outgoing]]:
        """Route what the connection produced: outgoing items and replays to their exchanges.

        Returns what no exchange owns: new requests (from the POST just fed) and items such as
        the connection's own answers (``initialize``, ``server/discover``, refusals).
        """
        conn = self.conn
        fresh: list[RequestReceived] = []
        unrouted: list[Outgoing] = []
        # Outgoing items first: when a request is cancelled, the cancellations of its legs were
        # queued before its RequestCancelled, and must reach its stream before the stream ends.
        for item in conn.outgoing():
            exchange = self.exchanges.get(item.related_request_id)
            if exchange is not None:
                exchange.put(item)
            else:
                unrouted.append(item)
        for event in conn.events():
            if type(event) is RequestReceived:
                if event.task_id is not None:
                    self.task_runs.append(event)
                    continue
                exchange = self.exchanges.get(event.request_id)
                if exchange is None:
                    fresh.append(event)
                else:
                    exchange.put(event)
            elif type(event) is RequestCancelled:
                exchange = self.exchanges.get(event.request_id)
                if exchange is not None:
                    exchange.put(event)
            elif type(event) is TaskCancelled:
                self.task_cancels.append(event.task_id)
            else:
                log.debug("event: %r", event)
        return fresh, unrouted

    @property
    def idle(self) -> bool:
        """Whether nothing of any request is left here: the peer may serve another POST."""
        return (
            self.conn.reusable
            and not self.broken
            and not self.exchanges
            and not self.task_runs
            and not self.task_cancels
        )

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
    the authenticated caller, bound into sealed request state and owner of the legacy sessions
    it opens. ``legacy=False`` makes a modern-only server (no sessions; ``initialize`` is
    refused). Session caps and idle expiry come from ``config``; idle sessions are swept by a
    task that runs while the server's lifespan does (and checked on every request anyway).

    Tasks (``config.tasks``) run as ``task_runs`` says (:class:`TaskRunOptions`): while the
    server's lifespan runs, in a pool of the app's own, owned by the lifespan, so a run holds
    no HTTP connection and no concurrency slot of the server (the POST that created it
    returns with its response). Without a lifespan (an ASGI server that does not run the
    lifespan protocol, or started with it off, or the app called directly), each run goes on
    in the POST that created it, after its response, holding that request's slot. At
    lifespan shutdown the runs going on are stopped and their tasks fail ("The server
    stopped before the task finished"), in a durable store too.
    Calls that reach a blocking task store or replay guard run in worker threads; a store
    fault is answered -32603 with its message, never a 500. A streamed response drops a
    client that leaves more than ``stream_queue_bytes`` unread (:data:`STREAM_QUEUE_BYTES`).
    """

    def __init__(
        self,
        handler: Handler,
        config: ServerConfig | None = None,
        *,
        path: str = "/mcp",
        allowed_hosts: Iterable[str] | None = LOCAL_HOSTS,
        legacy: bool = True,
        principal: Callable[[Scope], str | None] | None = None,
        task_runs: TaskRunOptions | None = None,
        stream_queue_bytes: int = STREAM_QUEUE_BYTES,
    ) -> None:
        if type(stream_queue_bytes) is not int or stream_queue_bytes <= 0:
            raise ValueError(
                f"stream_queue_bytes: must be a positive int, got {stream_queue_bytes!r}"
            )
        self.stream_queue_bytes = stream_queue_bytes
        self.handler = handler
        self.config = config if config is not None else ServerConfig()
        if not legacy:
            self.config = _modern_only(self.config)
        self.path = path
        self._route = path.rstrip("/")
        self.allowed_hosts = (
            None if allowed_hosts is None else frozenset(h.lower() for h in allowed_hosts)
        )
        self.max_body = self.config.limits.max_message_bytes
        self.legacy = legacy
        self._principal = principal
        self._sessions: SessionRegistry[_Peer] = SessionRegistry(
            max_sessions=self.config.max_sessions,
            max_per_principal=self.config.max_sessions_per_principal,
            idle_timeout=self.config.session_idle_timeout,
        )
        runs = task_runs if task_runs is not None else TaskRunOptions()
        self._calls = StoreCalls(self.config, runs.store_threads)
        self._runner = TaskRunner(handler, self.config, runs, self._calls)
        # Stateless peers that answered their POST and hold nothing of it (IDLE_CONNECTIONS).
        self._idle: list[_Peer] = []
        self._dumps = self.config.codec.dumps
        announce_state_key(self.config)

    # --- ASGI entry -------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """Startup: sweep idle sessions, and run tasks in this group (a POST hands its runs
        over and returns). Shutdown: end the runs (their tasks fail, see
        :meth:`TaskRunner.stop`), then the sessions. However the lifespan ends (cancelled
        by the server, say, without a shutdown), the runner is detached first, so a later
        run never goes to a closed group: it goes on in its POST."""
        runner = self._runner
        try:
            async with anyio.create_task_group() as tg:
                while True:
                    message = await receive()
                    if message["type"] == "lifespan.startup":
                        tg.start_soon(self._sweep_sessions)
                        runner.attach(tg)
                        await send({"type": "lifespan.startup.complete"})
                    elif message["type"] == "lifespan.shutdown":
                        await runner.stop()
                        tg.cancel_scope.cancel()
                        for peer in self._sessions.values():
                            self._end_session(peer)
                        await send({"type": "lifespan.shutdown.complete"})
                        return
        finally:
            runner.attach(None)

    async def _sweep_sessions(self) -> None:
        """End idle sessions when they expire, so an abandoned one releases its connection
        even if no request comes to notice it."""
        clock = self.config.clock
        while True:
            deadline = self._sessions.next_deadline()
            # None: a session that goes idle from now on expires one timeout later at the soonest
            delay = self.config.session_idle_timeout if deadline is None else deadline - clock()
            await anyio.sleep(max(0.0, delay))
            self._expire_sessions(clock())

    def _expire_sessions(self, now: float) -> None:
        for peer in self._sessions.expire(now):
            log.info("legacy session %s expired after being idle", peer.session_id)
            self._end_session(peer)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        facts, headers, repeated = _HEADERS.read(scope["headers"])
        if "content-length" in headers and "transfer-encoding" in headers:
            # Two framings: a proxy in front may have read another body than we would, and
            # what follows it on the connection could be a smuggled request (RFC 9112 §6.1).
            text = "Bad Request: Content-Length with Transfer-Encoding"
            await self._refuse(scope, facts, send, 400, text, [_CLOSE])
            return
        close = _close_if_body(headers)
        if _route_path(scope).rstrip("/") != self._route:
            await _plain(send, 404, "Not Found", close)
            return
        for name in repeated:
            if name in _SINGLE_HEADERS:
                text = f"Bad Request: header {name} sent more than once"
                await self._refuse(scope, facts, send, 400, text, close)
                return
        rejection = self._check_origin(headers)
        if rejection is not None:
            await self._refuse(scope, facts, send, *rejection, close)
            return
        method = scope["method"]
        if method == "POST":
            await self._post(scope, facts, headers, close, receive, send)
        elif method == "DELETE" and self.legacy:
            await self._delete(scope, headers, send)
        else:
            allow = b"POST, DELETE" if self.legacy else b"POST"
            await _plain(send, 405, "Method Not Allowed", [(b"allow", allow), *close])

    def _check_origin(self, headers: Mapping[str, str]) -> tuple[int, str] | None:
        """DNS-rebinding protection: Host and Origin must name an allowed host."""
        allowed = self.allowed_hosts
        if allowed is None:
            return None
        if not _allowed(host_name(headers.get("host", "")), allowed):
            return 421, "Misdirected Request: Host not allowed"
        origin = headers.get("origin")
        if origin is not None and not _allowed(origin_host(origin), allowed):
            return 403, "Forbidden: Origin not allowed"
        return None

    # --- POST -------------------------------------------------------------------------------

    async def _post(
        self,
        scope: Scope,
        facts: HttpRequestFacts,
        headers: Mapping[str, str],
        close: list[tuple[bytes, bytes]],
        receive: Receive,
        send: Send,
    ) -> None:
        if not _is_json(headers.get("content-type", "")):
            text = "Unsupported Media Type: expected application/json"
            await self._refuse(scope, facts, send, 415, text, close)
            return
        accept = headers.get("accept")
        if accept is not None and not _accepts(accept):
            text = "Not Acceptable: accept application/json, text/event-stream"
            await self._refuse(scope, facts, send, 406, text, close)
            return
        try:
            body = await _read_body(receive, self.max_body, headers.get("content-length"))
        except _DisconnectedError:
            return
        if body is None:  # refused before the rest is read: close rather than drain it
            too_large = f"Payload Too Large: the limit is {self.max_body} bytes"
            await self._refuse(scope, facts, send, 413, too_large, [_CLOSE])
            return
        principal = self._principal(scope) if self._principal is not None else None
        session_id = headers.get(SESSION_HEADER) if self.legacy else None
        if self.legacy:
            self._expire_sessions(self.config.clock())
        if session_id is not None and _names_modern(facts, self.config):
            session_id = None  # a modern request: Mcp-Session-Id is ignored (2026-07-28)
        observed = self.config.observer is not None
        if session_id is not None:
            peer = self._sessions.get(session_id, principal)
            if peer is None:  # unknown, ended, or another principal's: nothing to see here
                error = JsonRpcError(-32600, "Session not found")
                if observed:
                    self._observe_refusal(scope, body, error, facts.protocol_version, 404)
                await self._json_error(send, 404, error)
                return
            if observed:
                peer.conn.transport = _transport(scope)
            peer.conn.receive_message(body, http=facts, principal=principal)
        else:
            idle = self._idle
            peer = idle.pop() if idle else _Peer(ServerConnection(self.config))
            peer.conn.principal = principal
            if observed:
                peer.conn.transport = _transport(scope)
            if not await self._feed(peer, body, facts, send):
                return  # a store fault, answered; the connection is dropped
            if peer.conn.session is None:
                try:
                    await self._answer(peer, receive, send)
                finally:
                    peer.conn.principal = None
                    if peer.idle and len(idle) < IDLE_CONNECTIONS:
                        idle.append(peer)
                return
            # An initialize: this connection is a session now.
            new_id = self.config.token_hex(16)
            admission = self._sessions.open(new_id, peer, principal, self.config.clock())
            for evicted in admission.evicted:
                log.info("legacy session %s ended to make room", evicted.session_id)
                self._end_session(evicted)
            if not admission.accepted:
                error = JsonRpcError(ErrorCode.INTERNAL_ERROR, "Too many sessions")
                peer.conn.end_session()  # the session it opened is dropped unused
                if observed:
                    version = peer.conn.session.protocol_version
                    self._observe_refusal(scope, body, error, version, 503)
                await self._json_error(send, 503, error)
                return
            peer.session_id = new_id
            peer.conn.session.session_id = new_id  # observers report it
        session = peer.session_id
        assert session is not None
        self._sessions.enter(session)
        try:
            await self._answer(peer, receive, send)
        finally:
            self._sessions.leave(session, self.config.clock())

    async def _answer(self, peer: _Peer, receive: Receive, send: Send) -> None:
        """Answer the POST just fed to ``peer``: run its request, or send what it produced."""
        extra = [] if peer.session_id is None else [(b"mcp-session-id", peer.session_id.encode())]
        fresh, unrouted = peer.pump()
        if fresh:
            event = fresh[0]
            if peer.session_id is None and not _may_stream(event):
                await self._serve_inline(peer, event, receive, send)
            else:
                await self._serve(peer, event, receive, send, extra)
            if peer.task_runs or peer.task_cancels:
                await self._start_tasks(peer)
            return
        for item in unrouted:
            if isinstance(item, OutgoingResponse):
                # The connection's own answer to this POST; an error here refuses the message
                # (both eras: 400 for a request the server cannot accept, 404 unknown method).
                status = item.http_status if isinstance(item, OutgoingError) else 200
                await _json(send, status, item.data, extra)
                if peer.task_runs or peer.task_cancels:
                    await self._start_tasks(peer)
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
        """Answer a request whose response may be streamed (see :meth:`_serve_streaming`)."""
        exchange = _Exchange(event.request_id, self.stream_queue_bytes)
        peer.exchanges[event.request_id] = exchange
        try:
            await self._serve_streaming(peer, exchange, event, receive, send, extra_headers)
        finally:
            del peer.exchanges[event.request_id]
            exchange.close()

    async def _serve_inline(
        self, peer: _Peer, event: RequestReceived, receive: Receive, send: Send
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
                tg.start_soon(_watch_disconnect, receive, gone, tg)
                result = await _Resume(steps, suspended_on)
                tg.cancel_scope.cancel()
            if gone.is_set():
                conn.cancel(event.request_id, "The HTTP client disconnected")
                peer.pump()  # nothing goes out for a request nobody waits for
                return
        await self._answer_request(peer, event, result)
        _, pending = peer.pump()  # everything the request produced, and task runs to do
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
            exchange.scope = tg.cancel_scope
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
        if exchange.dropped and not answered:
            # Its client does not read: it gets nothing more (a write would wait for it too).
            log.warning(
                "%s %r: the client left over %d bytes unread; dropped",
                event.method,
                event.request_id,
                exchange.limit,
            )
            peer.conn.cancel(event.request_id, "The HTTP client reads too slowly")
            peer.flush()
        elif gone.is_set():
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
            return await exchange.take()
        with anyio.move_on_after(max(0.0, deadline - conn.config.clock())):
            return await exchange.take()
        conn.handle_timer(conn.config.clock())
        peer.flush()
        return None

    async def _run_handler(self, peer: _Peer, event: RequestReceived) -> None:
        conn = peer.conn
        ctx = RequestContext(conn, event, peer.flush, anyio.sleep)
        try:
            await self._answer_request(peer, event, await call_handler(self.handler, ctx))
        finally:
            peer.flush()

    # --- tasks (extension) ------------------------------------------------------------------

    async def _start_tasks(self, peer: _Peer) -> None:
        """After the response: stop the runs the client cancelled, then start the runs this
        POST created or resumed (their outcome goes to the task store, not to this client):
        handed to the lifespan's pool (this returns at once), or run here without one."""
        for cancelled in peer.task_cancels:
            self._runner.cancel(cancelled)
        peer.task_cancels.clear()
        runs, peer.task_runs = peer.task_runs, []
        await self._runner.run_all(runs)

    # --- store calls ------------------------------------------------------------------------

    async def _feed(self, peer: _Peer, body: bytes, facts: HttpRequestFacts, send: Send) -> bool:
        """Feed a stateless POST's body to its connection (in a worker thread when a store
        blocks). False when a store fault escaped the connection: it is answered -32603."""
        conn = peer.conn
        try:
            if self._calls.blocking:
                await self._calls(lambda: conn.receive_message(body, http=facts))
            else:
                conn.receive_message(body, http=facts)
        except Exception as exc:
            peer.broken = True
            error = _fault(exc, "receiving a request")
            reply = {"jsonrpc": "2.0", "id": _request_id(body), "error": error.to_wire()}
            await _json(send, 200, self._dumps(reply))
            return False
        return True

    async def _answer_request(
        self, peer: _Peer, event: RequestReceived, result: HandlerResult
    ) -> None:
        """The one answer path (:func:`answer`), with a new task refused while the pool is
        full, in a worker thread when a store blocks; a store fault answers -32603."""
        conn = peer.conn
        result = self._runner.admit(result)
        try:
            if self._calls.blocking:
                await self._calls(answer, conn, event, result)
            else:
                answer(conn, event, result)
        except Exception as exc:
            peer.broken = True
            error = _fault(exc, f"answering {event.method}")
            with contextlib.suppress(LocalProtocolError):
                conn.respond(event.request_id, error)

    # --- sessions ---------------------------------------------------------------------------

    async def _delete(self, scope: Scope, headers: Mapping[str, str], send: Send) -> None:
        session_id = headers.get(SESSION_HEADER)
        principal = self._principal(scope) if self._principal is not None else None
        self._expire_sessions(self.config.clock())
        peer = self._sessions.get(session_id, principal) if session_id is not None else None
        if peer is None:
            error = JsonRpcError(-32600, "Session not found")
            if self.config.observer is not None:
                self._observe_refusal(scope, b"", error, headers.get("mcp-protocol-version"), 404)
            await self._json_error(send, 404, error)
            return
        self._end_session(peer)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def _json_error(self, send: Send, status: int, error: JsonRpcError) -> None:
        """An error response to no request (an unknown session, too many sessions), written
        with the configured codec."""
        await _json(send, status, self._dumps({"jsonrpc": "2.0", "error": error.to_wire()}))

    async def _refuse(
        self,
        scope: Scope,
        facts: HttpRequestFacts,
        send: Send,
        status: int,
        text: str,
        headers: list[tuple[bytes, bytes]],
    ) -> None:
        """Refuse a request at the HTTP edge, before any message is read (a plain-text
        answer, no JSON-RPC error); an observer is told, its method unknown."""
        observer = self.config.observer
        if observer is not None:
            fact = RequestRefused(
                at=self.config.clock(),
                connection=connection_key(),
                request_id=None,
                method=None,
                target=None,
                code=None,
                message=text,
                legacy=False,
                protocol_version=facts.protocol_version,
                session_id=None,
                trace={},
                transport=_transport(scope),
                http_status=status,
            )
            observer.observe(fact)
        await _plain(send, status, text, headers)

    def _observe_refusal(
        self, scope: Scope, body: bytes, error: JsonRpcError, version: str | None, status: int
    ) -> None:
        """Tell the observer about a message refused before any connection read it."""
        observer = self.config.observer
        assert observer is not None
        try:
            message = self.config.codec.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError, TypeError):
            message = None
        rid = message.get("id") if type(message) is dict else None
        exc = RemoteProtocolError(error, rid if is_valid_id(rid) else None)
        at = self.config.clock()
        fact = refusal(at, connection_key(), message, exc, None, _transport(scope), version)
        observer.observe(attrs.evolve(fact, http_status=status))

    def _end_session(self, peer: _Peer) -> None:
        """Close a session (DELETE, expiry, eviction, shutdown): its requests are cancelled, so
        their legs are withdrawn and their streams end; its id is unknown from now on."""
        if peer.session_id is not None:
            self._sessions.close(peer.session_id)
        for request_id in list(peer.conn.in_flight):
            peer.conn.cancel(request_id, "Session ended")
        peer.flush()
        peer.conn.end_session()


# --- helpers ---------------------------------------------------------------------------------

_TRANSPORTS: dict[Any, Transport] = {}


def _transport(scope: Scope) -> Transport:
    """What observers are told of a POST's wire: TCP, HTTP, the scope's HTTP version and
    the peer's address when the server gives it (``scope["client"]``)."""
    version = scope.get("http_version")
    peer = scope.get("client")
    if peer:
        return Transport("tcp", "http", version, client_address=peer[0], client_port=peer[1])
    found = _TRANSPORTS.get(version)
    if found is None:
        found = _TRANSPORTS[version] = Transport("tcp", "http", version)
    return found


class _Resume:
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


async def _watch_disconnect(receive: Receive, gone: anyio.Event, tg: TaskGroup) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
            tg.cancel_scope.cancel()
            return


def _fault(exc: Exception, doing: str) -> JsonRpcError:
    """-32603 for an exception a connection call let through: a store fault says what failed
    (its message names no secret); anything else is logged and stays private."""
    if isinstance(exc, TaskStoreError):
        log.error("store fault while %s: %s", doing, exc)
        return JsonRpcError.internal(str(exc))
    log.error("unexpected failure while %s", doing, exc_info=exc)
    return JsonRpcError.internal()


def _request_id(body: bytes) -> Any:
    """The id of the request in ``body`` when there is a plain one (for a fault's answer)."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    rid = message.get("id") if isinstance(message, dict) else None
    return rid if type(rid) in (str, int) else None


def _route_path(scope: Scope) -> str:
    """The path below the app's mount point: ASGI servers and routers put the full path in
    ``path`` and the mount prefix in ``root_path``; an older server may already strip it."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :]
    return path


def _modern_only(config: ServerConfig) -> ServerConfig:
    import attrs

    return attrs.evolve(config, legacy_versions=())


def _names_modern(facts: HttpRequestFacts, config: ServerConfig) -> bool:
    """Whether the POST's ``MCP-Protocol-Version`` names a modern version this server serves."""
    version = facts.protocol_version
    return version is not None and version.strip() in config.supported_versions


def _close_if_body(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """``Connection: close`` for a refusal sent before a body the request announces is read:
    the server would otherwise read and discard all of it to keep the connection alive."""
    length = headers.get("content-length", "0").strip()
    if "transfer-encoding" in headers or length not in ("", "0"):
        return [_CLOSE]
    return []


def _may_stream(event: RequestReceived) -> bool:
    """Whether a modern request could get notifications before its result."""
    meta = event.meta
    return (
        "progressToken" in meta
        or "io.modelcontextprotocol/logLevel" in meta
        or event.method == "subscriptions/listen"
        or event.era is Era.LEGACY
    )


def _allowed(host: str | None, allowed: frozenset[str]) -> bool:
    """Whether a parsed host is allowed; an IPv6 literal may be listed with or without its
    brackets."""
    return host is not None and (host in allowed or host.strip("[]") in allowed)


def _is_json(content_type: str) -> bool:
    """Whether a ``Content-Type`` is JSON (parameters such as ``charset`` aside)."""
    return (
        content_type == "application/json"
        or content_type.split(";", 1)[0].strip().lower() == "application/json"
    )


#: Media ranges of an ``Accept`` that the app can answer.
_ANSWERABLE = frozenset({"application/json", "text/event-stream", "*/*", "application/*"})


def _accepts(accept: str) -> bool:
    """Whether an ``Accept`` names a media range the app can answer."""
    for part in accept.split(","):  # noqa: SIM110 (a loop: any() of a generator costs more)
        if part.split(";", 1)[0].strip().lower() in _ANSWERABLE:
            return True
    return False


def _later() -> None:
    """A stateless request's flush: nothing is sent before its handler returns."""


async def _read_body(receive: Receive, limit: int, length: str | None) -> bytes | None:
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
            raise _DisconnectedError
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
        message = await receive()


def _sse_chunk(data: bytes, *, more: bool) -> Message:
    return {
        "type": "http.response.body",
        "body": b"event: message\ndata: " + data + b"\n\n",
        "more_body": more,
    }


async def _json(
    send: Send, status: int, data: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [_JSON, (b"content-length", b"%d" % len(data))]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


async def _plain(
    send: Send, status: int, text: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = text.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8")]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
