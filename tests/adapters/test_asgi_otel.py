"""The ASGI adapter's spans: every refusal at the HTTP edge is a server span with its error,
and every server span names the peer (``client.address``/``client.port``).

Requests go straight to the app (one ASGI call each), with the raw header lists a test needs
(a repeated header, both framings); the spans are the SDK's, held to the conventions' table.
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from scale.semconv import violations

import helpers
import mrtr_sansio as m
from mrtr_sansio.adapters import RequestContext
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.otel import OtelObserver

pytestmark = pytest.mark.anyio

PEER = ("203.0.113.7", 51234)
ENVELOPE = {m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28", m.protocol.CLIENT_CAPABILITIES: {}}
GOOD = [
    (b"host", b"localhost:8000"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
]
MODERN = [
    (b"mcp-protocol-version", b"2026-07-28"),
    (b"mcp-method", b"tools/call"),
    (b"mcp-name", b"hello"),
]


async def handle(request: m.RequestReceived, ctx: RequestContext) -> Any:
    return {"content": [{"type": "text", "text": "hi"}]}


class Traced:
    """An app with an observer whose spans and measurements the test reads."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        observer = OtelObserver(provider, MeterProvider(metric_readers=[self.reader]))
        config = m.ServerConfig(
            server_info={"name": "t", "version": "1"},
            limits=m.Limits(max_message_bytes=1024),
            observer=observer,
        )
        self.app = McpHttpApp(handle, config)

    async def post(
        self,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        peer: Any = PEER,
        method: str = "POST",
    ) -> tuple[int, bytes]:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": "/mcp",
            "raw_path": b"/mcp",
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": peer,
            "server": ("127.0.0.1", 8000),
        }
        sent: list[MutableMapping[str, Any]] = []
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if delivered:
                return {"type": "http.disconnect"}
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(message)

        await self.app(scope, receive, send)
        status = next(msg["status"] for msg in sent if msg["type"] == "http.response.start")
        return status, b"".join(msg.get("body", b"") for msg in sent[1:])

    def server_durations(self) -> list[Any]:
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == "mcp.server.operation.duration"
            for point in metric.data.data_points
        ]


CALL = json.dumps(helpers.call(1, "hello", {}, envelope=ENVELOPE)).encode()
LEGACY_LIST = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}).encode()

#: (case, headers, body, HTTP status, error.type, rpc.response.status_code, method)
REFUSALS = [
    ("too large", [*GOOD, *MODERN], b"x" * 2048, 413, "413", None, "_OTHER"),
    (
        "not json",
        [GOOD[0], (b"content-type", b"text/plain"), *MODERN],
        CALL,
        415,
        "415",
        None,
        "_OTHER",
    ),
    (
        "not acceptable",
        [*GOOD[:2], (b"accept", b"text/html"), *MODERN],
        CALL,
        406,
        "406",
        None,
        "_OTHER",
    ),
    (
        "bad origin",
        [*GOOD, (b"origin", b"http://evil.example"), *MODERN],
        CALL,
        403,
        "403",
        None,
        "_OTHER",
    ),
    (
        "bad host",
        [(b"host", b"evil.example"), *GOOD[1:], *MODERN],
        CALL,
        421,
        "421",
        None,
        "_OTHER",
    ),
    (
        "repeated header",
        [*GOOD, (b"content-type", b"application/json"), *MODERN],
        CALL,
        400,
        "400",
        None,
        "_OTHER",
    ),
    (
        "two framings",
        [*GOOD, (b"content-length", b"10"), (b"transfer-encoding", b"chunked"), *MODERN],
        CALL,
        400,
        "400",
        None,
        "_OTHER",
    ),
    (
        "unknown session",
        [*GOOD, (b"mcp-session-id", b"nope"), (b"mcp-protocol-version", b"2025-11-25")],
        LEGACY_LIST,
        404,
        "-32600",
        "-32600",
        "tools/list",
    ),
    (
        "header mismatch",
        [*GOOD, (b"mcp-protocol-version", b"2026-07-28"), (b"mcp-method", b"tools/list")],
        CALL,
        400,
        "-32020",
        "-32020",
        "tools/call",
    ),
]


@pytest.mark.parametrize(
    ("headers", "body", "status", "error_type", "code", "method"),
    [pytest.param(*case[1:], id=case[0]) for case in REFUSALS],
)
async def test_every_http_refusal_is_a_server_span_with_its_error(
    headers: list[tuple[bytes, bytes]],
    body: bytes,
    status: int,
    error_type: str,
    code: str | None,
    method: str,
) -> None:
    traced = Traced()
    answered, _ = await traced.post(headers, body)
    assert answered == status
    (span,) = traced.exporter.get_finished_spans()
    attributes = span.attributes or {}
    assert span.kind is SpanKind.SERVER
    assert span.status.status_code is StatusCode.ERROR
    assert attributes["mcp.method.name"] == method
    assert attributes["error.type"] == error_type
    assert attributes.get("rpc.response.status_code") == code
    if code is None or status == 404:  # the HTTP status, where the edge answered it
        assert attributes["http.response.status_code"] == status
    assert (attributes["client.address"], attributes["client.port"]) == PEER
    assert attributes["network.transport"] == "tcp"
    assert violations(span, wire=True) == []
    (point,) = traced.server_durations()
    assert point.attributes["error.type"] == error_type
    assert "client.address" not in point.attributes  # measurements stay low-cardinality


async def test_an_answered_request_names_its_peer_when_the_server_gives_it() -> None:
    traced = Traced()
    assert (await traced.post([*GOOD, *MODERN], CALL))[0] == 200
    assert (await traced.post([*GOOD, *MODERN], CALL, peer=None))[0] == 200
    named, anonymous = traced.exporter.get_finished_spans()
    assert (named.attributes or {})["client.address"] == PEER[0]
    assert (named.attributes or {})["client.port"] == PEER[1]
    assert violations(named, wire=True) == []
    assert "client.address" not in (anonymous.attributes or {})
    assert "client.port" not in (anonymous.attributes or {})
    assert "http.response.status_code" not in (named.attributes or {})
    assert all("client.address" not in p.attributes for p in traced.server_durations())


async def test_the_conventions_check_finds_a_wrong_refusal_or_a_missing_peer() -> None:
    traced = Traced()
    await traced.post([*GOOD[:2], (b"accept", b"text/html"), *MODERN], CALL)
    await traced.post([*GOOD, *MODERN], CALL)
    refused, answered = (json.loads(s.to_json()) for s in traced.exporter.get_finished_spans())
    assert violations(refused, wire=True) == violations(answered, wire=True) == []
    refused["attributes"]["error.type"] = "-32600"
    del answered["attributes"]["client.address"]
    assert violations(refused) == [
        "SERVER span '_OTHER': an HTTP refusal's error.type is its status"
    ]
    assert violations(answered, wire=True) == [
        "SERVER span 'tools/call hello': client.port only with client.address",
        "SERVER span 'tools/call hello': client.address is recommended",
    ]


async def test_deleting_an_unknown_session_is_a_refusal_span() -> None:
    traced = Traced()
    headers = [GOOD[0], (b"mcp-session-id", b"nope"), (b"mcp-protocol-version", b"2025-11-25")]
    assert (await traced.post(headers, b"", method="DELETE"))[0] == 404
    (span,) = traced.exporter.get_finished_spans()
    attributes = span.attributes or {}
    assert attributes["mcp.method.name"] == "_OTHER"
    assert attributes["error.type"] == attributes["rpc.response.status_code"] == "-32600"
    assert attributes["http.response.status_code"] == 404
    assert attributes["mcp.protocol.version"] == "2025-11-25"
    assert violations(span, wire=True) == []
