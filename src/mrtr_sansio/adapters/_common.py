"""What every server adapter shares: the handler signature, the context handlers get, and the
IO-free half of a stream server loop.

A handler is written once and served by every async adapter::

    async def handler(request: RequestReceived, ctx: RequestContext) -> HandlerResult: ...

It returns a result mapping, an :class:`~mrtr_sansio.InputRequiredResult` or a
:class:`~mrtr_sansio.JsonRpcError`. It must not import an async library: it sleeps with
``await ctx.sleep(s)`` and sends progress and log messages through ``ctx``, so the same handler
runs under asyncio, trio, and any ASGI server. The blocking stdio adapter takes the same
handler written with ``def`` and a :class:`BlockingRequestContext`.

:class:`StreamServer` is the part of a stream adapter that does no IO: it feeds bytes to the
connection, routes the events (start a handler, cancel a handler), delivers handler answers and
keeps the connection's timer deadline, so that each adapter is only a loop moving bytes.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, TypeAlias, TypeVar

from mrtr_sansio import (
    NEED_DATA,
    ClientConnection,
    ConnectionClosed,
    InputRequiredResult,
    InvalidMessage,
    JsonRpcError,
    LocalProtocolError,
    RequestCancelled,
    RequestReceived,
    RequestStateRejected,
    RoundsExhausted,
    ServerConfig,
    ServerConnection,
)

__all__ = [
    "BlockingHandler",
    "BlockingRequestContext",
    "Handler",
    "HandlerResult",
    "RequestContext",
    "StreamServer",
    "SubscriptionHub",
    "TimedDriver",
    "announce_state_key",
    "call_blocking_handler",
    "call_handler",
]

log = logging.getLogger("mrtr_sansio.adapters")

#: What a handler returns: a result mapping, an input request, or an error.
HandlerResult: TypeAlias = Mapping[str, Any] | InputRequiredResult | JsonRpcError

#: Bytes asked of the transport per read.
READ_SIZE = 64 * 1024


SleepT = TypeVar("SleepT")


class _Context(Generic[SleepT]):
    """Notifications tied to one request, and the adapter's sleep: what contexts share.

    ``flush`` is called after anything is queued on the connection, so that the adapter writes
    it out at once (progress and log messages must reach the client while the handler runs).
    """

    __slots__ = ("_conn", "_flush", "_sleep", "request")

    def __init__(
        self,
        conn: ServerConnection,
        request: RequestReceived,
        flush: Callable[[], None],
        sleep: SleepT,
    ) -> None:
        self._conn = conn
        self._flush = flush
        self._sleep = sleep
        self.request = request

    @property
    def connection(self) -> ServerConnection:
        """The connection the request arrived on."""
        return self._conn

    def flush(self) -> None:
        """Hand whatever the connection has queued to the transport now."""
        self._flush()

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification related to this request (dropped once it has been answered)."""
        self._conn.notify(method, params, self.request.request_id)
        self._flush()

    def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> bool:
        """Report progress if the request asked for it (``_meta.progressToken``).

        A token that is not a string or an integer is ignored: echoing it would make an invalid
        notification.
        """
        token = self.request.meta.get("progressToken")
        if type(token) is not str and type(token) is not int:
            return False
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self.notify("notifications/progress", params)
        return True

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send a log message; the connection drops it unless the client asked for that level."""
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        self.notify("notifications/message", params)


class RequestContext(_Context[Callable[[float], Awaitable[None]]]):
    """A handler's view of its transport: notifications tied to its request, and sleeping.

    Built as ``RequestContext(conn, request, flush, sleep)``.
    """

    __slots__ = ()

    async def sleep(self, seconds: float) -> None:
        """Sleep with whatever async library the adapter runs on."""
        await self._sleep(seconds)


class BlockingRequestContext(_Context[Callable[[float], None]]):
    """:class:`RequestContext` for blocking handlers (the stdio adapter)."""

    __slots__ = ()

    def sleep(self, seconds: float) -> None:
        """Block for ``seconds``; the adapter may end it early if the request is cancelled."""
        self._sleep(seconds)


#: An async handler, served by the asyncio, trio and ASGI adapters alike.
Handler: TypeAlias = Callable[[RequestReceived, RequestContext], Awaitable[HandlerResult]]
#: A plain-function handler, served by the blocking stdio adapter.
BlockingHandler: TypeAlias = Callable[[RequestReceived, BlockingRequestContext], HandlerResult]


def _handler_failed(request: RequestReceived) -> JsonRpcError:
    log.exception("handler failed for %s %r", request.method, request.request_id)
    return JsonRpcError.internal()


async def call_handler(handler: Handler, ctx: RequestContext) -> HandlerResult:
    """Run ``handler``; an exception becomes -32603 (logged, never leaked to the client)."""
    try:
        return await handler(ctx.request, ctx)
    except Exception:
        return _handler_failed(ctx.request)


def call_blocking_handler(handler: BlockingHandler, ctx: BlockingRequestContext) -> HandlerResult:
    """Run a blocking ``handler``; an exception becomes -32603, as in :func:`call_handler`."""
    try:
        return handler(ctx.request, ctx)
    except Exception:
        return _handler_failed(ctx.request)


class SubscriptionHub:
    """Open ``subscriptions/listen`` streams, and fan-out of change notifications to them.

    Use :meth:`listen` as the whole handler of ``subscriptions/listen``; call :meth:`publish`
    from anywhere (another request's handler, say) to send a notification to every open stream.
    The connection of each stream drops what its client did not opt in to and tags the rest
    with the subscription id, so publishing is always safe.
    """

    def __init__(self) -> None:
        self._streams: dict[int, RequestContext] = {}

    def __len__(self) -> int:
        return len(self._streams)

    async def listen(
        self,
        ctx: RequestContext,
        honored: Mapping[str, Any] | None = None,
        *,
        idle_poll: float = 3600.0,
    ) -> HandlerResult:
        """Acknowledge the subscription and keep the stream open until it is cancelled."""
        ctx.connection.acknowledge(ctx.request.request_id, honored)
        ctx.flush()
        key = id(ctx)
        self._streams[key] = ctx
        try:
            while True:
                await ctx.sleep(idle_poll)
        finally:
            del self._streams[key]

    def publish(self, method: str, params: Mapping[str, Any] | None = None) -> int:
        """Notify every open stream; returns how many streams were offered the notification."""
        streams = list(self._streams.values())
        for ctx in streams:
            ctx.notify(method, params)
        return len(streams)


ConnT = TypeVar("ConnT", ServerConnection, ClientConnection)


class TimedDriver(Generic[ConnT]):
    """The IO-free half of an adapter's loop around one connection: bytes in, events routed,
    and the connection's timer kept.

    After a change (:meth:`refresh_timer`) the adapter re-arms its own timer for
    :meth:`timer_delay` seconds and calls :meth:`fire_timer` when it goes off.
    """

    __slots__ = ("_clock", "_deadline", "closed", "conn")

    def __init__(self, conn: ConnT) -> None:
        self.conn: ConnT = conn
        self._clock = conn.config.clock
        self._deadline: float | None = None
        #: True once the input ended (EOF, or a read failure treated as one).
        self.closed = False

    def receive(self, data: bytes) -> None:
        """Feed bytes read from the peer (``b""`` at the end of input) and route the events."""
        raise NotImplementedError

    def route(self) -> None:
        """Act on every pending connection event."""
        raise NotImplementedError

    def refresh_timer(self) -> bool:
        """Re-read the connection's next deadline; True when it changed (re-arm the timer)."""
        deadline = self.conn.next_deadline()
        if deadline == self._deadline:
            return False
        self._deadline = deadline
        return True

    def timer_delay(self) -> float | None:
        """Seconds until the deadline last read by :meth:`refresh_timer`, or None for none."""
        deadline = self._deadline
        return None if deadline is None else max(0.0, deadline - self._clock())

    def fire_timer(self) -> None:
        """The adapter's timer went off: do what is due on the connection's own clock."""
        self.conn.handle_timer(self._clock())
        self.route()


class StreamServer(TimedDriver[ServerConnection]):
    """The IO-free half of a stream server loop around one :class:`ServerConnection`.

    The adapter feeds it bytes (:meth:`receive`) and handler answers (:meth:`answer`); it calls
    ``start(request)`` for each request to run (first rounds and legacy-shim replays alike) and
    ``cancel(request_id)`` for each request the client cancelled. It keeps the connection's
    timer as :class:`TimedDriver` says.
    """

    __slots__ = ("_cancel", "_start")

    def __init__(
        self,
        conn: ServerConnection,
        start: Callable[[RequestReceived], object],
        cancel: Callable[[str | int], object],
    ) -> None:
        super().__init__(conn)
        self._start = start
        self._cancel = cancel
        announce_state_key(conn.config)

    def receive(self, data: bytes) -> None:
        """Feed bytes read from the peer (``b""`` at the end of input) and route the events."""
        if not self.closed:
            self.conn.receive_data(data)
            self.route()

    def route(self) -> None:
        """Hand every pending connection event to ``start``/``cancel``, or log it."""
        conn = self.conn
        while True:
            event = conn.next_event()
            if type(event) is RequestReceived:
                self._start(event)
            elif type(event) is RequestCancelled:
                self._cancel(event.request_id)
            elif event is NEED_DATA:
                return
            elif type(event) is ConnectionClosed:
                self.closed = True
            else:
                _log_event(event)

    def answer(self, request: RequestReceived, result: HandlerResult) -> None:
        """Answer ``request`` with what its handler returned.

        An answer the connection refuses (``input_required`` on a method that does not allow
        it, a result that is not JSON) becomes -32603 and is logged; an answer to a request
        the client cancelled meanwhile is dropped.
        """
        conn = self.conn
        rid = request.request_id
        try:
            conn.respond(rid, result)
        except (LocalProtocolError, TypeError) as exc:
            log.error("handler for %s %r returned an invalid answer: %s", request.method, rid, exc)
            with contextlib.suppress(LocalProtocolError):  # unless it awaits no answer now
                conn.respond(rid, JsonRpcError.internal())
        self.route()  # a state-only round on the legacy wire replays at once


_announced: list[bool] = []


def announce_state_key(config: ServerConfig) -> None:
    """Log once per process, at WARNING, that ``requestState`` is sealed with the default
    per-process key: right for one process, wrong for several instances or restarts."""
    if config.seals_with_process_key and not _announced:
        _announced.append(True)
        log.warning(
            "requestState is sealed with a random key made for this process (the default): "
            "a retry that reaches another process, or this one after a restart, is refused. "
            "Deployments with several processes must configure the same key ring everywhere: "
            "ServerConfig(request_state=RequestStateSecurity(keys=[...]))"
        )


def _log_event(event: object) -> None:
    if isinstance(event, InvalidMessage):
        log.debug("invalid message from the client: %s", event.error.message)
    elif isinstance(event, RequestStateRejected):
        log.info(
            "requestState rejected for %s %r: %s", event.method, event.request_id, event.reason
        )
    elif isinstance(event, RoundsExhausted):
        log.warning(
            "%s %r still needed input after %d rounds",
            event.call.method,
            event.call.request_id,
            event.rounds,
        )
    else:
        log.debug("%r", event)
