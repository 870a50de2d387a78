"""The client's spans: one per call, a CLIENT child per request sent, an ``input`` span for
the time the application took to answer, and on the legacy wire a SERVER span per server
request the client answers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer

from mrtr_sansio.observe import (
    CallFinished,
    CallRoundAnswered,
    CallRoundSent,
    CallRoundUnsent,
    CallStarted,
    LegReceived,
    LegReplied,
)
from mrtr_sansio.otel._attributes import (
    INPUT_KEYS,
    ROUND,
    OpenSpan,
    mark_error,
    metric_attributes,
    session_attributes,
    span_name,
    target_attributes,
    wire_attributes,
)
from mrtr_sansio.otel._metrics import Instruments
from mrtr_sansio.otel._propagation import headers_of, under, valid_parent


class ClientTrace:
    """The client's open call, request, wait and answered-request spans."""

    def __init__(
        self, tracer: Tracer, instruments: Instruments, ns: Callable[[float], int | None]
    ) -> None:
        self._tracer = tracer
        self._m = instruments
        self._ns = ns
        self._calls: dict[tuple[int, int], OpenSpan] = {}
        self._rounds: dict[tuple[int, Any], OpenSpan] = {}
        self._waits: dict[tuple[int, int], Span] = {}
        self._sent: dict[tuple[int, int], int] = {}
        self._served: dict[tuple[int, Any], OpenSpan] = {}  # legacy: server requests answered

    def carry(self, connection: int, request_id: Any) -> Mapping[str, str] | None:
        """The request span's trace context for the request's ``_meta``."""
        round_ = self._rounds.get((connection, request_id))
        return None if round_ is None else headers_of(round_.span)

    def call_started(self, fact: CallStarted) -> None:
        target = target_attributes(fact.method, fact.target)
        wire = wire_attributes(fact.transport, client=True)
        attributes: dict[str, Any] = {
            "mcp.method.name": fact.method,
            "mrtr.call.id": fact.call_id,
            **target,
        }
        span = self._tracer.start_span(
            span_name(fact.method, fact.target),
            None,
            SpanKind.INTERNAL,
            attributes,
            start_time=self._ns(fact.at),
        )
        # the target attributes go on the call's own requests; the wire on every request
        self._calls[fact.connection, fact.call_id] = OpenSpan(
            span,
            fact.at,
            {"mcp.method.name": fact.method, **target},
            span_name(fact.method, fact.target),
            shared=wire,
        )
        self._sent[fact.connection, fact.call_id] = 0

    def call_round_sent(self, fact: CallRoundSent) -> None:
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
            **session_attributes(fact.protocol_version, fact.session_id),
            **call.shared,
        }
        span = self._tracer.start_span(
            call.flow if own else fact.method,
            under(call.span),
            SpanKind.CLIENT,
            attributes,
            start_time=self._ns(fact.at),
        )
        self._rounds[fact.connection, fact.request_id] = OpenSpan(
            span, fact.at, metric_attributes(attributes), ""
        )

    def call_round_answered(self, fact: CallRoundAnswered) -> None:
        open_ = self._rounds.pop((fact.connection, fact.request_id), None)
        if open_ is None:
            return
        span = open_.span
        span.set_attribute("mrtr.result_type", fact.result_type)
        attributes = open_.attributes
        if fact.result_type == "error":
            code = str(fact.error_code) if fact.error_code is not None else "_OTHER"
            mark_error(span, code, fact.error_message, fact.error_code)
            attributes = {**attributes, "error.type": code}
            if fact.error_code is not None:
                attributes["rpc.response.status_code"] = code
        elif fact.is_error:
            mark_error(span, "tool_error", None)
            attributes = {**attributes, "error.type": "tool_error"}
        if fact.input_keys:
            span.set_attribute(INPUT_KEYS, list(fact.input_keys))
        self._m.client_duration.record(fact.at - open_.started, attributes)
        span.end(self._ns(fact.at))
        call = self._calls.get((fact.connection, fact.call_id))
        if fact.input_keys and call is not None:
            self._waits[fact.connection, fact.call_id] = self._tracer.start_span(
                "input " + ", ".join(fact.input_keys),
                under(call.span),
                SpanKind.INTERNAL,
                {INPUT_KEYS: list(fact.input_keys)},
                start_time=self._ns(fact.at),
            )

    def call_round_unsent(self, fact: CallRoundUnsent) -> None:
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

    def leg_received(self, fact: LegReceived) -> None:
        call = None if fact.call_id is None else self._calls.get((fact.connection, fact.call_id))
        parent = None if call is None else under(call.span)
        links: list[Link] = []
        remote = valid_parent(fact.trace)
        if remote is not None:  # the server's leg span sent its context: that is the parent
            if call is not None:
                links.append(Link(call.span.get_span_context(), {"mrtr.link": "call"}))
            parent = remote
        attributes: dict[str, Any] = {
            "mcp.method.name": fact.method,
            "jsonrpc.request.id": str(fact.request_id),
            ROUND: fact.round,
            "mrtr.legacy": True,
            **session_attributes(fact.protocol_version, fact.session_id),
            **({} if call is None else call.shared),
        }
        span = self._tracer.start_span(
            fact.method, parent, SpanKind.SERVER, attributes, links, self._ns(fact.at)
        )
        self._served[fact.connection, fact.request_id] = OpenSpan(
            span, fact.at, {"mcp.method.name": fact.method}, "", fact.round, fact.call_id
        )

    def leg_replied(self, fact: LegReplied) -> None:
        open_ = self._served.pop((fact.connection, fact.request_id), None)
        if open_ is not None:
            self._end_served(open_, fact.outcome, fact.at)

    def _end_served(self, open_: OpenSpan, outcome: str, at: float) -> None:
        span = open_.span
        span.set_attribute("mrtr.outcome", outcome)
        if outcome == "error":
            mark_error(span, "error", None)
        span.end(self._ns(at))

    def call_finished(self, fact: CallFinished) -> None:
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
        self._m.call_rounds.record(sent, metric_attributes(call.attributes))
        span.end(self._ns(fact.at))
