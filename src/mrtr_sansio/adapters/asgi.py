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
import logging
from collections.abc import Callable, Iterable, Mapping

import attrs

from mrtr_sansio._extras import raise_missing_extra

try:
    import anyio
except ModuleNotFoundError as exc:
    raise_missing_extra(exc, __name__, "server")

from mrtr_sansio import (
    ErrorCode,
    JsonRpcError,
    LocalProtocolError,
    OutgoingResponse,
    RequestReceived,
    ServerConfig,
    ServerConnection,
)
from mrtr_sansio._connection import DECODE_ERRORS
from mrtr_sansio._errors import RemoteProtocolError
from mrtr_sansio._server.connection import refusal
from mrtr_sansio._server.registry import SessionRegistry
from mrtr_sansio._wire.jsonrpc import is_valid_id
from mrtr_sansio.events import OutgoingError
from mrtr_sansio.http import HttpRequestFacts
from mrtr_sansio.http._names import SESSION_HEADER_BYTES, VERSION_HEADER
from mrtr_sansio.observe import RequestRefused, connection_key
from mrtr_sansio.tasks import RoundRunner

from ._asgi_peer import IDLE_CONNECTIONS, Peer, fault, may_stream, request_id, transport
from ._asgi_serve import Responder
from ._asgi_stream import (
    DisconnectedError,
    Receive,
    Scope,
    Send,
    read_body,
    send_empty,
    send_json,
    send_plain,
)
from ._common import Handler, HandlerResult, announce_state_key
from ._http_guard import (
    CLOSE,
    HEADERS,
    LOCAL_HOSTS,
    SESSION_HEADER,
    names_modern,
    route_path,
    screen,
)
from ._loop import answer
from ._slow_reader import STREAM_QUEUE_BYTES, queue_bytes
from ._tasks import StoreCalls, TaskRunner, TaskRunOptions

__all__ = ["McpHttpApp", "TaskRunOptions"]

log = logging.getLogger("mrtr_sansio.adapters.asgi")


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
    stopped before the task finished"), in a durable store too. ``task_runner`` runs the
    rounds elsewhere instead (a :class:`~mrtr_sansio.tasks.RoundRunner`: the Docket runner's
    worker processes, say; ``task_runs`` then bounds only the store threads).
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
        task_runner: RoundRunner | None = None,
    ) -> None:
        self.stream_queue_bytes = queue_bytes(stream_queue_bytes)
        self.handler = handler
        self.config = config if config is not None else ServerConfig()
        if not legacy:
            self.config = attrs.evolve(self.config, legacy_versions=())
        self.path = path
        self._route = path.rstrip("/")
        self.allowed_hosts = (
            None if allowed_hosts is None else frozenset(h.lower() for h in allowed_hosts)
        )
        self.max_body = self.config.limits.max_message_bytes
        self.legacy = legacy
        self._principal = principal
        self._sessions: SessionRegistry[Peer] = SessionRegistry(
            max_sessions=self.config.max_sessions,
            max_per_principal=self.config.max_sessions_per_principal,
            idle_timeout=self.config.session_idle_timeout,
        )
        runs = task_runs if task_runs is not None else TaskRunOptions()
        self._calls = StoreCalls(self.config, runs.store_threads)
        self._runner: RoundRunner = (
            task_runner
            if task_runner is not None
            else TaskRunner(handler, self.config, runs, self._calls)
        )
        # Stateless peers that answered their POST and hold nothing of it (IDLE_CONNECTIONS).
        self._idle: list[Peer] = []
        self._dumps = self.config.codec.dumps
        self._responder = Responder(handler, self._answer_request, stream_queue_bytes)
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
        facts, headers, repeated = HEADERS.read(scope["headers"])
        method = scope["method"]
        path_ok = route_path(scope["path"], scope.get("root_path", "")).rstrip("/") == self._route
        refused = screen(method, path_ok, headers, repeated, self.allowed_hosts, legacy=self.legacy)
        if refused is not None:
            if refused.observed:
                await self._refuse(
                    scope, facts, send, refused.status, refused.text, refused.headers
                )
            else:
                await send_plain(send, refused.status, refused.text, refused.headers)
        elif method == "POST":
            await self._post(scope, facts, headers, receive, send)
        else:
            await self._delete(scope, headers, send)

    # --- POST -------------------------------------------------------------------------------

    async def _post(
        self,
        scope: Scope,
        facts: HttpRequestFacts,
        headers: Mapping[str, str],
        receive: Receive,
        send: Send,
    ) -> None:
        try:
            body = await read_body(receive, self.max_body, headers.get("content-length"))
        except DisconnectedError:
            return
        if body is None:  # refused before the rest is read: close rather than drain it
            too_large = f"Payload Too Large: the limit is {self.max_body} bytes"
            await self._refuse(scope, facts, send, 413, too_large, [CLOSE])
            return
        principal = self._principal(scope) if self._principal is not None else None
        session_id = headers.get(SESSION_HEADER) if self.legacy else None
        if self.legacy:
            self._expire_sessions(self.config.clock())
        if session_id is not None and names_modern(facts, self.config):
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
                peer.conn.transport = transport(scope)
            peer.conn.receive_message(body, http=facts, principal=principal)
        else:
            idle = self._idle
            peer = idle.pop() if idle else Peer(ServerConnection(self.config))
            peer.conn.principal = principal
            if observed:
                peer.conn.transport = transport(scope)
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

    async def _answer(self, peer: Peer, receive: Receive, send: Send) -> None:
        """Answer the POST just fed to ``peer``: run its request, or send what it produced."""
        extra = (
            [] if peer.session_id is None else [(SESSION_HEADER_BYTES, peer.session_id.encode())]
        )
        fresh, unrouted = peer.pump()
        if fresh:
            event = fresh[0]
            if peer.session_id is None and not may_stream(event):
                await self._responder.serve_inline(peer, event, receive, send)
            else:
                await self._responder.serve(peer, event, receive, send, extra)
            if peer.task_runs or peer.task_cancels:
                await self._start_tasks(peer)
            return
        for item in unrouted:
            if isinstance(item, OutgoingResponse):
                # The connection's own answer to this POST; an error here refuses the message
                # (both eras: 400 for a request the server cannot accept, 404 unknown method).
                status = item.http_status if isinstance(item, OutgoingError) else 200
                await send_json(send, status, item.data, extra)
                if peer.task_runs or peer.task_cancels:
                    await self._start_tasks(peer)
                return
            log.debug("no stream for %r", item.message)
        await send_empty(send, 202)

    # --- tasks (extension) ------------------------------------------------------------------

    async def _start_tasks(self, peer: Peer) -> None:
        """After the response: stop the runs the client cancelled, then start the runs this
        POST created or resumed (their outcome goes to the task store, not to this client):
        handed to the lifespan's pool (this returns at once), or run here without one."""
        for cancelled in peer.task_cancels:
            self._runner.cancel(cancelled)
        peer.task_cancels.clear()
        runs, peer.task_runs = peer.task_runs, []
        await self._runner.run_all(runs)

    # --- store calls ------------------------------------------------------------------------

    async def _feed(self, peer: Peer, body: bytes, facts: HttpRequestFacts, send: Send) -> bool:
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
            error = fault(exc, "receiving a request")
            reply = {"jsonrpc": "2.0", "id": request_id(body), "error": error.to_wire()}
            await send_json(send, 200, self._dumps(reply))
            return False
        return True

    async def _answer_request(
        self, peer: Peer, event: RequestReceived, result: HandlerResult
    ) -> None:
        """The one answer path (:func:`answer`), with a new task refused while the pool is
        full, in a worker thread when a store blocks; a store fault answers -32603."""
        conn = peer.conn
        result = self._runner.admit(result, event.principal)
        try:
            if self._calls.blocking:
                await self._calls(answer, conn, event, result)
            else:
                answer(conn, event, result)
        except Exception as exc:
            peer.broken = True
            error = fault(exc, f"answering {event.method}")
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
                self._observe_refusal(scope, b"", error, headers.get(VERSION_HEADER), 404)
            await self._json_error(send, 404, error)
            return
        self._end_session(peer)
        await send_empty(send, 204)

    async def _json_error(self, send: Send, status: int, error: JsonRpcError) -> None:
        """An error response to no request (an unknown session, too many sessions), written
        with the configured codec."""
        await send_json(send, status, self._dumps({"jsonrpc": "2.0", "error": error.to_wire()}))

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
                transport=transport(scope),
                http_status=status,
            )
            observer.observe(fact)
        await send_plain(send, status, text, headers)

    def _observe_refusal(
        self, scope: Scope, body: bytes, error: JsonRpcError, version: str | None, status: int
    ) -> None:
        """Tell the observer about a message refused before any connection read it."""
        observer = self.config.observer
        assert observer is not None
        try:
            message = self.config.codec.loads(body)
        except DECODE_ERRORS:
            message = None
        rid = message.get("id") if type(message) is dict else None
        exc = RemoteProtocolError(error, rid if is_valid_id(rid) else None)
        at = self.config.clock()
        fact = refusal(at, connection_key(), message, exc, None, transport(scope), version)
        observer.observe(attrs.evolve(fact, http_status=status))

    def _end_session(self, peer: Peer) -> None:
        """Close a session (DELETE, expiry, eviction, shutdown): its requests are cancelled, so
        their legs are withdrawn and their streams end; its id is unknown from now on."""
        if peer.session_id is not None:
            self._sessions.close(peer.session_id)
        for open_id in list(peer.conn.in_flight):
            peer.conn.cancel(open_id, "Session ended")
        peer.flush()
        peer.conn.end_session()
