"""The IO-free half of every client adapter: :class:`ClientDriver` feeds bytes to a
:class:`~mrtr_sansio.ClientConnection`, routes its events (start an input callback, withdraw
one, settle a call), turns outcomes into results or typed exceptions, and keeps the timer
(state-only retry backoff, the era probe's timeout). It reads and writes nothing itself: it
logs, and calls the hooks its adapter gave it, which may."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from mrtr_sansio import (
    NEED_DATA,
    Call,
    CallCompleted,
    CallFailed,
    ClientConfig,
    ClientConnection,
    ConnectionClosed,
    Era,
    EraDetected,
    HandshakeFailed,
    InputNeeded,
    InputWithdrawn,
    JsonRpcError,
    LocalProtocolError,
    NotificationReceived,
    RoundsExhausted,
)
from mrtr_sansio.tasks import TaskStarted

from ._client_errors import (
    CallFailedError,
    ConnectionClosedError,
    HandshakeFailedError,
    InputRejectedError,
    RoundsExhaustedError,
)
from ._client_options import (
    BlockingClientOptions,
    ClientOptions,
    NotificationCallback,
    TaskCallback,
    Trace,
    call_hook,
    client_config,
)
from ._common import log
from ._loop import TimedDriver

__all__ = ["ClientDriver", "Outcome"]


#: A settled call: its result, or what :meth:`ClientDriver.take` raises.
Outcome: TypeAlias = "Mapping[str, Any] | BaseException"


class ClientDriver(TimedDriver[ClientConnection]):
    """The IO-free half of a client adapter around one :class:`ClientConnection`.

    The adapter feeds it bytes (:meth:`receive`), writes what :meth:`data_to_send` returns,
    starts calls with :meth:`call` and collects them with :meth:`take` once ``settled(call)``
    was called. For each input the server needs it calls ``start_input(event, callback)``; the
    adapter runs the callback and reports with :meth:`answer` or :meth:`fail`;
    ``stop_input(event)`` means the answer is no longer wanted (cancel the callback).
    ``ready()`` is called once the handshake settles (:attr:`ready`, :attr:`handshake_error`).
    The timer is kept as :class:`TimedDriver` says.
    """

    __slots__ = (
        "_buffer",
        "_callbacks",
        "_eof",
        "_inputs",
        "_notify",
        "_on_task",
        "_ready",
        "_settled",
        "_start_input",
        "_stop_input",
        "_trace",
        "handshake_error",
        "outcomes",
        "ready",
    )

    @classmethod
    def create(
        cls,
        config: ClientConfig | None,
        options: ClientOptions | BlockingClientOptions,
        *,
        start_input: Callable[[InputNeeded, Any], object],
        stop_input: Callable[[InputNeeded], object],
        settled: Callable[[Call], object],
        ready: Callable[[], object],
    ) -> ClientDriver:
        """A driver for a new connection: ``config`` with the capabilities of the callbacks
        in ``options`` (see :func:`client_config`), and the options' hooks."""
        config, callbacks = client_config(config, options)
        return cls(
            ClientConnection(config),
            callbacks,
            start_input=start_input,
            stop_input=stop_input,
            settled=settled,
            ready=ready,
            on_notification=options.get("on_notification"),
            on_task=options.get("on_task"),
            trace=options.get("trace"),
        )

    def __init__(
        self,
        conn: ClientConnection,
        callbacks: Mapping[str, Any],
        *,
        start_input: Callable[[InputNeeded, Any], object],
        stop_input: Callable[[InputNeeded], object],
        settled: Callable[[Call], object],
        ready: Callable[[], object],
        on_notification: NotificationCallback | None = None,
        on_task: TaskCallback | None = None,
        trace: Trace | None = None,
    ) -> None:
        super().__init__(conn)
        self._callbacks = callbacks
        self._start_input = start_input
        self._stop_input = stop_input
        self._settled = settled
        self._ready = ready
        self._notify = on_notification
        self._on_task = on_task
        self._trace = trace
        self._buffer = b""  # received bytes not yet traced (a line cut by a read)
        self._eof = False  # the connection was told the input ended
        self._inputs: dict[int, InputNeeded] = {}  # id(event) -> inputs being answered
        #: Settled calls whose outcome the adapter has not taken yet.
        self.outcomes: dict[Call, Outcome] = {}
        #: True once the era is known, or the handshake failed (:attr:`handshake_error`).
        self.ready = conn.config.era == "modern"
        self.handshake_error: CallFailedError | None = None

    # --- calls ------------------------------------------------------------------------------

    def call(self, method: str, params: Mapping[str, Any] | None) -> Call:
        """Start a call; raises :class:`HandshakeFailedError` or :class:`ConnectionClosedError`
        when no call can be made any more."""
        if self.handshake_error is not None:
            raise self.handshake_error
        if self.closed:
            raise ConnectionClosedError(None, JsonRpcError.internal("The connection is closed"))
        return self.conn.call(method, params)

    def resume_task(self, task_id: str) -> Call:
        """Follow the task ``task_id`` (from an ``on_task`` hook of an earlier client) as a
        new call that ends with the tool's result; raises as :meth:`call` does, and
        ``LocalProtocolError`` when the server or the configuration has no tasks extension."""
        if self.handshake_error is not None:
            raise self.handshake_error
        if self.closed:
            raise ConnectionClosedError(None, JsonRpcError.internal("The connection is closed"))
        return self.conn.resume_task(task_id)

    def take(self, call: Call) -> Mapping[str, Any]:
        """The settled call's result; raises its :class:`ClientError` (or the exception of the
        input callback that failed it)."""
        outcome = self.outcomes.pop(call)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def cancel(self, call: Call, reason: str | None = None) -> bool:
        """Give up on ``call``: cancel it on the wire if a request is in flight, stop its
        callbacks, forget its outcome. False when it had already ended."""
        self.outcomes.pop(call, None)
        self._stop_inputs_of(call)
        return self.conn.cancel(call, reason)

    # --- input ------------------------------------------------------------------------------

    def receive(self, data: bytes) -> None:
        """Feed bytes read from the server (``b""`` at the end of input) and route the events."""
        if self.closed:
            return
        if self._trace is not None:
            self._trace_received(data)
        if not data:
            self._eof = True
        self.conn.receive_data(data)
        self.route()

    def close(self) -> None:
        """The adapter stops reading: end the input, so every open call fails."""
        self.receive(b"")

    def _trace_received(self, data: bytes) -> None:
        assert self._trace is not None
        *lines, self._buffer = (self._buffer + data).split(b"\n")
        if not data and self._buffer:
            lines.append(self._buffer)
        for line in lines:
            if line.strip():
                call_hook(self._trace, "recv", line)

    def route(self) -> None:
        """Act on every pending connection event."""
        conn = self.conn
        while True:
            event = conn.next_event()
            kind = type(event)
            if kind is InputNeeded:
                assert isinstance(event, InputNeeded)
                self._inputs[id(event)] = event
                self._start_input(event, self._callbacks[event.method])
            elif kind is CallCompleted:
                assert isinstance(event, CallCompleted)
                self._settle(event.call, event.result)
            elif kind is CallFailed:
                assert isinstance(event, CallFailed)
                self._settle(event.call, self._failure(event))
            elif kind is RoundsExhausted:
                assert isinstance(event, RoundsExhausted)
                exhausted = RoundsExhaustedError(
                    event.call, event.rounds, event.last_result, event.asked_again
                )
                self._settle(event.call, exhausted)
            elif kind is InputWithdrawn:
                assert isinstance(event, InputWithdrawn)
                self._withdraw(event)
            elif kind is NotificationReceived:
                assert isinstance(event, NotificationReceived)
                if self._notify is not None:
                    call_hook(self._notify, event.method, event.params)
            elif kind is TaskStarted:
                assert isinstance(event, TaskStarted)
                if self._on_task is not None:
                    call_hook(self._on_task, event)
            elif kind is EraDetected or kind is HandshakeFailed:
                if isinstance(event, HandshakeFailed):
                    error, local = event.error, event.local
                    self.handshake_error = HandshakeFailedError(None, error, local=local)
                self.ready = True
                self._ready()
            elif kind is ConnectionClosed:
                self.closed = True
                if not self.ready:
                    self.handshake_error = ConnectionClosedError(
                        None, JsonRpcError.internal("The connection closed during the handshake")
                    )
                    self.ready = True
                    self._ready()
            elif event is NEED_DATA:
                return
            else:
                log.debug("client: %r", event)

    def _failure(self, event: CallFailed) -> CallFailedError:
        if self.handshake_error is not None:
            return type(self.handshake_error)(event.call, event.error, local=event.local)
        if event.local and self._eof:
            return ConnectionClosedError(event.call, event.error, local=True)
        return CallFailedError(event.call, event.error, local=event.local)

    def _settle(self, call: Call, outcome: Outcome) -> None:
        self._stop_inputs_of(call)
        self.outcomes[call] = outcome
        self._settled(call)

    def _stop_inputs_of(self, call: Call) -> None:
        for key, event in list(self._inputs.items()):
            if event.call is call:
                del self._inputs[key]
                self._stop_input(event)

    def _withdraw(self, withdrawn: InputWithdrawn) -> None:
        for key, event in self._inputs.items():
            if event.key == withdrawn.key and event.call is withdrawn.call:
                del self._inputs[key]
                self._stop_input(event)
                return

    # --- answers ----------------------------------------------------------------------------

    def answer(self, event: InputNeeded, result: Mapping[str, Any]) -> None:
        """A callback returned ``result`` for ``event`` (ignored if no longer wanted)."""
        if self._inputs.pop(id(event), None) is None:
            return
        try:
            self.conn.fulfil(event, result)
        except LocalProtocolError as exc:  # not an answer the server could read
            self._inputs[id(event)] = event
            self.fail(event, exc)

    def fail(self, event: InputNeeded, exc: BaseException) -> None:
        """A callback raised ``exc`` for ``event`` (ignored if no longer wanted).

        :class:`InputRejectedError` refuses the request (see there). Anything else is a bug in
        the callback: its call is cancelled and raises ``exc``; a legacy request tied to no call
        is answered -32603.
        """
        if self._inputs.pop(id(event), None) is None:
            return
        call = event.call
        if isinstance(exc, InputRejectedError):
            self.conn.reject(event, exc.error)  # modern: that abandoned the call
            if call is None or self.conn.era is not Era.MODERN:
                return  # the server heard the refusal, and decides
        else:
            log.error("the %s callback failed", event.method, exc_info=exc)
            if call is None:
                self.conn.reject(event, JsonRpcError.internal())
                return
            self.conn.cancel(call, f"The client's {event.method} callback failed")
        self._settle(call, exc)

    # --- output and time --------------------------------------------------------------------

    def data_to_send(self) -> bytes:
        """What the connection queued, as newline-delimited bytes (traced when tracing)."""
        trace = self._trace
        if trace is None:
            return self.conn.data_to_send()
        items = self.conn.outgoing()
        for item in items:
            call_hook(trace, "send", item.data)
        return b"".join([item.data + b"\n" for item in items])
