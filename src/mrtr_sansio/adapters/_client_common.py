"""What every client adapter shares: the callbacks an application registers, the exceptions a
call raises, and the IO-free half of a client loop.

An application registers one callback per kind of input it can give, and the declared
capabilities follow from them (``elicitation`` -> ``{"elicitation": {"form": {}}}``,
``sampling`` -> ``{"sampling": {}}``, ``roots`` -> ``{"roots": {}}``) unless
``ClientConfig.capabilities`` names that capability itself. A callback receives the
:class:`~mrtr_sansio.InputNeeded` event (``params`` is the request, ``call`` the operation that
needs it) and returns the result object: an ``ElicitResult`` (``{"action": "accept", "content":
...}``, or ``"decline"``/``"cancel"``), a ``CreateMessageResult`` or a ``ListRootsResult``. It
refuses by raising :class:`InputRejectedError`. The same callbacks serve both wires: on the
modern one they answer embedded ``inputRequests`` and the retry goes out once a round is
answered; on the legacy one they answer the server's own requests.

:class:`ClientDriver` is the part of a client adapter that does no IO: it feeds bytes to the
:class:`~mrtr_sansio.ClientConnection`, routes its events (start a callback, withdraw one,
settle a call), turns outcomes into results or typed exceptions, and keeps the connection's
timer (state-only retry backoff, the era probe's timeout), so that each adapter is a loop
moving bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, TypeAlias

import attrs
from typing_extensions import TypedDict

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

__all__ = [
    "AsyncClientBase",
    "BlockingClientOptions",
    "BlockingInputCallback",
    "CallFailedError",
    "ClientBase",
    "ClientDriver",
    "ClientError",
    "ClientOptions",
    "ConnectionClosedError",
    "HandshakeFailedError",
    "InputCallback",
    "InputRejectedError",
    "NotificationCallback",
    "RoundsExhaustedError",
    "Trace",
    "client_config",
    "request_params",
]

log = logging.getLogger("mrtr_sansio.adapters")

#: An async input callback: the request in, the result object out.
InputCallback: TypeAlias = Callable[[InputNeeded], Awaitable[Mapping[str, Any]]]
#: The blocking client's input callback.
BlockingInputCallback: TypeAlias = Callable[[InputNeeded], Mapping[str, Any]]
#: Called with ``(method, params)`` for each notification the server sends (progress, logs).
NotificationCallback: TypeAlias = Callable[[str, Mapping[str, Any] | None], object]
#: Called with ``("send" | "recv", message)`` for every message on the wire, as its JSON bytes.
Trace: TypeAlias = Callable[[Literal["send", "recv"], bytes], object]


class ClientOptions(TypedDict, total=False):
    """What an async client is given besides its configuration."""

    #: Answers ``elicitation/create`` (declares ``elicitation``).
    elicitation: InputCallback | None
    #: Answers ``sampling/createMessage`` (declares ``sampling``).
    sampling: InputCallback | None
    #: Answers ``roots/list`` (declares ``roots``).
    roots: InputCallback | None
    on_notification: NotificationCallback | None
    trace: Trace | None


class BlockingClientOptions(TypedDict, total=False):
    """:class:`ClientOptions` for the blocking client: the callbacks are plain functions."""

    elicitation: BlockingInputCallback | None
    sampling: BlockingInputCallback | None
    roots: BlockingInputCallback | None
    on_notification: NotificationCallback | None
    trace: Trace | None


#: The capability each callback declares when the configuration does not name it.
_DEFAULT_CAPABILITIES: dict[str, tuple[str, dict[str, Any]]] = {
    "elicitation/create": ("elicitation", {"form": {}}),
    "sampling/createMessage": ("sampling", {}),
    "roots/list": ("roots", {}),
}


# --- exceptions -------------------------------------------------------------------------------


class ClientError(Exception):
    """Base of what a client call raises when it does not return a result."""


class CallFailedError(ClientError):
    """The call ended with a JSON-RPC error: the server's, or one the connection made
    (``local``: the server's response broke a rule, or the stream closed; for logs, not users).
    """

    def __init__(self, call: Call | None, error: JsonRpcError, *, local: bool = False) -> None:
        what = "the handshake" if call is None else call.method
        super().__init__(f"{what} failed: {error.message} ({error.code})")
        self.call = call
        self.error = error
        self.local = local

    @property
    def code(self) -> int:
        return self.error.code

    @property
    def required_capabilities(self) -> Mapping[str, Any] | None:
        """For -32021: the client capabilities the server said it needs."""
        caps = self._data("requiredCapabilities")
        return caps if isinstance(caps, Mapping) else None

    @property
    def supported_versions(self) -> list[str] | None:
        """For -32022: the protocol versions the server serves."""
        versions = self._data("supported")
        return [v for v in versions if isinstance(v, str)] if isinstance(versions, list) else None

    def _data(self, field: str) -> Any:
        data = self.error.data
        return data.get(field) if isinstance(data, Mapping) else None


class ConnectionClosedError(CallFailedError):
    """The stream ended (the server exited or closed it) before the call did."""


class HandshakeFailedError(CallFailedError):
    """No protocol could be agreed with the server; no call can be made."""


class RoundsExhaustedError(ClientError):
    """The server still asked for input after ``ClientConfig.max_rounds`` rounds; the call was
    ended. ``last_result`` is the last ``input_required`` result (legacy: the server request
    that would have started one round too many)."""

    def __init__(self, call: Call, rounds: int, last_result: Mapping[str, Any]) -> None:
        super().__init__(f"{call.method} still needed input after {rounds} rounds")
        self.call = call
        self.rounds = rounds
        self.last_result = last_result


class InputRejectedError(ClientError):
    """Raise it in a callback to refuse a request (the user said no to sampling, say).

    Legacy wire: the server's request is answered with ``error`` (default -1, "User rejected
    the request") and the call goes on. Modern wire: an embedded request has no error channel,
    so the call is abandoned and raises this exception. For elicitation prefer returning
    ``{"action": "decline"}``, which the server sees on both wires.
    """

    def __init__(self, error: JsonRpcError | None = None) -> None:
        super().__init__(error.message if error is not None else "input rejected")
        self.error = error


# --- configuration ----------------------------------------------------------------------------


def client_config(
    config: ClientConfig | None, options: ClientOptions | BlockingClientOptions
) -> tuple[ClientConfig, dict[str, Any]]:
    """``config`` with the capabilities of the callbacks in ``options`` added where it does
    not name them, and the registered callbacks by method.

    Raises ``ValueError`` when ``config`` declares a capability no callback can answer.
    """
    config = config if config is not None else ClientConfig()
    caps = dict(config.capabilities)
    registered = {}
    for method, (name, default) in _DEFAULT_CAPABILITIES.items():
        callback = options.get(name)
        if callback is not None:
            registered[method] = callback
            caps.setdefault(name, default)
        elif name in caps:
            raise ValueError(f"capabilities: {name} is declared but no callback answers {method}")
    if caps != config.capabilities:
        config = attrs.evolve(config, capabilities=caps)
    return config, registered


# --- the driver -------------------------------------------------------------------------------

#: A settled call: its result, or what :meth:`ClientDriver.take` raises.
Outcome: TypeAlias = "Mapping[str, Any] | BaseException"


class ClientDriver:
    """The IO-free half of a client adapter around one :class:`ClientConnection`.

    The adapter feeds it bytes (:meth:`receive`), writes what :meth:`data_to_send` returns,
    starts calls with :meth:`call` and collects them with :meth:`take` once ``settled(call)``
    was called. For each input the server needs it calls ``start_input(event, callback)``; the
    adapter runs the callback and reports with :meth:`answer` or :meth:`fail`;
    ``stop_input(event)`` means the answer is no longer wanted (cancel the callback).
    ``ready()`` is called once the handshake settles (:attr:`ready`, :attr:`handshake_error`).
    The timer works as :class:`~mrtr_sansio.adapters.StreamServer`'s.
    """

    __slots__ = (
        "_buffer",
        "_callbacks",
        "_clock",
        "_deadline",
        "_eof",
        "_inputs",
        "_notify",
        "_ready",
        "_settled",
        "_start_input",
        "_stop_input",
        "_trace",
        "closed",
        "conn",
        "handshake_error",
        "outcomes",
        "ready",
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
        trace: Trace | None = None,
    ) -> None:
        self.conn = conn
        self._callbacks = callbacks
        self._start_input = start_input
        self._stop_input = stop_input
        self._settled = settled
        self._ready = ready
        self._notify = on_notification
        self._trace = trace
        self._buffer = b""  # received bytes not yet traced (a line cut by a read)
        self._clock = conn.config.clock
        self._deadline: float | None = None
        self._eof = False  # the connection was told the input ended
        self._inputs: dict[int, InputNeeded] = {}  # id(event) -> inputs being answered
        #: Settled calls whose outcome the adapter has not taken yet.
        self.outcomes: dict[Call, Outcome] = {}
        #: True once the era is known, or the handshake failed (:attr:`handshake_error`).
        self.ready = conn.config.era == "modern"
        self.handshake_error: CallFailedError | None = None
        #: True once the input ended.
        self.closed = False

    # --- calls ------------------------------------------------------------------------------

    def call(self, method: str, params: Mapping[str, Any] | None) -> Call:
        """Start a call; raises :class:`HandshakeFailedError` or :class:`ConnectionClosedError`
        when no call can be made any more."""
        if self.handshake_error is not None:
            raise self.handshake_error
        if self.closed:
            raise ConnectionClosedError(None, JsonRpcError.internal("The connection is closed"))
        return self.conn.call(method, params)

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
                self._trace("recv", line)

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
                exhausted = RoundsExhaustedError(event.call, event.rounds, event.last_result)
                self._settle(event.call, exhausted)
            elif kind is InputWithdrawn:
                assert isinstance(event, InputWithdrawn)
                self._withdraw(event)
            elif kind is NotificationReceived:
                assert isinstance(event, NotificationReceived)
                if self._notify is not None:
                    self._notify(event.method, event.params)
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
        else:
            self.route()

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
            self.conn.reject(event, exc.error)
            if call is not None and self.conn.era is Era.MODERN:
                self._settle(call, exc)
            self.route()
            return
        log.error("the %s callback failed", event.method, exc_info=exc)
        if call is None:
            self.conn.reject(event, JsonRpcError.internal())
            return
        self.conn.cancel(call, f"The client's {event.method} callback failed")
        self._settle(call, exc)
        self.route()

    # --- output and time --------------------------------------------------------------------

    def data_to_send(self) -> bytes:
        """What the connection queued, as newline-delimited bytes (traced when tracing)."""
        trace = self._trace
        if trace is None:
            return self.conn.data_to_send()
        items = self.conn.outgoing()
        for item in items:
            trace("send", item.data)
        return b"".join([item.data + b"\n" for item in items])

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


# --- the application API ----------------------------------------------------------------------


def request_params(**fields: Any) -> dict[str, Any]:
    """Request params from the fields that are given (None means absent)."""
    return {name: value for name, value in fields.items() if value is not None}


class ClientBase:
    """What every client tells about the server it talks to."""

    _driver: ClientDriver

    @property
    def connection(self) -> ClientConnection:
        """The Sans-IO connection underneath (for what this API does not cover)."""
        return self._driver.conn

    @property
    def era(self) -> Era | None:
        """The wire the server speaks, once known."""
        return self._driver.conn.era

    @property
    def protocol_version(self) -> str | None:
        return self._driver.conn.protocol_version

    @property
    def server_info(self) -> Mapping[str, Any] | None:
        """What ``server/discover`` or ``initialize`` said, when one was answered."""
        return self._driver.conn.server_info

    @property
    def server_capabilities(self) -> Mapping[str, Any] | None:
        return self._driver.conn.server_capabilities

    @property
    def instructions(self) -> str | None:
        return self._driver.conn.instructions


class AsyncClientBase(ClientBase):
    """The requests of the async clients, over their :meth:`request`.

    Each returns the result object; a JSON-RPC error raises :class:`CallFailedError`, too
    many rounds of input :class:`RoundsExhaustedError`. Cancelling the awaiting task cancels
    the request on the wire. A tool that fails returns a result with ``isError`` set.
    """

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None
    ) -> Mapping[str, Any]:
        """Send any request; MRTR rounds and legacy server requests are handled on the way."""
        raise NotImplementedError

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
    ) -> Mapping[str, Any]:
        return await self.request(
            "tools/call", request_params(name=name, arguments=arguments, _meta=meta)
        )

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
    ) -> Mapping[str, Any]:
        return await self.request(
            "prompts/get", request_params(name=name, arguments=arguments, _meta=meta)
        )

    async def read_resource(
        self, uri: str, *, meta: Mapping[str, Any] | None = None
    ) -> Mapping[str, Any]:
        return await self.request("resources/read", request_params(uri=uri, _meta=meta))

    async def list_tools(self, cursor: str | None = None) -> Mapping[str, Any]:
        return await self.request("tools/list", request_params(cursor=cursor))

    async def list_prompts(self, cursor: str | None = None) -> Mapping[str, Any]:
        return await self.request("prompts/list", request_params(cursor=cursor))

    async def list_resources(self, cursor: str | None = None) -> Mapping[str, Any]:
        return await self.request("resources/list", request_params(cursor=cursor))

    async def list_resource_templates(self, cursor: str | None = None) -> Mapping[str, Any]:
        return await self.request("resources/templates/list", request_params(cursor=cursor))
