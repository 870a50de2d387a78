"""``x-mcp-header`` annotations and the ``Mcp-Param-*`` header checks (SEP-2243)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import mrtr_sansio as m
from helpers import (
    client,
    drain,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "priority": {"type": "integer", "x-mcp-header": "Priority"},
        "verbose": {"type": ["boolean", "null"], "x-mcp-header": "Verbose"},
        "target": {
            "type": "object",
            "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}},
        },
        "query": {"type": "string", "default": {"x-mcp-header": "not an annotation: data"}},
    },
}
ENVELOPE = {m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28", m.protocol.CLIENT_CAPABILITIES: {}}


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


# --- annotations ------------------------------------------------------------------------------


def test_annotations_are_found_with_their_paths() -> None:
    assert m.http.mirrored_params(SCHEMA) == {
        "Region": ("region",),
        "Priority": ("priority",),
        "Verbose": ("verbose",),
        "Zone": ("target", "zone"),
    }
    assert m.http.mirrored_params({"type": "object"}) == {}


def test_param_headers_for_keeps_annotated_tools_only() -> None:
    tools: list[dict[str, Any]] = [
        {"name": "q", "inputSchema": SCHEMA},
        {"name": "plain", "inputSchema": {"type": "object"}},
        {"name": "bare"},
    ]
    assert m.http.param_headers_for(tools) == {"q": m.http.mirrored_params(SCHEMA)}


def prop(**schema: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"p": schema}}


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "object", "x-mcp-header": "Root"}, "only properties reachable"),
        (
            prop(type="array", items={"type": "string", "x-mcp-header": "A"}),
            "only properties reachable",
        ),
        ({"anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}, "reachable"),
        ({"$defs": {"d": {"type": "string", "x-mcp-header": "D"}}}, "reachable"),
        (prop(type="number", **{"x-mcp-header": "N"}), "only string, integer or boolean"),
        (prop(type="object", **{"x-mcp-header": "O"}), "only string, integer or boolean"),
        (prop(type="null", **{"x-mcp-header": "N"}), "only string, integer or boolean"),
        (prop(type=[{"x": 1}], **{"x-mcp-header": "N"}), "only string, integer or boolean"),
        (prop(**{"x-mcp-header": "Untyped"}), "only string, integer or boolean"),
        (prop(type="string", **{"x-mcp-header": ""}), "not an HTTP token"),
        (prop(type="string", **{"x-mcp-header": "Bad Name"}), "not an HTTP token"),
        (prop(type="string", **{"x-mcp-header": "A\r\nB"}), "not an HTTP token"),
        (prop(type="string", **{"x-mcp-header": 7}), "not an HTTP token"),
        (
            {
                "type": "object",
                "properties": {
                    "a": {"type": "string", "x-mcp-header": "Same"},
                    "b": {"type": "string", "x-mcp-header": "SAME"},
                },
            },
            "used twice",
        ),
    ],
)
def test_invalid_annotations_are_refused(schema: dict[str, Any], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        m.http.mirrored_params(schema)


# --- checks -----------------------------------------------------------------------------------


def exchange(
    arguments: Any, params: dict[str, str], name: str = "q", method: str = "tools/call"
) -> dict[str, Any]:
    """One modern request (a tools/call unless told) with these Mcp-Param headers; the error
    sent, or an empty dict when the request reached the handler."""
    config = m.ServerConfig(param_headers={"q": m.http.mirrored_params(SCHEMA)})
    conn = m.ServerConnection(config)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": method,
        "params": {"name": name, "arguments": arguments, "_meta": ENVELOPE},
    }
    facts = m.http.HttpRequestFacts("2026-07-28", method, name, params)
    conn.receive_message(body, http=facts)
    events = conn.events()
    out = drain(conn, m.Era.MODERN)
    if out:
        (item,) = out
        assert isinstance(item, m.events.OutgoingError)
        assert item.http_status == 400
        return dict(item.message["error"])
    (event,) = events
    assert isinstance(event, m.RequestReceived)
    return {}


@pytest.mark.parametrize(
    ("arguments", "headers"),
    [
        ({"region": "us-west1"}, {"region": "us-west1"}),
        ({"region": "Hello, 世界"}, {"region": b64("Hello, 世界")}),
        ({"region": " padded "}, {"region": b64(" padded ")}),
        ({"region": "=?base64?literal?="}, {"region": b64("=?base64?literal?=")}),
        ({"region": "SGVsbG8="}, {"region": "SGVsbG8="}),  # no sentinel: a literal
        ({"region": "=?base64?SGVsbG8="}, {"region": "=?base64?SGVsbG8="}),  # no suffix
        ({"region": "a"}, {"region": "  a "}),  # surrounding whitespace is not part of it
        ({"priority": 42, "verbose": True}, {"priority": "42", "verbose": "true"}),
        ({"priority": -7, "verbose": False}, {"priority": "-7", "verbose": "false"}),
        ({"target": {"zone": "z1"}}, {"zone": "z1"}),
        ({"verbose": None, "target": "not an object"}, {}),  # null or unreachable: no header
        ({}, {"unrelated": "ignored"}),
        (None, {}),
    ],
)
def test_matching_headers_pass(arguments: Any, headers: dict[str, str]) -> None:
    assert exchange(arguments, headers) == {}


@pytest.mark.parametrize(
    ("arguments", "headers", "message"),
    [
        ({"region": "us"}, {}, "Missing required header Mcp-Param-Region"),
        ({"region": "us"}, {"region": "eu"}, "does not match body value at arguments.region"),
        ({"region": "Hello"}, {"region": "=?base64?SGVsbG8?="}, "malformed Base64"),
        ({"region": "Hello"}, {"region": "=?base64?SGVs!!!bG8=?="}, "malformed Base64"),
        ({"region": "é"}, {"region": "\xc3\xa9"}, "invalid characters"),
        ({"region": "a\nb"}, {"region": "a\nb"}, "invalid characters"),
        ({"verbose": None}, {"verbose": "false"}, "no value in the body"),
        ({}, {"zone": "z1"}, "no value in the body"),
        ({"priority": 1.5}, {"priority": "1.5"}, "does not match"),
        ({"priority": True}, {"priority": "1"}, "does not match"),
        ({"target": {"zone": "z1"}}, {"zone": "z2"}, "arguments.target.zone"),
    ],
)
def test_disagreeing_headers_are_32020(
    arguments: Any, headers: dict[str, str], message: str
) -> None:
    error = exchange(arguments, headers)
    assert error["code"] == m.ErrorCode.HEADER_MISMATCH
    assert message in error["message"]


def test_only_configured_tools_are_checked() -> None:
    assert exchange({"region": "us"}, {}, name="other") == {}


@pytest.mark.parametrize("method", ["tools/call", "prompts/get"])
def test_param_headers_belong_to_tools_call_alone_on_both_sides(method: str) -> None:
    # A prompt that shares a mirrored tool's name: neither side mirrors or checks its
    # arguments; on tools/call both do (the client sends the header the server requires).
    arguments = {"region": "us"}
    conn = client()
    conn.call(method, {"name": "q", "arguments": arguments})
    (item,) = conn.outgoing()
    headers = conn.http_headers(item, {"q": m.http.mirrored_params(SCHEMA)})
    sent = {k[10:].lower(): v for k, v in headers.items() if k.startswith("Mcp-Param-")}
    if method == "tools/call":
        assert sent == {"region": "us"}
        assert exchange(arguments, {}, method=method)["code"] == m.ErrorCode.HEADER_MISMATCH
    else:
        assert sent == {}
        assert exchange(arguments, {}, method=method) == {}
    assert exchange(arguments, sent, method=method) == {}


def test_header_names_are_case_insensitive() -> None:
    facts = m.http.HttpRequestFacts.from_headers({"mcp-param-region": "us", "mcp-method": "x"})
    assert facts.params == {"region": "us"}
    assert facts.method == "x"


def test_legacy_requests_are_not_checked() -> None:
    config = m.ServerConfig(param_headers={"q": m.http.mirrored_params(SCHEMA)})
    conn = m.ServerConnection(config)
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
    }
    conn.receive_message(init)
    drain(conn, m.Era.LEGACY)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "q", "arguments": {"region": "us"}},
    }
    conn.receive_message(body, http=m.http.HttpRequestFacts("2025-11-25"))
    assert any(isinstance(e, m.RequestReceived) for e in conn.events())
    assert drain(conn, m.Era.LEGACY) == []


@given(st.text(max_size=40))
def test_what_a_client_encodes_the_server_accepts(value: str) -> None:
    # encode_header_value is the client's rule; HTTP parsers strip surrounding whitespace.
    header = m.http.encode_header_value(value)
    assert exchange({"region": value}, {"region": header.strip()}) == {}
