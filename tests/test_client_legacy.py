"""ClientConnection on the legacy (2025-11-25) wire: the ``initialize`` handshake, the server's
requests surfacing as InputNeeded, their answers, errors and withdrawals, ping, the round cap,
and a full pair with our ServerConnection's legacy shim."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import (
    ACCEPT,
    CAPS,
    CLIENT,
    FORM,
    ROOTS,
    ROOTS_ANSWER,
    SAMPLE,
    SAMPLED,
    URL,
    Pair,
    client,
    legacy_ready,
    one,
    reply,
    reply_error,
    sent,
)
from mrtr_sansio import (
    CallCompleted,
    CallFailed,
    ClientConfig,
    ClientConnection,
    ConnectionClosed,
    Era,
    EraDetected,
    HandshakeFailed,
    InputNeeded,
    InputRequiredResult,
    InputWithdrawn,
    InvalidMessage,
    JsonRpcError,
    Limits,
    LocalProtocolError,
    NotificationReceived,
    RequestReceived,
    RoundsExhausted,
    ServerConfig,
    elicit_form,
    elicit_url,
    list_roots,
    sample,
)
from mrtr_sansio.events import OutgoingError, OutgoingResult

L = Era.LEGACY
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}
INIT_RESULT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {"listChanged": True}},
    "serverInfo": {"name": "ExampleServer", "version": "1.0.0"},
    "instructions": "Be nice",
}


def server_request(conn: ClientConnection, rid: Any, method: str, params: Any = None) -> list[Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    conn.receive_message(msg)
    return conn.events()


def answers(conn: ClientConnection, methods: dict[Any, str] | None = None) -> list[Any]:
    return sent(conn, L, methods=methods)


# --- the handshake --------------------------------------------------------------------------


def test_initialize_handshake_is_exact_and_queues_calls() -> None:
    conn = client("legacy")
    assert conn.era is Era.LEGACY
    assert conn.protocol_version is None
    call = conn.call("tools/call", {"name": "get_weather", "arguments": {"location": "NY"}})
    assert sent(conn, L) == [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": CAPS, "clientInfo": CLIENT},
        }
    ]  # the call waits for the handshake
    reply(conn, 0, INIT_RESULT)
    assert conn.events() == [
        EraDetected(
            Era.LEGACY,
            "2025-11-25",
            INIT_RESULT["capabilities"],  # type: ignore[arg-type]
            INIT_RESULT["serverInfo"],  # type: ignore[arg-type]
            "Be nice",
        )
    ]
    assert sent(conn, L) == [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "get_weather", "arguments": {"location": "NY"}},
        },
    ]
    assert conn.protocol_version == "2025-11-25"
    assert conn.server_capabilities == INIT_RESULT["capabilities"]
    assert conn.server_info == INIT_RESULT["serverInfo"]
    assert conn.instructions == "Be nice"
    reply(conn, 1, {"content": [], "isError": False})
    assert conn.events() == [CallCompleted(call, {"content": [], "isError": False})]


def test_legacy_calls_after_the_handshake_go_out_at_once_without_envelope() -> None:
    conn = client("legacy")
    legacy_ready(conn)
    conn.call("tools/list")
    conn.call("tools/call", {"name": "t", "_meta": {"progressToken": 5}})
    assert sent(conn, L) == [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "t", "_meta": {"progressToken": 5}},
        },
    ]


def test_initialize_without_client_info_uses_a_stand_in() -> None:
    conn = client("legacy", client_info=None, capabilities={}, legacy_version="2025-06-18")
    assert one(conn, L)["params"] == {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "mrtr-sansio", "version": "0"},
    }


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26", "2024-11-05"])
def test_an_older_version_we_speak_is_accepted(version: str) -> None:
    conn = client("legacy")
    one(conn, L)
    reply(conn, 0, {**INIT_RESULT, "protocolVersion": version})
    (event,) = conn.events()
    assert type(event) is EraDetected
    assert event.protocol_version == version


def test_missing_server_info_and_instructions_are_tolerated() -> None:
    conn = client("legacy")
    one(conn, L)
    reply(conn, 0, {"protocolVersion": "2025-11-25", "capabilities": {}})
    assert conn.events() == [EraDetected(Era.LEGACY, "2025-11-25", {}, None, None)]


def test_a_version_we_do_not_speak_fails_the_handshake() -> None:
    conn = client("legacy")
    call = conn.call("tools/list")
    one(conn, L)
    reply(conn, 0, {**INIT_RESULT, "protocolVersion": "2030-01-01"})
    failed, call_failed = conn.events()
    assert type(failed) is HandshakeFailed
    assert failed.local
    assert "2030-01-01" in failed.error.message
    assert call_failed == CallFailed(call, failed.error, True)
    assert sent(conn, L) == []  # no notifications/initialized
    with pytest.raises(LocalProtocolError, match="handshake"):
        conn.call("tools/list")


def test_initialize_refused_by_the_server() -> None:
    conn = client("legacy")
    call = conn.call("tools/list")
    one(conn, L)
    data = {"supported": ["2024-11-05"], "requested": "2025-11-25"}
    reply_error(conn, 0, -32602, "Unsupported protocol version", data)
    err = JsonRpcError(-32602, "Unsupported protocol version", data)
    assert conn.events() == [HandshakeFailed(err), CallFailed(call, err)]


@pytest.mark.parametrize(
    "res",
    [
        "ok",
        {"capabilities": {}},
        {"protocolVersion": 2025, "capabilities": {}},
        {"protocolVersion": "2025-11-25", "capabilities": []},
        {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": "srv"},
        {"protocolVersion": "2025-11-25", "capabilities": {}, "instructions": 3},
    ],
)
def test_invalid_initialize_result_fails_the_handshake(res: Any) -> None:
    conn = client("legacy")
    one(conn, L)
    reply(conn, 0, res)
    (event,) = conn.events()
    assert type(event) is HandshakeFailed
    assert event.local
    assert "initialize" in event.error.message


def test_broken_initialize_response_fails_the_handshake() -> None:
    conn = client("legacy")
    one(conn, L)
    conn.receive_message({"jsonrpc": "2.0", "id": 0})
    (event,) = conn.events()
    assert type(event) is HandshakeFailed
    assert event.local


def test_http_headers_of_legacy_messages() -> None:
    conn = client("legacy")
    (init,) = conn.outgoing()
    assert conn.http_headers(init) == {}
    legacy_ready_after_init(conn)
    conn.call("tools/call", {"name": "t"})
    (item,) = conn.outgoing()
    assert conn.http_headers(item) == {"MCP-Protocol-Version": "2025-11-25"}


# --- server requests ------------------------------------------------------------------------


def ready_with_call(**kwargs: Any) -> tuple[ClientConnection, Any]:
    conn = client("legacy", **kwargs)
    legacy_ready(conn)
    call = conn.call("tools/call", {"name": "t"})
    one(conn, L)
    return conn, call


@pytest.mark.parametrize(
    ("req", "answer"),
    [(FORM, ACCEPT), (URL, {"action": "accept"}), (SAMPLE, SAMPLED), (ROOTS, ROOTS_ANSWER)],
)
def test_a_server_request_is_input_needed_and_answered_with_a_response(
    req: Any, answer: Any
) -> None:
    conn, call = ready_with_call()
    params = dict(req.get("params", {}))
    if params.get("mode") == "url":
        params["elicitationId"] = "e-1"
    (event,) = server_request(conn, 7, req["method"], params or None)
    assert event == InputNeeded(call, 7, req["method"], params, 1)
    assert conn.fulfil(event, answer)
    (item,) = conn.outgoing()
    assert type(item) is OutgoingResult
    assert item.related_request_id == 7
    assert item.message == {"jsonrpc": "2.0", "id": 7, "result": answer}
    assert not conn.fulfil(event, answer)
    assert conn.outgoing() == []


def test_answers_are_schema_valid_legacy_results() -> None:
    conn, _ = ready_with_call()
    reqs = [(1, FORM), (2, SAMPLE), (3, ROOTS)]
    evs = [server_request(conn, rid, r["method"], r.get("params"))[0] for rid, r in reqs]
    conn.fulfil(evs[0], ACCEPT)
    conn.fulfil(evs[1], SAMPLED)
    conn.fulfil(evs[2], ROOTS_ANSWER)
    methods = {rid: r["method"] for rid, r in reqs}
    assert [m["id"] for m in answers(conn, methods)] == [1, 2, 3]


def test_string_server_ids() -> None:
    conn, call = ready_with_call()
    (event,) = server_request(conn, "srv-1", "roots/list")
    assert event.key == "srv-1"
    assert event.call is call
    conn.fulfil(event, ROOTS_ANSWER)
    assert answers(conn) == [{"jsonrpc": "2.0", "id": "srv-1", "result": ROOTS_ANSWER}]


def test_server_ids_are_a_separate_space_from_ours() -> None:
    conn, call = ready_with_call()  # our tools/call has id 1
    (event,) = server_request(conn, 1, "roots/list")
    conn.fulfil(event, ROOTS_ANSWER)
    assert answers(conn) == [{"jsonrpc": "2.0", "id": 1, "result": ROOTS_ANSWER}]
    reply(conn, 1, {"content": []})
    assert conn.events() == [CallCompleted(call, {"content": []})]


def test_decline_cancel_and_reject_on_the_legacy_wire() -> None:
    conn, _ = ready_with_call()
    d = server_request(conn, 1, "elicitation/create", FORM["params"])[0]
    c = server_request(conn, 2, "elicitation/create", FORM["params"])[0]
    s = server_request(conn, 3, "sampling/createMessage", SAMPLE["params"])[0]
    r = server_request(conn, 4, "roots/list")[0]
    assert conn.decline(d)
    assert conn.dismiss(c)
    assert conn.reject(s)
    assert conn.reject(r, JsonRpcError(-32603, "Roots are unavailable", {"reason": "io"}))
    items = conn.outgoing()
    assert [type(i) for i in items] == [
        OutgoingResult,
        OutgoingResult,
        OutgoingError,
        OutgoingError,
    ]
    assert [i.message for i in items] == [
        {"jsonrpc": "2.0", "id": 1, "result": {"action": "decline"}},
        {"jsonrpc": "2.0", "id": 2, "result": {"action": "cancel"}},
        {"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": "User rejected the request"}},
        {
            "jsonrpc": "2.0",
            "id": 4,
            "error": {"code": -32603, "message": "Roots are unavailable", "data": {"reason": "io"}},
        },
    ]
    assert not conn.reject(s)


def test_two_calls_in_flight_leave_the_request_unlinked() -> None:
    conn = client("legacy")
    legacy_ready(conn)
    conn.call("tools/call", {"name": "a"})
    conn.call("tools/call", {"name": "b"})
    sent(conn, L)
    (event,) = server_request(conn, 9, "roots/list")
    assert event == InputNeeded(None, 9, "roots/list", {}, 1)
    conn.fulfil(event, ROOTS_ANSWER)
    assert answers(conn) == [{"jsonrpc": "2.0", "id": 9, "result": ROOTS_ANSWER}]


def test_a_server_request_with_no_call_in_flight_is_answered_invalid_params() -> None:
    conn = client("legacy")
    legacy_ready(conn)
    (event,) = server_request(conn, 3, "elicitation/create", FORM["params"])
    assert type(event) is InvalidMessage
    assert event.answered
    assert event.request_id == 3
    assert answers(conn) == [
        {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {
                "code": -32602,
                "message": "Invalid params: elicitation/create must be sent while a "
                "tools/call, prompts/get or resources/read of this client is in flight (SEP-2260)",
            },
        }
    ]


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/list", {}),
        ("resources/list", {}),
        (
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": "b"}},
        ),
    ],
)
def test_only_the_three_methods_can_originate_server_requests(method: str, params: Any) -> None:
    conn = client("legacy")
    legacy_ready(conn)
    conn.call(method, params)
    one(conn, L)
    (event,) = server_request(conn, 3, "roots/list")
    assert type(event) is InvalidMessage
    assert answers(conn)[0]["error"]["code"] == -32602
    call = conn.call("prompts/get", {"name": "p"})
    one(conn, L)
    (event,) = server_request(conn, 4, "roots/list")
    assert event == InputNeeded(call, 4, "roots/list", {}, 1)  # linked despite the tools/list


def test_a_request_cancelled_in_flight_stays_a_possible_origin_until_settled() -> None:
    conn = client("legacy")
    legacy_ready(conn)
    a = conn.call("tools/call", {"name": "a"})
    b = conn.call("tools/call", {"name": "b"})
    sent(conn, L)
    conn.cancel(a)
    answers(conn)
    # The server may not have read the cancellation yet: this may be a's, so it is not b's.
    (event,) = server_request(conn, 10, "roots/list")
    assert event.call is None
    reply(conn, 2, {"content": []})  # b was sent before the cancellation: proves nothing
    assert conn.events() == [CallCompleted(b, {"content": []})]
    c = conn.call("tools/call", {"name": "c"})
    (msg,) = answers(conn)
    (event,) = server_request(conn, 11, "roots/list")
    assert event.call is None
    d = conn.call("tools/list")
    answers(conn)
    reply(conn, msg["id"] + 1, {"tools": []})  # sent after the cancellation: a is settled
    assert conn.events() == [CallCompleted(d, {"tools": []})]
    (event,) = server_request(conn, 12, "roots/list")
    assert event.call is c


def test_cancelling_a_request_that_cannot_originate_server_requests_settles_nothing() -> None:
    conn, call = ready_with_call()
    listing = conn.call("tools/list")
    one(conn, L)
    conn.cancel(listing)
    answers(conn)
    (event,) = server_request(conn, 10, "roots/list")
    assert event.call is call


def test_a_server_request_that_can_only_be_for_a_cancelled_call_is_refused() -> None:
    conn, call = ready_with_call()
    conn.cancel(call)
    answers(conn)
    (event,) = server_request(conn, 10, "roots/list")
    assert type(event) is InvalidMessage
    assert answers(conn)[0]["error"]["code"] == -32602


def test_a_server_request_after_the_call_completed_is_unassociated() -> None:
    conn, call = ready_with_call()
    reply(conn, 1, {"content": []})
    assert conn.events() == [CallCompleted(call, {"content": []})]
    (event,) = server_request(conn, 3, "roots/list")
    assert type(event) is InvalidMessage
    assert answers(conn)[0]["error"]["code"] == -32602


def test_a_server_request_while_the_handshake_runs_is_unassociated() -> None:
    conn = client("legacy")
    conn.call("tools/call", {"name": "queued"})
    one(conn, L)
    (event,) = server_request(conn, 3, "sampling/createMessage", SAMPLE["params"])
    assert type(event) is InvalidMessage
    assert answers(conn)[0]["error"]["code"] == -32602


def test_ping_is_answered_by_the_connection_at_any_time() -> None:
    conn = client("legacy")
    one(conn, L)
    assert server_request(conn, "p1", "ping") == []
    assert answers(conn) == [{"jsonrpc": "2.0", "id": "p1", "result": {}}]
    legacy_ready_after_init(conn)
    assert server_request(conn, "p2", "ping", {}) == []
    assert answers(conn) == [{"jsonrpc": "2.0", "id": "p2", "result": {}}]


def legacy_ready_after_init(conn: ClientConnection) -> None:
    reply(conn, 0, INIT_RESULT)
    conn.events()
    conn.outgoing()


@pytest.mark.parametrize("method", ["tasks/get", "tools/call", "notifications/x", "initialize"])
def test_other_server_requests_are_method_not_found(method: str) -> None:
    conn, _ = ready_with_call()
    (event,) = server_request(conn, 5, method, {})
    assert type(event) is InvalidMessage
    assert answers(conn) == [
        {
            "jsonrpc": "2.0",
            "id": 5,
            "error": {"code": -32601, "message": f"Method not found: {method}"},
        }
    ]


@pytest.mark.parametrize(
    ("caps", "req", "code", "text"),
    [
        ({"elicitation": {"form": {}}}, URL, -32602, "elicitation.url"),
        ({"elicitation": {}}, URL, -32602, "elicitation.url"),
        ({"sampling": {}}, FORM, -32602, "elicitation.form"),
        ({"elicitation": {}}, SAMPLE, -32602, "sampling"),
        (
            {"sampling": {}},
            {"method": "sampling/createMessage", "params": {**SAMPLE["params"], "tools": []}},
            -32602,
            "sampling.tools",
        ),
        ({"elicitation": {}}, ROOTS, -32601, "roots/list"),
    ],
)
def test_requests_beyond_our_capabilities_are_refused(
    caps: Any, req: Any, code: int, text: str
) -> None:
    conn, _ = ready_with_call(capabilities=caps)
    params = dict(req.get("params", {}))
    if params.get("mode") == "url":
        params["elicitationId"] = "e-1"
    (event,) = server_request(conn, 5, req["method"], params)
    assert type(event) is InvalidMessage
    (msg,) = answers(conn)
    assert msg["id"] == 5
    assert msg["error"]["code"] == code
    assert text in msg["error"]["message"]


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("elicitation/create", None),
        ("elicitation/create", {"message": 5, "requestedSchema": {}}),
        ("elicitation/create", {"mode": "url", "message": "m"}),
        ("sampling/createMessage", {"messages": "hi", "maxTokens": 5}),
        ("sampling/createMessage", {"messages": [], "maxTokens": True}),
    ],
)
def test_malformed_server_requests_are_invalid_params(method: str, params: Any) -> None:
    conn, _ = ready_with_call()
    (event,) = server_request(conn, 5, method, params)
    assert type(event) is InvalidMessage
    (msg,) = answers(conn)
    assert msg["error"]["code"] == -32602
    assert msg["error"]["message"].startswith("Invalid params: ")


def test_malformed_server_messages_are_answered_when_their_id_is_readable() -> None:
    conn, _ = ready_with_call()
    conn.receive_message({"jsonrpc": "2.0", "id": 5, "method": "roots/list", "params": [1]})
    conn.receive_message({"jsonrpc": "2.0", "id": None, "method": "roots/list"})
    conn.receive_data(b"{oops\n")
    evs = conn.events()
    assert [type(e) for e in evs] == [InvalidMessage, InvalidMessage, InvalidMessage]
    assert [e.answered for e in evs] == [True, False, False]  # type: ignore[attr-defined]
    (msg,) = answers(conn)
    assert msg == {
        "jsonrpc": "2.0",
        "id": 5,
        "error": {"code": -32600, "message": 'Invalid Request: "params" must be an object'},
    }


def test_a_duplicate_server_id_is_refused_and_the_first_stays_pending() -> None:
    conn, _ = ready_with_call()
    (first,) = server_request(conn, 5, "roots/list")
    (dup,) = server_request(conn, 5, "roots/list")
    assert type(dup) is InvalidMessage
    assert answers(conn)[0]["error"] == {
        "code": -32600,
        "message": "Invalid Request: id is already in use",
    }
    assert conn.fulfil(first, ROOTS_ANSWER)


def test_open_server_requests_are_bounded() -> None:
    conn, _ = ready_with_call(limits=Limits(max_in_flight=2))
    server_request(conn, 1, "roots/list")
    server_request(conn, 2, "roots/list")
    (event,) = server_request(conn, 3, "roots/list")
    assert type(event) is InvalidMessage
    assert answers(conn)[0]["error"] == {"code": -32603, "message": "Too many requests in flight"}


def test_server_cancellation_withdraws_the_input() -> None:
    conn, call = ready_with_call()
    (event,) = server_request(conn, 5, "elicitation/create", FORM["params"])
    conn.receive_message(
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 5, "reason": "timeout"},
        }
    )
    assert conn.events() == [InputWithdrawn(call, 5)]
    assert not conn.fulfil(event, ACCEPT)
    assert conn.outgoing() == []
    for params in ({"requestId": 5}, {"requestId": 99}, {"requestId": None}, None):
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
        if params is not None:
            msg["params"] = params
        conn.receive_message(msg)
    assert conn.events() == []


def test_other_legacy_notifications_are_passed_on() -> None:
    conn, _ = ready_with_call()
    conn.receive_message(
        {
            "jsonrpc": "2.0",
            "method": "notifications/elicitation/complete",
            "params": {"elicitationId": "e"},
        }
    )
    assert conn.events() == [
        NotificationReceived("notifications/elicitation/complete", {"elicitationId": "e"})
    ]


def test_cancel_a_legacy_call_voids_its_server_requests() -> None:
    conn, call = ready_with_call()
    (event,) = server_request(conn, 5, "roots/list")
    assert conn.cancel(call, "bye")
    assert answers(conn) == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 1, "reason": "bye"},
        }
    ]
    assert not conn.fulfil(event, ROOTS_ANSWER)
    conn.receive_message(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}
    )
    reply(conn, 1, {"content": []})
    assert conn.events() == []  # nothing more about the cancelled call


def test_the_end_of_a_call_voids_its_server_requests_but_not_unlinked_ones() -> None:
    conn = client("legacy")
    legacy_ready(conn)
    a = conn.call("tools/call", {"name": "a"})
    one(conn, L)
    (linked,) = server_request(conn, 5, "roots/list")
    assert linked.call is a
    conn.call("tools/call", {"name": "b"})
    one(conn, L)
    (unlinked,) = server_request(conn, 6, "roots/list")
    assert unlinked.call is None
    reply(conn, 1, {"content": []})
    assert conn.events() == [CallCompleted(a, {"content": []})]
    assert not conn.fulfil(linked, ROOTS_ANSWER)
    assert conn.fulfil(unlinked, ROOTS_ANSWER)


def test_close_withdraws_pending_server_requests() -> None:
    conn, call = ready_with_call()
    server_request(conn, 5, "roots/list")
    conn.receive_data(b"")
    evs = conn.events()
    assert [type(e) for e in evs] == [CallFailed, ConnectionClosed]
    assert evs[0].call is call  # type: ignore[attr-defined]
    conn2 = client("legacy")
    legacy_ready(conn2)
    conn2.call("tools/call", {"name": "a"})
    conn2.call("tools/call", {"name": "b"})
    sent(conn2, L)
    (unlinked,) = server_request(conn2, 5, "roots/list")
    assert unlinked.call is None
    conn2.receive_data(b"")
    evs = conn2.events()
    assert [type(e) for e in evs] == [CallFailed, CallFailed, InputWithdrawn, ConnectionClosed]
    assert evs[2] == InputWithdrawn(None, 5)


# --- results and rounds ---------------------------------------------------------------------


def test_legacy_results_complete_whatever_stray_result_type_they_carry() -> None:
    conn = client("legacy")
    legacy_ready(conn)
    a = conn.call("tools/call", {"name": "a"})
    b = conn.call("tools/call", {"name": "b"})
    c = conn.call("tools/list")
    sent(conn, L)
    reply(conn, 1, {"content": [], "resultType": "complete"})
    reply(conn, 2, {"content": [], "resultType": "something"})
    reply(conn, 3, {"tools": [], "resultType": "input_required"})
    evs = conn.events()
    assert evs[:2] == [
        CallCompleted(a, {"content": [], "resultType": "complete"}),
        CallCompleted(b, {"content": [], "resultType": "something"}),
    ]
    assert type(evs[2]) is CallFailed
    assert evs[2].call is c
    assert "legacy" in evs[2].error.message


def test_input_required_on_the_legacy_wire_is_invalid() -> None:
    conn, call = ready_with_call()
    reply(conn, 1, {"resultType": "input_required", "inputRequests": {"k": ROOTS}})
    (event,) = conn.events()
    assert type(event) is CallFailed
    assert event.call is call
    assert event.local


def test_legacy_rounds_are_counted_and_capped() -> None:
    conn, call = ready_with_call(max_rounds=2)
    a, b = server_request(conn, 10, "roots/list") + server_request(conn, 11, "roots/list")
    assert (a.round, b.round) == (1, 1)  # sent together: one round
    conn.fulfil(a, ROOTS_ANSWER)
    (c,) = server_request(conn, 12, "roots/list")  # b still open: same round
    assert c.round == 1
    conn.fulfil(b, ROOTS_ANSWER)
    conn.fulfil(c, ROOTS_ANSWER)
    (d,) = server_request(conn, 13, "roots/list")
    assert d.round == 2
    conn.fulfil(d, ROOTS_ANSWER)
    answers(conn)
    request = {"jsonrpc": "2.0", "id": 14, "method": "roots/list"}
    conn.receive_message(request)
    assert conn.events() == [RoundsExhausted(call, 2, request)]
    assert answers(conn) == [
        {
            "jsonrpc": "2.0",
            "id": 14,
            "error": {
                "code": -32603,
                "message": "The client ended the request after 2 rounds of input (max_rounds=2)",
            },
        },
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 1, "reason": "Too many rounds of input"},
        },
    ]
    reply(conn, 1, {"content": []})
    assert conn.events() == []


def test_withdrawn_requests_close_their_round() -> None:
    conn, _ = ready_with_call()
    server_request(conn, 10, "roots/list")
    conn.receive_message(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 10}}
    )
    conn.events()
    (b,) = server_request(conn, 11, "roots/list")
    assert b.round == 2


# --- with our ServerConnection's legacy shim ------------------------------------------------


def test_pair_legacy_shim_round_trips() -> None:
    seen: list[RequestReceived] = []

    def handler(ev: RequestReceived) -> Any:
        seen.append(ev)
        responses = ev.input_responses
        if ev.request_state is None:
            return InputRequiredResult(
                {
                    "who": elicit_form("Name?", SCHEMA),
                    "llm": sample("2+2?", 5),
                    "site": elicit_url("Log in", "https://example.com"),
                },
                request_state={"step": 1},
            )
        if ev.request_state == {"step": 1}:
            assert responses.accepted_content("who") == {"name": "Ada"}
            assert responses.sampled_text("llm") == "4"
            assert responses.elicitation_action("site") == "accept"
            return InputRequiredResult({"where": list_roots()}, request_state={"step": 2})
        assert set(responses) == {"where"}
        return {"content": [{"type": "text", "text": str(responses.root_uris("where"))}]}

    # A dict state needs sealing (the default) on the legacy wire too.
    sealed = ServerConfig(server_info={"name": "srv", "version": "1"})
    pair = Pair(handler, ClientConfig(client_info=CLIENT, capabilities=CAPS, era="legacy"), sealed)
    call = pair.client.call("tools/call", {"name": "book"})
    by_method: dict[str, dict[str, Any]] = {
        "elicitation/create": ACCEPT,
        "sampling/createMessage": SAMPLED,
        "roots/list": ROOTS_ANSWER,
    }
    rounds: list[int] = []

    def answer(event: Any) -> None:
        if type(event) is InputNeeded:
            assert event.call is call
            rounds.append(event.round)
            reply = by_method[event.method]
            if event.params.get("mode") == "url":
                assert isinstance(event.params["elicitationId"], str)
                reply = {"action": "accept"}
            pair.client.fulfil(event, reply)

    evs = pair.run(answer)
    assert type(evs[0]) is EraDetected
    assert evs[-1] == CallCompleted(
        call, {"content": [{"type": "text", "text": "['file:///home/ada']"}]}
    )
    assert rounds == [1, 1, 1, 2]
    assert len(seen) == 3
    assert all(e.era is Era.LEGACY for e in seen)


def test_pair_legacy_shim_cap_surfaces_as_call_failed() -> None:
    def handler(ev: RequestReceived) -> Any:
        return InputRequiredResult({"r": list_roots()})

    pair = Pair(
        handler,
        ClientConfig(client_info=CLIENT, capabilities=CAPS, era="legacy"),
        ServerConfig(legacy_max_rounds=2),
    )
    call = pair.client.call("tools/call", {"name": "loop"})

    def answer(event: Any) -> None:
        if type(event) is InputNeeded:
            pair.client.fulfil(event, ROOTS_ANSWER)

    evs = pair.run(answer)
    assert [type(e).__name__ for e in evs] == [
        "EraDetected",
        "InputNeeded",
        "InputNeeded",
        "CallFailed",
    ]
    assert evs[-1].call is call  # type: ignore[attr-defined]
    assert evs[-1].error.code == -32603  # type: ignore[attr-defined]
    assert not evs[-1].local  # type: ignore[attr-defined]


def test_pair_legacy_reject_fails_the_original_at_the_server() -> None:
    def handler(ev: RequestReceived) -> Any:
        return InputRequiredResult({"s": sample("hi", 5)})

    pair = Pair(handler, era="legacy")
    call = pair.client.call("tools/call", {"name": "t"})

    def answer(event: Any) -> None:
        if type(event) is InputNeeded:
            pair.client.reject(event)

    evs = pair.run(answer)
    assert type(evs[-1]) is CallFailed
    assert evs[-1].call is call
    assert "User rejected the request" in evs[-1].error.message


def test_pair_legacy_cancel_cancels_the_shim_legs_quietly() -> None:
    def handler(ev: RequestReceived) -> Any:
        return InputRequiredResult({"a": list_roots(), "b": list_roots()})

    pair = Pair(handler, era="legacy")
    call = pair.client.call("tools/call", {"name": "t"})
    evs = pair.run()
    assert [type(e).__name__ for e in evs] == ["EraDetected", "InputNeeded", "InputNeeded"]
    pair.client.cancel(call)
    assert pair.run() == []
    cancels = [
        m for who, m in pair.wire if who == "s" and m.get("method") == "notifications/cancelled"
    ]
    assert len(cancels) == 2  # the shim withdrew both legs; the client reported nothing


def test_pair_legacy_ping_from_the_server() -> None:
    from mrtr_sansio import PingAnswered

    pair = Pair(lambda ev: {"content": []}, ClientConfig(era="legacy"))
    pair.run()
    ping_id = pair.server.ping()
    assert pair.run() == []
    assert pair.server_events[-1] == PingAnswered(ping_id, True)
