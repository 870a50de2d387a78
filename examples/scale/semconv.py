"""The OpenTelemetry semantic conventions for MCP spans, as a table, and a check against it.

Written from the conventions' MCP page (``docs/gen-ai/mcp.md`` of
``open-telemetry/semantic-conventions-genai``, status Development): the attributes each span
kind must, must under a condition, and should carry. :func:`violations` holds one span to the
table; ``tests/test_otel.py`` holds every span its tests produce to it, and
``examples/scale/trace.py`` every span of its processes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["CONDITIONAL", "RECOMMENDED", "REQUIRED", "WIRE", "span_view", "violations"]

#: Required on every MCP span, client and server.
REQUIRED = ("mcp.method.name",)
#: Conditionally required: the attribute and when it applies.
CONDITIONAL: Mapping[str, str] = {
    "error.type": "if and only if the operation failed (then the span status is ERROR)",
    "gen_ai.tool.name": "tools/call",
    "gen_ai.prompt.name": "prompts/get",
    "mcp.resource.uri": "resources/read (and subscribe, unsubscribe)",
    "jsonrpc.request.id": "a request (a message with an id)",
    "rpc.response.status_code": "the response carries a JSON-RPC error code",
}
#: Recommended, per span kind (``network.protocol.*`` when applicable: HTTP; the peer's
#: address when the transport knows it). docs/observability.md lists the same attributes
#: (a test holds the page to these tables).
RECOMMENDED: Mapping[str, tuple[str, ...]] = {
    "SERVER": (
        "gen_ai.operation.name",
        "mcp.protocol.version",
        "mcp.session.id",
        "network.transport",
        "network.protocol.name",
        "network.protocol.version",
        "client.address",
        "client.port",
    ),
    "CLIENT": (
        "gen_ai.operation.name",
        "mcp.protocol.version",
        "mcp.session.id",
        "network.transport",
        "network.protocol.name",
        "network.protocol.version",
        "server.address",
        "server.port",
    ),
}
#: The recommended wire attributes held to when the spans come from a real transport.
WIRE: Mapping[str, tuple[str, ...]] = {
    "SERVER": (
        "network.transport",
        "network.protocol.name",
        "network.protocol.version",
        "client.address",
    ),
    "CLIENT": ("network.transport", "network.protocol.name", "server.address", "server.port"),
}
_TARGETS = {
    "tools/call": "gen_ai.tool.name",
    "prompts/get": "gen_ai.prompt.name",
    "resources/read": "mcp.resource.uri",
}


def span_view(span: Any) -> tuple[str, str, str, Mapping[str, Any]]:
    """``(name, kind, status, attributes)`` of an SDK span or of its JSON form."""
    if isinstance(span, Mapping):
        kind = str(span.get("kind", "")).removeprefix("SpanKind.")
        status = str(span.get("status", {}).get("status_code", "UNSET"))
        return str(span.get("name")), kind, status, span.get("attributes") or {}
    return span.name, span.kind.name, span.status.status_code.name, span.attributes or {}


def violations(span: Any, *, wire: bool = False) -> list[str]:
    """What ``span`` (client or server kind) lacks or gets wrong against the table; empty
    when it conforms. ``wire``: also hold it to :data:`WIRE` (spans from a real transport).
    Spans of other kinds (our own INTERNAL ones) are not MCP spans: nothing to check."""
    name, kind, status, attributes = span_view(span)
    if kind not in RECOMMENDED:
        return []
    out: list[str] = []

    def claim(ok: bool, what: str) -> None:
        if not ok:
            out.append(f"{kind} span {name!r}: {what}")

    method = attributes.get("mcp.method.name")
    claim(type(method) is str, "mcp.method.name is required")
    failed = "error.type" in attributes
    claim(failed == (status == "ERROR"), "error.type is set if and only if the status is ERROR")
    target_key = _TARGETS.get(method) if type(method) is str else None
    target = attributes.get(target_key) if target_key is not None else None
    if target_key is not None and not failed:
        claim(target is not None, f"{target_key} is required on {method}")
    expected = f"{method} {target}" if target is not None and method != "resources/read" else method
    claim(name == expected, f"the span name is {expected!r}")
    claim(
        (attributes.get("gen_ai.operation.name") == "execute_tool") == (method == "tools/call")
        and attributes.get("gen_ai.operation.name") in (None, "execute_tool"),
        "gen_ai.operation.name is execute_tool on tools/call only",
    )
    error_type = attributes.get("error.type")
    code = attributes.get("rpc.response.status_code")
    http_status = attributes.get("http.response.status_code")
    if code is None and http_status is not None:  # refused at the HTTP edge, no JSON-RPC
        claim(error_type == str(http_status), "an HTTP refusal's error.type is its status")
    elif isinstance(error_type, str) and error_type.lstrip("-").isdigit():
        claim(code == error_type, "rpc.response.status_code is the JSON-RPC error code")
    else:
        claim(code is None, "rpc.response.status_code only with a JSON-RPC error code")
    if method != "_OTHER":  # a refused message that could not be read has no id, no version
        claim("jsonrpc.request.id" in attributes, "jsonrpc.request.id is required on a request")
        claim("mcp.protocol.version" in attributes, "mcp.protocol.version is recommended")
    for side in ("server", "client"):
        claim(
            f"{side}.port" not in attributes or f"{side}.address" in attributes,
            f"{side}.port only with {side}.address",
        )
    if wire:
        # A server's own request to the client (a legacy shim leg) dials no server address;
        # a client serving its server's request names the server it dialled, not a client,
        # and knows no HTTP version (it learns that from answers, after its spans started).
        leg = kind == "CLIENT" and "mrtr.leg.key" in attributes
        served = kind == "SERVER" and "server.address" in attributes
        for key in WIRE[kind]:
            skip = leg and key.startswith("server.")
            skip |= served and key in ("client.address", "network.protocol.version")
            if not skip:
                claim(key in attributes, f"{key} is recommended")
    return out
