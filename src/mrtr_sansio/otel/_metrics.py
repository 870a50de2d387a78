"""The measurements: every histogram and counter the observer records, and the session
durations (a session has no span, only its length)."""

from __future__ import annotations

from typing import Any

from opentelemetry import metrics

from mrtr_sansio import __version__
from mrtr_sansio.observe import SessionEnded, SessionStarted
from mrtr_sansio.otel._attributes import metric_attributes, wire_attributes

#: The bucket boundaries the conventions give every MCP duration histogram (seconds).
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)


class Instruments:
    """The observer's instruments, made once from one meter, and the open sessions."""

    def __init__(self, meter_provider: Any) -> None:
        meter = metrics.get_meter("mrtr_sansio", __version__, meter_provider)
        buckets = {"explicit_bucket_boundaries_advisory": DURATION_BUCKETS}
        self.server_duration = meter.create_histogram(
            "mcp.server.operation.duration", "s", "MCP request duration on the server", **buckets
        )
        self.client_duration = meter.create_histogram(
            "mcp.client.operation.duration", "s", "MCP request duration on the client", **buckets
        )
        self.session_duration = {
            role: meter.create_histogram(
                f"mcp.{role}.session.duration",
                "s",
                f"MCP session duration on the {role}",
                **buckets,
            )
            for role in ("server", "client")
        }
        self.call_rounds = meter.create_histogram(
            "mrtr.client.call.rounds", "{request}", "Requests one call took (its rounds)"
        )
        self.flow_rounds = meter.create_histogram(
            "mrtr.server.flow.rounds", "{round}", "The round that completed a flow"
        )
        self.input_required = meter.create_counter(
            "mrtr.server.input_required", "{result}", "input_required results sent"
        )
        self.refusals = meter.create_counter(
            "mrtr.server.missing_capability", "{error}", "-32021 refusals sent"
        )
        self.legs = meter.create_counter(
            "mrtr.server.shim.legs", "{request}", "Legacy shim legs by outcome"
        )
        self.leg_duration = meter.create_histogram(
            "mrtr.server.shim.leg.duration", "s", "Legacy shim legs: from sent to answered"
        )
        self.task_status = meter.create_counter(
            "mrtr.server.tasks", "{change}", "Task status changes, by the status entered"
        )
        self._sessions: dict[int, tuple[float, str, dict[str, Any]]] = {}

    def session_started(self, fact: SessionStarted) -> None:
        attributes = metric_attributes(
            {
                "mcp.protocol.version": fact.protocol_version,
                **wire_attributes(fact.transport, client=fact.role == "client"),
            }
        )
        self._sessions[fact.connection] = (fact.at, fact.role, attributes)

    def session_ended(self, fact: SessionEnded) -> None:
        started = self._sessions.pop(fact.connection, None)
        if started is None:
            return
        at, role, attributes = started
        if fact.error is not None:
            attributes = {**attributes, "error.type": fact.error}
        self.session_duration[role].record(fact.at - at, attributes)
