"""ServerConnection: the server role on both wires, a thin owner of what lives across messages
(requests in flight and cancelled, listen streams, the queues). It decides with the parts
beside it -- :mod:`.modern` and :mod:`.legacy` check requests, :mod:`.answers` builds what goes
out, :mod:`.shim` runs legacy rounds, ``tasks._server`` the tasks extension -- and applies what
they return.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import mrtr_sansio.tasks._server as tasks_part
from mrtr_sansio import observe
from mrtr_sansio._config import ServerConfig
from mrtr_sansio._connection import ENCODE_ERRORS, Connection, unserializable
from mrtr_sansio._errors import JsonRpcError, LocalProtocolError, RemoteProtocolError
from mrtr_sansio._events import (
    NotificationReceived,
    Outgoing,
    OutgoingNotification,
    OutgoingRequest,
    OutgoingResult,
    RequestCancelled,
    RequestReceived,
)
from mrtr_sansio._lifecycle import ANSWER_CARRIER, RequestTrigger, ShimTrigger
from mrtr_sansio._mcp.mrtr_fields import INPUT_REQUIRED
from mrtr_sansio._mcp.session import LegacySession
from mrtr_sansio._mcp.subscriptions import ACKNOWLEDGED, LISTEN, tag
from mrtr_sansio._mcp.values import InputRequiredResult
from mrtr_sansio._wire import jsonrpc
from mrtr_sansio._wire.jsonrpc import error_message, is_valid_id, notification_message
from mrtr_sansio.http._facts import HttpRequestFacts
from mrtr_sansio.tasks._values import RunAsTask

from . import answers, legacy
from .answers import (
    DROP,
    check_input_required,
    modern_result,
    notification_params,
    parse_input_required,
)
from .legacy import Admit, EmptyResult, LegacyAction, LegacyRequests
from .modern import ModernRequests
from .observing import answered, leg_ended, leg_sent, refusal, started, traced_leg
from .shim import CancelLeg, Fail, LegacyShim, LegEnded, Replay, SendRequest
from .state import StateGate, StateRejectedError

__all__ = ["ServerConnection", "refusal"]

# What each answer to a request in flight sends, as the table says (ANSWER_CARRIER), read once.
_RESULT = ANSWER_CARRIER[RequestTrigger.RESULT]
_INPUT_REQUIRED = ANSWER_CARRIER[RequestTrigger.INPUT_REQUIRED]
_ERROR = ANSWER_CARRIER[RequestTrigger.ERROR]
_MISSING_CAPABILITY = ANSWER_CARRIER[RequestTrigger.MISSING_CAPABILITY]


class ServerConnection(Connection):
    """The server side of one stream (stdio, TCP), one legacy HTTP session, or one stateless
    HTTP exchange. ``principal`` is the caller of every message without its own (bound into
    sealed state); ``server_requests=False``: the transport cannot carry server-to-client
    requests, so legacy requests that need input are refused (the shim cannot run)."""

    def __init__(
        self,
        config: ServerConfig | None = None,
        *,
        principal: str | None = None,
        server_requests: bool = True,
    ) -> None:
        config = config if config is not None else ServerConfig()
        super().__init__(config.limits, config.codec)
        #: The configuration this connection serves with.
        self.config = config
        #: The authenticated caller of every message without its own (bound into sealed state).
        self.principal = principal
        self._server_info = config.server_info
        self._observer = config.observer
        self._obs_key = 0 if config.observer is None else observe.connection_key()
        self._state = StateGate(config, self._obs_key)
        self._max_in_flight = config.limits.max_in_flight
        self._max_input_requests = config.limits.max_input_requests
        # The one record of which client requests are in flight (the shim's runs are a subset).
        self._inflight: dict[Any, RequestReceived] = {}
        # Cancelled requests the application may still answer (the answer is dropped).
        self._cancelled: dict[Any, None] = {}
        self._shim = LegacyShim(config)
        self._acknowledged: set[Any] = set()  # open subscriptions/listen streams
        self._tasks = tasks_part.task_machine(config, self._obs_key)
        self._modern = ModernRequests(config, self._state, self._tasks)
        self._legacy = LegacyRequests(config, self._shim, self._tasks, server_requests)

    # --- public API -------------------------------------------------------------------------

    @property
    def session(self) -> LegacySession | None:
        """The legacy session, once ``initialize`` was received."""
        return self._legacy.session

    @property
    def in_flight(self) -> frozenset[Any]:
        """Ids of client requests received and not yet answered."""
        return frozenset(self._inflight)

    @property
    def reusable(self) -> bool:
        """Whether the connection holds nothing of any request (none in flight or cancelled,
        no session or listen stream, nothing queued, not closed): it then serves the next
        stateless request as a new one would (an HTTP transport sets :attr:`principal`)."""
        return not (
            self._inflight
            or self._cancelled
            or self._legacy.session is not None
            or self._acknowledged
            or self._events
            or self._out
            or self._closed
        )

    def receive_message(
        self,
        message: bytes | str | Mapping[str, Any],
        *,
        http: HttpRequestFacts | None = None,
        principal: str | None = None,
    ) -> None:
        """Feed one whole message (an HTTP body, or decoded); ``http``: the request's MCP
        headers, for the mirror-header checks; ``principal`` overrides the connection's."""
        context = None if http is None and principal is None else (http, principal)
        self._receive_decoded(message, context)

    def respond(
        self,
        request_id: str | int,
        result: Mapping[str, Any] | InputRequiredResult | JsonRpcError | RunAsTask,
    ) -> None:
        """Answer a request with a result mapping, an :class:`InputRequiredResult`, an error or
        a :class:`~mrtr_sansio.tasks.RunAsTask`. Raises :class:`LocalProtocolError` for an id
        that awaits no answer or an answer its method does not allow (the request stays open)."""
        event = self._inflight.get(request_id)
        if event is None:
            if request_id in self._cancelled:
                del self._cancelled[request_id]
                return
            raise LocalProtocolError(f"no request with id {request_id!r} awaits an answer")
        if event.session is not None:
            self._shim.check_answer(request_id)
        kind = type(result)
        if kind is dict or (kind is not InputRequiredResult and isinstance(result, Mapping)):
            if result.get("resultType") == INPUT_REQUIRED:  # type: ignore[union-attr]
                self._respond_input_required(event, *parse_input_required(result))  # type: ignore[arg-type]
            else:
                self._respond_complete(event, result)  # type: ignore[arg-type]
        elif kind is InputRequiredResult or isinstance(result, InputRequiredResult):
            self._respond_input_required(event, result)  # type: ignore[arg-type]
        elif isinstance(result, JsonRpcError):
            self._respond_error(event, result)
        elif isinstance(result, RunAsTask):
            made = tasks_part.start_task(self._tasks, event, result)
            if isinstance(made, JsonRpcError):  # the store refused it
                self._respond_error(event, made)
                return
            task, first_run = made
            self._respond_complete(event, task.create_result())
            self._events.append(first_run)
        else:
            kinds = "a mapping, an InputRequiredResult, a RunAsTask or a JsonRpcError"
            raise TypeError(f"result must be {kinds}, not {type(result).__name__}")

    def notify(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        related_request_id: str | int | None = None,
    ) -> None:
        """Send a notification, tied to the client request it belongs to when there is one
        (dropped when that request is no longer in flight)."""
        related = related_request_id is not None
        event = self._inflight.get(related_request_id) if related else None
        acknowledged = related_request_id in self._acknowledged
        session = self._legacy.session
        sent = notification_params(method, params, related, event, acknowledged, session)
        if sent is not DROP:
            msg = notification_message(method, sent)
            self._send(OutgoingNotification, self._encode(msg), msg, related_request_id)

    def acknowledge(
        self, request_id: str | int, notifications: Mapping[str, Any] | None = None
    ) -> None:
        """Acknowledge a ``subscriptions/listen`` request (the first message on its stream),
        honouring ``notifications`` of its filter (default: all): only those types follow."""
        event = self._inflight.get(request_id)
        honored = answers.honoured(event, request_id, notifications)
        if notifications is not None:
            event.params["notifications"] = honored  # type: ignore[index,union-attr]
        self._acknowledged.add(request_id)
        msg = notification_message(ACKNOWLEDGED, tag({"notifications": honored}, request_id))
        self._send(OutgoingNotification, self._encode(msg), msg, request_id)

    def cancel(self, request_id: str | int, reason: str | None = None) -> bool:
        """Abandon a client request as if the client had cancelled it (e.g. its HTTP stream is
        gone); False when it was not in flight."""
        if request_id not in self._inflight:
            return False
        self._cancel(request_id, reason)
        return True

    def end_session(self) -> None:
        """An adapter ended the legacy session without closing a stream (HTTP DELETE, expiry):
        an observer is told. Cancel its requests first; the connection is not used after."""
        if self._legacy.session is not None:
            self._tell(observe.SessionEnded)

    def initialize_result(self, protocol_version: str | None = None) -> dict[str, Any]:
        """The ``InitializeResult`` for this session (negotiated version unless given)."""
        return legacy.initialize_result(self.config, self._legacy.session, protocol_version)

    def discover_result(self) -> dict[str, Any]:
        """The ``DiscoverResult``: versions, capabilities, instructions, cache hints."""
        return answers.discover_result(self.config)

    def settle_task(
        self,
        request: RequestReceived,
        result: Mapping[str, Any] | InputRequiredResult | JsonRpcError | RunAsTask,
    ) -> None:
        """Record what a task's run (``request.task_id`` set) returned: the task completes,
        fails or waits for input (a state-only answer queues its next run); a task cancelled
        meanwhile drops it. An outcome the store refused is saved again by :meth:`handle_timer`."""
        rerun = tasks_part.settle_task(self._tasks, request, result, self._encode)
        if rerun is not None:
            self._events.append(rerun)

    def detailed_task(self, task_id: str, principal: str | None = None) -> dict[str, Any] | None:
        """The ``DetailedTask`` ``tasks/get`` gives ``principal`` for ``task_id``, or None when
        that caller may not read it; raises :class:`~mrtr_sansio.tasks.TaskStoreError`."""
        machine = tasks_part.needs_tasks(self._tasks, "detailed_task")
        return tasks_part.detailed(machine.find(task_id, principal))

    def detailed_tasks(
        self, task_ids: Sequence[str], principal: str | None = None
    ) -> list[dict[str, Any] | None]:
        """:meth:`detailed_task` for each of ``task_ids`` (strings), in order, read from the
        store in one call when it can (:class:`~mrtr_sansio.tasks.BatchTaskStore`)."""
        machine = tasks_part.needs_tasks(self._tasks, "detailed_tasks")
        return [tasks_part.detailed(task) for task in machine.find_many(task_ids, principal)]

    def renew_task(self, task_id: str) -> bool:
        """Extend the lease of a task's run in this process (more often than
        ``TaskSettings.lease_seconds``); False when the task no longer runs: stop the run."""
        return tasks_part.needs_tasks(self._tasks, "renew_task").renew(task_id)

    @property
    def unsaved_task_outcomes(self) -> int:
        """Task outcomes the store refused, kept to save again: keep calling
        :meth:`handle_timer` while this is not 0 (dropping the connection loses them)."""
        return 0 if self._tasks is None else self._tasks.unsaved

    def ping(self) -> int:
        """Send a legacy ``ping`` to the client; its answer arrives as ``PingAnswered``."""
        ping_id, msg = self._legacy.ping(self._closed)
        self._send(OutgoingRequest, self._dumps(msg), msg, None, (ping_id,))
        return ping_id

    def next_deadline(self) -> float | None:
        """When :meth:`handle_timer` must next be called (clock seconds), or None."""
        deadline = self._shim.next_deadline()
        if self._tasks is not None:
            due = self._tasks.next_deadline()
            deadline = due if deadline is None else min(deadline, due)
        return deadline

    def handle_timer(self, now: float) -> None:
        """Do what is due at ``now``: expire unanswered legacy shim legs; sweep expired tasks
        and retry saving the outcomes the store refused."""
        self._apply(self._shim.handle_timer(now))
        if self._tasks is not None:
            self._events.extend(self._tasks.handle_timer(now))

    # --- receive path -----------------------------------------------------------------------

    def _dispatch(self, msg: Any, context: Any) -> None:
        # A well-formed request with params (every modern one) is recognised here in one pass,
        # with the same test as classify(); everything else is sorted by classify().
        rid: Any
        method: Any
        params: Any
        if type(msg) is dict:
            rid = msg.get("id")
            method = msg.get("method")
            params = msg.get("params")
            fast = (
                type(params) is dict
                and type(method) is str
                and is_valid_id(rid)
                and msg.get("jsonrpc") == "2.0"
            )
        else:
            fast = False
        if not fast:
            try:
                kind = jsonrpc.classify(msg)
            except RemoteProtocolError as exc:
                self._invalid(exc, answer=jsonrpc.answerable(msg), request=msg)
                return
            if kind == jsonrpc.NOTIFICATION:
                self._on_notification(msg["method"], msg.get("params"))
                return
            if kind != jsonrpc.REQUEST:
                self._apply(self._shim.on_response(msg))
                return
            rid, method, params = msg["id"], msg["method"], {}  # a request without params
        try:  # the request: the in-flight bounds, its era's checks, then it is recorded
            inflight = self._inflight
            if rid in inflight or rid in self._cancelled:
                raise RemoteProtocolError(answers.ID_IN_USE, rid)
            if len(inflight) >= self._max_in_flight:
                raise RemoteProtocolError(answers.TOO_MANY_IN_FLIGHT, rid)
            if context is None:
                http, principal = None, self.principal
            else:
                http, principal = context
                if principal is None:
                    principal = self.principal
            try:
                admitted = self._modern.admit(rid, method, params, http, principal)
            except StateRejectedError as exc:
                self._events.append(exc.event)
                raise
            if admitted is None:  # no protocol version in _meta: the legacy wire
                meta = params.get("_meta")
                self._apply(self._legacy.admit(rid, method, params, meta, http, principal))
                return
            state, round_, carried, answer = admitted
            event = RequestReceived(rid, method, params, None, state, round_, principal)
            inflight[rid] = event
            if method == "server/discover" and self.config.answer_discovery:  # never a task
                answer = answers.discover_result(self.config), None
            elif self._observer is not None:
                self._tell(started, event, carried, self.transport)
            if answer is None:
                self._events.append(event)
                return
            result, caused = answer  # a tasks/* request, answered from the store, or discovery
            if caused is not None:
                self._events.append(caused)
            self._respond_complete(event, result)
        except RemoteProtocolError as exc:
            self._invalid(exc, answer=True, request=msg)

    def _on_notification(self, method: str, params: dict[str, Any] | None) -> None:
        if method == "notifications/cancelled":
            rid = params.get("requestId") if params is not None else None
            event = self._inflight.get(rid) if is_valid_id(rid) else None
            # initialize must not be cancelled (2025-11-25 cancellation); ignore the attempt.
            if event is not None and event.method != "initialize":
                self._cancel(rid, params.get("reason") if params is not None else None)
            return
        if method == "notifications/initialized":
            self._apply(self._legacy.initialized())
        self._events.append(NotificationReceived(method, params))

    def _cancel(self, rid: Any, reason: Any) -> None:
        del self._inflight[rid]
        self._acknowledged.discard(rid)
        self._apply(self._shim.abandon(rid))
        cancelled = self._cancelled
        cancelled[rid] = None
        if len(cancelled) > self._limits.max_in_flight:
            del cancelled[next(iter(cancelled))]
        self._tell(observe.RequestAbandoned, rid, "cancelled")
        self._events.append(RequestCancelled(rid, reason if isinstance(reason, str) else None))

    def _invalid(self, exc: RemoteProtocolError, *, answer: bool, request: Any = None) -> None:
        super()._invalid(exc, answer=answer)
        if answer:
            self._tell(refusal, request, exc, self._legacy.session, self.transport)

    def _refusal_relates_to(self, request_id: Any) -> Any:
        # A refused message whose id names a request still open (a duplicate id) is not part
        # of that request: relating the refusal to it would let a transport write it on the
        # open request's stream and end it. It belongs where the refused message came from.
        if request_id in self._inflight or request_id in self._cancelled:
            return None
        return request_id

    def _on_close(self) -> None:
        # Those waiting for the client can never be answered; the others' answers go nowhere.
        for rid in self._legacy.close(self._inflight):
            del self._inflight[rid]
            self._tell(observe.RequestAbandoned, rid, "closed")
        self.end_session()

    # --- send path --------------------------------------------------------------------------

    def _respond_complete(self, event: RequestReceived, result: Mapping[str, Any]) -> None:
        rid = event.request_id
        session = event.session
        if session is None:
            if event.method == LISTEN:
                self._acknowledged.discard(rid)
            out = modern_result(result, event.method, rid, self._server_info, self.config)
            self._emit(_RESULT, rid, out)
            return
        legacy_out = answers.legacy_result(result)
        self._emit(_RESULT, rid, legacy_out)
        self._shim.finish(rid, ShimTrigger.RESULT)
        if event.method == "initialize":
            version = session.protocol_version
            self._tell(observe.SessionStarted, "server", version, self.transport)
            opened = legacy.session_opened(session, legacy_out)
            session.protocol_version = opened.protocol_version
            self._events.append(opened)

    def _emit(self, carrier: type[Outgoing], rid: Any, result: Mapping[str, Any]) -> None:
        """Queue the success response to ``rid`` (as ``carrier``, the item the table says the
        answer ends in) and close the request: the last step of every answer. Raises
        :class:`LocalProtocolError` when the result cannot be serialized (the request stays
        open)."""
        msg = {"jsonrpc": "2.0", "id": rid, "result": result}
        try:
            data = self._dumps(msg)
        except ENCODE_ERRORS as exc:
            raise unserializable(exc) from exc
        del self._inflight[rid]
        self._send(carrier, data, msg, rid)
        if self._observer is not None:
            self._tell(answered, rid, result)

    def _respond_error(
        self, event: RequestReceived, error: JsonRpcError, carrier: type[Outgoing] = _ERROR
    ) -> None:
        rid = event.request_id
        self._acknowledged.discard(rid)
        msg = error_message(rid, error)
        data = self._encode(msg)
        del self._inflight[rid]
        self._shim.finish(rid, ShimTrigger.ERROR)
        self._send(carrier, data, msg, rid, (error,))
        self._tell(observe.ErrorSent, rid, error.code, error.message)
        self._legacy.failed(event)

    def _respond_input_required(
        self, event: RequestReceived, ir: InputRequiredResult, meta: Mapping[str, Any] | None = None
    ) -> None:
        check_input_required(event.method, ir, self._max_input_requests, self._state.seals)
        if event.session is not None:
            self._apply(self._legacy.start_round(event, ir, self._encode))
        elif ir.input_requests and not ir.allowed_by(event.client_capabilities):
            missing = answers.missing_capability(ir, event.client_capabilities)
            self._respond_error(event, missing, _MISSING_CAPABILITY)
        else:
            state = self._state.write(event, ir.request_state)
            wire = ir.to_wire(state, meta, self._server_info)
            self._emit(_INPUT_REQUIRED, event.request_id, wire)

    def _tell(self, fact: Any, *args: Any) -> None:
        """Give the observer, if any, the fact ``fact`` builds now (hot paths check first)."""
        if self._observer is not None:
            self._observer.observe(fact(self.config.clock(), self._obs_key, *args))

    def _apply(self, actions: Iterable[LegacyAction]) -> None:
        """Carry out the legacy side's actions, in order."""
        for action in actions:
            if isinstance(action, SendRequest):
                observer = self._observer
                if observer is None:
                    self._send(*action.item)
                else:  # the leg goes out with the trace keys the observer carries for it
                    self._tell(leg_sent, action)
                    carry = observer.carry(self._obs_key, observe.LegKey(action.leg_id))
                    self._send(*traced_leg(action.item, carry, self._dumps))
            elif isinstance(action, LegEnded):
                self._tell(leg_ended, action)
            elif isinstance(action, CancelLeg):
                msg = action.message()
                self._send(OutgoingNotification, self._dumps(msg), msg, action.related_request_id)
            elif isinstance(action, Replay):  # the request's next run replaces its record
                self._inflight[action.event.request_id] = action.event
                self._events.append(action.event)
            elif isinstance(action, Fail):  # the shim forgot the run: finish() finds nothing
                self._respond_error(self._inflight[action.request_id], action.error)
            elif isinstance(action, Admit):
                event = action.event
                self._inflight[event.request_id] = event
                if action.result is not None:
                    self._respond_complete(event, action.result)
                    continue
                if action.observed:
                    self._tell(started, event, None, self.transport)
                self._events.append(event)
            elif isinstance(action, EmptyResult):
                msg = jsonrpc.result_message(action.request_id, {})
                self._send(OutgoingResult, self._dumps(msg), msg, action.request_id)
            else:
                self._events.append(action.event)
