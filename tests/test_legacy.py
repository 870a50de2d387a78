"""The legacy (2025-11-25) wire without the shim: handshake, version negotiation,
``notifications/initialized``, ``ping`` both ways, ``logging/setLevel`` and log filtering, and the
session's capabilities on every legacy request.

Every test drives a real :class:`ServerConnection` with a scripted legacy client and asserts on
the exact messages written, each validated against the 2025-11-25 schema.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from helpers import (
    CLIENT,
    LEGACY,
    LEGACY_CAPS,
    SERVER,
    App,
    ScriptedClient,
    drain,
    server,
)
from helpers import (
    session as open_session,
)
from mrtr_sansio import (
    Era,
    InvalidMessage,
    JsonRpcError,
    Limits,
    LocalProtocolError,
    NotificationReceived,
    PingAnswered,
    RequestCancelled,
    RequestReceived,
    ServerConnection,
    SessionInitialized,
    UnexpectedResponse,
)
from mrtr_sansio.events import OutgoingError, OutgoingRequest, OutgoingResult
from mrtr_sansio.http import HttpRequestFacts
from mrtr_sansio.protocol import CLIENT_CAPABILITIES, PROTOCOL_VERSION_KEY

TEXT = {"content": [{"type": "text", "text": "done"}]}


def init_params(version: str = LEGACY, caps: Any = None) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": LEGACY_CAPS if caps is None else caps,
        "clientInfo": CLIENT,
    }


def modern_meta(caps: Any = None) -> dict[str, Any]:
    return {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES: caps or {}}


def echo(event: RequestReceived) -> dict[str, Any]:
    return TEXT


# --- handshake and version negotiation ------------------------------------------------------


def test_initialize_answers_with_the_requested_version() -> None:
    conn = server(instructions="Use the tools.")
    client = ScriptedClient(conn)
    client.request("initialize", init_params())
    assert client.take() == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "protocolVersion": LEGACY,
                "capabilities": {"tools": {}, "prompts": {}, "resources": {}},
                "serverInfo": SERVER,
                "instructions": "Use the tools.",
            },
        }
    ]
    assert conn.events() == [SessionInitialized(LEGACY, LEGACY_CAPS, CLIENT)]
    assert conn.session is not None
    assert conn.session.protocol_version == LEGACY
    assert conn.session.client_capabilities == LEGACY_CAPS
    assert conn.session.client_info == CLIENT
    assert conn.session.initialized is False
    assert conn.in_flight == frozenset()


@pytest.mark.parametrize(
    ("requested", "negotiated"),
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        ("2099-01-01", "2025-11-25"),  # unknown: our latest legacy version
        ("2026-07-28", "2025-11-25"),  # a modern version is never negotiated by initialize
        ("", "2025-11-25"),
    ],
)
def test_version_negotiation(requested: str, negotiated: str) -> None:
    conn = server()
    client = ScriptedClient(conn)
    client.request("initialize", init_params(requested))
    (reply,) = client.take()
    assert reply["result"]["protocolVersion"] == negotiated
    assert conn.session is not None
    assert conn.session.protocol_version == negotiated


def test_negotiation_falls_back_to_the_first_configured_legacy_version() -> None:
    conn = server(legacy_versions=("2025-06-18", "2025-03-26"))
    client = ScriptedClient(conn)
    client.request("initialize", init_params("2025-11-25"))
    (reply,) = client.take()
    assert reply["result"]["protocolVersion"] == "2025-06-18"


def test_initialize_without_server_info_uses_a_placeholder_identity() -> None:
    conn = server(server_info=None)
    client = ScriptedClient(conn)
    client.request("initialize", init_params())
    (reply,) = client.take()
    assert reply["result"]["serverInfo"] == {"name": "mrtr-sansio", "version": "0"}
    assert "instructions" not in reply["result"]


def test_application_answers_initialize_when_discovery_is_not_automatic() -> None:
    conn = server(answer_discovery=False)
    client = ScriptedClient(conn)
    client.request("initialize", init_params("2025-06-18"))
    assert client.take() == []
    (request,) = conn.events()  # SessionInitialized waits for the answer
    assert isinstance(request, RequestReceived)
    assert (request.request_id, request.method, request.era) == (1, "initialize", Era.LEGACY)
    assert request.protocol_version == "2025-06-18"
    assert conn.in_flight == {1}
    result = conn.initialize_result()
    conn.respond(1, {**result, "resultType": "complete"})
    assert client.take() == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}, "prompts": {}, "resources": {}},
                "serverInfo": SERVER,
            },
        }
    ]
    assert conn.events() == [SessionInitialized("2025-06-18", LEGACY_CAPS, CLIENT)]


def test_the_version_the_application_answers_is_the_negotiated_one() -> None:
    conn = server(answer_discovery=False)
    client = ScriptedClient(conn)
    client.request("initialize", init_params())
    conn.events()
    conn.respond(1, conn.initialize_result("2025-03-26"))
    (reply,) = client.take()
    assert reply["result"]["protocolVersion"] == "2025-03-26"
    assert conn.events() == [SessionInitialized("2025-03-26", LEGACY_CAPS, CLIENT)]
    assert conn.session is not None
    assert conn.session.protocol_version == "2025-03-26"
    client.request("tools/call", {"name": "t"})
    (event,) = conn.events()
    assert isinstance(event, RequestReceived)
    assert event.protocol_version == "2025-03-26"


def test_an_initialize_answer_without_a_version_keeps_the_negotiated_one() -> None:
    conn = server(answer_discovery=False)
    client = ScriptedClient(conn)
    client.request("initialize", init_params("2025-06-18"))
    conn.events()
    conn.respond(1, {"capabilities": {}, "serverInfo": SERVER})  # an app bug
    conn.outgoing()  # not schema-valid on purpose
    assert conn.events() == [SessionInitialized("2025-06-18", LEGACY_CAPS, CLIENT)]


def test_initialize_result_needs_a_session_or_an_explicit_version() -> None:
    conn = server()
    with pytest.raises(LocalProtocolError):
        conn.initialize_result()
    assert conn.initialize_result("2025-03-26")["protocolVersion"] == "2025-03-26"


def test_initialize_twice_is_an_error_and_keeps_the_session() -> None:
    conn = server()
    client = ScriptedClient(conn)
    client.initialize()
    client.request("initialize", init_params("2025-06-18", {}))
    assert client.take() == [
        {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {
                "code": -32600,
                "message": "Invalid Request: the session is already initialized",
            },
        }
    ]
    assert conn.session is not None
    assert conn.session.protocol_version == LEGACY
    assert conn.session.client_capabilities == LEGACY_CAPS


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"capabilities": {}, "clientInfo": CLIENT}, "protocolVersion must be a string"),
        ({"protocolVersion": 20251125, "capabilities": {}}, "protocolVersion must be a string"),
        ({"protocolVersion": LEGACY, "clientInfo": CLIENT}, "capabilities must be an object"),
        ({"protocolVersion": LEGACY, "capabilities": []}, "capabilities must be an object"),
        ({"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": "x"}, "clientInfo must"),
    ],
)
def test_malformed_initialize_is_invalid_params_and_opens_no_session(
    params: dict[str, Any], message: str
) -> None:
    conn = server()
    client = ScriptedClient(conn)
    client.request("initialize", params)
    (reply,) = client.take()
    assert reply["id"] == 1
    assert reply["error"]["code"] == -32602
    assert message in reply["error"]["message"]
    assert conn.session is None
    client.request("initialize", init_params())
    (reply,) = client.take()
    assert reply["result"]["protocolVersion"] == LEGACY


def test_initialize_without_params_is_invalid_params() -> None:
    conn = server()
    client = ScriptedClient(conn)
    client.request("initialize")
    (reply,) = client.take()
    assert reply["error"]["code"] == -32602


def test_modern_only_server_refuses_initialize_naming_its_versions() -> None:
    conn = server(legacy_versions=())
    client = ScriptedClient(conn)
    client.request("initialize", init_params())
    assert client.take() == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {
                "code": -32601,
                "message": "initialize is not supported: send the 2026-07-28 _meta envelope on "
                "every request",
                "data": {"supported": ["2026-07-28"]},
            },
        }
    ]
    assert conn.session is None


def test_initialize_with_a_modern_envelope_is_method_not_found() -> None:
    conn = server()
    client = ScriptedClient(conn)
    client.request("initialize", {**init_params(), "_meta": modern_meta()})
    (reply,) = client.take()
    assert reply["error"]["code"] == -32601
    assert conn.session is None


@pytest.mark.parametrize("method", ["tools/call", "tools/list", "ping", "logging/setLevel"])
def test_legacy_request_before_initialize_is_invalid_params(method: str) -> None:
    conn = server()
    client = ScriptedClient(conn)
    client.request(method, {"name": "x"})
    assert client.take() == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {
                "code": -32602,
                "message": "Not initialized: send initialize first (protocol 2025-11-25), or "
                "give every request the 2026-07-28 _meta envelope "
                "(io.modelcontextprotocol/protocolVersion, clientCapabilities)",
            },
        }
    ]
    assert conn.session is None
    assert conn.in_flight == frozenset()


def test_initialize_answered_with_an_error_discards_the_session() -> None:
    conn = server(answer_discovery=False)
    client = ScriptedClient(conn)
    client.request("initialize", init_params())
    conn.events()
    conn.respond(1, JsonRpcError(-32602, "Unsupported protocol version"))
    (reply,) = client.take()
    assert reply["error"]["code"] == -32602
    assert conn.session is None
    client.request("tools/call", {"name": "x"})
    (reply,) = client.take()
    assert reply["error"]["code"] == -32602  # no session: not served
    client.request("initialize", init_params())
    conn.events()
    conn.respond(3, conn.initialize_result())
    (reply,) = client.take()
    assert reply["result"]["protocolVersion"] == LEGACY


def test_initialize_cannot_be_cancelled() -> None:
    conn = server(answer_discovery=False)
    client = ScriptedClient(conn)
    client.request("initialize", init_params())
    conn.events()
    client.cancel(1)
    assert conn.in_flight == {1}
    assert not any(isinstance(e, RequestCancelled) for e in conn.events())
    conn.respond(1, conn.initialize_result())
    (reply,) = client.take()
    assert reply["result"]["protocolVersion"] == LEGACY


# --- notifications/initialized --------------------------------------------------------------


def test_initialized_notification_is_tracked_and_reported() -> None:
    conn = server()
    client = ScriptedClient(conn)
    client.initialize(initialized=False)
    conn.events()
    assert conn.session is not None
    assert conn.session.initialized is False
    client.notify("notifications/initialized")
    assert conn.session.initialized is True
    assert conn.events() == [NotificationReceived("notifications/initialized", None)]
    assert client.take() == []


def test_initialized_before_initialize_is_only_reported() -> None:
    conn = server()
    client = ScriptedClient(conn)
    client.notify("notifications/initialized")
    assert conn.session is None
    assert conn.events() == [NotificationReceived("notifications/initialized", None)]
    assert client.take() == []


# --- ping -----------------------------------------------------------------------------------


@pytest.mark.parametrize("params", [None, {}, {"_meta": {"progressToken": 3}}])
def test_client_ping_is_answered_with_an_empty_result(params: Any) -> None:
    conn, client, _app = open_session(echo)
    client.request("ping", params, request_id="p-1")
    assert client.take() == [{"jsonrpc": "2.0", "id": "p-1", "result": {}}]
    assert conn.events() == []
    assert conn.in_flight == frozenset()


def test_client_ping_is_answered_before_initialized() -> None:
    conn = server()
    client = ScriptedClient(conn)
    client.initialize(initialized=False)
    client.request("ping", request_id=9)
    assert client.take() == [{"jsonrpc": "2.0", "id": 9, "result": {}}]


def test_modern_ping_is_method_not_found() -> None:
    _conn, client, _app = open_session(echo)
    client.request("ping", {"_meta": modern_meta()}, request_id=4)
    assert client.take() == [
        {"jsonrpc": "2.0", "id": 4, "error": {"code": -32601, "message": "Method not found: ping"}}
    ]


def test_server_ping_and_its_answer() -> None:
    conn, client, _app = open_session(echo)
    ping_id = conn.ping()
    (item,) = client.take_items()
    assert isinstance(item, OutgoingRequest)
    assert item.message == {"jsonrpc": "2.0", "id": ping_id, "method": "ping"}
    assert item.request_id == ping_id
    assert item.related_request_id is None
    assert json.loads(item.data) == item.message
    client.answer(ping_id, {})
    assert conn.events() == [PingAnswered(ping_id, True)]
    # a second answer to the same ping is unexpected
    client.answer(ping_id, {})
    (event,) = conn.events()
    assert isinstance(event, UnexpectedResponse)
    assert event.response_id == ping_id


def test_server_ping_answered_with_an_error() -> None:
    conn, client, _app = open_session(echo)
    first = conn.ping()
    second = conn.ping()
    assert second != first
    client.take()
    client.answer_error(second, -32601, "Method not found")
    client.answer(first, {})
    assert conn.events() == [PingAnswered(second, False), PingAnswered(first, True)]


def test_server_ping_needs_a_session_that_carries_requests() -> None:
    with pytest.raises(LocalProtocolError):
        server().ping()
    conn = server(server_requests=False)
    ScriptedClient(conn).initialize()
    with pytest.raises(LocalProtocolError):
        conn.ping()


def test_server_ping_after_close_is_refused() -> None:
    conn, _client, _app = open_session(echo)
    conn.receive_data(b"")
    with pytest.raises(LocalProtocolError):
        conn.ping()


# --- logging/setLevel and log filtering -----------------------------------------------------


def log(level: str, data: Any = "x") -> dict[str, Any]:
    return {"level": level, "data": data}


def test_logs_flow_at_every_level_until_a_level_is_set() -> None:
    conn, client, _app = open_session(echo)
    conn.notify("notifications/message", log("debug"))
    assert client.take() == [
        {"jsonrpc": "2.0", "method": "notifications/message", "params": log("debug")}
    ]


def test_set_level_filters_lower_levels() -> None:
    conn, client, _app = open_session(echo)
    client.request("logging/setLevel", {"level": "warning"}, request_id=7)
    assert client.take() == [{"jsonrpc": "2.0", "id": 7, "result": {}}]
    assert conn.session is not None
    assert conn.session.log_level == "warning"
    for level in ("debug", "info", "notice", "warning", "error", "emergency"):
        conn.notify("notifications/message", log(level))
    assert [m["params"]["level"] for m in client.take()] == ["warning", "error", "emergency"]
    client.request("logging/setLevel", {"level": "debug"}, request_id=8)
    client.take()
    conn.notify("notifications/message", log("debug"))
    assert len(client.take()) == 1


@pytest.mark.parametrize("params", [{"level": "verbose"}, {}, {"level": 3}])
def test_set_level_with_an_unknown_level_is_invalid_params(params: dict[str, Any]) -> None:
    conn, client, _app = open_session(echo)
    client.request("logging/setLevel", params, request_id=7)
    assert client.take() == [
        {
            "jsonrpc": "2.0",
            "id": 7,
            "error": {"code": -32602, "message": "logging/setLevel: unknown level"},
        }
    ]
    assert conn.session is not None
    assert conn.session.log_level is None


def test_request_scoped_logs_follow_the_session_level_and_stop_with_the_request() -> None:
    conn, client, app = open_session(lambda e: None)
    client.request("logging/setLevel", {"level": "info"}, request_id=1)
    rid = client.request("tools/call", {"name": "t", "arguments": {}}, request_id=2)
    client.take()
    app.run()
    conn.notify("notifications/message", log("debug"), related_request_id=rid)
    conn.notify("notifications/message", log("info"), related_request_id=rid)
    conn.notify("notifications/progress", {"progressToken": 1, "progress": 1}, rid)
    items = client.take_items()
    assert [(i.message["method"], i.related_request_id) for i in items] == [
        ("notifications/message", rid),
        ("notifications/progress", rid),
    ]
    conn.respond(rid, TEXT)
    client.take()
    conn.notify("notifications/message", log("error"), related_request_id=rid)
    conn.notify("notifications/progress", {"progressToken": 1, "progress": 2}, rid)
    assert client.take() == []


# --- legacy requests carry the session's facts ----------------------------------------------


def test_legacy_request_carries_the_session_facts() -> None:
    caps: dict[str, Any] = {"elicitation": {}}
    _conn, client, app = open_session(echo, caps)
    client.request("tools/call", {"name": "t", "arguments": {"a": 1}}, request_id="c-1")
    app.run()
    (event,) = app.seen
    assert event.request_id == "c-1"
    assert event.method == "tools/call"
    assert event.era is Era.LEGACY
    assert event.protocol_version == LEGACY
    assert event.client_capabilities == caps
    assert event.client_info == CLIENT
    assert event.request_state is None
    assert event.round == 1
    assert event.arguments == {"a": 1}
    assert event.input_responses == {}
    assert client.take() == [
        {"jsonrpc": "2.0", "id": "c-1", "result": {"content": [{"type": "text", "text": "done"}]}}
    ]


def test_legacy_results_never_carry_result_type() -> None:
    _conn, client, app = open_session(lambda e: {**TEXT, "resultType": "complete"})
    rid = client.request("tools/call", {"name": "t"})
    app.run()
    (item,) = client.take_items()
    assert isinstance(item, OutgoingResult)
    assert item.message == {"jsonrpc": "2.0", "id": rid, "result": TEXT}


def test_missing_capability_on_legacy_is_internal_error_with_required_capabilities() -> None:
    _conn, client, app = open_session(
        lambda e: e.missing_capability({"elicitation": {"url": {}}}), {"elicitation": {}}
    )
    rid = client.request("tools/call", {"name": "t"})
    app.run()
    (item,) = client.take_items()
    assert isinstance(item, OutgoingError)
    assert item.message == {
        "jsonrpc": "2.0",
        "id": rid,
        "error": {
            "code": -32603,
            "message": "Missing required client capability: elicitation.url",
            "data": {"requiredCapabilities": {"elicitation": {"url": {}}}},
        },
    }


@pytest.mark.parametrize(
    "extra",
    [
        {"inputResponses": {"k": {"action": "accept", "content": {"x": 1}}}},
        {"inputResponses": ["not", "a", "map"]},
        {"requestState": "forged"},
        {"requestState": 7, "inputResponses": "junk"},
    ],
)
def test_legacy_client_cannot_forge_answers_or_state(extra: dict[str, Any]) -> None:
    """MRTR fields do not exist on the legacy wire: a first round never sees client values."""
    _conn, client, app = open_session(echo)
    client.request("tools/call", {"name": "t", "arguments": {}, **extra})
    app.run()
    (event,) = app.seen
    assert event.input_responses == {}
    assert event.input_response("k") is None
    assert event.request_state is None
    assert "inputResponses" not in event.params
    assert "requestState" not in event.params
    assert event.params == {"name": "t", "arguments": {}}


def test_other_legacy_methods_reach_the_application_untouched() -> None:
    _conn, client, app = open_session(lambda e: {"tools": []})
    rid = client.request("tools/list", {"cursor": "c"})
    app.run()
    (event,) = app.seen
    assert event.params == {"cursor": "c"}
    assert client.take() == [{"jsonrpc": "2.0", "id": rid, "result": {"tools": []}}]


def test_legacy_cancellation_without_legs() -> None:
    conn, client, app = open_session(lambda e: None)
    client.request("tools/call", {"name": "t"}, request_id=3)
    app.run()
    client.cancel(3, "user gave up")
    assert conn.events() == [RequestCancelled(3, "user gave up")]
    conn.respond(3, TEXT)  # the late answer is dropped
    assert client.take() == []
    with pytest.raises(LocalProtocolError):
        conn.respond(3, TEXT)


def test_remembered_cancellations_are_bounded() -> None:
    conn, client, app = open_session(lambda e: None, limits=Limits(max_in_flight=1))
    client.request("tools/call", {"name": "a"}, request_id="a")
    client.cancel("a")
    client.request("tools/call", {"name": "b"}, request_id="b")
    client.cancel("b")
    app.run()
    conn.respond("b", TEXT)  # still remembered: dropped
    with pytest.raises(LocalProtocolError):  # forgotten to stay within the bound
        conn.respond("a", TEXT)
    assert client.take() == []


def test_cancellation_of_unknown_or_malformed_ids_is_ignored() -> None:
    conn, client, _app = open_session(echo)
    client.cancel(99)
    client.notify("notifications/cancelled", {"requestId": True})
    client.notify("notifications/cancelled")
    assert conn.events() == []
    assert client.take() == []


def test_dual_era_connection_serves_modern_requests_statelessly_after_initialize() -> None:
    """The modern request's own envelope wins over the session's facts."""
    conn, client, app = open_session(echo, {"roots": {}})
    client.request(
        "tools/call", {"name": "t", "_meta": modern_meta({"sampling": {}})}, request_id=5
    )
    app.run()
    (event,) = app.seen
    assert event.era is Era.MODERN
    assert event.client_capabilities == {"sampling": {}}
    (item,) = conn.outgoing()
    assert item.message["result"]["resultType"] == "complete"


# --- Streamable HTTP legacy sessions --------------------------------------------------------


def test_legacy_http_session_is_not_held_to_the_modern_mirror_headers() -> None:
    """2025-11-25 clients send no Mcp-Method/Mcp-Name, and no version header on initialize."""
    conn = server()
    app = App(conn, echo)
    conn.receive_message(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params()},
        http=HttpRequestFacts(),
    )
    (reply,) = conn.outgoing()
    assert reply.message["result"]["protocolVersion"] == LEGACY
    conn.receive_message(
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        http=HttpRequestFacts(protocol_version=LEGACY),
    )
    conn.receive_message(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t"}},
        http=HttpRequestFacts(protocol_version=LEGACY),
    )
    conn.receive_message(
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
        http=HttpRequestFacts(),  # no header: the session's version applies
    )
    app.run()
    assert [e.request_id for e in app.seen] == [2, 3]
    assert [i.message.get("result") for i in conn.outgoing()] == [TEXT, TEXT]


@pytest.mark.parametrize("header", ["1999-01-01", "2026-07-28", "garbage"])
def test_legacy_http_request_with_an_unsupported_version_header_is_rejected(header: str) -> None:
    conn = server()
    conn.receive_message(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params()},
        http=HttpRequestFacts(),
    )
    conn.outgoing()
    conn.receive_message(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t"}},
        http=HttpRequestFacts(protocol_version=header),
    )
    (item,) = drain(conn, Era.LEGACY)
    assert isinstance(item, OutgoingError)
    assert item.http_status == 400
    if header == "2026-07-28":  # claims the modern wire without its envelope
        assert item.error.code == -32602
    else:
        assert item.message == {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {
                "code": -32600,
                "message": f"Bad Request: unsupported MCP-Protocol-Version header '{header}'",
                "data": {"supported": ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]},
            },
        }
    assert conn.in_flight == frozenset()
    assert isinstance(conn.events()[-1], InvalidMessage)


def _http_session(version: str = LEGACY) -> ServerConnection:
    conn = server()
    conn.receive_message(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params(version)},
        http=HttpRequestFacts(),
    )
    conn.outgoing()
    return conn


def test_legacy_http_version_header_must_be_the_negotiated_version() -> None:
    conn = _http_session("2025-06-18")
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t"}}
    conn.receive_message(call, http=HttpRequestFacts(protocol_version=LEGACY))
    (item,) = drain(conn, Era.LEGACY)
    assert isinstance(item, OutgoingError)
    assert (item.error.code, item.http_status) == (-32600, 400)
    assert "unsupported MCP-Protocol-Version header '2025-11-25'" in item.error.message
    conn.receive_message(call, http=HttpRequestFacts(protocol_version="2025-06-18"))
    assert [e.request_id for e in conn.events() if isinstance(e, RequestReceived)] == [2]


def test_legacy_http_version_header_sent_twice_is_refused() -> None:
    conn = _http_session()
    repeated = HttpRequestFacts(
        protocol_version=LEGACY, repeated=frozenset({"mcp-protocol-version"})
    )
    conn.receive_message(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}, http=repeated
    )
    (item,) = drain(conn, Era.LEGACY)
    assert isinstance(item, OutgoingError)
    assert item.message["error"] == {
        "code": -32600,
        "message": "Bad Request: MCP-Protocol-Version header is repeated",
    }
    assert conn.in_flight == frozenset()


def test_legacy_http_ignores_other_repeated_mirror_headers() -> None:
    """The legacy wire has no Mcp-Method/Mcp-Name: they are not read, repeated or not."""
    conn = _http_session()
    http = HttpRequestFacts(LEGACY, "x", None, {}, frozenset({"mcp-method"}))
    conn.receive_message({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, http=http)
    assert [e.request_id for e in conn.events() if isinstance(e, RequestReceived)] == [2]


def test_modern_request_on_a_legacy_http_session_keeps_its_header_rules() -> None:
    conn = server()
    conn.receive_message(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params()},
        http=HttpRequestFacts(),
    )
    conn.outgoing()
    conn.receive_message(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "t",
                "_meta": {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES: {}},
            },
        },
        http=HttpRequestFacts(protocol_version="2026-07-28", method="tools/call"),
    )
    (item,) = conn.outgoing()
    assert isinstance(item, OutgoingError)
    assert item.error.code == -32020


# --- the byte stream --------------------------------------------------------------------------


def test_a_whole_legacy_exchange_split_at_every_byte() -> None:
    """Chunking never changes what the server does (same bytes out, same handler calls)."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params()},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "é"}},
    ]
    stream = b"".join(json.dumps(m, ensure_ascii=False).encode() + b"\n" for m in lines)

    def run(chunks: list[bytes]) -> tuple[bytes, list[Any]]:
        conn = server()
        app = App(conn, echo)
        for chunk in chunks:
            conn.receive_data(chunk)
            app.run()
        return conn.data_to_send(), [(e.request_id, e.params) for e in app.seen]

    whole = run([stream])
    assert whole[1] == [(3, {"name": "é"})]
    assert run([stream[i : i + 1] for i in range(len(stream))]) == whole
