"""What the spans and measurements carry: the attribute names and the builders of each group
(target, session, wire), the span name, the failure marking, and the open-span record."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.trace import Span, Status, StatusCode

from mrtr_sansio.observe import Transport
from mrtr_sansio.tasks import TASK

#: The round of a request (1 first) or the rounds a call took.
ROUND = "mrtr.round"
#: The id every round of one call shares (the first round's span id, sealed onward).
FLOW_ID = "mrtr.flow.id"
#: The keys of the ``inputRequests`` an ``input_required`` result asked for.
INPUT_KEYS = "mrtr.input_request.keys"
#: The task a span is about (``tasks/*`` requests, a task's status changes).
TASK_ID = "mrtr.task.id"
#: ``mcp.method.name`` of a refused message whose method could not be read (the
#: conventions' fallback value for what an instrumentation cannot name).
UNKNOWN_METHOD = "_OTHER"
#: The wire statuses a task ends in (the task table's terminal states).
TERMINAL = frozenset(status.value for status in TASK.terminal)
NAMED = ("tools/call", "prompts/get")  # the methods whose target goes into the span name

#: What measurements carry: the conventions' low-cardinality attributes (no ids, no URIs).
METRIC_KEYS = (
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


class OpenSpan:
    """A span the observer opened and still owes an end, with what its end needs."""

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


def span_name(method: str, target: str | None) -> str:
    """The conventions' span name: ``{method} {target}`` for the named methods."""
    return f"{method} {target}" if target is not None and method in NAMED else method


def target_attributes(method: str, target: str | None) -> dict[str, Any]:
    """The conventions' attributes naming what ``method`` acts on."""
    if target is None:
        return {}
    if method == "tools/call":
        return {"gen_ai.tool.name": target, "gen_ai.operation.name": "execute_tool"}
    if method == "prompts/get":
        return {"gen_ai.prompt.name": target}
    if method == "resources/read":
        return {"mcp.resource.uri": target}
    return {}


def metric_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The low-cardinality attributes measurements carry (no ids, no URIs)."""
    return {k: attributes[k] for k in METRIC_KEYS if k in attributes}


def wire_attributes(transport: Transport | None, client: bool) -> dict[str, Any]:
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


def session_attributes(version: str | None, session_id: str | None) -> dict[str, Any]:
    """The protocol version and session id, those that are known."""
    out: dict[str, Any] = {}
    if version is not None:
        out["mcp.protocol.version"] = version
    if session_id is not None:
        out["mcp.session.id"] = session_id
    return out


def mark_error(span: Span, error_type: str, message: str | None, code: int | None = None) -> None:
    """Mark ``span`` failed as the conventions say: ``error.type``, the JSON-RPC code as
    ``rpc.response.status_code`` when there is one, an ERROR status with its message."""
    span.set_attribute("error.type", error_type)
    if code is not None:
        span.set_attribute("rpc.response.status_code", str(code))
    span.set_status(Status(StatusCode.ERROR, message))
