"""The modern ``_meta`` envelope: detection, required fields, version, legacy-only methods."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import (
    CLIENT,
    error,
    events,
    feed,
    legacy_request,
    meta,
    only,
    request,
    sent,
)
from mrtr_sansio import (
    Era,
    ErrorCode,
    InvalidMessage,
    JsonRpcError,
    RequestReceived,
    ServerConfig,
    ServerConnection,
)
from mrtr_sansio._mcp.envelope import LOG_LEVELS
from mrtr_sansio.protocol import (
    CLIENT_CAPABILITIES,
    CLIENT_INFO,
    LATEST_LEGACY_VERSION,
    LATEST_MODERN_VERSION,
    LEGACY_VERSIONS,
    LOG_LEVEL,
    MODERN_VERSIONS,
    PROTOCOL_VERSION_KEY,
    SERVER_INFO,
    SUBSCRIPTION_ID,
    modern_envelope,
)

_MISSING: Any = object()


def test_constants() -> None:
    assert PROTOCOL_VERSION_KEY == "io.modelcontextprotocol/protocolVersion"
    assert CLIENT_CAPABILITIES == "io.modelcontextprotocol/clientCapabilities"
    assert CLIENT_INFO == "io.modelcontextprotocol/clientInfo"
    assert LOG_LEVEL == "io.modelcontextprotocol/logLevel"
    assert SERVER_INFO == "io.modelcontextprotocol/serverInfo"
    assert SUBSCRIPTION_ID == "io.modelcontextprotocol/subscriptionId"
    assert LATEST_MODERN_VERSION == "2026-07-28"
    assert MODERN_VERSIONS == ("2026-07-28",)
    assert LATEST_LEGACY_VERSION == LEGACY_VERSIONS[0] == "2025-11-25"
    assert LOG_LEVELS[0] == "debug"
    assert LOG_LEVELS[-1] == "emergency"
    assert Era.MODERN.value == "modern"
    assert Era.LEGACY.value == "legacy"


def test_modern_envelope() -> None:
    assert modern_envelope("2026-07-28", {"roots": {}}, None) == {
        PROTOCOL_VERSION_KEY: "2026-07-28",
        CLIENT_CAPABILITIES: {"roots": {}},
    }
    assert modern_envelope("v", {}, CLIENT) == {
        PROTOCOL_VERSION_KEY: "v",
        CLIENT_CAPABILITIES: {},
        CLIENT_INFO: CLIENT,
    }


# --- the envelope checks -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("envelope", "message"),
    [
        ({PROTOCOL_VERSION_KEY: "v"}, f"Missing required _meta field {CLIENT_CAPABILITIES}"),
        ({PROTOCOL_VERSION_KEY: 2026}, f"Missing required _meta field {CLIENT_CAPABILITIES}"),
        (
            {PROTOCOL_VERSION_KEY: 2026, CLIENT_CAPABILITIES: {}},
            f"_meta field {PROTOCOL_VERSION_KEY} must be a string",
        ),
        (
            {PROTOCOL_VERSION_KEY: "v", CLIENT_CAPABILITIES: None},
            f"Missing required _meta field {CLIENT_CAPABILITIES}",
        ),
        (
            {PROTOCOL_VERSION_KEY: "v", CLIENT_CAPABILITIES: []},
            f"_meta field {CLIENT_CAPABILITIES} must be an object",
        ),
        (
            {PROTOCOL_VERSION_KEY: "v", CLIENT_CAPABILITIES: "all"},
            f"_meta field {CLIENT_CAPABILITIES} must be an object",
        ),
        (
            {PROTOCOL_VERSION_KEY: "v", CLIENT_CAPABILITIES: {}, CLIENT_INFO: "me"},
            f"_meta field {CLIENT_INFO} must be an object",
        ),
        (
            {PROTOCOL_VERSION_KEY: "v", CLIENT_CAPABILITIES: {}, LOG_LEVEL: "loud"},
            f"Unknown log level in _meta field {LOG_LEVEL}",
        ),
        (
            {PROTOCOL_VERSION_KEY: "v", CLIENT_CAPABILITIES: {}, LOG_LEVEL: ["info"]},
            f"Unknown log level in _meta field {LOG_LEVEL}",
        ),
        (
            {PROTOCOL_VERSION_KEY: "v", CLIENT_CAPABILITIES: {}, LOG_LEVEL: {"a": 1}},
            f"Unknown log level in _meta field {LOG_LEVEL}",
        ),
        (
            {PROTOCOL_VERSION_KEY: "v", CLIENT_CAPABILITIES: {}, LOG_LEVEL: 3},
            f"Unknown log level in _meta field {LOG_LEVEL}",
        ),
    ],
)
def test_malformed_envelopes_are_invalid_params(envelope: dict[str, Any], message: str) -> None:
    """Every malformed-envelope case is -32602, checked before the version (-32022)."""
    conn = ServerConnection()
    feed(conn, request(9, "tools/list", envelope=envelope))
    assert sent(conn) == [error(ErrorCode.INVALID_PARAMS, message, 9)]


@pytest.mark.parametrize(
    "extra",
    [{}, {CLIENT_INFO: None}, {CLIENT_INFO: CLIENT}, {LOG_LEVEL: None}]
    + [{LOG_LEVEL: level} for level in LOG_LEVELS],
)
def test_well_formed_envelopes_are_served(extra: dict[str, Any]) -> None:
    conn = ServerConnection()
    envelope = {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES: {}, **extra}
    feed(conn, request(1, "tools/list", envelope=envelope))
    assert isinstance(only(events(conn)), RequestReceived)
    assert sent(conn) == []


# --- through the server ---------------------------------------------------------------------


def test_a_request_with_the_version_key_is_modern(conn: ServerConnection) -> None:
    envelope = meta({"roots": {}}, progressToken="p", traceparent="00-ab-cd-01")
    feed(conn, request(1, "tools/call", {"name": "t"}, envelope=envelope))
    event = only(events(conn))
    assert isinstance(event, RequestReceived)
    assert event.era is Era.MODERN
    assert event.protocol_version == "2026-07-28"
    assert event.client_capabilities == {"roots": {}}
    assert event.client_info == CLIENT
    assert event.meta == envelope
    assert sent(conn) == []


def test_client_info_is_optional(conn: ServerConnection) -> None:
    feed(conn, request(1, "tools/list", envelope=meta(info=None)))
    event = only(events(conn))
    assert isinstance(event, RequestReceived)
    assert event.client_info is None
    assert sent(conn) == []


@pytest.mark.parametrize(
    ("caps", "message"),
    [
        (_MISSING, f"Missing required _meta field {CLIENT_CAPABILITIES}"),
        (None, f"Missing required _meta field {CLIENT_CAPABILITIES}"),
        ([], f"_meta field {CLIENT_CAPABILITIES} must be an object"),
        ("x", f"_meta field {CLIENT_CAPABILITIES} must be an object"),
        (1, f"_meta field {CLIENT_CAPABILITIES} must be an object"),
    ],
)
def test_missing_or_non_object_capabilities_is_invalid_params(
    conn: ServerConnection, caps: Any, message: str
) -> None:
    envelope = meta()
    if caps is _MISSING:
        del envelope[CLIENT_CAPABILITIES]
    else:
        envelope[CLIENT_CAPABILITIES] = caps
    feed(conn, request("r", "tools/list", envelope=envelope))
    assert sent(conn) == [error(ErrorCode.INVALID_PARAMS, message, "r")]
    assert only(events(conn)) == InvalidMessage(
        JsonRpcError(ErrorCode.INVALID_PARAMS, message), "r", True
    )


def test_unknown_log_level_is_invalid_params(conn: ServerConnection) -> None:
    feed(conn, request(1, "tools/list", envelope=meta(log_level="verbose")))
    assert sent(conn) == [
        error(ErrorCode.INVALID_PARAMS, f"Unknown log level in _meta field {LOG_LEVEL}", 1)
    ]


def test_non_object_client_info_is_invalid_params(conn: ServerConnection) -> None:
    feed(conn, request(1, "tools/list", envelope=meta(info=["x"])))
    assert sent(conn) == [
        error(ErrorCode.INVALID_PARAMS, f"_meta field {CLIENT_INFO} must be an object", 1)
    ]


@pytest.mark.parametrize("version", ["1900-01-01", "2025-11-25", "2026-07-29", ""])
def test_unsupported_version(conn: ServerConnection, version: str) -> None:
    feed(conn, request(1, "tools/list", envelope=meta(version=version)))
    assert sent(conn) == [
        error(
            ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            1,
            {"supported": ["2026-07-28", *LEGACY_VERSIONS], "requested": version},
        )
    ]
    event = only(events(conn))
    assert isinstance(event, InvalidMessage)
    assert event.error.code == ErrorCode.UNSUPPORTED_PROTOCOL_VERSION


def test_supported_versions_come_from_config() -> None:
    conn = ServerConnection(
        ServerConfig(supported_versions=("2026-07-28", "2027-01-01"), legacy_versions=())
    )
    feed(conn, request(1, "tools/list", envelope=meta(version="2027-01-01")))
    event = only(events(conn))
    assert isinstance(event, RequestReceived)
    assert event.protocol_version == "2027-01-01"
    feed(conn, request(2, "tools/list", envelope=meta(version="2030-01-01")))
    assert sent(conn) == [
        error(
            ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            2,
            {"supported": ["2026-07-28", "2027-01-01"], "requested": "2030-01-01"},
        )
    ]


def test_non_string_version_is_invalid_params_before_the_version_check(
    conn: ServerConnection,
) -> None:
    feed(conn, request(1, "tools/list", envelope=meta(version=20260728)))
    assert sent(conn) == [
        error(ErrorCode.INVALID_PARAMS, f"_meta field {PROTOCOL_VERSION_KEY} must be a string", 1)
    ]


def test_missing_capabilities_is_checked_before_the_version(conn: ServerConnection) -> None:
    envelope = meta(version="1900-01-01")
    del envelope[CLIENT_CAPABILITIES]
    feed(conn, request(1, "tools/list", envelope=envelope))
    assert only(sent(conn))["error"]["code"] == ErrorCode.INVALID_PARAMS


@pytest.mark.parametrize(
    "method",
    ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"],
)
def test_legacy_methods_with_an_envelope_are_method_not_found(
    conn: ServerConnection, method: str
) -> None:
    feed(conn, request(4, method, {"level": "info", "uri": "file:///x"}))
    assert sent(conn) == [error(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method}", 4)]
    assert conn.session is None


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            None,
            (
                "Not initialized: send initialize first (protocol 2025-11-25), or give every"
                " request the 2026-07-28 _meta envelope"
                " (io.modelcontextprotocol/protocolVersion, clientCapabilities)"
            ),
        ),
        (
            {},
            (
                "Not initialized: send initialize first (protocol 2025-11-25), or give every"
                " request the 2026-07-28 _meta envelope"
                " (io.modelcontextprotocol/protocolVersion, clientCapabilities)"
            ),
        ),
        ({"_meta": {}}, f"Missing required _meta field {PROTOCOL_VERSION_KEY}"),
        ({"_meta": {"progressToken": 1}}, f"Missing required _meta field {PROTOCOL_VERSION_KEY}"),
        (
            {"_meta": {CLIENT_CAPABILITIES: {}, PROTOCOL_VERSION_KEY: None}},
            f"Missing required _meta field {PROTOCOL_VERSION_KEY}",
        ),
        ({"_meta": []}, "_meta must be an object"),
        ({"_meta": "x"}, "_meta must be an object"),
    ],
)
def test_no_envelope_and_no_session_is_invalid_params(
    conn: ServerConnection, params: dict[str, Any] | None, message: str
) -> None:
    feed(conn, legacy_request(3, "tools/list", params))
    assert sent(conn) == [error(ErrorCode.INVALID_PARAMS, message, 3)]
    assert only(events(conn)) == InvalidMessage(
        JsonRpcError(ErrorCode.INVALID_PARAMS, message), 3, True
    )


def test_a_modern_only_server_asks_only_for_the_envelope() -> None:
    modern_only = ServerConnection(ServerConfig(legacy_versions=()))
    feed(modern_only, legacy_request(1, "tools/call", {"name": "x"}))
    message = "Missing required _meta (io.modelcontextprotocol/protocolVersion, clientCapabilities)"
    assert sent(modern_only) == [error(ErrorCode.INVALID_PARAMS, message, 1)]


def test_modern_only_server_refuses_initialize(conn: ServerConnection) -> None:
    modern_only = ServerConnection(ServerConfig(legacy_versions=()))
    feed(
        modern_only,
        legacy_request(
            1,
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT},
        ),
    )
    assert sent(modern_only) == [
        error(
            ErrorCode.METHOD_NOT_FOUND,
            "initialize is not supported: send the 2026-07-28 _meta envelope on every request",
            1,
            {"supported": ["2026-07-28"]},
        )
    ]
    assert modern_only.session is None


def test_each_request_stands_alone(conn: ServerConnection) -> None:
    """Capabilities and version are read from each request, never from an earlier one."""
    feed(
        conn,
        request(1, "tools/list", caps={"roots": {}}),
        request(2, "tools/list", caps={}),
        legacy_request(3, "tools/list"),
    )
    first, second, third = events(conn)
    assert isinstance(first, RequestReceived)
    assert isinstance(second, RequestReceived)
    assert first.client_capabilities == {"roots": {}}
    assert second.client_capabilities == {}
    assert isinstance(third, InvalidMessage)
