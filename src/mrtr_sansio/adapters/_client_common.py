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

from ._client_errors import (
    CallFailedError,
    ClientError,
    ConnectionClosedError,
    HandshakeFailedError,
    InputRejectedError,
    RoundsExhaustedError,
)
from ._common import TimedDriver

__all__ = [
    "SHUTDOWN_TIMEOUT",
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
    #: Called for each notification (logs, progress).
    on_notification: NotificationCallback | None
    trace: Trace | None
    #: ``ClientConfig.log_level``: ask for logs at this level and above on every call.
    log_level: str | None
    #: ``ClientConfig.progress``: ask for progress on every call.
    progress: bool


class BlockingClientOptions(TypedDict, total=False):
    """:class:`ClientOptions` for the blocking client: the callbacks are plain functions."""

    elicitation: BlockingInputCallback | None
    sampling: BlockingInputCallback | None
    roots: BlockingInputCallback | None
    on_notification: NotificationCallback | None
    trace: Trace | None
    log_level: str | None
    progress: bool


#: Seconds a closing client waits for the server to end its output; for a server it launched,
#: then as long again for the process to exit after its stdin was closed, then after SIGTERM,
#: before SIGKILL (the shutdown the stdio transport prescribes); its pipes are closed then.
SHUTDOWN_TIMEOUT = 5.0

#: The capability each callback declares when the configuration does not name it.
_DEFAULT_CAPABILITIES: dict[str, tuple[str, dict[str, Any]]] = {
    "elicitation/create": ("elicitation", {"form": {}}),
    "sampling/createMessage": ("sampling", {}),
    "roots/list": ("roots", {}),
}


# --- configuration ----------------------------------------------------------------------------


def client_config(
    config: ClientConfig | None, options: ClientOptions | BlockingClientOptions
) -> tuple[ClientConfig, dict[str, Any]]:
    """``config`` with the capabilities of the callbacks in ``options`` added where it does
    not name them (and ``log_level``/``progress`` from ``options`` when given), and the
    registered callbacks by method.

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
    if "log_level" in options:
        config = attrs.evolve(config, log_level=options["log_level"])
    if "progress" in options:
        config = attrs.evolve(config, progress=options["progress"])
    return config, registered


# --- the driver -------------------------------------------------------------------------------

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
    The timer is kept as :class:`~mrtr_sansio.adapters.TimedDriver` says.
    """

    __slots__ = (
        "_buffer",
        "_callbacks",
        "_eof",
        "_inputs",
        "_notify",
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
        trace: Trace | None = None,
    ) -> None:
        super().__init__(conn)
        self._callbacks = callbacks
        self._start_input = start_input
        self._stop_input = stop_input
        self._settled = settled
        self._ready = ready
        self._notify = on_notification
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
                exhausted = RoundsExhaustedError(event.call, event.rounds, event.last_result)
                self._settle(event.call, exhausted)
            elif kind is InputWithdrawn:
                assert isinstance(event, InputWithdrawn)
                self._withdraw(event)
            elif kind is NotificationReceived:
                assert isinstance(event, NotificationReceived)
                if self._notify is not None:
                    call_hook(self._notify, event.method, event.params)
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


def call_hook(hook: Callable[..., object], *args: Any) -> None:
    """Call an application hook (trace, notifications); a failure is logged, not raised into
    the loop that reads the server's messages."""
    try:
        hook(*args)
    except Exception:
        log.exception("a client hook failed")


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
        """The protocol version in use, once known."""
        return self._driver.conn.protocol_version

    @property
    def server_info(self) -> Mapping[str, Any] | None:
        """What ``server/discover`` or ``initialize`` said, when one was answered."""
        return self._driver.conn.server_info

    @property
    def server_capabilities(self) -> Mapping[str, Any] | None:
        """The server's capabilities, from ``server/discover`` or ``initialize``."""
        return self._driver.conn.server_capabilities

    @property
    def instructions(self) -> str | None:
        """The server's instructions for the model, when it gave any."""
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
        """Call tool ``name``; the rounds of input it asks for are answered by the callbacks."""
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
        """Get prompt ``name``, answering any input it asks for through the callbacks."""
        return await self.request(
            "prompts/get", request_params(name=name, arguments=arguments, _meta=meta)
        )

    async def read_resource(
        self, uri: str, *, meta: Mapping[str, Any] | None = None
    ) -> Mapping[str, Any]:
        """Read resource ``uri``, answering any input it asks for through the callbacks."""
        return await self.request("resources/read", request_params(uri=uri, _meta=meta))

    async def list_tools(self, cursor: str | None = None) -> Mapping[str, Any]:
        """One page of ``tools/list`` (pass the previous ``nextCursor`` for the next)."""
        return await self.request("tools/list", request_params(cursor=cursor))

    async def list_prompts(self, cursor: str | None = None) -> Mapping[str, Any]:
        """One page of ``prompts/list``."""
        return await self.request("prompts/list", request_params(cursor=cursor))

    async def list_resources(self, cursor: str | None = None) -> Mapping[str, Any]:
        """One page of ``resources/list``."""
        return await self.request("resources/list", request_params(cursor=cursor))

    async def list_resource_templates(self, cursor: str | None = None) -> Mapping[str, Any]:
        """One page of ``resources/templates/list``."""
        return await self.request("resources/templates/list", request_params(cursor=cursor))
