"""Streamable HTTP facts: mirror headers (-32020), the base64 header form, HTTP statuses."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import (
    CLIENT,
    call,
    drain,
    error,
    events,
    legacy_request,
    meta,
    only,
    request,
    sent,
)
from mrtr_sansio import (
    UNSEALED,
    Era,
    ErrorCode,
    InputRequiredResult,
    JsonRpcError,
    RequestReceived,
    ServerConfig,
    ServerConnection,
    elicit_url,
)
from mrtr_sansio.events import OutgoingError
from mrtr_sansio.http import HttpRequestFacts, decode_header_value
from mrtr_sansio.http._facts import is_field_value

V = "2026-07-28"


def facts(
    version: str | None = V, method: str | None = None, name: str | None = None
) -> HttpRequestFacts:
    return HttpRequestFacts(version, method, name)


# --- header values ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("get_weather", "get_weather"),
        ("file:///tmp/a b.txt", "file:///tmp/a b.txt"),
        ("", ""),
        ("café", "=?base64?Y2Fmw6k=?="),
        ("日本語", "=?base64?5pel5pys6Kqe?="),
        (" padded", "=?base64?IHBhZGRlZA==?="),
        ("tab\there", "=?base64?dGFiCWhlcmU=?="),
        ("line\nbreak", "=?base64?bGluZQpicmVhaw==?="),
        ("=?looks-encoded", "=?base64?PT9sb29rcy1lbmNvZGVk?="),
    ],
)
def test_encode_and_decode_header_values(value: str, encoded: str) -> None:
    from mrtr_sansio.http import encode_header_value

    assert encode_header_value(value) == encoded
    assert decode_header_value(encoded) == value


@pytest.mark.parametrize(
    "bad", ["=?base64?not base64!?=", "=?base64?Y2Fmw6k?=", "=?base64?//79?=", "=?base64?é?="]
)
def test_decode_rejects_malformed_base64(bad: str) -> None:
    with pytest.raises(ValueError, match="malformed base64 header value"):
        decode_header_value(bad)


def test_decode_leaves_other_values_alone() -> None:
    assert decode_header_value("=?base64?") == "=?base64?"
    assert decode_header_value("=?utf-8?q?x?=") == "=?utf-8?q?x?="


def test_facts_from_headers() -> None:
    headers = {"mcp-protocol-version": V, "mcp-method": "tools/call", "mcp-name": "x", "other": "y"}
    assert HttpRequestFacts.from_headers(headers) == HttpRequestFacts(V, "tools/call", "x")
    assert HttpRequestFacts.from_headers({}) == HttpRequestFacts()


def test_facts_from_a_header_list_record_repeats_case_insensitively() -> None:
    raw: list[tuple[bytes | str, bytes | str]] = [
        (b"MCP-Protocol-Version", V.encode()),
        (b"mcp-method", b"tools/list"),
        ("Mcp-Method", "tools/call"),
        (b"Mcp-Param-Region", b"eu"),
        (b"mcp-param-region", b"us"),
        (b"Mcp-Name", b"caf\xe9"),
        (b"X-Other", b"1"),
        (b"x-other", b"2"),
    ]
    got = HttpRequestFacts.from_header_list(raw)
    assert got == HttpRequestFacts(
        V, "tools/list", "caf\xe9", {"region": "eu"}, frozenset({"mcp-method", "mcp-param-region"})
    )
    assert HttpRequestFacts.from_header_list([]) == HttpRequestFacts()


@pytest.mark.parametrize(
    ("repeated", "named"),
    [
        ({"mcp-method"}, "Mcp-Method"),
        ({"mcp-name"}, "Mcp-Name"),
        ({"mcp-protocol-version"}, "MCP-Protocol-Version"),
        ({"mcp-param-region"}, "Mcp-Param-region"),
        ({"mcp-name", "mcp-method"}, "Mcp-Method, Mcp-Name"),
    ],
)
def test_a_repeated_header_is_a_mismatch_even_when_every_value_agrees(
    conn: ServerConnection, repeated: set[str], named: str
) -> None:
    http = HttpRequestFacts(V, "tools/call", "book", {"region": "us"}, frozenset(repeated))
    conn.receive_message(call(7, "book"), http=http)
    assert sent(conn) == [
        error(ErrorCode.HEADER_MISMATCH, f"Header sent more than once: {named}", 7)
    ]
    assert conn.in_flight == frozenset()


@pytest.mark.parametrize(
    ("http", "named"),
    [
        (facts("2026-07-28\x00", "tools/call", "book"), "MCP-Protocol-Version"),
        (facts(V, "tools/call\x7f", "book"), "Mcp-Method"),
        (facts(V, "tools/call", "b\xe9ok"), "Mcp-Name"),
        (facts(V, "tools/call", "book\n"), "Mcp-Name"),
    ],
)
def test_header_values_outside_visible_ascii_are_invalid_characters(
    conn: ServerConnection, http: HttpRequestFacts, named: str
) -> None:
    conn.receive_message(call(7, "book"), http=http)
    assert sent(conn) == [
        error(ErrorCode.HEADER_MISMATCH, f"Header {named} has invalid characters", 7)
    ]


def test_a_plain_value_is_visible_ascii_space_and_tab_and_nothing_else() -> None:
    for code in range(0x180):
        char = chr(code)
        assert is_field_value(f"a{char}b") is (0x20 <= code <= 0x7E or char == "\t"), hex(code)
    assert is_field_value("")


def test_surrounding_spaces_and_tabs_are_not_part_of_the_value(conn: ServerConnection) -> None:
    conn.receive_message(call(7, "book"), http=facts(f" {V}\t", "\ttools/call ", " book"))
    assert served(conn).name == "book"


# --- the mirror-header checks -------------------------------------------------------------------


def served(conn: ServerConnection) -> RequestReceived:
    assert sent(conn) == []
    event = only(events(conn))
    assert isinstance(event, RequestReceived)
    return event


@pytest.mark.parametrize(
    ("method", "params", "name"),
    [
        ("tools/call", {"name": "get_weather"}, "get_weather"),
        ("prompts/get", {"name": "review"}, "review"),
        ("resources/read", {"uri": "file:///a.txt"}, "file:///a.txt"),
        ("tools/call", {"name": "météo"}, "=?base64?bcOpdMOpbw==?="),
        ("resources/read", {"uri": "file:///ü"}, "=?base64?ZmlsZTovLy/DvA==?="),
        ("tools/list", {}, None),
        ("tools/list", {}, "ignored"),
        ("server/discover", {}, None),
    ],
)
def test_matching_headers_are_accepted(
    conn: ServerConnection, method: str, params: dict[str, Any], name: str | None
) -> None:
    conn.receive_message(request(1, method, params), http=facts(V, method, name))
    if method == "server/discover":
        assert only(sent(conn))["result"]["resultType"] == "complete"
    else:
        assert served(conn).method == method


@pytest.mark.parametrize("encoded", ["=?base64?dG9vbHMvY2FsbA==?=", "=?base64?***?="])
def test_base64_method_header_is_refused(conn: ServerConnection, encoded: str) -> None:
    # "dG9vbHMvY2FsbA==" is "tools/call": the base64 form is for Mcp-Name and Mcp-Param-*
    # only, so a gateway filtering on the raw Mcp-Method cannot be bypassed with it.
    conn.receive_message(call(1, "book"), http=facts(V, encoded, "book"))
    (refused,) = sent(conn)
    assert refused["error"] == {
        "code": ErrorCode.HEADER_MISMATCH,
        "message": "Header Mcp-Method must be sent as is: the =?base64?...?= form is only "
        "for Mcp-Name and Mcp-Param-* headers",
    }
    conn.events()  # the InvalidMessage of the refusal
    conn.receive_message(call(2, "book"), http=facts(V, "tools/call", "book"))
    assert served(conn).method == "tools/call"


def test_base64_version_header_is_compared_raw(conn: ServerConnection) -> None:
    # "MjAyNi0wNy0yOA==" is the version itself: compared as sent, it does not match.
    conn.receive_message(
        call(1, "book"), http=facts("=?base64?MjAyNi0wNy0yOA==?=", "tools/call", "book")
    )
    (refused,) = sent(conn)
    assert refused["error"]["code"] == ErrorCode.HEADER_MISMATCH
    assert "MCP-Protocol-Version" in refused["error"]["message"]


@pytest.mark.parametrize(
    ("http", "message"),
    [
        (facts(None, "tools/call", "book"), "Missing required header MCP-Protocol-Version"),
        (
            facts("2025-11-25", "tools/call", "book"),
            "Header mismatch: MCP-Protocol-Version header value '2025-11-25' does not match "
            "body value '2026-07-28'",
        ),
        (facts(V, None, "book"), "Missing required header Mcp-Method"),
        (
            facts(V, "tools/list", "book"),
            "Header mismatch: Mcp-Method header value 'tools/list' does not match "
            "body value 'tools/call'",
        ),
        (facts(V, "tools/call", None), "Missing required header Mcp-Name"),
        (
            facts(V, "tools/call", "foo"),
            "Header mismatch: Mcp-Name header value 'foo' does not match body value 'book'",
        ),
        (
            facts(V, "tools/call", "=?base64?Zm9v?="),
            "Header mismatch: Mcp-Name header value 'foo' does not match body value 'book'",
        ),
        (
            facts(V, "tools/call", "=?base64?Zm9v"),
            "Header mismatch: Mcp-Name header value "
            "'=?base64?Zm9v' does not match body value 'book'",
        ),
        (facts(V, "tools/call", "=?base64?%%?="), "Malformed Mcp-Name header"),
        (facts(V, "tools/call", "=?base64?/w==?="), "Malformed Mcp-Name header"),
        (
            facts(V, "tools/call", "Book"),
            "Header mismatch: Mcp-Name header value 'Book' does not match body value 'book'",
        ),
    ],
)
def test_header_problems_are_header_mismatch(
    conn: ServerConnection, http: HttpRequestFacts, message: str
) -> None:
    conn.receive_message(call(7, "book"), http=http)
    items = drain(conn, Era.MODERN)
    item = only(items)
    assert isinstance(item, OutgoingError)
    assert item.message == error(ErrorCode.HEADER_MISMATCH, message, 7)
    assert item.http_status == 400
    assert item.related_request_id == 7
    assert only(events(conn)).error == JsonRpcError(ErrorCode.HEADER_MISMATCH, message)


def test_name_header_against_a_missing_body_name(conn: ServerConnection) -> None:
    conn.receive_message(request(1, "tools/call", {}), http=facts(V, "tools/call", "x"))
    assert sent(conn) == [
        error(
            ErrorCode.HEADER_MISMATCH,
            "Header mismatch: Mcp-Name header value 'x' does not match body value 'None'",
            1,
        )
    ]


def test_headers_are_checked_before_the_envelope(conn: ServerConnection) -> None:
    envelope = meta(version="1900-01-01")
    conn.receive_message(request(1, "tools/list", envelope=envelope), http=facts(V, "tools/list"))
    assert only(sent(conn))["error"]["code"] == ErrorCode.HEADER_MISMATCH


def test_header_check_applies_to_retries() -> None:
    conn = ServerConnection(ServerConfig(request_state=UNSEALED))  # to see the state as sent
    retry = call(2, "book", inputResponses={"k": {"action": "cancel"}}, requestState="s")
    conn.receive_message(retry, http=facts(V, "tools/call", "book"))
    assert served(conn).request_state == "s"
    conn.receive_message(call(3, "other"), http=facts(V, "tools/call", "book"))
    assert only(sent(conn))["error"]["code"] == ErrorCode.HEADER_MISMATCH


def test_no_envelope_over_http_is_invalid_params(conn: ServerConnection) -> None:
    conn.receive_message(legacy_request(1, "tools/list", {}), http=facts(V, "tools/list"))
    assert sent(conn) == [
        error(
            ErrorCode.INVALID_PARAMS,
            (
                "Not initialized: send initialize first (protocol 2025-11-25), or give every"
                " request the 2026-07-28 _meta envelope"
                " (io.modelcontextprotocol/protocolVersion, clientCapabilities)"
            ),
            1,
        )
    ]


def test_legacy_initialize_over_http_is_not_held_to_modern_headers(
    conn: ServerConnection,
) -> None:
    """A 2025-11-25 client sends no MCP-Protocol-Version on initialize and never Mcp-Method."""
    init = legacy_request(
        1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT}
    )
    conn.receive_message(init, http=HttpRequestFacts())
    assert only(sent(conn, Era.LEGACY))["result"]["protocolVersion"] == "2025-11-25"
    conn.receive_message(legacy_request(2, "tools/list"), http=facts("2025-11-25"))
    event = [e for e in events(conn) if isinstance(e, RequestReceived)][-1]
    assert event.era is Era.LEGACY
    assert event.request_id == 2


def test_notifications_are_not_header_checked(conn: ServerConnection) -> None:
    conn.receive_message(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        http=HttpRequestFacts(),
    )
    assert sent(conn) == []


def test_principal_is_per_message() -> None:
    conn = ServerConnection(principal="alice")
    conn.receive_message(request(1, "tools/list"))
    conn.receive_message(request(2, "tools/list"), principal="bob")
    conn.receive_message(request(3, "tools/list"), http=facts(V, "tools/list"), principal="carol")
    conn.receive_message(request(4, "tools/list"), http=facts(V, "tools/list"))
    got = [e.principal for e in events(conn) if isinstance(e, RequestReceived)]
    assert got == ["alice", "bob", "carol", "alice"]


# --- HTTP statuses ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ErrorCode.INVALID_PARAMS, 400),
        (ErrorCode.HEADER_MISMATCH, 400),
        (ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY, 400),
        (ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, 400),
        (ErrorCode.INVALID_REQUEST, 400),
        (ErrorCode.PARSE_ERROR, 400),
        (ErrorCode.METHOD_NOT_FOUND, 404),
        (ErrorCode.INTERNAL_ERROR, 200),
        (-32000, 200),
        (1, 200),
    ],
)
def test_http_status_of_errors(code: int, status: int) -> None:
    item = OutgoingError(b"", {}, None, JsonRpcError(code, "x"))
    assert item.http_status == status


def test_http_status_of_connection_errors(conn: ServerConnection) -> None:
    conn.receive_message(b"{")
    conn.receive_message(request(1, "initialize"))
    conn.receive_message(request(2, "tools/list", envelope=meta(version="1999-01-01")))
    conn.receive_message(call(3, caps={}))
    events(conn)
    conn.respond(3, InputRequiredResult({"u": elicit_url("m", "https://x")}))
    statuses = [
        (i.error.code, i.http_status)
        for i in drain(conn, Era.MODERN)
        if isinstance(i, OutgoingError)
    ]
    assert statuses == [
        (ErrorCode.PARSE_ERROR, 400),
        (ErrorCode.METHOD_NOT_FOUND, 404),
        (ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, 400),
        (ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY, 400),
    ]
