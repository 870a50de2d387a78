"""JSON-RPC 2.0 shape rules, through the classifier and through a ServerConnection's wire."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import (
    call,
    error,
    events,
    feed,
    line,
    only,
    request,
    sent,
)
from mrtr_sansio import (
    ErrorCode,
    InvalidMessage,
    JsonRpcError,
    RemoteProtocolError,
    RequestReceived,
    ServerConfig,
    ServerConnection,
    UnexpectedResponse,
)
from mrtr_sansio._wire.jsonrpc import (
    NOTIFICATION,
    REQUEST,
    RESPONSE,
    classify,
    error_message,
    is_valid_id,
    notification_message,
    parse_error,
    request_message,
    result_message,
)
from mrtr_sansio.config import OrjsonCodec, StdlibJsonCodec

CODECS = [pytest.param(StdlibJsonCodec, id="stdlib"), pytest.param(OrjsonCodec, id="orjson")]


@pytest.fixture(params=CODECS)
def server_config(request: pytest.FixtureRequest) -> ServerConfig:
    """``conn`` under each codec."""
    return ServerConfig(codec=request.param())


# --- classify ---------------------------------------------------------------------------------


def test_classify_kinds() -> None:
    assert classify({"jsonrpc": "2.0", "id": 1, "method": "m"}) == REQUEST
    assert classify({"jsonrpc": "2.0", "id": "a", "method": "m", "params": {}}) == REQUEST
    assert classify({"jsonrpc": "2.0", "method": "m"}) == NOTIFICATION
    assert classify({"jsonrpc": "2.0", "method": "m", "params": {"a": 1}}) == NOTIFICATION
    assert classify({"jsonrpc": "2.0", "id": 1, "result": {}}) == RESPONSE
    assert classify({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": ""}}) == RESPONSE
    assert classify({"jsonrpc": "2.0", "id": None, "error": {"code": 1, "message": ""}}) == RESPONSE
    assert classify({"jsonrpc": "2.0", "error": {"code": 1, "message": ""}}) == RESPONSE


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("1", True),
        ("", True),
        (0, True),
        (-5, True),
        (2**53, True),
        (2**64 - 1, True),
        (-(2**63), True),
        (2**64, False),
        (-(2**63) - 1, False),
        (None, False),
        (True, False),
        (False, False),
        (1.0, False),
        (1.5, False),
        ([1], False),
        ({"a": 1}, False),
    ],
)
def test_is_valid_id(value: Any, valid: bool) -> None:
    assert is_valid_id(value) is valid


def _raises(msg: Any) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        classify(msg)
    return info.value


def test_classify_errors_carry_the_readable_id_only_for_requests() -> None:
    exc = _raises({"id": 7, "method": "m"})
    assert (exc.code, exc.request_id) == (ErrorCode.INVALID_REQUEST, 7)
    assert _raises({"jsonrpc": "2.0", "id": 7.0, "method": "m"}).request_id is None
    # A malformed response never carries an id to answer.
    assert _raises({"jsonrpc": "2.0", "id": 3, "result": {}, "error": {}}).request_id is None
    assert _raises({"jsonrpc": "2.0", "id": True, "error": {}}).request_id is None
    assert _raises({"jsonrpc": "2.0", "result": {}}).request_id is None


# --- ids --------------------------------------------------------------------------------------


@pytest.mark.parametrize("rid", ["abc", "", 0, 42, -1, 2**31, 2**64 - 1, -(2**63)])
def test_string_and_integer_ids_are_served_with_their_type(
    conn: ServerConnection, rid: Any
) -> None:
    feed(conn, request(rid, "tools/list"))
    event = only(events(conn))
    assert isinstance(event, RequestReceived)
    assert event.request_id == rid
    assert type(event.request_id) is type(rid)
    conn.respond(rid, {"tools": []})
    assert only(sent(conn))["id"] == rid


@pytest.mark.parametrize(
    "raw_id",
    ["null", "true", "false", "1.0", "1.5", "1e3", "[1]", '{"a":1}', "18446744073709551616"],
)
def test_bad_ids_are_invalid_requests_answered_without_id(
    conn: ServerConnection, raw_id: str
) -> None:
    data = f'{{"jsonrpc":"2.0","id":{raw_id},"method":"tools/list","params":{{}}}}\n'
    conn.receive_data(data.encode())
    assert sent(conn) == [
        error(ErrorCode.INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer')
    ]
    assert only(events(conn)) == InvalidMessage(
        JsonRpcError(
            ErrorCode.INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer'
        ),
        None,
        True,
    )


def test_one_and_one_string_are_different_ids(conn: ServerConnection) -> None:
    feed(conn, request(1, "tools/list"), request("1", "tools/list"))
    assert [e.request_id for e in events(conn) if isinstance(e, RequestReceived)] == [1, "1"]
    assert sent(conn) == []


# --- shape errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("batch", ["[]", "[1]", '[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]'])
def test_batches_are_rejected(conn: ServerConnection, batch: str) -> None:
    conn.receive_data(batch.encode() + b"\n")
    assert sent(conn) == [
        error(ErrorCode.INVALID_REQUEST, "Invalid Request: batches are not supported")
    ]
    assert only(events(conn)) == InvalidMessage(
        JsonRpcError(ErrorCode.INVALID_REQUEST, "Invalid Request: batches are not supported"),
        None,
        True,
    )


@pytest.mark.parametrize("junk", ["1", '"x"', "null", "true"])
def test_non_object_messages_are_rejected(conn: ServerConnection, junk: str) -> None:
    conn.receive_data(junk.encode() + b"\n")
    assert sent(conn) == [
        error(ErrorCode.INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
    ]


@pytest.mark.parametrize(
    "data",
    [
        b"{",
        b"{}}",
        b"{'a': 1}",
        b'{"jsonrpc":"2.0",}',
        b"not json",
        b'{"a":1} {"b":2}',
        b'{"a": NaN}',
        b'{"a": Infinity}',
        b'{"a": -Infinity}',
        b'{"a": 1e400}',
        b'{"a": -1e400}',
        b"\xef\xbb\xbf{}",
        b'"\x00"',
    ],
)
def test_unparseable_json_is_a_parse_error_without_id(conn: ServerConnection, data: bytes) -> None:
    conn.receive_data(data + b"\n")
    assert sent(conn) == [error(ErrorCode.PARSE_ERROR, "Parse error: Invalid JSON")]
    assert only(events(conn)) == InvalidMessage(
        JsonRpcError(ErrorCode.PARSE_ERROR, "Parse error: Invalid JSON"), None, True
    )


@pytest.mark.parametrize(
    "data", [b'{"jsonrpc":"2.0","id":1,"method":"\xff"}', b"\xc3\x28", b"\xed\xa0\x80"]
)
def test_invalid_utf8_is_a_parse_error_without_id(conn: ServerConnection, data: bytes) -> None:
    conn.receive_data(data + b"\n")
    assert sent(conn) == [error(ErrorCode.PARSE_ERROR, "Parse error: invalid UTF-8")]


def test_deeply_nested_json_is_a_parse_error(conn: ServerConnection) -> None:
    conn.receive_data(b"[" * 100_000 + b"]" * 100_000 + b"\n")
    [answer] = sent(conn)
    assert answer["error"]["code"] == ErrorCode.PARSE_ERROR
    assert "Limits.max_json_depth" in answer["error"]["message"]


@pytest.mark.parametrize(
    ("msg", "message"),
    [
        ({"id": 1, "method": "tools/list"}, 'Invalid Request: "jsonrpc" must be "2.0"'),
        (
            {"jsonrpc": "1.0", "id": 1, "method": "tools/list"},
            'Invalid Request: "jsonrpc" must be "2.0"',
        ),
        (
            {"jsonrpc": 2.0, "id": 1, "method": "tools/list"},
            'Invalid Request: "jsonrpc" must be "2.0"',
        ),
        ({"jsonrpc": "2.0", "id": 1}, 'Invalid Request: "method" is missing'),
        ({"jsonrpc": "2.0", "id": 1, "params": {}}, 'Invalid Request: "method" is missing'),
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, 'Invalid Request: "method" must be a string'),
        ({"jsonrpc": "2.0", "id": 1, "method": None}, 'Invalid Request: "method" is missing'),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "m", "params": [1]},
            'Invalid Request: "params" must be an object',
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "m", "params": "x"},
            'Invalid Request: "params" must be an object',
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "m", "params": 3},
            'Invalid Request: "params" must be an object',
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "m", "params": None},
            'Invalid Request: "params" must be an object',
        ),
    ],
)
def test_malformed_requests_are_answered_with_their_id(
    conn: ServerConnection, msg: dict[str, Any], message: str
) -> None:
    feed(conn, msg)
    assert sent(conn) == [error(ErrorCode.INVALID_REQUEST, message, 1)]
    assert only(events(conn)) == InvalidMessage(
        JsonRpcError(ErrorCode.INVALID_REQUEST, message), 1, True
    )


@pytest.mark.parametrize(
    "msg",
    [
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "1"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": [1]},
        {"jsonrpc": "2.0", "method": "notifications/initialized", "params": None},
        {"jsonrpc": "1.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
    ],
)
def test_malformed_notification_is_never_answered(
    conn: ServerConnection, msg: dict[str, Any]
) -> None:
    feed(conn, call(1, "first"))
    first = only(events(conn))
    feed(conn, msg)
    assert sent(conn) == []
    event = only(events(conn))
    assert isinstance(event, InvalidMessage)
    assert (event.error.code, event.request_id, event.answered) == (
        ErrorCode.INVALID_REQUEST,
        None,
        False,
    )
    assert conn.in_flight == {first.request_id}  # and nothing was cancelled


def test_malformed_message_without_a_string_method_is_still_answered(
    conn: ServerConnection,
) -> None:
    feed(conn, {"jsonrpc": "2.0", "method": 1, "params": "bar"})
    assert sent(conn) == [
        error(ErrorCode.INVALID_REQUEST, 'Invalid Request: "method" must be a string')
    ]


# --- responses from the client ----------------------------------------------------------------


@pytest.mark.parametrize(
    "msg",
    [
        {"jsonrpc": "2.0", "id": 99, "result": {}},
        {"jsonrpc": "2.0", "id": "x", "result": {"a": 1}},
        {"jsonrpc": "2.0", "id": 5, "error": {"code": -1, "message": "no"}},
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "bad"}},
        {"jsonrpc": "2.0", "error": {"code": -32700, "message": "bad"}},
    ],
)
def test_response_to_unknown_id_is_an_event_and_never_answered(
    conn: ServerConnection, msg: dict[str, Any]
) -> None:
    feed(conn, msg)
    assert events(conn) == [UnexpectedResponse(msg.get("id"), msg)]
    assert sent(conn) == []


@pytest.mark.parametrize(
    "msg",
    [
        {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": ""}},
        {"jsonrpc": "2.0", "id": None, "result": {}},
        {"jsonrpc": "2.0", "result": {}},
        {"jsonrpc": "2.0", "id": 1.5, "result": {}},
        {"jsonrpc": "2.0", "id": True, "error": {"code": 1, "message": ""}},
        {"jsonrpc": "1.0", "id": 1, "result": {}},
        {"id": 1, "error": {"code": 1, "message": ""}},
    ],
)
def test_malformed_response_is_an_event_and_never_answered(
    conn: ServerConnection, msg: dict[str, Any]
) -> None:
    feed(conn, msg)
    event = only(events(conn))
    assert isinstance(event, InvalidMessage)
    assert (event.error.code, event.request_id, event.answered) == (
        ErrorCode.INVALID_REQUEST,
        None,
        False,
    )
    assert sent(conn) == []


# --- duplicate ids ----------------------------------------------------------------------------


def test_duplicate_in_flight_id_is_rejected_and_the_original_still_completes(
    conn: ServerConnection,
) -> None:
    feed(conn, call(1, "first"))
    first = only(events(conn))
    feed(conn, call(1, "second"), request(1, "tools/list"))
    assert sent(conn) == [
        error(ErrorCode.INVALID_REQUEST, "Invalid Request: id is already in use", 1),
        error(ErrorCode.INVALID_REQUEST, "Invalid Request: id is already in use", 1),
    ]
    assert all(isinstance(e, InvalidMessage) and e.request_id == 1 for e in events(conn))
    assert conn.in_flight == {1}
    conn.respond(1, {"content": []})
    assert sent(conn, methods={1: "tools/call"}) == [
        {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "resultType": "complete"}}
    ]
    assert isinstance(first, RequestReceived)
    assert first.name == "first"
    # Once answered the id is free again (the server keeps no memory of finished requests).
    feed(conn, request(1, "tools/list"))
    assert isinstance(only(events(conn)), RequestReceived)


def test_refusal_of_a_duplicate_id_belongs_to_no_open_request(conn: ServerConnection) -> None:
    """A transport routes by ``related_request_id``: the refusal of the second message must not
    go to the open request's stream (and end it), but back where the duplicate came from.
    Malformed messages with a taken id are no different; a free id keeps its relation."""
    feed(conn, call(1, "first"), call(2, "cancelled"))
    feed(conn, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
    events(conn)
    feed(conn, request(1, "tools/list"), request(2, "tools/list"))
    feed(conn, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": "x"})
    feed(conn, {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": "x"})
    items = conn.outgoing()
    assert [(i.message["id"], i.related_request_id) for i in items] == [
        (1, None),
        (2, None),
        (1, None),
        (3, 3),
    ]
    assert conn.in_flight == {1}


def test_id_of_a_cancelled_unanswered_request_stays_reserved(conn: ServerConnection) -> None:
    feed(
        conn,
        call(1),
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
    )
    events(conn)
    feed(conn, call(1))
    assert sent(conn) == [
        error(ErrorCode.INVALID_REQUEST, "Invalid Request: id is already in use", 1)
    ]
    assert isinstance(only(events(conn)), InvalidMessage)
    conn.respond(1, {"content": []})  # the late answer is dropped and frees the id
    assert sent(conn) == []
    feed(conn, call(1))
    assert isinstance(only(events(conn)), RequestReceived)


# --- junk never disturbs other requests --------------------------------------------------------


def test_junk_between_requests_leaves_them_intact(conn: ServerConnection) -> None:
    conn.receive_data(line(call(1)) + b"{oops\n" + b"[]\n" + line(call(2)) + b"\xff\n")
    kinds = [type(e).__name__ for e in events(conn)]
    assert kinds == [
        "RequestReceived",
        "InvalidMessage",
        "InvalidMessage",
        "RequestReceived",
        "InvalidMessage",
    ]
    assert [m["error"]["code"] for m in sent(conn)] == [
        ErrorCode.PARSE_ERROR,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.PARSE_ERROR,
    ]
    assert conn.in_flight == {1, 2}
    conn.respond(2, {"content": []})
    conn.respond(1, {"content": []})
    assert [m["id"] for m in sent(conn)] == [2, 1]


# --- builders ---------------------------------------------------------------------------------


def test_message_builders() -> None:
    assert result_message(1, {}) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    err = JsonRpcError(ErrorCode.INVALID_PARAMS, "bad", {"x": 1})
    assert error_message("a", err) == {
        "jsonrpc": "2.0",
        "id": "a",
        "error": {"code": -32602, "message": "bad", "data": {"x": 1}},
    }
    assert error_message(None, err) == {
        "jsonrpc": "2.0",
        "error": {"code": -32602, "message": "bad", "data": {"x": 1}},
    }
    assert request_message(0, "ping", None) == {"jsonrpc": "2.0", "id": 0, "method": "ping"}
    assert request_message(0, "m", {"a": 1}) == {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "m",
        "params": {"a": 1},
    }
    assert notification_message("n", None) == {"jsonrpc": "2.0", "method": "n"}
    assert notification_message("n", {}) == {"jsonrpc": "2.0", "method": "n", "params": {}}
    exc = parse_error("invalid UTF-8")
    assert (exc.code, exc.request_id, exc.error.message) == (
        ErrorCode.PARSE_ERROR,
        None,
        "Parse error: invalid UTF-8",
    )


def test_json_rpc_error_value() -> None:
    assert JsonRpcError(1, "m").to_wire() == {"code": 1, "message": "m"}
    assert JsonRpcError(1, "m", 0).to_wire() == {"code": 1, "message": "m", "data": 0}
    assert JsonRpcError.from_wire({"code": 5, "message": "x", "data": [1]}) == JsonRpcError(
        5, "x", [1]
    )
    assert JsonRpcError.from_wire({"code": True, "message": 3}) == JsonRpcError(
        ErrorCode.INTERNAL_ERROR, ""
    )
    assert JsonRpcError.from_wire({"code": 1.0}) == JsonRpcError(ErrorCode.INTERNAL_ERROR, "")
    assert JsonRpcError.from_wire("boom") == JsonRpcError(
        ErrorCode.INTERNAL_ERROR, "Malformed error object", "boom"
    )
    assert JsonRpcError.invalid_params("p") == JsonRpcError(ErrorCode.INVALID_PARAMS, "p")
    assert JsonRpcError.method_not_found("x/y") == JsonRpcError(-32601, "Method not found: x/y")
    assert JsonRpcError.internal() == JsonRpcError(ErrorCode.INTERNAL_ERROR, "Internal error")
    assert JsonRpcError.unsupported_version(["a"], "b") == JsonRpcError(
        -32022, "Unsupported protocol version", {"supported": ["a"], "requested": "b"}
    )


def test_missing_capability_error_value() -> None:
    err = JsonRpcError.missing_capability({"elicitation": {"url": {}}, "roots": {}})
    assert err == JsonRpcError(
        -32021,
        "Missing required client capability: elicitation.url, roots",
        {"requiredCapabilities": {"elicitation": {"url": {}}, "roots": {}}},
    )
    assert JsonRpcError.missing_capability({}).message == (
        "Missing required client capability: a client capability"
    )
    assert JsonRpcError.missing_capability({"roots": {}}, "Roots are required").message == (
        "Roots are required"
    )


def test_missing_capability_data_is_plain_json() -> None:
    from types import MappingProxyType

    required = MappingProxyType({"sampling": MappingProxyType({"tools": {}}), "x": True})
    err = JsonRpcError.missing_capability(required)
    assert err.data == {"requiredCapabilities": {"sampling": {"tools": {}}, "x": True}}
    assert type(err.data["requiredCapabilities"]["sampling"]) is dict
    assert err.message == "Missing required client capability: sampling.tools, x"
    assert RemoteProtocolError(err, 3).code == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY
