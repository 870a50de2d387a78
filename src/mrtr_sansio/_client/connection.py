"""ClientConnection: the client role on both wires, one driver for multi round-trip requests.

The connection owns the state (calls, requests in flight, timers, queues) and carries out what
its pure parts decide: ``calls.py``, ``results.py``, ``task_follow.py``, ``era.py``,
``legacy_rounds.py``, ``checks.py``, ``observing.py`` (each says what it decides). A call's phase
in :data:`~mrtr_sansio._lifecycle.CLIENT_CALL` decides what happens next. Time enters only
through ``ClientConfig.clock`` and the ``now`` of :meth:`handle_timer`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mrtr_sansio._config import ClientConfig
from mrtr_sansio._connection import Connection
from mrtr_sansio._errors import JsonRpcError, LocalProtocolError, RemoteProtocolError
from mrtr_sansio._events import (
    Call,
    CallFailed,
    Event,
    HandshakeFailed,
    InputNeeded,
    NotificationReceived,
    Outgoing,
    OutgoingNotification,
    OutgoingRequest,
    UnexpectedResponse,
)
from mrtr_sansio._lifecycle import CLIENT_CALL, CallPhase, CallTrigger
from mrtr_sansio._mcp.capabilities import declares_tasks
from mrtr_sansio._mcp.envelope import Era
from mrtr_sansio._wire.jsonrpc import REQUEST, RESPONSE, classify, is_valid_id, request_message
from mrtr_sansio.http._client_headers import request_headers

from . import calls, checks
from . import task_follow as follow
from .calls import IN_FLIGHT, TASK_LEGS, TASK_PHASES, CallState
from .era import Handshake, HandshakeAction, Ignore, Settled, StartInitialize
from .legacy_rounds import Closed, Exhausted, LegacyRounds, Opened
from .observing import Reporter
from .results import Reading, read_answer, unanswered
from .server_requests import Refuse, Reply

__all__ = ["ClientConnection"]

P = CallPhase
K = CallTrigger
#: ``_MOVES[trigger][phase]``: the table's next phase (an undeclared move raises), by lookup.
_MOVES = {trigger: CLIENT_CALL.moves(trigger) for trigger in CallTrigger}
# Hot-path members bound once: a global is cheaper than an enum attribute (docs/performance.md).
_SENT, _RETRY, _ANSWERED = K.SENT, K.RETRY, K.ANSWERED
_ANSWERING_SERVER, _TASK_WAITING = P.ANSWERING_SERVER, P.TASK_WAITING
_TASK_INPUT, _TASK_UPDATING = P.TASK_INPUT, P.TASK_UPDATING
_ENDED = CLIENT_CALL.terminal


class ClientConnection(Connection):
    """The client side of one stream (a stdio process), or of one server over HTTP: feed it
    what the server sends (:meth:`receive_data`, :meth:`receive_message`), read
    :meth:`next_event`, write :meth:`outgoing` or :meth:`data_to_send`, and call
    :meth:`handle_timer` at :meth:`next_deadline`."""

    #: The transport's name for the legacy session (HTTP ``Mcp-Session-Id``), set by the
    #: adapter that received it; only reported to an observer (``mcp.session.id``).
    session_id: str | None = None

    def __init__(self, config: ClientConfig | None = None) -> None:
        config = config if config is not None else ClientConfig()  # (ClientConfig checks era)
        checks.check_capabilities(config.capabilities)
        super().__init__(config.limits, config.codec)
        #: The configuration this connection runs with.
        self.config = config
        self._tasks = declares_tasks(config.capabilities)
        self._clock = config.clock
        self._backoff = config.retry_backoff
        self._report = None if config.observer is None else Reporter(config.observer, config.clock)
        self._next_id = 0
        self._next_call = 0
        self._calls: dict[int, CallState] = {}
        self._legs: dict[Any, CallState] = {}  # our request id -> its call
        self._queue: list[CallState] = []  # calls made before the era was known
        self._timers: dict[int, float] = {}  # call id -> when its retry or poll is due
        self._ignored: dict[Any, None] = {}  # ids whose late answers are dropped silently
        self._failure: JsonRpcError | None = None
        self._envelope: dict[str, Any] = {}
        self._ready = False  # the era is known and calls go out at once
        self._server = LegacyRounds(config)
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
            self._agree(self._handshake.pinned())
        elif config.era == "legacy":
            self._apply_handshake([StartInitialize()])
        else:
            self._own(self._handshake.probe(self._new_id()))

    # --- public API -------------------------------------------------------------------------

    def receive_message(
        self,
        message: bytes | str | Mapping[str, Any],
        related_request_id: int | None = None,
    ) -> None:
        """Feed one whole message (an HTTP body, an SSE event's data, or decoded);
        ``related_request_id``: our request whose HTTP response carried it (SEP-2260)."""
        self._receive_decoded(message, related_request_id)

    def call(self, method: str, params: Mapping[str, Any] | None = None) -> Call:
        """Start an operation; its outcome arrives as events carrying the returned handle.
        ``params`` go as given (the envelope, ``inputResponses`` and ``requestState`` are the
        connection's); before the era is known the call waits in a queue."""
        if self._closed:
            raise LocalProtocolError("call after the stream was closed")
        if self._failure is not None:
            raise LocalProtocolError(f"the handshake failed: {self._failure.message}")
        st = CallState(
            Call(self._next_call, method, checks.check_call(method, params)), self._backoff
        )
        if not self._ready:
            self._encode(st.call.params)  # fail now, not when the era is known
            self._queue.append(st)
        return self._start(st, _SENT if self._ready else K.QUEUED)

    def fulfil(self, event: InputNeeded, result: Mapping[str, Any]) -> bool:
        """Answer ``event`` with ``result`` (an ElicitResult, CreateMessageResult or
        ListRootsResult); the answer completing a modern round sends the retry. False, doing
        nothing, when it is no longer pending; :class:`LocalProtocolError` for a wrong shape."""
        answer = checks.check_answer(checks.check_event(event).method, result)
        st = self._round_of(event)
        if st is None:
            return self._answer_server_request(event, self._server.answer(event, answer))
        if st.answer(event, answer):  # the round is answered: send it (a task's, tasks/update)
            self._send_leg(st, K.TASK_UPDATE if st.phase is _TASK_INPUT else _RETRY)
        else:
            st.phase = _MOVES[_ANSWERED][st.phase]
        return True

    def decline(self, event: InputNeeded) -> bool:
        """Answer an elicitation with ``{"action": "decline"}`` (the user said no)."""
        return self.fulfil(checks.check_elicitation(event, "decline"), {"action": "decline"})

    def dismiss(self, event: InputNeeded) -> bool:
        """Answer an elicitation with ``{"action": "cancel"}`` (the user dismissed it)."""
        return self.fulfil(checks.check_elicitation(event, "dismiss"), {"action": "cancel"})

    def cancel(self, call: Call, reason: str | None = None) -> bool:
        """Cancel ``call``: its request in flight, if any, gets ``notifications/cancelled``,
        its pending input is void, and nothing more is sent or reported for it. Returns False
        when the call had already ended. (A dismissed elicitation is :meth:`dismiss`'s.)"""
        st = self._calls.get(checks.check_handle(call).call_id)
        if st is None or st.call is not call:
            return False
        self._abandon(st, reason, K.CANCELLED)
        return True

    def resume_task(self, task_id: str) -> Call:
        """Follow the task ``task_id`` (of an earlier connection's ``TaskStarted``) as a new
        ``tools/call`` call; needs the modern wire and the tasks extension declared."""
        resumable = self._ready and self.era is Era.MODERN and self._tasks
        return self._start(
            follow.resumed(self._next_call, task_id, resumable, self._backoff), K.POLL
        )

    def reject(self, event: InputNeeded, error: JsonRpcError | None = None) -> bool:
        """Refuse a request (e.g. sampling): on the legacy wire with ``error`` (default -1,
        "User rejected the request"); the modern wire has no error channel, so the call is
        cancelled. Prefer :meth:`decline` for elicitation. False when no longer pending."""
        error = checks.check_rejection(error)
        st = self._round_of(checks.check_event(event))
        if st is not None:
            return self.cancel(st.call)
        return self._answer_server_request(event, self._server.answer_error(event, error))

    def next_deadline(self) -> float | None:
        """When :meth:`handle_timer` must next be called (clock seconds), or None."""
        due = min(self._timers.values(), default=None)
        probe = self._handshake.deadline
        return due if probe is None or (due is not None and due <= probe) else probe

    def handle_timer(self, now: float) -> None:
        """Do what is due at ``now`` (read from ``ClientConfig.clock``): state-only retries,
        task polls, the probe's fallback to legacy."""
        self._apply_handshake(self._handshake.on_timer(now))
        timers = self._timers
        for call_id in [cid for cid, due in timers.items() if due <= now]:
            del timers[call_id]
            st = self._calls[call_id]
            self._send_leg(st, K.POLL if st.phase is _TASK_WAITING else _RETRY)

    def http_headers(
        self,
        item: Outgoing,
        param_headers: Mapping[str, Mapping[str, tuple[str, ...]]] | None = None,
    ) -> dict[str, str]:
        """The MCP headers of the POST carrying ``item`` (:mod:`mrtr_sansio.http` states each);
        ``param_headers``: ``param_headers_for(tools)`` of the ``tools/list`` result."""
        return request_headers(item.message, self.protocol_version, param_headers)

    def request_call(self, request_id: Any) -> Call | None:
        """The call whose request ``request_id`` awaits the server's answer, or None."""
        st = self._legs.get(request_id)
        return None if st is None else st.call

    def request_failed(self, request_id: Any, reason: str) -> bool:
        """The transport lost request ``request_id`` (an HTTP error, a stream that ended): what
        waited for it fails with -32603 ``reason`` (the probe falls back to ``initialize``).
        False, doing nothing, when no request of ours awaits an answer under that id."""
        return self._unanswered(request_id, reason, lost=True)

    @property
    def in_flight(self) -> frozenset[Call]:
        """Calls with a request awaiting the server's answer."""
        return frozenset(st.call for st in self._legs.values())

    def _start(self, st: CallState, trigger: CallTrigger) -> Call:
        """Take on the new call ``st``, moved by ``trigger``: its first leg, or the queue."""
        call = st.call
        if self._report is not None:
            self._report.started(call, self.transport)
        if trigger is K.QUEUED:
            st.phase = _MOVES[trigger][st.phase]
        else:
            self._send_leg(st, trigger)
        self._next_call += 1
        self._calls[call.call_id] = st
        return call

    def _round_of(self, event: InputNeeded) -> CallState | None:
        """The call whose current modern round still awaits ``event``'s answer, or None."""
        call = event.call
        st = None if call is None else self._calls.get(call.call_id)
        return st if st is not None and st.awaits(event) else None

    # --- era (what the Handshake decides) ----------------------------------------------------

    def _apply_handshake(self, actions: list[HandshakeAction]) -> None:
        """Carry out the handshake's decisions, in order."""
        for action in actions:
            if isinstance(action, StartInitialize):
                self.era, self.protocol_version = Era.LEGACY, None
                self._own(self._handshake.initialize(self._new_id()))
            elif isinstance(action, Ignore):
                self._ignore(action.request_id)
            elif isinstance(action, Settled):
                self._events.append(action.detected)
                self._agree(action)
            else:  # (the handshake has stopped: it failed)
                self._failure = error = action.error
                self._events.append(HandshakeFailed(error, action.local))
                queue, self._queue = self._queue, []
                for st in queue:
                    failed = CallFailed(st.call, error, action.local)
                    self._settle(st, (K.HANDSHAKE_FAILED, failed))

    def _agree(self, settled: Settled) -> None:
        """Take the era, version and server facts the handshake agreed, then send what waited
        for them (the legacy follow-ups, the queued calls)."""
        known = settled.detected
        self.era, self.protocol_version = known.era, known.protocol_version
        self.server_capabilities, self.server_info = known.capabilities, known.server_info
        self.instructions, self._envelope, self._ready = known.instructions, settled.envelope, True
        for msg in settled.follow_ups(self._new_id):
            self._own(msg, ignore=True)
        if self._report is not None and known.era is Era.LEGACY:
            self._report.session_started(known.protocol_version, self.transport)
        queue, self._queue = self._queue, []
        for st in queue:
            self._send_leg(st, _SENT)

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

    def _own(self, msg: dict[str, Any], *, ignore: bool = False) -> None:
        """Queue a notification, or a request of the connection's own (no call's) whose answer,
        with ``ignore``, is dropped."""
        if "id" not in msg:
            self._send(OutgoingNotification, self._encode(msg), msg, None)
            return
        self._send(OutgoingRequest, self._encode(msg), msg, None, (msg["id"],))
        if ignore:
            self._ignore(msg["id"])

    def _send_leg(self, st: CallState, trigger: CallTrigger) -> None:
        """Send the call's next request, the one the phase ``trigger`` leads to names, and move
        it once queued; an answer that cannot be serialized is taken back and named."""
        phase = _MOVES[trigger][st.phase]
        method = TASK_LEGS.get(phase)
        if method is None:
            method = st.call.method
            params = calls.leg_params(st, self.era, self._envelope, self.config)
        else:
            params = follow.task_params(st, phase is _TASK_UPDATING, self._envelope)
        rid = self._new_id()
        report = self._report
        if report is not None:
            session = self.session_id if self.era is Era.LEGACY else None
            version = self.protocol_version
            params = report.leg_sent(st.call, rid, method, st.round + 1, params, version, session)
        msg = request_message(rid, method, params)
        try:
            data = self._encode(msg)
        except LocalProtocolError as exc:
            if report is not None:
                report.unsent(st.call, rid, exc)
            names = ", ".join(map(repr, calls.unsendable(st, self._encode)))
            if names:
                raise LocalProtocolError(f"the answer to {names} cannot be sent: {exc}") from None
            raise
        st.phase = phase
        st.leg = rid
        self._legs[rid] = st
        self._send(OutgoingRequest, data, msg, None, (rid,))

    def _abandon(self, st: CallState, reason: str | None, trigger: CallTrigger) -> None:
        """End a call on our side (``trigger``: why), cancelling its request in flight (and its
        task, with ``tasks/cancel``, whose answer is ignored)."""
        was = st.phase
        if trigger is K.CANCELLED and was in TASK_PHASES:
            self._own(follow.cancel_message(self._new_id(), st, self._envelope), ignore=True)
        st.phase = _MOVES[trigger][was]
        if was in IN_FLIGHT:
            self._own(calls.cancelled_message(st, reason))
            self._ignore(st.leg)
            if self.era is Era.LEGACY:
                self._server.cancelled(st.call.method, self._next_id)
        elif was is P.QUEUED:
            self._queue.remove(st)
        self._end(st, was, "CallCancelled" if trigger is K.CANCELLED else "CallAbandoned")

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

    def _on_response(self, msg: dict[str, Any]) -> None:
        rid = msg.get("id")
        self._server.answered(rid)
        st = self._legs.pop(rid, None) if rid is not None else None
        if st is not None:  # the answer to a call's request: what it means moves the call
            st.leg = None
            task_leg = st.phase in TASK_LEGS
            if self._report is not None:
                self._report.answered(st.call, msg, task_leg)
            if task_leg:
                self._settle(st, follow.read_task_answer(st, msg, self.config))
            else:
                self._settle(st, read_answer(st, msg, self.era, self._tasks, self.config))
        elif self._handshake.owns(rid):
            self._apply_handshake(self._handshake.on_response(rid, msg))
        elif rid in self._ignored:
            del self._ignored[rid]
        else:
            self._events.append(UnexpectedResponse(rid, msg))

    def _settle(self, st: CallState, reading: Reading) -> None:
        """Move the call by the trigger of ``reading`` and do what its new phase asks."""
        trigger, detail = reading
        was = st.phase
        st.phase = phase = _MOVES[trigger][was]
        if phase in _ENDED:  # the table says the call is over; ``detail`` is its last event
            self._end(st, was, detail)
            self._events.append(detail)
            return
        events, delay = st.enter(trigger, detail, self.config)
        self._events.extend(events)
        if delay is not None:
            self._timers[st.call.call_id] = self._clock() + delay

    def _on_server_request(self, msg: dict[str, Any], related: Any) -> None:
        """A legacy server's request, where :class:`LegacyRounds` places it."""
        step = self._server.receive(msg, related, self.era, self._legs)
        if isinstance(step, Opened):
            event, st = step.event, step.st
            if st is not None:
                st.round = event.round
                st.phase = _MOVES[K.SERVER_REQUEST][st.phase]
            if self._report is not None:
                self._report.request_received(event, self.session_id, self.protocol_version)
            self._events.append(event)
        elif isinstance(step, Refuse):
            self._invalid(step.exc, answer=step.answer)
        elif isinstance(step, Exhausted):
            self._send(*step.reply.entry(self._encode))
            self._abandon(step.st, "Too many rounds of input", K.ROUND_CAP)
            self._events.append(step.event)
        else:
            self._send(*step.entry(self._encode))

    def _answer_server_request(self, event: InputNeeded, reply: Reply | None) -> bool:
        """Send ``reply`` to a pending server request and close it; False (nothing sent) when
        it is not pending. When the reply cannot be encoded the request stays open."""
        if reply is None:
            return False
        self._send(*reply.entry(self._encode))
        self._request_closed(self._server.settle(event, reply))
        return True

    def _request_closed(self, closed: Closed | None) -> None:
        """A server request no longer awaits the application: its call, if any, moves."""
        if closed is None:
            return
        event, move = closed.event, closed.move
        if self._report is not None:
            self._report.replied(event.key, closed.outcome)
        if move is not None:
            st = self._calls[event.call.call_id]  # type: ignore[union-attr]
            st.phase = _MOVES[move][st.phase]
        if (withdrawn := closed.withdrawn) is not None:
            self._events.append(withdrawn)

    def _on_notification(self, method: str, params: dict[str, Any] | None) -> None:
        if method == "notifications/cancelled" and self.era is not Era.MODERN:
            self._request_closed(self._server.withdraw(params))
        else:
            self._events.append(NotificationReceived(method, params))

    def _on_malformed(self, msg: Any, exc: RemoteProtocolError) -> None:
        """A message that is not valid JSON-RPC: a broken answer to one of our requests ends
        that request; anything else is reported (a legacy server's request answered)."""
        if type(msg) is not dict or "method" in msg:
            self._invalid(exc, answer=True)
        elif not is_valid_id(rid := msg.get("id")) or not self._unanswered(
            rid, "the response is not valid JSON-RPC", lost=False
        ):
            self._invalid(exc, answer=False)

    def _unanswered(self, rid: Any, reason: str, *, lost: bool) -> bool:
        """Our request ``rid`` gets no usable answer: none will come (``lost``), or a broken
        one came. What waited for it ends; False when nothing did."""
        st = self._legs.pop(rid, None)
        if st is not None:
            st.leg = None
            self._settle(st, unanswered(st, reason, lost))
        elif self._handshake.owns(rid):
            self._apply_handshake(self._handshake.on_broken(rid, reason, lost=lost))
        else:
            return False
        return True

    def _invalid(self, exc: RemoteProtocolError, *, answer: bool) -> None:
        # A client answers only identifiable server requests, and only on the legacy wire.
        answer = answer and exc.request_id is not None and self.era is not Era.MODERN
        super()._invalid(exc, answer=answer)

    # --- endings ----------------------------------------------------------------------------

    def _end(self, st: CallState, was: CallPhase, outcome: Event | str) -> None:
        """Report the ``outcome`` of a call that was in phase ``was`` and drop every trace of
        it: its request in flight is no longer ours to route, its pending input is void."""
        if self._report is not None:
            self._report.finished(st.call, outcome, st.round)
        del self._calls[st.call.call_id]
        self._timers.pop(st.call.call_id, None)
        self._legs.pop(st.leg, None)
        if was is _ANSWERING_SERVER:
            self._server.drop_call(st.call)

    def _on_close(self) -> None:
        error = JsonRpcError.internal("The connection closed before the call ended")
        self._handshake.stop()
        self._queue.clear()
        for st in list(self._calls.values()):
            self._settle(st, (K.CLOSED, CallFailed(st.call, error, True)))
        for closed in self._server.withdraw_all():
            self._request_closed(closed)
        if self._report is not None and self.era is Era.LEGACY and self._ready:
            self._report.session_ended()
