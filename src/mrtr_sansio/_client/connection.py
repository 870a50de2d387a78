"""ClientConnection: the client role on both wires, one driver for multi round-trip requests.

The application makes calls and answers :class:`InputNeeded` events; the connection does the
rest. On the modern wire it puts the ``_meta`` envelope on every request, validates each
``input_required`` result, and once every key of a round is answered sends the retry: same
method and params, a new id, this round's ``inputResponses`` and the ``requestState`` echoed
byte-for-byte. On the legacy wire it performs ``initialize`` and surfaces the server's own
requests as the same events (see ``server_requests.py``). With ``era="auto"`` it probes with
``server/discover`` first (DIGEST §1.8) and queues calls until the era is known.

Time enters only through ``ClientConfig.clock`` and the ``now`` of :meth:`handle_timer`, which
must read the same clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mrtr_sansio._config import ClientConfig
from mrtr_sansio._connection import Connection
from mrtr_sansio._errors import (
    ErrorCode,
    InvalidResponseError,
    JsonRpcError,
    LocalProtocolError,
    RemoteProtocolError,
)
from mrtr_sansio._events import (
    Call,
    CallCompleted,
    CallFailed,
    EraDetected,
    Event,
    HandshakeFailed,
    InputNeeded,
    InputWithdrawn,
    NotificationReceived,
    Outgoing,
    OutgoingError,
    OutgoingNotification,
    OutgoingRequest,
    OutgoingResult,
    RoundsExhausted,
    UnexpectedResponse,
)
from mrtr_sansio._lifecycle import CLIENT_CALL, CallPhase, CallTrigger
from mrtr_sansio._mcp.capabilities import declares_tasks
from mrtr_sansio._mcp.envelope import (
    CLIENT_CAPABILITIES,
    CLIENT_INFO,
    LOG_LEVEL,
    PROTOCOL_VERSION,
    Era,
    modern_envelope,
)
from mrtr_sansio._mcp.values import INPUT_REQUIRED, MRTR_METHODS
from mrtr_sansio._wire.jsonrpc import (
    REQUEST,
    RESPONSE,
    classify,
    error_message,
    is_valid_id,
    notification_message,
    request_message,
)
from mrtr_sansio.http._facts import NAME_FIELDS
from mrtr_sansio.observe import (
    CallFinished,
    CallRoundAnswered,
    CallRoundSent,
    CallRoundUnsent,
    CallStarted,
    LegReceived,
    LegReplied,
    SessionEnded,
    SessionStarted,
    connection_key,
    trace_of,
)
from mrtr_sansio.tasks._client import read_task
from mrtr_sansio.tasks._machine import TASK_METHOD
from mrtr_sansio.tasks._table import TaskStatus
from mrtr_sansio.tasks._values import TaskStarted

from .checks import check_answer, read_input_required
from .era import Failed, Handshake, HandshakeAction, Ignore, Settled, StartInitialize
from .http import request_headers
from .server_requests import Accept, Refuse, Reply, ServerRequests

__all__ = ["ClientConnection"]

#: One trigger's transitions (``CLIENT_CALL.moves``): phase -> next phase.
Moves = Mapping[CallPhase, CallPhase]
#: Fields of the params that belong to the connection, never to the application.
_MANAGED_PARAMS = ("inputResponses", "requestState")
_ENVELOPE_KEYS = (PROTOCOL_VERSION, CLIENT_CAPABILITIES, CLIENT_INFO)
PROGRESS_TOKEN = "progressToken"
# What each trigger does to a call, bound once: a call moves with one dict lookup.
_SENT = CLIENT_CALL.moves(CallTrigger.SENT)
_QUEUED = CLIENT_CALL.moves(CallTrigger.QUEUED)
_RETRY = CLIENT_CALL.moves(CallTrigger.RETRY)
_COMPLETE = CLIENT_CALL.moves(CallTrigger.COMPLETE)
_ERROR = CLIENT_CALL.moves(CallTrigger.ERROR)
_INVALID = CLIENT_CALL.moves(CallTrigger.INVALID)
_LOST = CLIENT_CALL.moves(CallTrigger.LOST)
_INPUT_REQUESTS = CLIENT_CALL.moves(CallTrigger.INPUT_REQUESTS)
_STATE_ONLY = CLIENT_CALL.moves(CallTrigger.STATE_ONLY)
_ROUND_CAP = CLIENT_CALL.moves(CallTrigger.ROUND_CAP)
_ANSWERED = CLIENT_CALL.moves(CallTrigger.ANSWERED)
_CANCELLED = CLIENT_CALL.moves(CallTrigger.CANCELLED)
_CLOSED = CLIENT_CALL.moves(CallTrigger.CLOSED)
_HANDSHAKE_FAILED = CLIENT_CALL.moves(CallTrigger.HANDSHAKE_FAILED)
_TASK_CREATED = CLIENT_CALL.moves(CallTrigger.TASK_CREATED)
_POLL = CLIENT_CALL.moves(CallTrigger.POLL)
_TASK_WORKING = CLIENT_CALL.moves(CallTrigger.TASK_WORKING)
_TASK_INPUT_REQUESTS = CLIENT_CALL.moves(CallTrigger.TASK_INPUT_REQUESTS)
_TASK_UPDATE = CLIENT_CALL.moves(CallTrigger.TASK_UPDATE)


class _CallState:
    """One call across its rounds: the leg in flight, or the round being answered.

    ``phase`` changes only through the :data:`CLIENT_CALL` table.
    """

    __slots__ = (
        "answers",
        "asked",
        "backoff",
        "call",
        "leg",
        "open_requests",
        "params",
        "phase",
        "round",
        "state",
        "task_id",
        "task_leg",
        "task_poll",
        "task_seen",
    )

    def __init__(self, call: Call, backoff: float) -> None:
        self.call = call
        self.phase = CallPhase.SENDING
        #: Params of every leg before the MRTR fields (envelope merged on the modern wire).
        self.params: dict[str, Any] | None = None
        self.leg: int | None = None  # id of the request in flight
        self.round = 0  # input_required results acted on (legacy: rounds of server requests)
        self.asked: dict[str, InputNeeded] = {}  # modern: this round's events, by key
        self.answers: dict[str, Any] = {}  # modern: this round's answers so far
        self.state: str | None = None  # requestState of this round, echoed on the retry
        self.backoff = backoff  # delay before the next state-only retry
        self.open_requests = 0  # legacy: server requests linked to this call, unanswered
        self.task_id: str | None = None  # tasks extension: the task this call became
        self.task_leg: str | None = None  # tasks/get or tasks/update, while one is in flight
        self.task_poll: int | None = None  # the server's last pollIntervalMs
        self.task_seen: set[str] = set()  # task inputRequests keys already surfaced


class ClientConnection(Connection):
    """The client side of one stream (a stdio process), or of one server over HTTP.

    Feed what the server sends to :meth:`receive_data` (NDJSON) or :meth:`receive_message`
    (one HTTP body, or a decoded message); read events with :meth:`next_event`; write what
    :meth:`outgoing` or :meth:`data_to_send` returns. Drive :meth:`handle_timer` at
    :meth:`next_deadline`.
    """

    #: The transport's name for the legacy session (HTTP ``Mcp-Session-Id``), set by the
    #: adapter that received it; only reported to an observer (``mcp.session.id``).
    session_id: str | None = None

    def __init__(self, config: ClientConfig | None = None) -> None:
        config = config if config is not None else ClientConfig()  # (ClientConfig checks era)
        for name, value in config.capabilities.items():
            if not isinstance(value, Mapping):
                raise ValueError(f"capabilities: {name} must be an object, got {value!r}")
        super().__init__(config.limits, config.codec)
        #: The configuration this connection runs with.
        self.config = config
        self._caps = config.capabilities
        self._tasks = declares_tasks(config.capabilities)
        self._clock = config.clock
        self._observer = config.observer
        self._obs_key = 0 if config.observer is None else connection_key()
        self._next_id = 0
        self._next_call = 0
        self._calls: dict[int, _CallState] = {}
        self._legs: dict[Any, _CallState] = {}  # our request id -> its call
        self._queue: list[_CallState] = []  # calls made before the era was known
        self._timers: dict[int, float] = {}  # call id -> when its state-only retry is due
        self._ignored: dict[Any, None] = {}  # ids whose late answers are dropped silently
        self._failure: JsonRpcError | None = None
        self._envelope: dict[str, Any] = {}
        self._ready = False  # the era is known and calls go out at once
        self._server = ServerRequests(config)
        self._handshake = Handshake(config)
        #: The era of the server, once known.
        self.era: Era | None = None
        #: The protocol version in use, once known.
        self.protocol_version: str | None = None
        #: What ``server/discover`` or ``initialize`` said, when one was answered.
        self.server_capabilities: Mapping[str, Any] | None = None
        self.server_info: Mapping[str, Any] | None = None
        self.instructions: str | None = None
        if config.era == "modern":
            self._use_version(config.protocol_version)
            self._ready = True
        elif config.era == "legacy":
            self._start_initialize()
        else:
            rid = self._new_id()
            msg = self._handshake.probe(rid)
            self._send(OutgoingRequest, self._encode(msg), msg, None, (rid,))

    # --- public API -------------------------------------------------------------------------

    def receive_message(
        self,
        message: bytes | str | Mapping[str, Any],
        related_request_id: int | None = None,
    ) -> None:
        """Feed one whole message: an HTTP response body, an SSE event's data, or a decoded
        message.

        ``related_request_id`` is the id of our request whose HTTP response carried the
        message, when it came on one. A legacy server's request arriving there belongs to that
        request's call for certain (SEP-2260 on Streamable HTTP), however many are in flight.
        """
        self._receive_decoded(message, related_request_id)

    def call(self, method: str, params: Mapping[str, Any] | None = None) -> Call:
        """Start an operation; its outcome arrives as events carrying the returned handle.

        ``params`` are sent as given, plus the envelope on the modern wire; their ``_meta``
        may carry e.g. a ``progressToken`` but not the envelope keys, and ``inputResponses`` /
        ``requestState`` are the connection's to send. Before the era is known the call is
        queued and sent once it is.
        """
        if self._closed:
            raise LocalProtocolError("call after the stream was closed")
        if self._failure is not None:
            raise LocalProtocolError(f"the handshake failed: {self._failure.message}")
        if type(method) is not str:
            raise TypeError(f"method: must be a string, not {type(method).__name__}")
        if method == "initialize":
            raise LocalProtocolError("initialize is performed by the connection (era='legacy')")
        if params is None:
            params = {}
        elif not isinstance(params, Mapping):
            raise TypeError(f"params: must be a mapping, not {type(params).__name__}")
        for name in _MANAGED_PARAMS:
            if name in params:
                raise LocalProtocolError(f"params: {name} is sent by the connection on retries")
        meta = params.get("_meta")
        if meta is not None:
            if not isinstance(meta, Mapping):
                raise TypeError("params._meta: must be a mapping")
            for key in _ENVELOPE_KEYS:
                if key in meta:
                    raise LocalProtocolError(f"params._meta: {key} comes from ClientConfig")
        call = Call(self._next_call, method, dict(params))
        st = _CallState(call, self.config.retry_backoff)
        if self._observer is not None:
            target = params.get(NAME_FIELDS[method] if method in MRTR_METHODS else "name")
            self._observer.observe(
                CallStarted(
                    self._clock(),
                    self._obs_key,
                    call.call_id,
                    method,
                    target if type(target) is str else None,
                    self.transport,
                )
            )
        if self._ready:
            self._send_leg(st, _SENT)
        else:
            self._encode(call.params)  # fail now, not when the era is known
            st.phase = _QUEUED[st.phase]
            self._queue.append(st)
        self._next_call += 1
        self._calls[call.call_id] = st
        return call

    def fulfil(self, event: InputNeeded, result: Mapping[str, Any]) -> bool:
        """Answer ``event`` with ``result`` (an ElicitResult, CreateMessageResult or
        ListRootsResult object).

        On the modern wire, the answer that completes a round sends the retry; on the legacy
        wire the answer goes out at once as the response to the server's request. Returns
        False, doing nothing, when the request is no longer pending (answered, withdrawn, or
        its call ended); raises :class:`LocalProtocolError` for an answer of the wrong shape.
        """
        answer = check_answer(_event(event).method, result)
        st = self._round_of(event)
        if st is None:
            return self._answer_server_request(event, self._server.answer(event, answer))
        key = event.key
        answers = st.answers
        answers[key] = answer  # type: ignore[index]
        if len(answers) == len(st.asked):
            if st.task_id is not None:
                self._send_task_leg(st, "tasks/update", _TASK_UPDATE)
            else:
                self._send_retry(st)
        else:
            st.phase = _ANSWERED[st.phase]
        return True

    def decline(self, event: InputNeeded) -> bool:
        """Answer an elicitation with ``{"action": "decline"}`` (the user said no)."""
        return self._elicitation_action(event, "decline")

    def cancel(self, target: Call | InputNeeded, reason: str | None = None) -> bool:
        """Cancel a call, or answer an elicitation with ``{"action": "cancel"}``.

        For a :class:`Call`: the request in flight, if any, is cancelled with
        ``notifications/cancelled`` (an HTTP transport closes that request's stream instead,
        reading ``requestId``), nothing more is sent for the call, its pending input is void
        and no further event is reported for it. Returns False when the call had already
        ended. For an :class:`InputNeeded` of ``elicitation/create``: the user dismissed it.
        """
        if type(target) is InputNeeded:
            return self._elicitation_action(target, "cancel")
        if type(target) is not Call:
            raise TypeError(f"cannot cancel {type(target).__name__}")
        st = self._calls.get(target.call_id)
        if st is None or st.call is not target:
            return False
        self._abandon(st, reason, _CANCELLED)
        return True

    def resume_task(self, task_id: str) -> Call:
        """Follow the task ``task_id`` (from a :class:`~mrtr_sansio.tasks.TaskStarted` of an
        earlier connection, say after a restart) as a new ``tools/call`` call: it is polled,
        its input requests surface as :class:`InputNeeded`, and it ends with the tool's result.
        Needs the modern wire and the tasks extension in ``ClientConfig.capabilities``."""
        if type(task_id) is not str or not task_id:
            raise TypeError("task_id: must be a non-empty string")
        if not (self._ready and self.era is Era.MODERN and self._tasks):
            raise LocalProtocolError(
                "resume_task needs the modern wire and the tasks extension in the capabilities"
            )
        call = Call(self._next_call, TASK_METHOD, {})
        st = _CallState(call, self.config.retry_backoff)
        st.task_id = task_id
        if self._observer is not None:
            self._observer.observe(
                CallStarted(
                    self._clock(), self._obs_key, call.call_id, TASK_METHOD, None, self.transport
                )
            )
        self._send_task_leg(st, "tasks/get", _SENT)
        self._next_call += 1
        self._calls[call.call_id] = st
        return call

    def _abandon(self, st: _CallState, reason: str | None, moves: Moves) -> None:
        """End a call on our side (``moves``: why), cancelling its request in flight (and its
        task, with ``tasks/cancel``, whose answer is ignored)."""
        if st.task_id is not None and moves is _CANCELLED:
            rid = self._new_id()
            body = {"taskId": st.task_id, "_meta": dict(self._envelope)}
            msg = request_message(rid, "tasks/cancel", body)
            self._send(OutgoingRequest, self._encode(msg), msg, None, (rid,))
            self._ignore(rid)
        st.phase = moves[st.phase]
        if st.leg is not None:
            params: dict[str, Any] = {"requestId": st.leg}
            if reason is not None:
                params["reason"] = reason
            msg = notification_message("notifications/cancelled", params)
            self._send(OutgoingNotification, self._encode(msg), msg, None)
            self._ignore(st.leg)
            if self.era is Era.LEGACY:
                self._server.cancelled(st.call.method, self._next_id)
        elif st in self._queue:
            self._queue.remove(st)
        if self._observer is not None:
            self._observe_end(st, "CallCancelled" if moves is _CANCELLED else "CallAbandoned")
        self._forget(st)

    def reject(self, event: InputNeeded, error: JsonRpcError | None = None) -> bool:
        """Refuse a request the application will not fulfil (e.g. the user rejected sampling).

        Legacy wire: answered with ``error`` (default -1, "User rejected the request", the
        convention for sampling). Modern wire: embedded requests have no error channel
        (DIGEST §2.6), so the call is abandoned, as with :meth:`cancel`. Prefer
        :meth:`decline` for elicitation. Returns False when the request is no longer pending.
        """
        if error is None:
            error = JsonRpcError(-1, "User rejected the request")
        elif type(error) is not JsonRpcError:
            raise TypeError(f"error: must be a JsonRpcError, not {type(error).__name__}")
        st = self._round_of(_event(event))
        if st is not None:
            return self.cancel(st.call)
        return self._answer_server_request(event, self._server.answer_error(event, error))

    def next_deadline(self) -> float | None:
        """When :meth:`handle_timer` must next be called (clock seconds), or None."""
        due = min(self._timers.values(), default=None)
        probe = self._handshake.deadline
        if probe is not None and (due is None or probe < due):
            return probe
        return due

    def handle_timer(self, now: float) -> None:
        """Do what is due at ``now`` (read from ``ClientConfig.clock``): state-only retries,
        and the probe's fallback to legacy when the server did not answer it in time."""
        self._apply_handshake(self._handshake.on_timer(now))
        timers = self._timers
        for call_id in [cid for cid, due in timers.items() if due <= now]:
            del timers[call_id]
            st = self._calls[call_id]
            if st.task_id is not None:
                self._send_task_leg(st, "tasks/get", _POLL)
            else:
                self._send_leg(st, _RETRY)

    def http_headers(
        self,
        item: Outgoing,
        param_headers: Mapping[str, Mapping[str, tuple[str, ...]]] | None = None,
    ) -> dict[str, str]:
        """The MCP headers an HTTP transport sets on the POST carrying ``item``.

        Modern: ``MCP-Protocol-Version`` on every message, ``Mcp-Method`` on requests,
        ``Mcp-Name`` on ``tools/call``/``prompts/get``/``resources/read``, and for a
        ``tools/call`` the ``Mcp-Param-*`` headers of the tool's ``x-mcp-header`` arguments,
        given ``param_headers`` (``param_headers_for(tools)`` over the ``tools/list`` result).
        Values that are not plain header-safe ASCII are base64-wrapped. Legacy:
        ``MCP-Protocol-Version`` once ``initialize`` has been answered.
        """
        return request_headers(item.message, self.protocol_version, param_headers)

    def request_call(self, request_id: Any) -> Call | None:
        """The call whose request ``request_id`` awaits the server's answer, or None."""
        st = self._legs.get(request_id)
        return None if st is None else st.call

    def request_failed(self, request_id: Any, reason: str) -> bool:
        """The transport lost request ``request_id``: it could not be delivered, or its answer
        can no longer arrive (an HTTP error status without a JSON-RPC body, a response stream
        that ended first, a broken connection).

        What waited for it ends: a call with ``CallFailed`` (-32603 with ``reason``,
        ``local=True``); the era probe falls back to ``initialize``, as for any answer that is
        not a recognised modern one; ``initialize`` fails the handshake. Returns False, doing
        nothing, when no request of ours awaits an answer under that id (answered, cancelled).
        """
        st = self._legs.pop(request_id, None)
        if st is not None:
            st.leg = None
            self._end(
                st, CallFailed(st.call, JsonRpcError(ErrorCode.INTERNAL_ERROR, reason), True), _LOST
            )
            return True
        if self._handshake.owns(request_id):
            self._apply_handshake(self._handshake.on_broken(request_id, reason, lost=True))
            return True
        return False

    @property
    def in_flight(self) -> frozenset[Call]:
        """Calls with a request awaiting the server's answer."""
        return frozenset(st.call for st in self._legs.values())

    def _round_of(self, event: InputNeeded) -> _CallState | None:
        """The call whose current modern round still awaits ``event``'s answer, or None."""
        call = event.call
        if call is None:
            return None
        st = self._calls.get(call.call_id)
        if st is None or st.asked.get(event.key) is not event:  # type: ignore[arg-type]
            return None
        if event.key in st.answers:
            return None
        return st

    def _elicitation_action(self, event: InputNeeded, action: str) -> bool:
        if _event(event).method != "elicitation/create":
            raise LocalProtocolError(
                f"{action} answers elicitation/create, not {event.method}; use reject() or "
                "cancel(event.call)"
            )
        return self.fulfil(event, {"action": action})

    # --- era (what the Handshake decides) ----------------------------------------------------

    def _start_initialize(self) -> None:
        self.era = Era.LEGACY
        self.protocol_version = None
        rid = self._new_id()
        msg = self._handshake.initialize(rid)
        self._send(OutgoingRequest, self._encode(msg), msg, None, (rid,))

    def _apply_handshake(self, actions: list[HandshakeAction]) -> None:
        """Carry out the handshake's decisions, in order."""
        for action in actions:
            if isinstance(action, StartInitialize):
                self._start_initialize()
            elif isinstance(action, Ignore):
                self._ignore(action.request_id)
            elif isinstance(action, Settled):
                if action.era is Era.MODERN:
                    self._use_version(action.protocol_version)
                else:
                    self.protocol_version = action.protocol_version
                self.server_capabilities = action.server_capabilities
                self.server_info = action.server_info
                self.instructions = action.instructions
                if action.era is Era.LEGACY:
                    note = notification_message("notifications/initialized", None)
                    self._send(OutgoingNotification, self._encode(note), note, None)
                self._era_known()
            else:
                assert isinstance(action, Failed)
                self._fail_handshake(action.error, local=action.local)

    def _use_version(self, version: str) -> None:
        self.era = Era.MODERN
        self.protocol_version = version
        self._envelope = modern_envelope(version, self._caps, self.config.client_info)

    def _era_known(self) -> None:
        """The handshake settled: report it and send the calls that waited for it."""
        self._ready = True
        assert self.era is not None
        assert self.protocol_version is not None
        self._events.append(
            EraDetected(
                self.era,
                self.protocol_version,
                self.server_capabilities,
                self.server_info,
                self.instructions,
            )
        )
        if self.era is Era.LEGACY:
            if self._observer is not None:
                self._observer.observe(
                    SessionStarted(
                        self._clock(),
                        self._obs_key,
                        "client",
                        self.protocol_version,
                        self.transport,
                    )
                )
            self._set_legacy_log_level()
        queue, self._queue = self._queue, []
        for st in queue:
            self._send_leg(st, _SENT)

    def _fail_handshake(self, error: JsonRpcError, *, local: bool = False) -> None:
        self._failure = error
        self._handshake.stop()
        self._events.append(HandshakeFailed(error, local))
        queue, self._queue = self._queue, []
        for st in queue:
            self._end(st, CallFailed(st.call, error, local), _HANDSHAKE_FAILED)

    # --- sending ----------------------------------------------------------------------------

    def _new_id(self) -> int:
        rid = self._next_id
        self._next_id = rid + 1
        return rid

    def _ignore(self, rid: Any) -> None:
        ignored = self._ignored
        ignored[rid] = None
        if len(ignored) > self._limits.max_in_flight:
            del ignored[next(iter(ignored))]

    def _base_params(self, st: _CallState) -> dict[str, Any]:
        params = st.params
        if params is None:
            params = st.params = dict(st.call.params)
            meta = params.get("_meta")
            asked = self._asked(st)
            if asked:  # defaults: what the call's own _meta says wins
                meta = asked if meta is None else {**asked, **meta}
            if self.era is Era.MODERN:
                params["_meta"] = (
                    dict(self._envelope) if meta is None else {**meta, **self._envelope}
                )
            elif meta is not None:
                params["_meta"] = meta
        return params

    def _asked(self, st: _CallState) -> dict[str, Any] | None:
        """The ``_meta`` defaults of ``ClientConfig.log_level`` (modern; legacy asks once per
        session) and ``ClientConfig.progress`` (the call's id as its token)."""
        config = self.config
        if config.log_level is None and not config.progress:
            return None
        out: dict[str, Any] = {}
        if config.log_level is not None and self.era is Era.MODERN:
            out[LOG_LEVEL] = config.log_level
        if config.progress:
            out[PROGRESS_TOKEN] = st.call.call_id
        return out

    def _set_legacy_log_level(self) -> None:
        """Legacy: ask for ``ClientConfig.log_level`` once, after the handshake, when the server
        declares ``logging``; the answer is dropped (a refusal leaves the server's default)."""
        level = self.config.log_level
        caps = self.server_capabilities
        if level is None or not (isinstance(caps, dict) and "logging" in caps):
            return
        rid = self._new_id()
        msg = request_message(rid, "logging/setLevel", {"level": level})
        self._send(OutgoingRequest, self._encode(msg), msg, None, (rid,))
        self._ignore(rid)

    def _send_leg(self, st: _CallState, moves: Moves) -> None:
        """Send the call's next request: the first one, or a retry with this round's fields;
        once it is queued, ``moves`` (sent or retry) moves the call."""
        params: dict[str, Any] | None = self._base_params(st)
        if st.answers or st.state is not None:
            params = dict(params)  # type: ignore[arg-type]
            if st.answers:
                params["inputResponses"] = st.answers
            if st.state is not None:
                params["requestState"] = st.state
        elif not params and self.era is Era.LEGACY:
            params = None
        rid = self._new_id()
        if self._observer is not None:
            params = self._observe_leg(st, rid, st.call.method, params)
        msg = request_message(rid, st.call.method, params)
        try:
            data = self._encode(msg)
        except LocalProtocolError as exc:
            if self._observer is not None:
                self._observe_unsent(st, rid, exc)
            raise
        st.phase = moves[st.phase]
        st.leg = rid
        self._legs[rid] = st
        self._send(OutgoingRequest, data, msg, None, (rid,))

    def _send_task_leg(self, st: _CallState, method: str, moves: Moves) -> None:
        """Send ``tasks/get``, or ``tasks/update`` with this round's answers, for the task."""
        params: dict[str, Any] = {"taskId": st.task_id}
        if method == "tasks/update":
            params["inputResponses"] = st.answers
        params["_meta"] = dict(self._envelope)
        rid = self._new_id()
        if self._observer is not None:
            params = self._observe_leg(st, rid, method, params)  # type: ignore[assignment]
        msg = request_message(rid, method, params)
        try:
            data = self._encode(msg)
        except LocalProtocolError as exc:
            if self._observer is not None:
                self._observe_unsent(st, rid, exc)
            raise
        st.phase = moves[st.phase]
        st.leg = rid
        st.task_leg = method
        self._legs[rid] = st
        self._send(OutgoingRequest, data, msg, None, (rid,))

    def _poll_later(self, st: _CallState, moves: Moves) -> None:
        """Wait ``pollIntervalMs`` (bounded by the config) before the next ``tasks/get``."""
        st.phase = moves[st.phase]
        config = self.config
        ms = st.task_poll
        delay = config.task_poll_interval if ms is None else ms / 1000
        self._timers[st.call.call_id] = self._clock() + min(delay, config.max_task_poll_interval)

    def _send_retry(self, st: _CallState) -> None:
        """Every key of the round is answered: retry. If an answer cannot be serialized, it is
        taken back (its event is pending again) and the error names its key."""
        try:
            self._send_leg(st, _RETRY)
        except LocalProtocolError as exc:
            answers = st.answers
            bad = []
            for key, answer in answers.items():
                try:
                    self._encode(answer)
                except LocalProtocolError:
                    bad.append(key)
            for key in bad:
                del answers[key]
            names = ", ".join(map(repr, bad))
            raise LocalProtocolError(f"the answer to {names} cannot be sent: {exc}") from None

    # --- receiving --------------------------------------------------------------------------

    def _dispatch(self, msg: Any, context: Any) -> None:
        try:
            kind = classify(msg)
        except RemoteProtocolError as exc:
            self._on_malformed(msg, exc)
            return
        if kind == RESPONSE:
            self._on_response(msg)
        elif kind == REQUEST:
            self._on_server_request(msg, context)
        else:
            self._on_notification(msg["method"], msg.get("params"))

    def _on_server_request(self, msg: dict[str, Any], related: Any) -> None:
        """A legacy server's request: what :class:`ServerRequests` decides, and the round of
        the call it belongs to (a new round when the previous one is answered)."""
        legs = {rid: st.call.method for rid, st in self._legs.items()}
        verdict = self._server.on_request(msg, related, self.era, legs)
        if isinstance(verdict, Reply):
            self._reply(verdict)
            return
        if isinstance(verdict, Refuse):
            self._invalid(verdict.exc, answer=verdict.answer)
            return
        accepted: Accept = verdict
        st = None if accepted.origin is None else self._legs[accepted.origin]
        round_ = 1
        if st is not None:
            if st.open_requests == 0:  # the previous round is answered: a new one starts
                if st.round >= self.config.max_rounds:
                    self._server_rounds_exhausted(st, msg)
                    return
                st.round += 1
            st.phase = CLIENT_CALL.step(st.phase, CallTrigger.SERVER_REQUEST)
            st.open_requests += 1
            round_ = st.round
        event = InputNeeded(
            None if st is None else st.call,
            accepted.request_id,
            accepted.method,
            accepted.params,
            round_,
        )
        self._server.opened(event)
        if self._observer is not None:
            self._observer.observe(
                LegReceived(
                    self._clock(),
                    self._obs_key,
                    None if st is None else st.call.call_id,
                    accepted.request_id,
                    accepted.method,
                    round_,
                    trace_of(accepted.params.get("_meta")),  # an object: checked on receipt
                    self.session_id,
                    self.protocol_version,
                )
            )
        self._events.append(event)

    def _server_rounds_exhausted(self, st: _CallState, msg: dict[str, Any]) -> None:
        """The server asked for one round more than ``max_rounds``: end the call (cancelling
        it on the wire), refuse the request, and report :class:`RoundsExhausted` with the
        request as ``last_result``."""
        rounds = st.round
        error = JsonRpcError(
            ErrorCode.INTERNAL_ERROR,
            f"The client ended the request after {rounds} rounds of input "
            f"(max_rounds={self.config.max_rounds})",
        )
        self._reply(Reply(error_message(msg["id"], error), error))
        self._abandon(st, "Too many rounds of input", CLIENT_CALL.moves(CallTrigger.ROUND_CAP))
        self._events.append(RoundsExhausted(st.call, rounds, msg))

    def _reply(self, reply: Reply) -> None:
        """Queue a response to a server request."""
        msg = reply.message
        data = self._encode(msg)
        if reply.error is None:
            self._send(OutgoingResult, data, msg, msg["id"])
        else:
            self._send(OutgoingError, data, msg, msg["id"], (reply.error,))

    def _answer_server_request(self, event: InputNeeded, reply: Reply | None) -> bool:
        """Send ``reply`` to a pending server request and close it; False (nothing sent) when
        it is not pending. When the reply cannot be encoded the request stays open."""
        if reply is None:
            return False
        self._reply(reply)
        self._server.closed(event)
        if self._observer is not None:
            outcome = "answered" if reply.error is None else "error"
            self._observer.observe(LegReplied(self._clock(), self._obs_key, event.key, outcome))
        self._server_request_closed(event)
        return True

    def _server_request_closed(self, event: InputNeeded) -> None:
        """A server request was answered or withdrawn: its call, if alive, has one fewer."""
        call = event.call
        if call is not None:  # alive: a call's end drops its requests (drop_call)
            st = self._calls[call.call_id]
            st.open_requests -= 1
            trigger = CallTrigger.ANSWERED if st.open_requests else CallTrigger.LAST_ANSWERED
            st.phase = CLIENT_CALL.step(st.phase, trigger)

    def _on_malformed(self, msg: Any, exc: RemoteProtocolError) -> None:
        """A message that is not valid JSON-RPC. A broken answer to one of our requests ends
        that request as an invalid response; anything else is reported (and a legacy
        server request with a readable id is answered)."""
        if type(msg) is dict and "method" not in msg:
            rid = msg.get("id")
            if is_valid_id(rid) and self._owns(rid):
                self._invalid_response(rid, "the response is not valid JSON-RPC")
                return
            self._invalid(exc, answer=False)
            return
        self._invalid(exc, answer=True)

    def _owns(self, rid: Any) -> bool:
        return rid in self._legs or self._handshake.owns(rid)

    def _invalid(self, exc: RemoteProtocolError, *, answer: bool) -> None:
        # A client answers only identifiable server requests, and only on the legacy wire.
        answer = answer and exc.request_id is not None and self.era is not Era.MODERN
        super()._invalid(exc, answer=answer)

    def _invalid_response(self, rid: Any, reason: str) -> None:
        st = self._legs.pop(rid, None)
        if st is None:
            self._apply_handshake(self._handshake.on_broken(rid, reason))
            return
        st.leg = None
        self._fail_invalid(st, reason)

    def _on_response(self, msg: dict[str, Any]) -> None:
        rid = msg.get("id")
        self._server.answered(rid)
        st = self._legs.pop(rid, None) if rid is not None else None
        if st is not None:
            st.leg = None
            self._on_leg_response(st, msg)
        elif self._handshake.owns(rid):
            self._apply_handshake(self._handshake.on_response(rid, msg))
        elif rid in self._ignored:
            del self._ignored[rid]
        else:
            self._events.append(UnexpectedResponse(rid, msg))

    def _on_leg_response(self, st: _CallState, msg: dict[str, Any]) -> None:
        if self._observer is not None:
            self._observe_answer(st, msg)
        if st.task_id is not None:
            self._on_task_leg(st, msg)
            return
        if "error" in msg:
            error = JsonRpcError.from_wire(msg["error"])
            self._end(st, CallFailed(st.call, error), _ERROR)
            return
        result = msg["result"]
        if type(result) is not dict:
            self._fail_invalid(st, "the result is not an object")
            return
        kind = result.get("resultType", "complete")
        if kind == INPUT_REQUIRED:
            if self.era is not Era.MODERN:
                self._fail_invalid(st, "input_required result on the legacy wire")
            elif st.call.method not in MRTR_METHODS:
                self._fail_invalid(st, f"input_required result on {st.call.method}")
            else:
                self._on_input_required(st, result)
        elif kind == "task" and self._tasks and self.era is Era.MODERN:
            if st.call.method != TASK_METHOD:
                self._fail_invalid(st, f"CreateTaskResult on {st.call.method}")
            else:
                self._on_task_created(st, result)
        elif (
            kind == "complete"
            or self.era is not Era.MODERN
            or (type(kind) is str and kind in self.config.extra_result_types)
        ):
            self._end(st, CallCompleted(st.call, result), _COMPLETE)
        else:
            self._fail_invalid(st, f"unknown resultType {kind!r}")

    def _on_input_required(self, st: _CallState, result: dict[str, Any]) -> None:
        try:
            requests, state = read_input_required(result, self._caps, self._limits)
        except InvalidResponseError as exc:
            self._fail_invalid(st, str(exc))
            return
        if st.round >= self.config.max_rounds:
            again = tuple(key for key, _, _ in requests if key in st.answers)
            self._end(st, RoundsExhausted(st.call, st.round, result, again), _ROUND_CAP)
            return
        st.round += 1
        st.state = state
        st.answers = {}
        asked: dict[str, InputNeeded] = {}
        st.asked = asked
        if not requests:
            st.phase = _STATE_ONLY[st.phase]
            self._timers[st.call.call_id] = self._clock() + st.backoff
            st.backoff = min(st.backoff * 2, self.config.max_retry_backoff)
            return
        st.phase = _INPUT_REQUESTS[st.phase]
        st.backoff = self.config.retry_backoff
        events = self._events
        call = st.call
        for key, method, params in requests:
            event = InputNeeded(call, key, method, params, st.round)
            asked[key] = event
            events.append(event)

    def _on_task_created(self, st: _CallState, result: dict[str, Any]) -> None:
        try:
            view = read_task(result, None)
        except InvalidResponseError as exc:
            self._fail_invalid(st, str(exc))
            return
        st.task_id = view.task_id
        st.task_poll = view.poll_interval_ms
        self._events.append(TaskStarted(st.call, view.task_id))
        self._poll_later(st, _TASK_CREATED)

    def _on_task_leg(self, st: _CallState, msg: dict[str, Any]) -> None:
        """The answer to a ``tasks/get`` or ``tasks/update`` of the call's task."""
        if "error" in msg:
            self._end(st, CallFailed(st.call, JsonRpcError.from_wire(msg["error"])), _ERROR)
            return
        result = msg["result"]
        if type(result) is not dict or result.get("resultType", "complete") != "complete":
            self._fail_invalid(st, f"{st.task_leg} must answer a complete result object")
            return
        if st.task_leg == "tasks/update":
            self._poll_later(st, _TASK_WORKING)
            return
        try:
            view = read_task(result, st.task_id)
        except InvalidResponseError as exc:
            self._fail_invalid(st, str(exc))
            return
        if view.poll_interval_ms is not None:
            st.task_poll = view.poll_interval_ms
        status = view.status
        call = st.call
        if status is TaskStatus.COMPLETED:
            assert view.result is not None
            self._end(st, CallCompleted(call, view.result), _COMPLETE)
        elif status is TaskStatus.FAILED:
            assert view.error is not None
            self._end(st, CallFailed(call, view.error), _ERROR)
        elif status is TaskStatus.CANCELLED:
            error = JsonRpcError(ErrorCode.INTERNAL_ERROR, "The task was cancelled")
            self._end(st, CallFailed(call, error), _ERROR)
        elif status is TaskStatus.INPUT_REQUIRED:
            self._on_task_input(st, view.input_requests or {}, result)
        else:
            self._poll_later(st, _TASK_WORKING)

    def _on_task_input(
        self, st: _CallState, requests: Mapping[str, Any], result: dict[str, Any]
    ) -> None:
        """Surface the task's input requests not surfaced before (keys are unique for the
        task's lifetime, so a key seen once is never asked again)."""
        try:
            embedded, _ = read_input_required({"inputRequests": requests}, self._caps, self._limits)
        except InvalidResponseError as exc:
            self._fail_invalid(st, str(exc))
            return
        new = [r for r in embedded if r[0] not in st.task_seen]
        if not new:
            self._poll_later(st, _TASK_WORKING)
            return
        if st.round >= self.config.max_rounds:
            self._end(st, RoundsExhausted(st.call, st.round, result), _ROUND_CAP)
            return
        st.round += 1
        st.answers = {}
        asked: dict[str, InputNeeded] = {}
        st.asked = asked
        st.phase = _TASK_INPUT_REQUESTS[st.phase]
        for key, method, params in new:
            st.task_seen.add(key)
            event = InputNeeded(st.call, key, method, params, st.round)
            asked[key] = event
            self._events.append(event)

    def _on_notification(self, method: str, params: dict[str, Any] | None) -> None:
        if method == "notifications/cancelled" and self.era is not Era.MODERN:
            withdrawn = self._server.on_cancelled(params)
            if withdrawn is not None:
                if self._observer is not None:
                    self._observer.observe(
                        LegReplied(self._clock(), self._obs_key, withdrawn.key, "withdrawn")
                    )
                self._server_request_closed(withdrawn)
                self._events.append(InputWithdrawn(withdrawn.call, withdrawn.key))
            return
        self._events.append(NotificationReceived(method, params))

    # --- endings ----------------------------------------------------------------------------

    def _fail_invalid(self, st: _CallState, reason: str) -> None:
        error = JsonRpcError(
            ErrorCode.INTERNAL_ERROR, f"Invalid response from the server: {reason}"
        )
        self._end(st, CallFailed(st.call, error, True), _INVALID)

    def _forget(self, st: _CallState) -> None:
        """Drop every trace of a call: its request in flight is no longer ours to route, and
        its pending input (legacy server requests linked to it included) is void."""
        del self._calls[st.call.call_id]
        self._timers.pop(st.call.call_id, None)
        if st.leg is not None:
            self._legs.pop(st.leg, None)
            st.leg = None
        if st.open_requests:
            self._server.drop_call(st.call)
            st.open_requests = 0
        st.asked = {}
        st.answers = {}

    def _end(self, st: _CallState, event: Event, moves: Moves) -> None:
        st.phase = moves[st.phase]
        if self._observer is not None:
            error = getattr(event, "error", None)
            self._observe_end(
                st, type(event).__name__, error.code if isinstance(error, JsonRpcError) else None
            )
        self._forget(st)
        self._events.append(event)

    # --- the observer (only called when one is configured) -----------------------------------

    def _observe_leg(
        self, st: _CallState, rid: int, method: str, params: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """Tell the observer a request of the call goes out; return ``params`` with the
        observer's trace context in ``_meta`` (the spec's reserved keys only)."""
        observer = self._observer
        assert observer is not None
        observer.observe(
            CallRoundSent(
                self._clock(),
                self._obs_key,
                st.call.call_id,
                rid,
                method,
                st.round + 1,
                self.protocol_version,
                self.session_id if self.era is Era.LEGACY else None,
            )
        )
        carry = observer.carry(self._obs_key, rid)
        if not carry:
            return params
        trace = trace_of(carry)
        if not trace:
            return params
        params = {} if params is None else dict(params)
        meta = params.get("_meta")
        params["_meta"] = {**(meta if isinstance(meta, Mapping) else {}), **trace}
        return params

    def _observe_unsent(self, st: _CallState, rid: int, exc: LocalProtocolError) -> None:
        """Tell the observer the request just reported sent could not be encoded: it never
        went out (the application may answer again, and a new request is reported)."""
        assert self._observer is not None
        self._observer.observe(
            CallRoundUnsent(self._clock(), self._obs_key, st.call.call_id, rid, str(exc))
        )

    def _observe_answer(self, st: _CallState, msg: dict[str, Any]) -> None:
        """Tell the observer the server answered a request of the call."""
        assert self._observer is not None
        result = msg.get("result")
        keys: tuple[str, ...] = ()
        error: JsonRpcError | None = None
        is_error = False
        if type(result) is dict:
            kind = result.get("resultType", "complete")
            requests = result.get("inputRequests")
            if kind == INPUT_REQUIRED and type(requests) is dict:
                keys = tuple(requests)
            # a task's tools/call result arrives inside tasks/get: its isError counts there
            inner = result.get("result") if st.task_id is not None else result
            is_error = type(inner) is dict and inner.get("isError") is True
        else:
            kind = "error"
            error = JsonRpcError.from_wire(msg.get("error"))
        self._observer.observe(
            CallRoundAnswered(
                self._clock(),
                self._obs_key,
                st.call.call_id,
                msg.get("id"),
                kind if type(kind) is str else "",
                keys,
                None if error is None else error.code,
                None if error is None else error.message,
                is_error,
            )
        )

    def _observe_end(self, st: _CallState, outcome: str, code: int | None = None) -> None:
        """Tell the observer the call ended."""
        assert self._observer is not None
        self._observer.observe(
            CallFinished(self._clock(), self._obs_key, st.call.call_id, outcome, st.round, code)
        )

    def _on_close(self) -> None:
        error = JsonRpcError(
            ErrorCode.INTERNAL_ERROR, "The connection closed before the call ended"
        )
        self._handshake.stop()
        self._queue.clear()
        for st in list(self._calls.values()):
            self._end(st, CallFailed(st.call, error, True), _CLOSED)
        for event in self._server.close():
            if self._observer is not None:
                self._observer.observe(
                    LegReplied(self._clock(), self._obs_key, event.key, "withdrawn")
                )
            self._events.append(InputWithdrawn(event.call, event.key))
        if self._observer is not None and self.era is Era.LEGACY and self._ready:
            self._observer.observe(SessionEnded(self._clock(), self._obs_key))


def _event(event: InputNeeded) -> InputNeeded:
    if type(event) is not InputNeeded:
        raise TypeError(f"event: must be an InputNeeded, not {type(event).__name__}")
    return event
