"""The half of every server adapter's loop that touches no socket, file or clock of its own.

:func:`route_of` is the one routing decision of every server adapter (stdio, anyio streams,
ASGI): which owner acts on an event of a :class:`~mrtr_sansio.ServerConnection` (a
:class:`Route`: a handler to start, a request to cancel, a task's run for the pool, a task to
stop). :func:`answer` is how every server adapter hands a handler's return value to its
connection: an answer the connection refuses becomes -32603 (and is logged); the ASGI adapter
adds one step of its own, a fault raised while answering (a task store that fails) answered
-32603 there. :class:`ServerDriver` is the part of a stream server (stdio, anyio streams) that
does no IO: it feeds bytes to the connection, routes the events to its adapter's hooks,
delivers the answers and keeps the connection's timer (:class:`TimedDriver`, which its client
twin, :class:`~mrtr_sansio.adapters.ClientDriver`, shares). It reads and writes nothing by
itself; it logs, and calls the hooks its adapter gave it, which may. The stream adapters are
then loops moving bytes. The ASGI app routes with :func:`route_of` too, to the exchanges of a
POST or a session instead of hooks (``_asgi_peer.py``).
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from mrtr_sansio import (
    NEED_DATA,
    ClientConnection,
    ConnectionClosed,
    InvalidMessage,
    JsonRpcError,
    LocalProtocolError,
    RequestCancelled,
    RequestReceived,
    RequestStateRejected,
    RoundsExhausted,
    ServerConnection,
)
from mrtr_sansio.tasks import TaskCancelled

from ._common import HandlerResult, log

__all__ = ["Route", "ServerDriver", "TimedDriver", "answer", "route_of", "settle_task"]


class Route(enum.Enum):
    """Who acts on an event of a :class:`~mrtr_sansio.ServerConnection`: the one routing
    decision of every server adapter (:meth:`ServerDriver.route`, the ASGI app's peers)."""

    #: A request to run (a first round, or a legacy-shim replay): its handler starts.
    HANDLER = "handler"
    #: A task's run (tasks extension, ``task_id`` set): the task-run pool starts it.
    TASK_RUN = "task run"
    #: A request the client cancelled: its handler (or its exchange) stops.
    CANCEL = "cancel"
    #: A task cancelled with ``tasks/cancel``: its run stops, where it goes on.
    TASK_CANCEL = "task cancel"
    #: The input ended: nothing more will come.
    CLOSED = "closed"
    #: Nothing more until more bytes come (:data:`~mrtr_sansio.NEED_DATA`).
    WAIT = "wait"
    #: Nothing to do but log it (an invalid message, a refused state, a notification...).
    LOG = "log"


# The members as module names, for the loops that route every event: ``Route.HANDLER`` costs
# an enum class lookup, about four times a global's on CPython 3.11 (bench/README.md).
HANDLER = Route.HANDLER
TASK_RUN = Route.TASK_RUN
CANCEL = Route.CANCEL
TASK_CANCEL = Route.TASK_CANCEL
CLOSED = Route.CLOSED
WAIT = Route.WAIT
LOG = Route.LOG

_ROUTES: dict[type, Route] = {
    RequestReceived: HANDLER,
    RequestCancelled: CANCEL,
    TaskCancelled: TASK_CANCEL,
    ConnectionClosed: CLOSED,
}


def route_of(event: object) -> Route:
    """Where ``event`` goes (see :class:`Route`)."""
    route = _ROUTES.get(type(event))
    if route is None:
        return WAIT if event is NEED_DATA else LOG
    if route is HANDLER and isinstance(event, RequestReceived) and event.task_id is not None:
        return TASK_RUN
    return route


def answer(conn: ServerConnection, request: RequestReceived, result: HandlerResult) -> None:
    """Answer ``request`` on ``conn`` with what its handler returned: the one answer path of
    every server adapter.

    An answer the connection refuses (``input_required`` on a method that does not allow it, a
    result that is not JSON, a value that is no answer at all) becomes -32603 and is logged; an
    answer to a request that awaits none any more (the client cancelled it meanwhile) is
    dropped. A task's run (``request.task_id`` set) settles its task instead
    (:func:`settle_task`). The caller then writes what the connection queued.
    """
    if request.task_id is not None:
        settle_task(conn, request, result)
        return
    rid = request.request_id
    try:
        conn.respond(rid, result)
    except (LocalProtocolError, TypeError) as exc:
        log.error("handler for %s %r returned an invalid answer: %s", request.method, rid, exc)
        with contextlib.suppress(LocalProtocolError):  # unless it awaits no answer now
            conn.respond(rid, JsonRpcError.internal())


def settle_task(conn: ServerConnection, request: RequestReceived, result: HandlerResult) -> None:
    """Record what a task's run returned; an outcome the task machine refuses fails the task
    with -32603 (logged), as a refused answer does for a request."""
    try:
        conn.settle_task(request, result)
    except (LocalProtocolError, TypeError) as exc:
        log.error("handler for task %r returned an invalid outcome: %s", request.task_id, exc)
        with contextlib.suppress(LocalProtocolError):
            conn.settle_task(request, JsonRpcError.internal())


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


class ServerDriver(TimedDriver[ServerConnection]):
    """The IO-free half of a stream server loop around one :class:`ServerConnection`.

    The adapter feeds it bytes (:meth:`receive`) and handler answers (:meth:`answer`); it
    routes each event as :func:`route_of` says: ``start(request)`` for each request to run
    (first rounds and legacy-shim replays), ``cancel(request_id)`` for each request the client
    cancelled, ``run_task(request)`` for each task's run and ``cancel_task(task_id)`` for each
    task cancelled with ``tasks/cancel`` (by default ``start`` and ``cancel``: a task's run is
    then started under its task id). It keeps the connection's timer as :class:`TimedDriver`
    says.
    """

    __slots__ = ("_cancel", "_cancel_task", "_hooks", "_run_task", "_start")

    def __init__(
        self,
        conn: ServerConnection,
        start: Callable[[RequestReceived], object],
        cancel: Callable[[str | int], object],
        *,
        run_task: Callable[[RequestReceived], object] | None = None,
        cancel_task: Callable[[str], object] | None = None,
    ) -> None:
        super().__init__(conn)
        self._start = start
        self._cancel = cancel
        self._run_task = start if run_task is None else run_task
        self._cancel_task = cancel if cancel_task is None else cancel_task
        # Each event type straight to its hook, as route_of's table says: one lookup per
        # event on the loop's hottest path. Without run_task a task's run goes to start too,
        # so requests need no look at their task id.
        on_route: dict[Route, Callable[[Any], object]] = {
            HANDLER: start if run_task is None else self._on_request,
            CANCEL: self._on_cancel,
            TASK_CANCEL: self._on_task_cancel,
            CLOSED: self._on_closed,
        }
        self._hooks = {kind: on_route[route] for kind, route in _ROUTES.items()}
        # No announce_state_key: a stream server (stdio) is one process per client, where the
        # per-process requestState key is the right default.

    def receive(self, data: bytes) -> None:
        """Feed bytes read from the peer (``b""`` at the end of input) and route the events."""
        if not self.closed:
            self.conn.receive_data(data)
            self.route()

    def route(self) -> None:
        """Hand every pending connection event to the hook :func:`route_of` names, or log it."""
        conn = self.conn
        hooks = self._hooks
        while True:
            event = conn.next_event()
            hook = hooks.get(type(event))
            if hook is not None:
                hook(event)
            elif event is NEED_DATA:
                return
            else:
                _log_event(event)

    def _on_request(self, event: RequestReceived) -> None:
        if route_of(event) is TASK_RUN:
            self._run_task(event)
        else:
            self._start(event)

    def _on_cancel(self, event: RequestCancelled) -> None:
        self._cancel(event.request_id)

    def _on_task_cancel(self, event: TaskCancelled) -> None:
        self._cancel_task(event.task_id)

    def _on_closed(self, event: ConnectionClosed) -> None:
        self.closed = True

    def answer(self, request: RequestReceived, result: HandlerResult) -> None:
        """Answer ``request`` with what its handler returned (see :func:`answer`), and route
        what that caused."""
        answer(self.conn, request, result)
        self.route()  # a state-only round on the legacy wire replays at once


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
