"""ServerConnection on the modern wire: events, the MRTR field checks, the answer gate, stamping
of results, discovery, cancellation, notifications, limits, and robustness."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from helpers import (
    CAPS,
    CLIENT,
    FORM_SCHEMA,
    SERVER,
    call,
    drain,
    error,
    events,
    feed,
    legacy_request,
    line,
    meta,
    notification,
    only,
    request,
    sent,
    spec_dir,
)
from mrtr_sansio import (
    UNSEALED,
    Era,
    ErrorCode,
    InputRequest,
    InputRequiredResult,
    InputResponses,
    InvalidMessage,
    JsonRpcError,
    Limits,
    LocalProtocolError,
    NotificationReceived,
    RequestCancelled,
    RequestReceived,
    RequestStateRejected,
    ServerConfig,
    ServerConnection,
    elicit_form,
    elicit_url,
    list_roots,
    sample,
)
from mrtr_sansio.config import StdlibJsonCodec
from mrtr_sansio.events import (
    OutgoingError,
    OutgoingInputRequired,
    OutgoingNotification,
    OutgoingResult,
)
from mrtr_sansio.protocol import SERVER_INFO, LegacySession
from mrtr_sansio.sealing import OpenedState, RequestStateError, StateBinding

FORM = elicit_form("Your name?", FORM_SCHEMA)
INFO_META = {SERVER_INFO: SERVER}


@pytest.fixture
def server_config() -> ServerConfig:
    """``conn`` stamps serverInfo; state unsealed, so that tests see it on the wire (sealing,
    the default, has its own tests in test_sealing_server.py)."""
    return ServerConfig(server_info=SERVER, request_state=UNSEALED)


@pytest.fixture
def bare() -> ServerConnection:
    """A server configured not to stamp serverInfo (state unsealed, as for ``conn``)."""
    return ServerConnection(ServerConfig(request_state=UNSEALED))


def received(conn: ServerConnection) -> RequestReceived:
    event = only(events(conn))
    assert isinstance(event, RequestReceived), event
    return event


def answer(
    conn: ServerConnection, msg: dict[str, Any], result: Any, *, typed: bool = True
) -> list[dict[str, Any]]:
    """Feed one request, answer it with ``result``, return what went out (schema-checked as
    that method's result when ``typed``)."""
    feed(conn, msg)
    event = received(conn)
    conn.respond(event.request_id, result)
    return sent(conn, methods={msg["id"]: msg["method"]} if typed else None)


def initialize(conn: ServerConnection) -> None:
    feed(
        conn,
        legacy_request(
            0,
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": CAPS, "clientInfo": CLIENT},
        ),
        notification("notifications/initialized"),
    )
    events(conn)
    sent(conn, Era.LEGACY)


# --- RequestReceived ------------------------------------------------------------------------


def test_request_received_fields() -> None:
    conn = ServerConnection(principal="alice")
    msg = call("c-1", "book", {"city": "Oslo"}, caps={"roots": {}})
    feed(conn, msg)
    event = received(conn)
    assert event.request_id == "c-1"
    assert event.method == "tools/call"
    assert event.params == msg["params"]
    assert event.era is Era.MODERN
    assert event.protocol_version == "2026-07-28"
    assert event.client_capabilities == {"roots": {}}
    assert event.client_info == CLIENT
    assert event.request_state is None
    assert event.round == 1
    assert event.principal == "alice"
    assert event.name == "book"
    assert event.arguments == {"city": "Oslo"}
    assert event.uri is None
    assert event.meta == msg["params"]["_meta"]
    assert isinstance(event.input_responses, InputResponses)
    assert len(event.input_responses) == 0
    assert event.input_response("x") is None
    assert conn.in_flight == {"c-1"}
    # The server builds it with a private fast constructor: the same value as the public one.
    public = RequestReceived("c-1", "tools/call", msg["params"], None, None, 1, "alice")
    assert attrs.asdict(event, recurse=False) == attrs.asdict(public, recurse=False)
    assert repr(event) == repr(public)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.round = 2  # type: ignore[misc]


def test_request_received_on_a_retry(bare: ServerConnection) -> None:
    conn = bare
    responses = {
        "who": {"action": "accept", "content": {"name": "octocat"}},
        "extra": {"unexpected": True},
    }
    msg = call(2, inputResponses=responses, requestState="opaque-state")
    feed(conn, msg)
    event = received(conn)
    assert event.request_state == "opaque-state"
    assert event.round is None  # an unsealed state does not carry the round
    assert event.input_responses.accepted_content("who") == {"name": "octocat"}
    assert event.input_response("extra") == {"unexpected": True}
    # Extra keys are passed through untouched.
    assert event.params["inputResponses"] == responses
    assert event.params["inputResponses"] is msg["params"]["inputResponses"] or (
        event.params["inputResponses"] == responses
    )


def test_round_is_unknown_with_responses_but_no_state() -> None:
    conn = ServerConnection()
    feed(conn, call(1, inputResponses={}))
    event = received(conn)
    assert event.round is None
    assert event.request_state is None


def test_request_received_helpers_for_other_methods(conn: ServerConnection) -> None:
    feed(
        conn,
        request(1, "resources/read", {"uri": "file:///a"}),
        request(2, "prompts/get", {"name": "p", "arguments": "junk"}),
        request(3, "tools/list", {"name": 5, "uri": 6, "_meta": meta()}),
    )
    read, prompt, listing = events(conn)
    assert isinstance(read, RequestReceived)
    assert isinstance(prompt, RequestReceived)
    assert isinstance(listing, RequestReceived)
    assert read.uri == "file:///a"
    assert read.name is None
    assert prompt.arguments == {}
    assert listing.name is None
    assert listing.uri is None


def test_meta_reader_without_meta() -> None:
    event = RequestReceived(1, "tools/list", {}, LegacySession("2025-11-25", {}, None))
    assert event.meta == {}
    assert event.arguments == {}


def test_request_received_error_helpers(conn: ServerConnection) -> None:
    feed(conn, call(1, "nope"), request(2, "resources/read", {"uri": "file:///gone"}))
    tool, resource = events(conn)
    assert isinstance(tool, RequestReceived)
    assert isinstance(resource, RequestReceived)
    assert tool.unknown() == JsonRpcError(ErrorCode.INVALID_PARAMS, "Unknown tool: nope")
    assert tool.unknown("other") == JsonRpcError(ErrorCode.INVALID_PARAMS, "Unknown tool: other")
    assert resource.unknown() == JsonRpcError(
        ErrorCode.INVALID_PARAMS, "Resource not found: file:///gone", {"uri": "file:///gone"}
    )
    assert tool.method_not_found() == JsonRpcError(
        ErrorCode.METHOD_NOT_FOUND, "Method not found: tools/call"
    )
    err = tool.missing_capability({"elicitation": {"url": {}}})
    assert err == JsonRpcError(
        ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY,
        "Missing required client capability: elicitation.url",
        {"requiredCapabilities": {"elicitation": {"url": {}}}},
    )
    conn.respond(1, err)
    conn.respond(2, resource.unknown())
    assert sent(conn) == [
        error(
            ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY,
            "Missing required client capability: elicitation.url",
            1,
            {"requiredCapabilities": {"elicitation": {"url": {}}}},
        ),
        error(
            ErrorCode.INVALID_PARAMS, "Resource not found: file:///gone", 2, {"uri": "file:///gone"}
        ),
    ]
    prompt = RequestReceived(3, "prompts/get", {"name": "p", "_meta": meta()})
    assert prompt.unknown().message == "Unknown prompt: p"
    other = RequestReceived(4, "completion/complete", {"_meta": meta()})
    assert other.unknown("x").message == "Unknown target: x"


def test_missing_capability_helper_on_the_legacy_wire() -> None:
    event = RequestReceived(1, "tools/call", {}, LegacySession("2025-11-25", {}, None))
    assert event.missing_capability({"roots": {}}) == JsonRpcError(
        ErrorCode.INTERNAL_ERROR,
        "Missing required client capability: roots",
        {"requiredCapabilities": {"roots": {}}},
    )


# --- MRTR field validation --------------------------------------------------------------------

MRTR = [
    ("tools/call", {"name": "t"}),
    ("prompts/get", {"name": "p"}),
    ("resources/read", {"uri": "file:///r"}),
]


@pytest.mark.parametrize(("method", "base"), MRTR)
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"inputResponses": None}, "inputResponses must be an object"),
        ({"inputResponses": []}, "inputResponses must be an object"),
        ({"inputResponses": "x"}, "inputResponses must be an object"),
        ({"inputResponses": 1}, "inputResponses must be an object"),
        ({"inputResponses": {"user_name": 12345}}, "each inputResponses value must be an object"),
        ({"inputResponses": {"a": {}, "b": None}}, "each inputResponses value must be an object"),
        ({"inputResponses": {"a": []}}, "each inputResponses value must be an object"),
        ({"inputResponses": {"a": "accept"}}, "each inputResponses value must be an object"),
        ({"requestState": None}, "requestState must be a string"),
        ({"requestState": 5}, "requestState must be a string"),
        ({"requestState": {"a": 1}}, "requestState must be a string"),
        ({"requestState": ["s"]}, "requestState must be a string"),
        ({"inputResponses": {}, "requestState": False}, "requestState must be a string"),
    ],
)
def test_malformed_mrtr_fields_are_invalid_params(
    conn: ServerConnection,
    method: str,
    base: dict[str, Any],
    extra: dict[str, Any],
    message: str,
) -> None:
    feed(conn, request(5, method, {**base, **extra}))
    assert sent(conn) == [error(ErrorCode.INVALID_PARAMS, message, 5)]
    assert only(events(conn)) == InvalidMessage(
        JsonRpcError(ErrorCode.INVALID_PARAMS, message), 5, True
    )
    assert conn.in_flight == frozenset()


@pytest.mark.parametrize(("method", "base"), MRTR)
def test_valid_mrtr_fields_reach_the_application(
    conn: ServerConnection, method: str, base: dict[str, Any]
) -> None:
    responses = {"k": {"action": "decline"}, "r": {"roots": []}, "ignored": {"x": [1]}}
    feed(conn, request(1, method, {**base, "inputResponses": responses, "requestState": ""}))
    event = received(conn)
    assert event.params["inputResponses"] == responses
    assert event.request_state == ""


def test_mrtr_fields_are_not_checked_on_other_methods(conn: ServerConnection) -> None:
    feed(conn, request(1, "tools/list", {"inputResponses": None, "requestState": 5}))
    event = received(conn)
    assert event.request_state is None
    assert len(event.input_responses) == 0


def test_conformance_validate_input_scenario(conn: ServerConnection) -> None:
    """The conformance suite's validate-input sends these two retries."""
    feed(
        conn,
        call(1, "ask", inputResponses=None, requestState="s"),
        call(2, "ask", inputResponses={"user_name": 12345}, requestState="s"),
    )
    assert sent(conn) == [
        error(ErrorCode.INVALID_PARAMS, "inputResponses must be an object", 1),
        error(ErrorCode.INVALID_PARAMS, "each inputResponses value must be an object", 2),
    ]


# --- results ----------------------------------------------------------------------------------


def test_complete_result_gets_result_type_and_server_info(conn: ServerConnection) -> None:
    out = answer(conn, call(1), {"content": [{"type": "text", "text": "ok"}], "isError": False})
    assert out == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "content": [{"type": "text", "text": "ok"}],
                "isError": False,
                "resultType": "complete",
                "_meta": INFO_META,
            },
        }
    ]
    assert conn.in_flight == frozenset()


def test_no_server_info_unless_configured(bare: ServerConnection) -> None:
    out = answer(bare, call(1), {"content": []})
    assert out == [{"jsonrpc": "2.0", "id": 1, "result": {"content": [], "resultType": "complete"}}]


def test_server_info_is_merged_with_the_application_meta(conn: ServerConnection) -> None:
    out = answer(conn, call(1), {"content": [], "_meta": {"app/key": 1}})
    assert out[0]["result"]["_meta"] == {"app/key": 1, SERVER_INFO: SERVER}
    own = {"name": "custom", "version": "9"}
    out = answer(conn, call(2), {"content": [], "_meta": {SERVER_INFO: own}})
    assert out[0]["result"]["_meta"] == {SERVER_INFO: own}


def test_application_result_is_not_mutated(conn: ServerConnection) -> None:
    result: dict[str, Any] = {"content": [], "_meta": {"a": 1}}
    answer(conn, call(1), result)
    assert result == {"content": [], "_meta": {"a": 1}}


def test_result_type_set_by_the_application_is_kept(conn: ServerConnection) -> None:
    task = {"taskId": "t1", "status": "working", "createdAt": "x", "lastUpdatedAt": "x"}
    out = answer(conn, call(1), {**task, "resultType": "task"}, typed=False)
    assert out[0]["result"]["resultType"] == "task"


def test_outgoing_items_are_typed_and_routed(conn: ServerConnection) -> None:
    feed(conn, call(1), call(2), call(3))
    events(conn)
    conn.respond(1, {"content": []})
    conn.respond(2, InputRequiredResult(request_state="s"))
    conn.respond(3, JsonRpcError(-32000, "app failure"))
    items = drain(conn, Era.MODERN)
    assert [type(i) for i in items] == [OutgoingResult, OutgoingInputRequired, OutgoingError]
    assert [i.related_request_id for i in items] == [1, 2, 3]
    for item in items:
        assert json.loads(item.data) == item.message
    error_item = items[2]
    assert isinstance(error_item, OutgoingError)
    assert error_item.error == JsonRpcError(-32000, "app failure")
    assert error_item.message == error(-32000, "app failure", 3)


def test_legacy_results_never_carry_result_type(conn: ServerConnection) -> None:
    initialize(conn)
    feed(conn, legacy_request(1, "tools/call", {"name": "t"}))
    event = received(conn)
    assert event.era is Era.LEGACY
    conn.respond(1, {"content": [], "resultType": "complete"})
    feed(conn, legacy_request(2, "tools/list"))
    events(conn)
    conn.respond(2, {"tools": []})
    assert sent(conn, Era.LEGACY) == [
        {"jsonrpc": "2.0", "id": 1, "result": {"content": []}},
        {"jsonrpc": "2.0", "id": 2, "result": {"tools": []}},
    ]


def test_legacy_results_never_carry_the_modern_decoration(conn: ServerConnection) -> None:
    """A modern result relayed as it is (the bridge's case) loses its cache hints and its
    serverInfo on the legacy wire; the rest of its ``_meta`` stays."""
    initialize(conn)
    info = {SERVER_INFO: {"name": "up", "version": "1"}}
    modern = {"tools": [], "resultType": "complete", "ttlMs": 5, "cacheScope": "private"}
    feed(conn, legacy_request(1, "tools/list"), legacy_request(2, "tools/list"))
    events(conn)
    conn.respond(1, {**modern, "_meta": info})
    conn.respond(2, {**modern, "_meta": {**info, "x/kept": 1}})
    assert sent(conn, Era.LEGACY) == [
        {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}},
        {"jsonrpc": "2.0", "id": 2, "result": {"tools": [], "_meta": {"x/kept": 1}}},
    ]


# --- cache hints ------------------------------------------------------------------------------

CACHEABLE: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("tools/list", {}, {"tools": []}),
    ("prompts/list", {}, {"prompts": []}),
    ("resources/list", {}, {"resources": []}),
    ("resources/templates/list", {}, {"resourceTemplates": []}),
    ("resources/read", {"uri": "file:///a"}, {"contents": []}),
]


@pytest.mark.parametrize(("method", "params", "result"), CACHEABLE)
def test_cacheable_results_get_cache_hints(
    bare: ServerConnection, method: str, params: dict[str, Any], result: dict[str, Any]
) -> None:
    out = answer(bare, request(1, method, params), result)
    assert out == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {**result, "resultType": "complete", "ttlMs": 0, "cacheScope": "private"},
        }
    ]


@pytest.mark.parametrize(("method", "params", "result"), CACHEABLE)
def test_cache_hints_come_from_config_unless_the_application_set_them(
    method: str, params: dict[str, Any], result: dict[str, Any]
) -> None:
    conn = ServerConnection(ServerConfig(cache_ttl_ms=60_000, cache_scope="public"))
    out = answer(conn, request(1, method, params), result)
    assert (out[0]["result"]["ttlMs"], out[0]["result"]["cacheScope"]) == (60_000, "public")
    out = answer(conn, request(2, method, params), {**result, "ttlMs": 5, "cacheScope": "private"})
    assert (out[0]["result"]["ttlMs"], out[0]["result"]["cacheScope"]) == (5, "private")


@pytest.mark.parametrize(
    ("method", "params", "result"),
    [
        ("tools/call", {"name": "t"}, {"content": []}),
        ("prompts/get", {"name": "p"}, {"messages": []}),
        ("completion/complete", {}, {"completion": {"values": []}}),
        ("custom/method", {}, {}),
    ],
)
def test_other_results_get_no_cache_hints(
    bare: ServerConnection, method: str, params: dict[str, Any], result: dict[str, Any]
) -> None:
    out = answer(bare, request(1, method, params), result)
    assert "ttlMs" not in out[0]["result"]
    assert "cacheScope" not in out[0]["result"]


def test_input_required_gets_no_cache_hints(bare: ServerConnection) -> None:
    out = answer(
        bare,
        request(1, "resources/read", {"uri": "file:///a"}),
        InputRequiredResult({"r": list_roots()}, "s"),
    )
    assert out == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "resultType": "input_required",
                "inputRequests": {"r": {"method": "roots/list", "params": {}}},
                "requestState": "s",
            },
        }
    ]


def test_non_complete_cacheable_result_gets_no_cache_hints(bare: ServerConnection) -> None:
    out = answer(
        bare, request(1, "resources/read", {"uri": "u"}), {"resultType": "other"}, typed=False
    )
    assert out[0]["result"] == {"resultType": "other"}


# --- input_required -------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "base"), MRTR)
def test_input_required_on_the_three_methods(
    conn: ServerConnection, method: str, base: dict[str, Any]
) -> None:
    result = InputRequiredResult({"who": FORM}, "state-1")
    out = answer(conn, request(1, method, base), result)
    assert out == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "resultType": "input_required",
                "inputRequests": {
                    "who": {
                        "method": "elicitation/create",
                        "params": {"message": "Your name?", "requestedSchema": FORM_SCHEMA},
                    }
                },
                "requestState": "state-1",
                "_meta": INFO_META,
            },
        }
    ]
    assert conn.in_flight == frozenset()  # the server keeps nothing after answering


def test_input_required_state_only(bare: ServerConnection) -> None:
    out = answer(bare, call(1), InputRequiredResult(request_state="retry-later"))
    assert out[0]["result"] == {"resultType": "input_required", "requestState": "retry-later"}


def test_input_required_as_a_dict_goes_through_the_same_path(conn: ServerConnection) -> None:
    wire = {
        "resultType": "input_required",
        "inputRequests": {"r": {"method": "roots/list"}},
        "requestState": "s",
        "_meta": {"app/trace": "t-1"},
    }
    out = answer(conn, call(1), wire)
    assert out == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "resultType": "input_required",
                "inputRequests": {"r": {"method": "roots/list"}},
                "requestState": "s",
                "_meta": {"app/trace": "t-1", SERVER_INFO: SERVER},
            },
        }
    ]


@pytest.mark.parametrize(
    "wire",
    [
        {"resultType": "input_required"},
        {"resultType": "input_required", "requestState": 5},
        {"resultType": "input_required", "inputRequests": []},
        {"resultType": "input_required", "inputRequests": {"k": {"method": "tools/call"}}},
    ],
)
def test_invalid_input_required_dict_is_a_local_error_and_the_request_stays_open(
    conn: ServerConnection, wire: dict[str, Any]
) -> None:
    feed(conn, call(1))
    received(conn)
    with pytest.raises(LocalProtocolError, match="invalid input_required result"):
        conn.respond(1, wire)
    assert conn.in_flight == {1}
    assert sent(conn) == []
    conn.respond(1, {"content": []})
    assert only(sent(conn))["id"] == 1


@pytest.mark.parametrize(
    "method",
    ["tools/list", "prompts/list", "resources/list", "completion/complete", "server/discover"],
)
def test_input_required_on_other_methods_is_refused_and_the_request_stays_open(method: str) -> None:
    conn = ServerConnection(ServerConfig(answer_discovery=False))
    feed(conn, request(1, method))
    received(conn)
    with pytest.raises(LocalProtocolError, match=f"not on {method}"):
        conn.respond(1, InputRequiredResult(request_state="s"))
    with pytest.raises(LocalProtocolError, match=f"not on {method}"):
        conn.respond(1, {"resultType": "input_required", "requestState": "s"})
    assert conn.in_flight == {1}
    assert sent(conn) == []
    conn.respond(1, {"ok": True})
    assert only(sent(conn))["result"]["resultType"] == "complete"


def test_undeclared_capabilities_are_missing_required_client_capability(
    conn: ServerConnection,
) -> None:
    result = InputRequiredResult(
        {
            "who": FORM,
            "login": elicit_url("Sign in", "https://example.com"),
            "llm": sample("hi", 10, tools=[{"name": "t", "inputSchema": {"type": "object"}}]),
            "dirs": list_roots(),
        },
        "s",
    )
    out = answer(conn, call(1, caps={"elicitation": {}, "sampling": {}}), result)
    assert out == [
        error(
            ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY,
            "Missing required client capability: elicitation.url, sampling.tools, roots",
            1,
            {
                "requiredCapabilities": {
                    "elicitation": {"form": {}, "url": {}},
                    "sampling": {"tools": {}},
                    "roots": {},
                }
            },
        )
    ]
    assert conn.in_flight == frozenset()


@pytest.mark.parametrize(
    ("request_", "caps", "required"),
    [
        (FORM, {}, {"elicitation": {"form": {}}}),
        (FORM, {"elicitation": {"url": {}}}, {"elicitation": {"form": {}}}),
        (elicit_url("m", "https://x"), {"elicitation": {}}, {"elicitation": {"url": {}}}),
        (sample("q", 5), {"elicitation": {}}, {"sampling": {}}),
        (
            sample("q", 5, tool_choice={"mode": "none"}),
            {"sampling": {}},
            {"sampling": {"tools": {}}},
        ),
        (
            sample("q", 5, includeContext="thisServer"),
            {"sampling": {"tools": {}}},
            {"sampling": {"context": {}}},
        ),
        (list_roots(), {"sampling": {}}, {"roots": {}}),
    ],
)
def test_each_capability_rule_on_the_wire(
    bare: ServerConnection, request_: InputRequest, caps: dict[str, Any], required: dict[str, Any]
) -> None:
    out = answer(bare, call(1, caps=caps), InputRequiredResult({"k": request_}))
    assert only(out)["error"]["code"] == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert out[0]["error"]["data"] == {"requiredCapabilities": required}


@pytest.mark.parametrize(
    ("request_", "caps"),
    [
        (FORM, {"elicitation": {}}),
        (FORM, {"elicitation": {"form": {}}}),
        (elicit_url("m", "https://x"), {"elicitation": {"url": {}}}),
        (sample("q", 5), {"sampling": {}}),
        (sample("q", 5, tools=[]), {"sampling": {"tools": {}}}),
        (sample("q", 5, includeContext="allServers"), {"sampling": {"context": {}}}),
        (sample("q", 5, includeContext="none"), {"sampling": {}}),
        (list_roots(), {"roots": {}}),
    ],
)
def test_declared_capabilities_let_the_request_through(
    bare: ServerConnection, request_: InputRequest, caps: dict[str, Any]
) -> None:
    out = answer(bare, call(1, caps=caps), InputRequiredResult({"k": request_}))
    assert only(out)["result"]["inputRequests"] == {"k": request_.to_wire()}


def test_capabilities_are_those_of_this_request(bare: ServerConnection) -> None:
    feed(bare, call(1, caps=CAPS), call(2, caps={}))
    events(bare)
    bare.respond(2, InputRequiredResult({"r": list_roots()}))
    bare.respond(1, InputRequiredResult({"r": list_roots()}))
    out = sent(bare)
    assert out[0]["error"]["code"] == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert out[1]["result"]["resultType"] == "input_required"


def test_legacy_request_without_the_shim_gets_internal_error() -> None:
    conn = ServerConnection(ServerConfig(legacy_shim=False))
    initialize(conn)
    feed(conn, legacy_request(1, "tools/call", {"name": "t"}))
    received(conn)
    conn.respond(1, InputRequiredResult({"who": FORM}))
    assert sent(conn, Era.LEGACY) == [
        error(
            ErrorCode.INTERNAL_ERROR,
            "The handler needs client input, which this server can only request on the "
            "2026-07-28 protocol (input_required result)",
            1,
        )
    ]


def test_legacy_request_without_server_requests_gets_internal_error() -> None:
    conn = ServerConnection(server_requests=False)
    initialize(conn)
    feed(conn, legacy_request(1, "tools/call", {"name": "t"}))
    received(conn)
    conn.respond(1, {"resultType": "input_required", "requestState": "s"})
    assert only(sent(conn, Era.LEGACY))["error"]["code"] == ErrorCode.INTERNAL_ERROR


def test_gate_order_cancelled_comes_before_everything(conn: ServerConnection) -> None:
    feed(conn, request(1, "tools/list"), call(2, caps={}))
    events(conn)
    feed(
        conn,
        notification("notifications/cancelled", {"requestId": 1}),
        notification("notifications/cancelled", {"requestId": 2}),
    )
    events(conn)
    conn.respond(1, InputRequiredResult(request_state="s"))  # no LocalProtocolError: dropped
    conn.respond(2, InputRequiredResult({"r": list_roots()}))  # no -32021: dropped
    assert sent(conn) == []


def test_gate_order_method_comes_before_capabilities(conn: ServerConnection) -> None:
    feed(conn, request(1, "tools/list", caps={}))
    received(conn)
    with pytest.raises(LocalProtocolError):
        conn.respond(1, InputRequiredResult({"r": list_roots()}))


def test_request_state_must_be_a_string_without_a_protector(conn: ServerConnection) -> None:
    feed(conn, call(1))
    received(conn)
    with pytest.raises(LocalProtocolError, match="request_state must be a string"):
        conn.respond(1, InputRequiredResult(request_state={"step": 1}))
    assert conn.in_flight == {1}
    conn.respond(1, InputRequiredResult(request_state=json.dumps({"step": 1})))
    assert only(sent(conn))["result"]["requestState"] == '{"step": 1}'


def test_request_state_passes_through_unchanged(bare: ServerConnection) -> None:
    state = 'eyJsb2NhdGlvbiI6Ik5ldyBZb3JrIn0=/+ é \u2028 "quoted"'
    out = answer(bare, call(1), InputRequiredResult({"who": FORM}, state))
    assert out[0]["result"]["requestState"] == state
    feed(bare, call(2, inputResponses={"who": {"action": "cancel"}}, requestState=state))
    assert received(bare).request_state == state


def test_request_state_never_leaks_between_requests(bare: ServerConnection) -> None:
    feed(
        bare,
        call(1, inputResponses={"a": {"action": "accept"}}, requestState="state-A"),
        call(2),
        call(3, inputResponses={"b": {"action": "decline"}}, requestState="state-B"),
    )
    got = {e.request_id: (e.request_state, dict(e.input_responses)) for e in events(bare)}  # type: ignore[attr-defined]
    assert got == {
        1: ("state-A", {"a": {"action": "accept"}}),
        2: (None, {}),
        3: ("state-B", {"b": {"action": "decline"}}),
    }
    bare.respond(2, InputRequiredResult({"r": list_roots()}))
    assert "requestState" not in only(sent(bare))["result"]


def test_unserializable_result_is_a_local_error_and_the_request_stays_open(
    conn: ServerConnection,
) -> None:
    feed(conn, call(1), call(2))
    events(conn)
    with pytest.raises(LocalProtocolError, match="cannot be serialized"):
        conn.respond(1, {"content": [object()]})
    strict = ServerConnection(ServerConfig(codec=StdlibJsonCodec(), request_state=UNSEALED))
    feed(strict, call(2))
    events(strict)
    with pytest.raises(LocalProtocolError, match="cannot be serialized"):
        strict.respond(2, {"x": float("nan")})  # (orjson, the default when installed: null)
    with pytest.raises(LocalProtocolError, match="cannot be serialized"):
        conn.respond(
            2,
            InputRequiredResult(
                {"f": elicit_form("m", {"type": "object", "properties": {}, "bad": {1, 2}})}
            ),
        )
    assert conn.in_flight == {1, 2}
    assert sent(conn) == []


def test_respond_misuse(conn: ServerConnection) -> None:
    with pytest.raises(LocalProtocolError, match="no request with id 1"):
        conn.respond(1, {})
    feed(conn, call(1))
    received(conn)
    with pytest.raises(TypeError, match="not list"):
        conn.respond(1, [1])  # type: ignore[arg-type]
    conn.respond(1, {"content": []})
    with pytest.raises(LocalProtocolError, match="no request with id 1"):
        conn.respond(1, {"content": []})


# --- server/discover ------------------------------------------------------------------------


def test_server_discover_is_answered_from_config() -> None:
    conn = ServerConnection(
        ServerConfig(
            server_info=SERVER,
            capabilities={"tools": {"listChanged": True}, "prompts": {}},
            instructions="Be nice.",
            cache_ttl_ms=1000,
            cache_scope="public",
        )
    )
    feed(conn, request("d", "server/discover"))
    assert events(conn) == []
    assert sent(conn, methods={"d": "server/discover"}) == [
        {
            "jsonrpc": "2.0",
            "id": "d",
            "result": {
                "supportedVersions": [
                    "2026-07-28",
                    "2025-11-25",
                    "2025-06-18",
                    "2025-03-26",
                    "2024-11-05",
                ],
                "capabilities": {"tools": {"listChanged": True}, "prompts": {}},
                "instructions": "Be nice.",
                "resultType": "complete",
                "_meta": INFO_META,
                "ttlMs": 1000,
                "cacheScope": "public",
            },
        }
    ]
    assert conn.in_flight == frozenset()


def test_server_discover_without_instructions_or_info(bare: ServerConnection) -> None:
    feed(bare, request(1, "server/discover"))
    assert sent(bare, methods={1: "server/discover"})[0]["result"] == {
        "supportedVersions": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
        "capabilities": {},
        "resultType": "complete",
        "ttlMs": 0,
        "cacheScope": "private",
    }


def test_server_discover_can_be_left_to_the_application() -> None:
    conn = ServerConnection(ServerConfig(answer_discovery=False, legacy_versions=()))
    feed(conn, request(1, "server/discover"))
    event = received(conn)
    assert event.method == "server/discover"
    conn.respond(1, {**conn.discover_result(), "instructions": "mine"})
    assert sent(conn, methods={1: "server/discover"})[0]["result"] == {
        "supportedVersions": ["2026-07-28"],
        "capabilities": {},
        "instructions": "mine",
        "resultType": "complete",
        "ttlMs": 0,
        "cacheScope": "private",
    }


# --- cancellation -----------------------------------------------------------------------------


def test_cancelled_request_gets_nothing_at_all(conn: ServerConnection) -> None:
    feed(conn, call(1), call(2))
    events(conn)
    feed(conn, notification("notifications/cancelled", {"requestId": 1, "reason": "user"}))
    assert events(conn) == [RequestCancelled(1, "user")]
    assert conn.in_flight == {2}
    conn.notify("notifications/progress", {"progressToken": "p", "progress": 1}, 1)
    conn.respond(1, {"content": []})
    conn.respond(2, {"content": []})
    assert [m["id"] for m in sent(conn)] == [2]


@pytest.mark.parametrize(
    "result",
    [{"content": []}, InputRequiredResult(request_state="s"), JsonRpcError(-32000, "x")],
)
def test_every_kind_of_answer_to_a_cancelled_request_is_dropped(
    conn: ServerConnection, result: Any
) -> None:
    feed(conn, call(1), notification("notifications/cancelled", {"requestId": 1}))
    assert [type(e) for e in events(conn)] == [RequestReceived, RequestCancelled]
    conn.respond(1, result)
    assert sent(conn) == []


@pytest.mark.parametrize(
    "params",
    [
        {"requestId": 99},
        {"requestId": True},
        {"requestId": 1.0},
        {"requestId": None},
        {"requestId": [1]},
        {},
        None,
    ],
)
def test_cancellation_of_nothing_is_ignored(conn: ServerConnection, params: Any) -> None:
    feed(conn, call(1), notification("notifications/cancelled", params))
    assert [type(e) for e in events(conn)] == [RequestReceived]
    assert conn.in_flight == {1}
    assert sent(conn) == []


def test_cancellation_reason_must_be_a_string(conn: ServerConnection) -> None:
    feed(conn, call(1), notification("notifications/cancelled", {"requestId": 1, "reason": 5}))
    assert events(conn)[-1] == RequestCancelled(1, None)


def test_cancellation_after_the_answer_is_ignored(conn: ServerConnection) -> None:
    feed(conn, call(1))
    received(conn)
    conn.respond(1, {"content": []})
    feed(conn, notification("notifications/cancelled", {"requestId": 1}))
    assert events(conn) == []
    assert len(sent(conn)) == 1


# --- notifications ----------------------------------------------------------------------------


def test_other_notifications_are_events(conn: ServerConnection) -> None:
    feed(conn, notification("notifications/custom", {"a": 1}), notification("x/y"))
    assert events(conn) == [
        NotificationReceived("notifications/custom", {"a": 1}),
        NotificationReceived("x/y", None),
    ]
    assert sent(conn) == []


def test_request_scoped_notifications_follow_their_request(conn: ServerConnection) -> None:
    feed(conn, call(1, envelope=meta(progressToken="p")))
    received(conn)
    progress = {"progressToken": "p", "progress": 0.5, "total": 1}
    conn.notify("notifications/progress", progress, 1)
    items = drain(conn, Era.MODERN)
    assert [(type(i), i.related_request_id) for i in items] == [(OutgoingNotification, 1)]
    assert items[0].message == {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": progress,
    }
    conn.respond(1, {"content": []})
    sent(conn)
    conn.notify("notifications/progress", progress, 1)  # the request is over
    conn.notify("notifications/progress", progress, 42)  # never existed
    assert sent(conn) == []


def test_unrelated_notifications_go_out(conn: ServerConnection) -> None:
    conn.notify("notifications/tools/list_changed")
    item = only(drain(conn, Era.MODERN))
    assert item.related_request_id is None
    assert item.message == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


def log(level: str) -> dict[str, Any]:
    return {"level": level, "data": f"a {level} message"}


def test_log_messages_need_the_request_log_level(conn: ServerConnection) -> None:
    feed(conn, call(1), call(2, envelope=meta(log_level="warning")))
    events(conn)
    for level in ("debug", "info", "warning", "error", "emergency"):
        conn.notify("notifications/message", log(level), 1)
        conn.notify("notifications/message", log(level), 2)
    out = sent(conn)
    assert [m["params"]["level"] for m in out] == ["warning", "error", "emergency"]
    assert all(m["method"] == "notifications/message" for m in out)


@pytest.mark.parametrize("level", ["debug", "info", "notice", "error"])
def test_log_level_threshold(conn: ServerConnection, level: str) -> None:
    feed(conn, call(1, envelope=meta(log_level=level)))
    received(conn)
    levels = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
    for name in levels:
        conn.notify("notifications/message", log(name), 1)
    assert [m["params"]["level"] for m in sent(conn)] == levels[levels.index(level) :]


def test_unrelated_log_messages_are_not_sent_on_the_modern_wire(conn: ServerConnection) -> None:
    conn.notify("notifications/message", log("emergency"))
    assert sent(conn) == []


@pytest.mark.parametrize(
    "params", [None, {"data": 1}, {"level": "loud", "data": 1}, {"level": [1]}]
)
def test_log_message_with_an_invalid_level_is_a_local_error(
    conn: ServerConnection, params: Any
) -> None:
    feed(conn, call(1, envelope=meta(log_level="debug")))
    received(conn)
    with pytest.raises(LocalProtocolError, match="level"):
        conn.notify("notifications/message", params, 1)
    assert sent(conn) == []


# --- limits -----------------------------------------------------------------------------------


def test_max_in_flight() -> None:
    conn = ServerConnection(ServerConfig(limits=Limits(max_in_flight=2)))
    feed(conn, call(1), call(2), call(3))
    assert sent(conn) == [error(ErrorCode.INTERNAL_ERROR, "Too many requests in flight", 3)]
    assert conn.in_flight == {1, 2}
    conn.respond(1, {"content": []})
    feed(conn, call(3))
    assert conn.in_flight == {2, 3}


def test_max_input_responses() -> None:
    conn = ServerConnection(ServerConfig(limits=Limits(max_input_responses=2)))
    two: dict[str, Any] = {"a": {}, "b": {}}
    feed(conn, call(1, inputResponses=two), call(2, inputResponses={**two, "c": {}}))
    assert sent(conn) == [
        error(ErrorCode.INVALID_PARAMS, "inputResponses has more than 2 entries", 2)
    ]
    assert conn.in_flight == {1}


@pytest.mark.parametrize(
    ("state", "accepted"),
    [("a" * 16, True), ("a" * 17, False), ("é" * 8, True), ("é" * 9, False), ("€" * 6, False)],
)
def test_max_request_state_bytes(state: str, accepted: bool) -> None:
    conn = ServerConnection(
        ServerConfig(limits=Limits(max_request_state_bytes=16), request_state=UNSEALED)
    )
    feed(conn, call(1, requestState=state))
    if accepted:
        assert received(conn).request_state == state
        assert sent(conn) == []
    else:
        assert sent(conn) == [
            error(
                ErrorCode.INVALID_PARAMS,
                "Invalid or expired requestState",
                1,
                {"reason": "invalid_request_state"},
            )
        ]
        assert events(conn) == [
            RequestStateRejected(1, "tools/call", "oversized"),
            InvalidMessage(
                JsonRpcError(
                    ErrorCode.INVALID_PARAMS,
                    "Invalid or expired requestState",
                    {"reason": "invalid_request_state"},
                ),
                1,
                True,
            ),
        ]


def test_max_input_requests_bounds_what_the_application_sends() -> None:
    conn = ServerConnection(ServerConfig(limits=Limits(max_input_requests=2)))
    feed(conn, call(1))
    received(conn)
    three = {"a": list_roots(), "b": list_roots(), "c": list_roots()}
    with pytest.raises(LocalProtocolError, match="more than 2 entries"):
        conn.respond(1, InputRequiredResult(three))
    assert conn.in_flight == {1}
    del three["c"]
    conn.respond(1, InputRequiredResult(three))
    assert len(only(sent(conn))["result"]["inputRequests"]) == 2


# --- robustness -------------------------------------------------------------------------------

JUNK: list[bytes] = [
    b"{",
    b"\xff",
    b"[]",
    b"null",
    b'{"jsonrpc":"2.0","id":null,"method":"tools/call"}',
    b'{"jsonrpc":"2.0","id":1,"result":{}}',
    b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":[]}}',
    b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":{}}}}',
    b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"inputResponses":{"x":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}',
    b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":[]},"io.modelcontextprotocol/logLevel":{}}}}',
    b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{}}}',
    b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":[]}}',
    b'{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}',
    b'{"jsonrpc":"2.0","id":8,"method":"initialize","params":{"protocolVersion":5}}',
    b'{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"cursor":1e400}}',
]


def test_peer_junk_never_raises_and_never_disturbs_a_request_in_flight(
    conn: ServerConnection,
) -> None:
    feed(conn, call("keep", inputResponses={"who": {"action": "accept", "content": {"n": 1}}}))
    keep = received(conn)
    for junk in JUNK:
        conn.receive_data(junk + b"\n")
        conn.receive_message(junk)
        drain(conn, Era.MODERN)
        drain(conn, Era.LEGACY) if conn.session is not None else None
        for event in events(conn):
            if isinstance(event, RequestReceived):
                conn.respond(event.request_id, {"content": []})
                sent(conn, event.era)
    assert "keep" in conn.in_flight
    conn.respond("keep", InputRequiredResult({"who": FORM}, "s2"))
    out = only(sent(conn))
    assert out["id"] == "keep"
    assert out["result"]["requestState"] == "s2"
    assert keep.input_responses.accepted_content("who") == {"n": 1}


@pytest.mark.parametrize("message", [5, None, [b"x"]])
def test_receive_message_refuses_non_messages(conn: ServerConnection, message: Any) -> None:
    with pytest.raises(TypeError, match="message must be bytes, str or a mapping"):
        conn.receive_message(message)


def test_receive_message_accepts_bytes_str_and_mappings(conn: ServerConnection) -> None:
    from types import MappingProxyType

    conn.receive_message(json.dumps(call(1)))
    conn.receive_message(json.dumps(call(2)).encode())
    conn.receive_message(bytearray(json.dumps(call(3)).encode()))  # type: ignore[arg-type]
    conn.receive_message(memoryview(json.dumps(call(4)).encode()))  # type: ignore[arg-type]
    conn.receive_message(call(5))
    conn.receive_message(MappingProxyType(call(6)))
    conn.receive_message("\ud800")  # a lone surrogate is not UTF-8
    assert [e.request_id for e in events(conn) if isinstance(e, RequestReceived)] == [
        1,
        2,
        3,
        4,
        5,
        6,
    ]
    assert sent(conn) == [error(-32700, "Parse error: invalid UTF-8")]


def test_next_event_and_events(conn: ServerConnection) -> None:
    from mrtr_sansio import NEED_DATA

    assert conn.next_event() is NEED_DATA
    assert repr(NEED_DATA) == "NEED_DATA"
    feed(conn, call(1), call(2))
    first = conn.next_event()
    assert isinstance(first, RequestReceived)
    assert [e.request_id for e in conn.events()] == [2]  # type: ignore[attr-defined]
    assert conn.events() == []


def test_no_timers_on_the_modern_wire(conn: ServerConnection) -> None:
    feed(conn, call(1))
    assert conn.next_deadline() is None
    conn.handle_timer(1e12)
    assert sent(conn) == []


# --- the spec's examples ------------------------------------------------------------------------

needs_spec = pytest.mark.skipif(spec_dir() is None, reason="official spec examples not found")


def example(name: str) -> Any:
    folder = spec_dir()
    assert folder is not None
    return json.loads((folder / "examples" / f"{name}.json").read_text(encoding="utf-8"))


@needs_spec
@pytest.mark.parametrize(
    ("name", "result"),
    [
        ("CallToolRequest_call-tool-request", {"content": [{"type": "text", "text": "ok"}]}),
        ("GetPromptRequest_get-prompt-request", {"messages": []}),
        ("ReadResourceRequest_read-resource-request", {"contents": []}),
    ],
)
def test_spec_requests_are_served(conn: ServerConnection, name: str, result: Any) -> None:
    msg = example(name)
    conn.receive_message(msg)
    event = received(conn)
    assert event.params == msg["params"]
    conn.respond(event.request_id, result)
    assert only(sent(conn, methods={msg["id"]: msg["method"]}))["id"] == msg["id"]


@needs_spec
def test_spec_discover_request_is_answered(conn: ServerConnection) -> None:
    msg = example("DiscoverRequest_server-discover-request")
    conn.receive_message(msg)
    out = only(sent(conn, methods={msg["id"]: "server/discover"}))
    assert out["result"]["supportedVersions"][0] == "2026-07-28"


@needs_spec
def test_spec_mrtr_exchange(bare: ServerConnection) -> None:
    """DIGEST 7.1-7.4: the example InputRequiredResult goes out byte-for-byte as the app wrote
    it, and the example retry reaches the handler with its responses and state."""
    wire = example(
        "InputRequiredResult_input-required-result-with-elicitation-and-sampling-and-request-state"
    )
    first = call(1, "get_weather", {"location": "New York"})
    bare.receive_message(first)
    received(bare)
    bare.respond(1, InputRequiredResult.from_wire(wire))
    assert only(sent(bare, methods={1: "tools/call"}))["result"] == wire
    responses = example("InputResponses_elicitation-and-sampling-input-responses")
    retry = call(
        2,
        "get_weather",
        {"location": "New York"},
        inputResponses=responses,
        requestState=wire["requestState"],
    )
    bare.receive_message(retry)
    event = received(bare)
    assert event.request_state == wire["requestState"]
    keys = sorted(wire["inputRequests"])
    assert sorted(event.input_responses) == keys
    texts = [event.input_responses.sampled_text(k) for k in keys]
    contents = [event.input_responses.accepted_content(k) for k in keys]
    assert any(t is not None for t in texts)
    assert any(c is not None for c in contents)


def test_line_helper_is_ndjson() -> None:
    assert line({"a": 1}).endswith(b"\n")
    assert int(ErrorCode.INVALID_REQUEST) == -32600


# --- the requestState seam ----------------------------------------------------------------------


class ClearProtector:
    """A reversible stand-in for a sealing implementation: it records every call and writes the
    binding into the token, so the seam's contract (what is sealed, with which binding, round and
    clock reading) is observable. Real sealing is tested with the real protector."""

    def __init__(self) -> None:
        self.sealed: list[tuple[Any, StateBinding, int, float]] = []
        self.opened: list[tuple[str, StateBinding, float]] = []

    def seal(self, state: Any, binding: StateBinding, round: int, now: float) -> str:
        self.sealed.append((state, binding, round, now))
        return "T:" + json.dumps([state, round, attrs.asdict(binding)])

    def unseal(self, token: str, binding: StateBinding, now: float) -> OpenedState:
        self.opened.append((token, binding, now))
        if not token.startswith("T:"):
            raise RequestStateError("not a token")
        state, round_, bound = json.loads(token[2:])
        if bound != attrs.asdict(binding):
            raise RequestStateError("binding mismatch")
        return OpenedState(state, round_)


def sealing_conn(protector: ClearProtector, **limits: int) -> ServerConnection:
    config = ServerConfig(request_state=protector, clock=lambda: 1234.5, limits=Limits(**limits))
    return ServerConnection(config, principal="alice")


def test_outgoing_state_goes_through_the_protector_once() -> None:
    protector = ClearProtector()
    conn = sealing_conn(protector)
    out = answer(
        conn, call(1, "book", {"x": 1}), InputRequiredResult({"r": list_roots()}, {"n": 1})
    )
    binding = StateBinding("tools/call", "book", {"x": 1}, "alice")
    assert protector.sealed == [({"n": 1}, binding, 1, 1234.5)]
    token = out[0]["result"]["requestState"]
    assert token == "T:" + json.dumps([{"n": 1}, 1, attrs.asdict(binding)])
    # The retry: the handler sees the plaintext state and the next round number.
    feed(conn, call(2, "book", {"x": 1}, inputResponses={"r": {"roots": []}}, requestState=token))
    event = received(conn)
    assert (event.request_state, event.round) == ({"n": 1}, 2)
    assert protector.opened == [(token, binding, 1234.5)]
    # A state-only round from a retry keeps counting.
    conn.respond(2, InputRequiredResult(request_state={"n": 2}))
    assert protector.sealed[-1] == ({"n": 2}, binding, 2, 1234.5)
    sent(conn)


def test_binding_of_each_mrtr_method() -> None:
    protector = ClearProtector()
    conn = sealing_conn(protector)
    answer(
        conn,
        request(1, "resources/read", {"uri": "file:///a"}),
        InputRequiredResult(request_state=0),
    )
    answer(
        conn,
        request(2, "prompts/get", {"name": "p", "arguments": {"a": "b"}}),
        InputRequiredResult(request_state=0),
    )
    answer(conn, request(3, "tools/call", {"name": 5}), InputRequiredResult(request_state=0))
    assert [s[1] for s in protector.sealed] == [
        StateBinding("resources/read", "file:///a", None, "alice"),
        StateBinding("prompts/get", "p", {"a": "b"}, "alice"),
        StateBinding("tools/call", None, None, "alice"),
    ]


def test_state_failing_verification_is_rejected() -> None:
    protector = ClearProtector()
    conn = sealing_conn(protector)
    token = "T:" + json.dumps(
        [{"n": 1}, 1, attrs.asdict(StateBinding("tools/call", "book", {"x": 1}, "alice"))]
    )
    feed(conn, call(1, "book", {"x": 2}, requestState=token), call(2, requestState="forged"))
    invalid_state = JsonRpcError(
        ErrorCode.INVALID_PARAMS,
        "Invalid or expired requestState",
        {"reason": "invalid_request_state"},
    )
    assert sent(conn) == [
        error(invalid_state.code, invalid_state.message, 1, invalid_state.data),
        error(invalid_state.code, invalid_state.message, 2, invalid_state.data),
    ]
    assert events(conn) == [
        RequestStateRejected(1, "tools/call", "binding mismatch"),
        InvalidMessage(invalid_state, 1, True),
        RequestStateRejected(2, "tools/call", "not a token"),
        InvalidMessage(invalid_state, 2, True),
    ]
    assert conn.in_flight == frozenset()


def test_oversized_state_is_rejected_before_the_protector_runs() -> None:
    protector = ClearProtector()
    conn = sealing_conn(protector, max_request_state_bytes=8)
    feed(conn, call(1, requestState="T:" + "x" * 20))
    assert only(sent(conn))["error"]["data"] == {"reason": "invalid_request_state"}
    assert protector.opened == []


def test_round_restarts_when_a_retry_carried_no_state() -> None:
    protector = ClearProtector()
    conn = sealing_conn(protector)
    feed(conn, call(1, inputResponses={"r": {"roots": []}}))
    event = received(conn)
    assert event.round is None
    conn.respond(1, InputRequiredResult(request_state="s"))
    assert protector.sealed[0][2] == 1
    sent(conn)


# --- more bounds ------------------------------------------------------------------------------


def test_cancelled_ids_awaiting_a_late_answer_are_bounded() -> None:
    conn = ServerConnection(ServerConfig(limits=Limits(max_in_flight=1)))
    feed(conn, call(1), notification("notifications/cancelled", {"requestId": 1}))
    feed(conn, call(2), notification("notifications/cancelled", {"requestId": 2}))
    events(conn)
    conn.respond(2, {"content": []})  # still remembered: dropped silently
    with pytest.raises(LocalProtocolError, match="no request with id 1"):
        conn.respond(1, {"content": []})  # the oldest was forgotten
    feed(conn, call(1))
    assert received(conn).request_id == 1
    assert sent(conn) == []


def test_input_required_dict_with_a_non_object_meta_is_a_local_error(
    conn: ServerConnection,
) -> None:
    feed(conn, call(1))
    received(conn)
    with pytest.raises(LocalProtocolError, match="_meta: must be an object"):
        conn.respond(1, {"resultType": "input_required", "requestState": "s", "_meta": [1]})
    assert conn.in_flight == {1}


def test_input_required_dict_is_capability_gated_too(bare: ServerConnection) -> None:
    wire = {"resultType": "input_required", "inputRequests": {"r": {"method": "roots/list"}}}
    out = answer(bare, call(1, caps={"elicitation": {}}), wire)
    assert out == [
        error(
            ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY,
            "Missing required client capability: roots",
            1,
            {"requiredCapabilities": {"roots": {}}},
        )
    ]


def test_any_mapping_is_a_result(conn: ServerConnection) -> None:
    from types import MappingProxyType

    feed(conn, call(1), call(2))
    events(conn)
    conn.respond(1, MappingProxyType({"content": []}))
    conn.respond(2, MappingProxyType({"resultType": "input_required", "requestState": "s"}))
    out = sent(conn, methods={1: "tools/call", 2: "tools/call"})
    assert out[0]["result"] == {"content": [], "resultType": "complete", "_meta": INFO_META}
    assert out[1]["result"] == {
        "resultType": "input_required",
        "requestState": "s",
        "_meta": INFO_META,
    }


def test_input_required_subclass_is_accepted(bare: ServerConnection) -> None:
    class Mine(InputRequiredResult):
        pass

    out = answer(bare, call(1), Mine(request_state="s"))
    assert out[0]["result"] == {"resultType": "input_required", "requestState": "s"}
