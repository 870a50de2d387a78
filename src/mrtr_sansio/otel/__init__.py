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
    from opentelemetry import trace
except ImportError as exc:  # pragma: no cover - exercised by tests/test_packaging.py
    raise_missing_extra(exc, "mrtr_sansio.otel", "otel")

from mrtr_sansio import __version__
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
)
from mrtr_sansio.otel._attributes import FLOW_ID, INPUT_KEYS, ROUND, TASK_ID
from mrtr_sansio.otel._client import ClientTrace
from mrtr_sansio.otel._metrics import DURATION_BUCKETS, Instruments
from mrtr_sansio.otel._propagation import headers_of
from mrtr_sansio.otel._server import ServerTrace
from mrtr_sansio.otel._tasks import task_status_changed

__all__ = ["DURATION_BUCKETS", "FLOW_ID", "INPUT_KEYS", "ROUND", "TASK_ID", "OtelObserver"]


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
        self._to_epoch = to_epoch
        self._metrics = Instruments(meter_provider)
        self._server = ServerTrace(self._tracer, self._metrics, self._ns)
        self._client = ClientTrace(self._tracer, self._metrics, self._ns)
        server, client, metrics = self._server, self._client, self._metrics
        self._handlers: dict[type[Fact], Callable[[Any], None]] = {
            RequestStarted: server.request_started,
            RequestAnswered: server.request_answered,
            ErrorSent: server.error_sent,
            RequestAbandoned: server.request_abandoned,
            LegSent: server.leg_sent,
            LegAnswered: server.leg_ended,
            LegTimedOut: server.leg_ended,
            RequestRefused: server.request_refused,
            TaskStatusChanged: self._task_status_changed,
            SessionStarted: metrics.session_started,
            SessionEnded: metrics.session_ended,
            CallStarted: client.call_started,
            CallRoundSent: client.call_round_sent,
            CallRoundAnswered: client.call_round_answered,
            CallRoundUnsent: client.call_round_unsent,
            CallFinished: client.call_finished,
            LegReceived: client.leg_received,
            LegReplied: client.leg_replied,
        }

    # --- Observer ------------------------------------------------------------------------

    def observe(self, fact: Fact) -> None:
        """Turn ``fact`` into spans, span events and measurements."""
        handler = self._handlers.get(type(fact))
        if handler is not None:
            handler(fact)

    def carry(self, connection: int, request_id: Any) -> Mapping[str, str] | None:
        """Server: the flow id and this round's span context, to seal into the state; for a
        :class:`~mrtr_sansio.observe.LegKey`, the leg span's context for the leg's ``_meta``.
        Client: the request span's trace context for the request's ``_meta``."""
        if type(request_id) is LegKey:  # a shim leg: its span's context, for its _meta
            return self._server.leg_context(connection, request_id.leg_id)
        if type(request_id) is TaskKey:  # a new task: the creating request's span context
            creating = self._server.request_span(connection, request_id.request_id)
            return None if creating is None else headers_of(creating)
        carried = self._server.carry(connection, request_id)
        return carried if carried is not None else self._client.carry(connection, request_id)

    def _ns(self, at: float) -> int | None:
        return None if self._to_epoch is None else int(self._to_epoch(at) * 1e9)

    def _task_status_changed(self, fact: TaskStatusChanged) -> None:
        task_status_changed(fact, self._tracer, self._metrics, self._ns, self._server.request_span)
