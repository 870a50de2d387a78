"""The server's spans: one per request (per round on the modern wire) linked round to round,
a SERVER span for each refusal, a CLIENT child per legacy shim leg; and what the server seals
or sends onward (:meth:`ServerTrace.carry`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer

from mrtr_sansio._errors import ErrorCode
from mrtr_sansio._mcp.methods import TASK_REQUESTS
from mrtr_sansio._mcp.mrtr_fields import INPUT_REQUIRED
from mrtr_sansio.observe import (
    ErrorSent,
    LegAnswered,
    LegSent,
    LegTimedOut,
    RequestAbandoned,
    RequestAnswered,
    RequestRefused,
    RequestStarted,
)
from mrtr_sansio.otel._attributes import (
    FLOW_ID,
    INPUT_KEYS,
    ROUND,
    TASK_ID,
    UNKNOWN_METHOD,
    OpenSpan,
    mark_error,
    metric_attributes,
    session_attributes,
    span_name,
    target_attributes,
    wire_attributes,
)
from mrtr_sansio.otel._metrics import Instruments
from mrtr_sansio.otel._propagation import headers_of, span_context_of, under, valid_parent


class ServerTrace:
    """The server's open request and leg spans, keyed by (connection, id)."""

    def __init__(
        self, tracer: Tracer, instruments: Instruments, ns: Callable[[float], int | None]
    ) -> None:
        self._tracer = tracer
        self._m = instruments
        self._ns = ns
        self._requests: dict[tuple[int, Any], OpenSpan] = {}
        self._legs: dict[tuple[int, int], OpenSpan] = {}

    def request_span(self, connection: int, request_id: Any) -> Span | None:
        """The open span of a request, or None when the observer holds none."""
        open_ = self._requests.get((connection, request_id))
        return None if open_ is None else open_.span

    def carry(self, connection: int, request_id: Any) -> Mapping[str, str] | None:
        """The flow id and this round's span context, to seal into the state (None when the
        request is not one this part holds)."""
        open_ = self._requests.get((connection, request_id))
        if open_ is None:
            return None
        out = {"flow": open_.flow, **headers_of(open_.span)}
        out.pop("baggage", None)  # the client sends its own each round
        return out

    def leg_context(self, connection: int, leg_id: int) -> Mapping[str, str] | None:
        """A shim leg span's context, for the leg's ``_meta``."""
        leg = self._legs.get((connection, leg_id))
        return None if leg is None else headers_of(leg.span)

    def request_started(self, fact: RequestStarted) -> None:
        parent = valid_parent(fact.trace)
        links: list[Link] = []
        carried = fact.carried or {}
        task = fact.method in TASK_REQUESTS
        previous = span_context_of(carried)
        if previous.is_valid:
            # a round links to the round before it; a tasks/* request to the task's creation
            links.append(Link(previous, {"mrtr.link": "task" if task else "previous_round"}))
            if parent is None:
                parent = under(trace.NonRecordingSpan(previous))
        shared = {
            **session_attributes(fact.protocol_version, fact.session_id),
            **wire_attributes(fact.transport, client=False),
        }
        attributes: dict[str, Any] = {
            "mcp.method.name": fact.method,
            "jsonrpc.request.id": str(fact.request_id),
            **target_attributes(fact.method, fact.target),
            **shared,
        }
        if task and fact.target is not None:
            attributes[TASK_ID] = fact.target
        if fact.round is not None:
            attributes[ROUND] = fact.round
        if fact.legacy:
            attributes["mrtr.legacy"] = True
        span = self._tracer.start_span(
            span_name(fact.method, fact.target),
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
        metric = metric_attributes(attributes)
        self._requests[fact.connection, fact.request_id] = OpenSpan(
            span, fact.at, metric, flow, fact.round, None, shared
        )

    def request_answered(self, fact: RequestAnswered) -> None:
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
            mark_error(span, "tool_error", None)
            attributes = {**attributes, "error.type": "tool_error"}
        if fact.result_type == INPUT_REQUIRED:
            self._m.input_required.add(1, open_.attributes)
        elif open_.round is not None:
            self._m.flow_rounds.record(open_.round, open_.attributes)
        self._m.server_duration.record(fact.at - open_.started, attributes)
        span.end(self._ns(fact.at))

    def error_sent(self, fact: ErrorSent) -> None:
        open_ = self._requests.pop((fact.connection, fact.request_id), None)
        if fact.code == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY:
            self._m.refusals.add(1, {} if open_ is None else open_.attributes)
        if open_ is None:
            return
        code = str(fact.code)
        mark_error(open_.span, code, fact.message, fact.code)
        self._m.server_duration.record(
            fact.at - open_.started,
            {**open_.attributes, "error.type": code, "rpc.response.status_code": code},
        )
        open_.span.end(self._ns(fact.at))

    def request_refused(self, fact: RequestRefused) -> None:
        """A refused request: a SERVER span that starts and ends at the refusal."""
        method = fact.method if fact.method is not None else UNKNOWN_METHOD
        # the JSON-RPC code when one was sent, else the HTTP status of an edge refusal
        error_type = str(fact.code if fact.code is not None else fact.http_status)
        failure: dict[str, Any] = {"error.type": error_type}
        if fact.code is not None:
            failure["rpc.response.status_code"] = error_type
        attributes: dict[str, Any] = {
            "mcp.method.name": method,
            **target_attributes(method, fact.target),
            **session_attributes(fact.protocol_version, fact.session_id),
            **wire_attributes(fact.transport, client=False),
            **failure,
        }
        if fact.http_status is not None:
            attributes["http.response.status_code"] = fact.http_status
        if fact.request_id is not None:
            attributes["jsonrpc.request.id"] = str(fact.request_id)
        if method in TASK_REQUESTS and fact.target is not None:
            attributes[TASK_ID] = fact.target
        if fact.legacy:
            attributes["mrtr.legacy"] = True
        at = self._ns(fact.at)
        span = self._tracer.start_span(
            span_name(method, fact.target),
            valid_parent(fact.trace),
            SpanKind.SERVER,
            attributes,
            start_time=at,
        )
        span.set_status(Status(StatusCode.ERROR, fact.message))
        metric = {**metric_attributes(attributes), **failure}
        if fact.code == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY:
            self._m.refusals.add(1, metric_attributes(attributes))
        self._m.server_duration.record(0.0, metric)
        span.end(at)

    def request_abandoned(self, fact: RequestAbandoned) -> None:
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

    def leg_sent(self, fact: LegSent) -> None:
        request = self._requests.get((fact.connection, fact.request_id))
        parent = None if request is None else under(request.span)
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
        self._legs[fact.connection, fact.leg_id] = OpenSpan(
            span, fact.at, attributes, "", fact.round, fact.request_id
        )

    def leg_ended(self, fact: LegAnswered | LegTimedOut) -> None:
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
        self._m.legs.add(1, attributes)
        self._m.leg_duration.record(fact.at - open_.started, attributes)
        open_.span.end(self._ns(fact.at))
