"""OpenTelemetry for MRTR: one trace per call, however many rounds and processes.

:class:`OtelObserver` is an :class:`~mrtr_sansio.observe.Observer`: give it to
``ServerConfig(observer=...)`` and ``ClientConfig(observer=...)``. It needs only
``opentelemetry-api`` (the ``otel`` extra); the application configures the SDK and exporters.

Names follow the OpenTelemetry semantic conventions for MCP (``mcp.method.name``,
``jsonrpc.request.id``, ``gen_ai.tool.name``, ``mcp.protocol.version``, span name
``{method} {target}``, the ``mcp.server.operation.duration`` and
``mcp.client.operation.duration`` histograms). What MRTR adds lives under ``mrtr.``: the round
number, the flow id every round of one call shares, the keys of the input asked for.

**Server.** A span per request (per round on the modern wire). Its parent is the trace context
of the request's ``_meta`` (``traceparent``...); the previous round's span context and the flow
id ride in the sealed ``requestState``, so a round answered by another process links to the
round before it (and is its child when the client sent no trace context). Legacy shim legs are
child spans (the wait for the user is their length); a task is a span whose events are its
status changes. **Client.** A span per call, a child per request sent (which carries its trace
context in ``_meta``), and an ``input`` span for the time the application took to answer; on
the legacy wire, a span per server request the client answers (its length is the time
the application took): a child of the server's leg span when the request's ``_meta`` carries
its trace context (linked to the call span), else a child of the call span.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mrtr_sansio._extras import raise_missing_extra

try:
    from opentelemetry import metrics, trace
    from opentelemetry.propagate import extract, inject
    from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - exercised by tests/test_packaging.py
    raise_missing_extra(exc, "mrtr_sansio.otel", "otel")

from mrtr_sansio import __version__
from mrtr_sansio._errors import ErrorCode
from mrtr_sansio.observe import (
    CallFinished,
    CallRoundAnswered,
    CallRoundSent,
    CallRoundUnsent,
    CallStarted,
    ErrorSent,
    Fact,
    LegAnswered,
    LegKey,
    LegReceived,
    LegReplied,
    LegSent,
    LegTimedOut,
    RequestAbandoned,
    RequestAnswered,
    RequestRefused,
    RequestStarted,
    SessionEnded,
    SessionStarted,
    TaskKey,
    TaskStatusChanged,
    Transport,
)
from mrtr_sansio.tasks import TASK

__all__ = ["DURATION_BUCKETS", "FLOW_ID", "INPUT_KEYS", "ROUND", "TASK_ID", "OtelObserver"]

#: The round of a request (1 first) or the rounds a call took.
ROUND = "mrtr.round"
#: The id every round of one call shares (the first round's span id, sealed onward).
FLOW_ID = "mrtr.flow.id"
#: The keys of the ``inputRequests`` an ``input_required`` result asked for.
INPUT_KEYS = "mrtr.input_request.keys"
#: The task a span is about (``tasks/*`` requests, a task's status changes).
TASK_ID = "mrtr.task.id"
#: The bucket boundaries the conventions give every MCP duration histogram (seconds).
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
#: ``mcp.method.name`` of a refused message whose method could not be read (the
#: conventions' fallback value for what an instrumentation cannot name).
UNKNOWN_METHOD = "_OTHER"
_TASK_REQUESTS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
#: The wire statuses a task ends in (the task table's terminal states).
_TERMINAL = frozenset(status.value for status in TASK.terminal)
_NAMED = ("tools/call", "prompts/get")  # the methods whose target goes into the span name


class _Open:
    """A span this observer opened and still owes an end, with what its end needs."""

    __slots__ = ("attributes", "flow", "request", "round", "shared", "span", "started")

    def __init__(
        self,
        span: Span,
        started: float,
        attributes: dict[str, Any],
        flow: str,
        round: int | None = None,
        request: Any = None,
        shared: dict[str, Any] | None = None,
    ) -> None:
        self.request = request  # a leg's: the request (server) or call (client) it is for
        self.span = span
        self.started = started
        self.attributes = attributes  # what its measurements carry
        self.flow = flow
        self.round = round
        # what the spans under it repeat: protocol version, session, the wire
        self.shared = {} if shared is None else shared


def _name(method: str, target: str | None) -> str:
    return f"{method} {target}" if target is not None and method in _NAMED else method


def _target(method: str, target: str | None) -> dict[str, Any]:
    if target is None:
        return {}
    if method == "tools/call":
        return {"gen_ai.tool.name": target, "gen_ai.operation.name": "execute_tool"}
    if method == "prompts/get":
        return {"gen_ai.prompt.name": target}
    if method == "resources/read":
        return {"mcp.resource.uri": target}
    return {}


#: What measurements carry: the conventions' low-cardinality attributes (no ids, no URIs).
_METRIC_KEYS = (
    "mcp.method.name",
    "gen_ai.tool.name",
    "gen_ai.prompt.name",
    "gen_ai.operation.name",
    "mcp.protocol.version",
    "network.transport",
    "network.protocol.name",
    "network.protocol.version",
    "server.address",
    "server.port",
)


def _metric_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The low-cardinality attributes measurements carry (no ids, no URIs)."""
    return {k: attributes[k] for k in _METRIC_KEYS if k in attributes}


def _wire(transport: Transport | None, client: bool) -> dict[str, Any]:
    """The conventions' attributes for ``transport``: ``server.*`` on the client's spans,
    ``client.*`` (the peer) on the server's."""
    if transport is None:
        return {}
    out: dict[str, Any] = {"network.transport": transport.network}
    if transport.protocol is not None:
        out["network.protocol.name"] = transport.protocol
    if transport.protocol_version is not None:
        out["network.protocol.version"] = transport.protocol_version
    address, port, prefix = (
        (transport.address, transport.port, "server.")
        if client
        else (transport.client_address, transport.client_port, "client.")
    )
    if address is not None:
        out[prefix + "address"] = address
        if port is not None:
            out[prefix + "port"] = port
    return out


def _session(version: str | None, session_id: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if version is not None:
        out["mcp.protocol.version"] = version
    if session_id is not None:
        out["mcp.session.id"] = session_id
    return out


def _error(span: Span, error_type: str, message: str | None, code: int | None = None) -> None:
    """Mark ``span`` failed as the conventions say: ``error.type``, the JSON-RPC code as
    ``rpc.response.status_code`` when there is one, an ERROR status with its message."""
    span.set_attribute("error.type", error_type)
    if code is not None:
        span.set_attribute("rpc.response.status_code", str(code))
    span.set_status(Status(StatusCode.ERROR, message))


def _valid(context: Mapping[str, str] | None) -> Any:
    """The OpenTelemetry context of W3C keys, or None when they name no valid span."""
    if not context:
        return None
    extracted = extract(dict(context))
    return extracted if trace.get_current_span(extracted).get_span_context().is_valid else None


class OtelObserver:
    """Spans and metrics for the connections whose config names it (one instance may serve
    many connections, server and client).

    ``tracer_provider``/``meter_provider``: the providers to use (the global ones when None).
    ``to_epoch`` maps a fact's ``at`` (the connection's injected clock) to epoch seconds for
    span timestamps; None lets OpenTelemetry stamp spans with its own clock (right for the
    client's default monotonic clock). Durations always come from the facts.
    """

    def __init__(
        self,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        *,
        to_epoch: Callable[[float], float] | None = None,
    ) -> None:
        self._tracer = trace.get_tracer("mrtr_sansio", __version__, tracer_provider)
        meter = metrics.get_meter("mrtr_sansio", __version__, meter_provider)
        self._to_epoch = to_epoch
        self._requests: dict[tuple[int, Any], _Open] = {}
        self._legs: dict[tuple[int, int], _Open] = {}
        self._calls: dict[tuple[int, int], _Open] = {}
        self._rounds: dict[tuple[int, Any], _Open] = {}
        self._waits: dict[tuple[int, int], Span] = {}
        self._sent: dict[tuple[int, int], int] = {}
        self._served: dict[tuple[int, Any], _Open] = {}  # legacy: server requests answered
        self._sessions: dict[int, tuple[float, str, dict[str, Any]]] = {}
        buckets = {"explicit_bucket_boundaries_advisory": DURATION_BUCKETS}
        self._server_duration = meter.create_histogram(
            "mcp.server.operation.duration", "s", "MCP request duration on the server", **buckets
        )
        self._client_duration = meter.create_histogram(
            "mcp.client.operation.duration", "s", "MCP request duration on the client", **buckets
        )
        self._session_duration = {
            role: meter.create_histogram(
                f"mcp.{role}.session.duration",
                "s",
                f"MCP session duration on the {role}",
                **buckets,
            )
            for role in ("server", "client")
        }
        self._call_rounds = meter.create_histogram(
            "mrtr.client.call.rounds", "{request}", "Requests one call took (its rounds)"
        )
        self._flow_rounds = meter.create_histogram(
            "mrtr.server.flow.rounds", "{round}", "The round that completed a flow"
        )
        self._input_required = meter.create_counter(
            "mrtr.server.input_required", "{result}", "input_required results sent"
        )
        self._refusals = meter.create_counter(
            "mrtr.server.missing_capability", "{error}", "-32021 refusals sent"
        )
        self._legs_count = meter.create_counter(
            "mrtr.server.shim.legs", "{request}", "Legacy shim legs by outcome"
        )
        self._leg_duration = meter.create_histogram(
            "mrtr.server.shim.leg.duration", "s", "Legacy shim legs: from sent to answered"
        )
        self._task_status = meter.create_counter(
            "mrtr.server.tasks", "{change}", "Task status changes, by the status entered"
        )

    # --- Observer ------------------------------------------------------------------------

    def observe(self, fact: Fact) -> None:
        """Turn ``fact`` into spans, span events and measurements."""
        handler = _HANDLERS.get(type(fact))
        if handler is not None:
            handler(self, fact)

    def carry(self, connection: int, request_id: Any) -> Mapping[str, str] | None:
        """Server: the flow id and this round's span context, to seal into the state; for a
        :class:`~mrtr_sansio.observe.LegKey`, the leg span's context for the leg's ``_meta``.
        Client: the request span's trace context for the request's ``_meta``."""
        if type(request_id) is LegKey:  # a shim leg: its span's context, for its _meta
            leg = self._legs.get((connection, request_id.leg_id))
            return None if leg is None else _context(leg.span)
        if type(request_id) is TaskKey:  # a new task: the creating request's span context
            creating = self._requests.get((connection, request_id.request_id))
            return None if creating is None else _context(creating.span)
        key = (connection, request_id)
        open_ = self._requests.get(key)
        if open_ is not None:
            out = {"flow": open_.flow, **_context(open_.span)}
            out.pop("baggage", None)  # the client sends its own each round
            return out
        round_ = self._rounds.get(key)
        return None if round_ is None else _context(round_.span)

    # --- server --------------------------------------------------------------------------

    def _ns(self, at: float) -> int | None:
        return None if self._to_epoch is None else int(self._to_epoch(at) * 1e9)

    def _request_started(self, fact: RequestStarted) -> None:
        parent = _valid(fact.trace)
        links: list[Link] = []
        carried = fact.carried or {}
        task = fact.method in _TASK_REQUESTS
        previous = trace.get_current_span(extract(dict(carried))).get_span_context()
        if previous.is_valid:
            # a round links to the round before it; a tasks/* request to the task's creation
            links.append(Link(previous, {"mrtr.link": "task" if task else "previous_round"}))
            if parent is None:
                parent = trace.set_span_in_context(trace.NonRecordingSpan(previous))
        shared = {
            **_session(fact.protocol_version, fact.session_id),
            **_wire(fact.transport, client=False),
        }
        attributes: dict[str, Any] = {
            "mcp.method.name": fact.method,
            "jsonrpc.request.id": str(fact.request_id),
            **_target(fact.method, fact.target),
            **shared,
        }
        if task and fact.target is not None:
            attributes[TASK_ID] = fact.target
        if fact.round is not None:
            attributes[ROUND] = fact.round
        if fact.legacy:
            attributes["mrtr.legacy"] = True
        span = self._tracer.start_span(
            _name(fact.method, fact.target),
            parent,
            SpanKind.SERVER,
            attributes,
            links,
            self._ns(fact.at),
        )
        flow = ""
        if not task:
            flow = carried.get("flow") or format(span.get_span_context().span_id, "016x")
            span.set_attribute(FLOW_ID, flow)
        metric = _metric_attributes(attributes)
        self._requests[fact.connection, fact.request_id] = _Open(
            span, fact.at, metric, flow, fact.round, None, shared
        )

    def _request_answered(self, fact: RequestAnswered) -> None:
        open_ = self._requests.pop((fact.connection, fact.request_id), None)
        if open_ is None:  # a request the observer did not see start (server/discover...)
            return
        span = open_.span
        span.set_attribute("mrtr.result_type", fact.result_type)
        if fact.input_keys:
            span.set_attribute(INPUT_KEYS, list(fact.input_keys))
        if fact.task_status is not None:
            span.set_attribute("mrtr.task.status", fact.task_status)
        attributes = open_.attributes
        if fact.is_error:  # a tool result with isError: the conventions' tool_error
            _error(span, "tool_error", None)
            attributes = {**attributes, "error.type": "tool_error"}
        if fact.result_type == "input_required":
            self._input_required.add(1, open_.attributes)
        elif open_.round is not None:
            self._flow_rounds.record(open_.round, open_.attributes)
        self._server_duration.record(fact.at - open_.started, attributes)
        span.end(self._ns(fact.at))

    def _error_sent(self, fact: ErrorSent) -> None:
        open_ = self._requests.pop((fact.connection, fact.request_id), None)
        if fact.code == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY:
            self._refusals.add(1, {} if open_ is None else open_.attributes)
        if open_ is None:
            return
        code = str(fact.code)
        _error(open_.span, code, fact.message, fact.code)
        self._server_duration.record(
            fact.at - open_.started,
            {**open_.attributes, "error.type": code, "rpc.response.status_code": code},
        )
        open_.span.end(self._ns(fact.at))

    def _request_refused(self, fact: RequestRefused) -> None:
        """A refused request: a SERVER span that starts and ends at the refusal."""
        method = fact.method if fact.method is not None else UNKNOWN_METHOD
        # the JSON-RPC code when one was sent, else the HTTP status of an edge refusal
        error_type = str(fact.code if fact.code is not None else fact.http_status)
        failure: dict[str, Any] = {"error.type": error_type}
        if fact.code is not None:
            failure["rpc.response.status_code"] = error_type
        attributes: dict[str, Any] = {
            "mcp.method.name": method,
            **_target(method, fact.target),
            **_session(fact.protocol_version, fact.session_id),
            **_wire(fact.transport, client=False),
            **failure,
        }
        if fact.http_status is not None:
            attributes["http.response.status_code"] = fact.http_status
        if fact.request_id is not None:
            attributes["jsonrpc.request.id"] = str(fact.request_id)
        if method in _TASK_REQUESTS and fact.target is not None:
            attributes[TASK_ID] = fact.target
        if fact.legacy:
            attributes["mrtr.legacy"] = True
        at = self._ns(fact.at)
        span = self._tracer.start_span(
            _name(method, fact.target),
            _valid(fact.trace),
            SpanKind.SERVER,
            attributes,
            start_time=at,
        )
        span.set_status(Status(StatusCode.ERROR, fact.message))
        metric = {**_metric_attributes(attributes), **failure}
        if fact.code == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY:
            self._refusals.add(1, _metric_attributes(attributes))
        self._server_duration.record(0.0, metric)
        span.end(at)

    def _request_abandoned(self, fact: RequestAbandoned) -> None:
        open_ = self._requests.pop((fact.connection, fact.request_id), None)
        if open_ is None:
            return
        end = self._ns(fact.at)
        for key, leg in list(self._legs.items()):  # its legs were withdrawn with it
            if key[0] == fact.connection and leg.request == fact.request_id:
                del self._legs[key]
                leg.span.set_attribute("mrtr.outcome", "withdrawn")
                leg.span.end(end)
        open_.span.set_attribute("mrtr.outcome", fact.reason)
        open_.span.end(end)

    def _leg_sent(self, fact: LegSent) -> None:
        request = self._requests.get((fact.connection, fact.request_id))
        parent = None if request is None else trace.set_span_in_context(request.span)
        shared = {} if request is None else request.shared
        span = self._tracer.start_span(
            fact.method,
            parent,
            SpanKind.CLIENT,
            {
                "mcp.method.name": fact.method,
                "jsonrpc.request.id": str(fact.leg_id),
                "mrtr.leg.key": fact.key,
                ROUND: fact.round,
                "mrtr.legacy": True,
                **shared,
            },
            start_time=self._ns(fact.at),
        )
        attributes = {"mcp.method.name": fact.method}
        self._legs[fact.connection, fact.leg_id] = _Open(
            span, fact.at, attributes, "", fact.round, fact.request_id
        )

    def _leg_ended(self, fact: LegAnswered | LegTimedOut) -> None:
        open_ = self._legs.pop((fact.connection, fact.leg_id), None)
        if open_ is None:
            return
        if isinstance(fact, LegTimedOut):
            outcome = "timeout"
        else:
            outcome = "error" if fact.error else "answered"
        if outcome != "answered":
            open_.span.set_attribute("error.type", outcome)
            open_.span.set_status(Status(StatusCode.ERROR, outcome))
        attributes = {**open_.attributes, "mrtr.outcome": outcome}
        self._legs_count.add(1, attributes)
        self._leg_duration.record(fact.at - open_.started, attributes)
        open_.span.end(self._ns(fact.at))

    def _task_status_changed(self, fact: TaskStatusChanged) -> None:
        """A status change, on whichever process made it: a span of its own (no duration),
        a child of the task's creating request (the context stored with the task), with
        the change as its event; nothing waits for another process."""
        self._task_status.add(1, {"mrtr.task.status": fact.status})
        event: dict[str, Any] = {
            TASK_ID: fact.task_id,
            "mrtr.task.status": fact.status,
            ROUND: fact.round,
        }
        parent = _valid(fact.trace)
        if parent is None and fact.request_id is not None:
            request = self._requests.get((fact.connection, fact.request_id))
            parent = None if request is None else trace.set_span_in_context(request.span)
        at = self._ns(fact.at)
        span = self._tracer.start_span(
            f"task {fact.status}", parent, SpanKind.INTERNAL, event, start_time=at
        )
        span.add_event("mrtr.task.status", event, at)
        if fact.status in _TERMINAL and fact.status != "completed":
            span.set_status(Status(StatusCode.ERROR, fact.status))
        span.end(at)

    def _session_started(self, fact: SessionStarted) -> None:
        attributes = _metric_attributes(
            {
                "mcp.protocol.version": fact.protocol_version,
                **_wire(fact.transport, client=fact.role == "client"),
            }
        )
        self._sessions[fact.connection] = (fact.at, fact.role, attributes)

    def _session_ended(self, fact: SessionEnded) -> None:
        started = self._sessions.pop(fact.connection, None)
        if started is None:
            return
        at, role, attributes = started
        if fact.error is not None:
            attributes = {**attributes, "error.type": fact.error}
        self._session_duration[role].record(fact.at - at, attributes)

    # --- client --------------------------------------------------------------------------

    def _call_started(self, fact: CallStarted) -> None:
        target = _target(fact.method, fact.target)
        wire = _wire(fact.transport, client=True)
        attributes: dict[str, Any] = {
            "mcp.method.name": fact.method,
            "mrtr.call.id": fact.call_id,
            **target,
        }
        span = self._tracer.start_span(
            _name(fact.method, fact.target),
            None,
            SpanKind.INTERNAL,
            attributes,
            start_time=self._ns(fact.at),
        )
        # the target attributes go on the call's own requests; the wire on every request
        self._calls[fact.connection, fact.call_id] = _Open(
            span,
            fact.at,
            {"mcp.method.name": fact.method, **target},
            _name(fact.method, fact.target),
            shared=wire,
        )
        self._sent[fact.connection, fact.call_id] = 0

    def _call_round_sent(self, fact: CallRoundSent) -> None:
        key = (fact.connection, fact.call_id)
        call = self._calls.get(key)
        if call is None:
            return
        wait = self._waits.pop(key, None)
        if wait is not None:
            wait.end(self._ns(fact.at))
        self._sent[key] += 1
        own = fact.method == call.attributes.get("mcp.method.name")  # not a tasks/* poll
        attributes: dict[str, Any] = {
            **(call.attributes if own else {}),
            "mcp.method.name": fact.method,
            "jsonrpc.request.id": str(fact.request_id),
            ROUND: fact.round,
            **_session(fact.protocol_version, fact.session_id),
            **call.shared,
        }
        span = self._tracer.start_span(
            call.flow if own else fact.method,
            trace.set_span_in_context(call.span),
            SpanKind.CLIENT,
            attributes,
            start_time=self._ns(fact.at),
        )
        self._rounds[fact.connection, fact.request_id] = _Open(
            span, fact.at, _metric_attributes(attributes), ""
        )

    def _call_round_answered(self, fact: CallRoundAnswered) -> None:
        open_ = self._rounds.pop((fact.connection, fact.request_id), None)
        if open_ is None:
            return
        span = open_.span
        span.set_attribute("mrtr.result_type", fact.result_type)
        attributes = open_.attributes
        if fact.result_type == "error":
            code = str(fact.error_code) if fact.error_code is not None else "_OTHER"
            _error(span, code, fact.error_message, fact.error_code)
            attributes = {**attributes, "error.type": code}
            if fact.error_code is not None:
                attributes["rpc.response.status_code"] = code
        elif fact.is_error:
            _error(span, "tool_error", None)
            attributes = {**attributes, "error.type": "tool_error"}
        if fact.input_keys:
            span.set_attribute(INPUT_KEYS, list(fact.input_keys))
        self._client_duration.record(fact.at - open_.started, attributes)
        span.end(self._ns(fact.at))
        call = self._calls.get((fact.connection, fact.call_id))
        if fact.input_keys and call is not None:
            self._waits[fact.connection, fact.call_id] = self._tracer.start_span(
                "input " + ", ".join(fact.input_keys),
                trace.set_span_in_context(call.span),
                SpanKind.INTERNAL,
                {INPUT_KEYS: list(fact.input_keys)},
                start_time=self._ns(fact.at),
            )

    def _call_round_unsent(self, fact: CallRoundUnsent) -> None:
        open_ = self._rounds.pop((fact.connection, fact.request_id), None)
        if open_ is None:
            return
        key = (fact.connection, fact.call_id)
        if key in self._sent:
            self._sent[key] -= 1  # the request never went out: not one of the call's rounds
        span = open_.span
        span.set_attribute("error.type", "unsent")
        span.set_attribute("mrtr.outcome", "unsent")
        span.set_status(Status(StatusCode.ERROR, fact.reason))
        span.end(self._ns(fact.at))

    def _leg_received(self, fact: LegReceived) -> None:
        call = None if fact.call_id is None else self._calls.get((fact.connection, fact.call_id))
        parent = None if call is None else trace.set_span_in_context(call.span)
        links: list[Link] = []
        if fact.trace:  # the server's leg span sent its context: that is the parent
            remote = extract(dict(fact.trace))
            if trace.get_current_span(remote).get_span_context().is_valid:
                if call is not None:
                    links.append(Link(call.span.get_span_context(), {"mrtr.link": "call"}))
                parent = remote
        attributes: dict[str, Any] = {
            "mcp.method.name": fact.method,
            "jsonrpc.request.id": str(fact.request_id),
            ROUND: fact.round,
            "mrtr.legacy": True,
            **_session(fact.protocol_version, fact.session_id),
            **({} if call is None else call.shared),
        }
        span = self._tracer.start_span(
            fact.method, parent, SpanKind.SERVER, attributes, links, self._ns(fact.at)
        )
        self._served[fact.connection, fact.request_id] = _Open(
            span, fact.at, {"mcp.method.name": fact.method}, "", fact.round, fact.call_id
        )

    def _leg_replied(self, fact: LegReplied) -> None:
        open_ = self._served.pop((fact.connection, fact.request_id), None)
        if open_ is not None:
            self._end_served(open_, fact.outcome, fact.at)

    def _end_served(self, open_: _Open, outcome: str, at: float) -> None:
        span = open_.span
        span.set_attribute("mrtr.outcome", outcome)
        if outcome == "error":
            _error(span, "error", None)
        span.end(self._ns(at))

    def _call_finished(self, fact: CallFinished) -> None:
        key = (fact.connection, fact.call_id)
        if self._served:  # its server requests were dropped with it
            for served, open_ in list(self._served.items()):
                if served[0] == fact.connection and open_.request == fact.call_id:
                    del self._served[served]
                    self._end_served(open_, "withdrawn", fact.at)
        call = self._calls.pop(key, None)
        sent = self._sent.pop(key, 0)
        wait = self._waits.pop(key, None)
        if wait is not None:
            wait.end(self._ns(fact.at))
        if call is None:
            return
        span = call.span
        span.set_attribute(ROUND, sent)
        span.set_attribute("mrtr.outcome", fact.outcome)
        if fact.outcome != "CallCompleted":
            span.set_status(Status(StatusCode.ERROR, fact.outcome))
            if fact.error_code is not None:
                span.set_attribute("error.type", str(fact.error_code))
        self._call_rounds.record(sent, _metric_attributes(call.attributes))
        span.end(self._ns(fact.at))


_HANDLERS: dict[type[Fact], Callable[[OtelObserver, Any], None]] = {
    RequestStarted: OtelObserver._request_started,
    RequestAnswered: OtelObserver._request_answered,
    ErrorSent: OtelObserver._error_sent,
    RequestAbandoned: OtelObserver._request_abandoned,
    LegSent: OtelObserver._leg_sent,
    LegAnswered: OtelObserver._leg_ended,
    LegTimedOut: OtelObserver._leg_ended,
    TaskStatusChanged: OtelObserver._task_status_changed,
    RequestRefused: OtelObserver._request_refused,
    SessionStarted: OtelObserver._session_started,
    SessionEnded: OtelObserver._session_ended,
    CallStarted: OtelObserver._call_started,
    CallRoundSent: OtelObserver._call_round_sent,
    CallRoundAnswered: OtelObserver._call_round_answered,
    CallRoundUnsent: OtelObserver._call_round_unsent,
    CallFinished: OtelObserver._call_finished,
    LegReceived: OtelObserver._leg_received,
    LegReplied: OtelObserver._leg_replied,
}


def _context(span: trace.Span) -> dict[str, str]:
    """The W3C headers (``traceparent``, ...) that carry ``span``'s context."""
    headers: dict[str, str] = {}
    inject(headers, trace.set_span_in_context(span))
    return headers
