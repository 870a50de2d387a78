"""ClientConnection on the modern (2026-07-28) wire: envelope, ids, the retry driver, the round
cap, state-only backoff, result validation, errors and cancellation.

Scripted server answers go in as dicts; every message the client emits is asserted exactly and
schema-checked (``helpers.sent`` uses ``helpers.drain``).
"""

from __future__ import annotations

import json
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
    Clock,
    Pair,
    client,
    input_required,
    meta,
    one,
    reply,
    reply_error,
    sent,
)
from mrtr_sansio import (
    NEED_DATA,
    Call,
    CallCompleted,
    CallFailed,
    ClientConfig,
    ClientConnection,
    ConnectionClosed,
    Era,
    InputNeeded,
    InputRequiredResult,
    InvalidMessage,
    JsonRpcError,
    Limits,
    LocalProtocolError,
    NotificationReceived,
    RequestReceived,
    RoundsExhausted,
    UnexpectedResponse,
    elicit_form,
    sample,
)
from mrtr_sansio.config import StdlibJsonCodec

TOOL = {"name": "book", "arguments": {"city": "Paris", "nights": 2}}
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


def needed(conn: ClientConnection) -> list[InputNeeded]:
    evs = conn.events()
    assert all(type(e) is InputNeeded for e in evs), evs
    return evs  # type: ignore[return-value]


def start(conn: ClientConnection, method: str = "tools/call", params: Any = TOOL) -> Call:
    call = conn.call(method, params)
    msg = one(conn)
    assert msg["method"] == method
    return call


# --- the envelope and ids -------------------------------------------------------------------


def test_first_request_is_exact() -> None:
    conn = client()
    conn.call("tools/call", TOOL)
    assert one(conn) == {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "tools/call",
        "params": {**TOOL, "_meta": meta()},
    }
    assert conn.era is Era.MODERN
    assert conn.protocol_version == "2026-07-28"


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/list", None),
        ("tools/list", {"cursor": "c2"}),
        ("server/discover", None),
        ("resources/read", {"uri": "file:///a"}),
        ("prompts/get", {"name": "p", "arguments": {"x": "1"}}),
        ("resources/templates/list", {}),
        (
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": "b"}},
        ),
    ],
)
def test_every_request_carries_the_envelope(method: str, params: Any) -> None:
    conn = client()
    conn.call(method, params)
    msg = one(conn)
    assert msg["params"] == {**(params or {}), "_meta": meta()}


def test_user_meta_is_kept_beside_the_envelope() -> None:
    conn = client()
    conn.call("tools/call", {**TOOL, "_meta": {"progressToken": "p-1"}})
    assert one(conn)["params"]["_meta"] == {"progressToken": "p-1", **meta()}


def test_envelope_without_client_info_and_with_empty_capabilities() -> None:
    conn = client(client_info=None, capabilities={})
    conn.call("tools/list")
    assert one(conn)["params"] == {"_meta": meta(caps={}, info=None)}


def test_ids_are_never_reused_across_calls_and_retries() -> None:
    conn = client()
    ids: list[Any] = []
    calls = [conn.call("tools/call", {**TOOL, "arguments": {"i": i}}) for i in range(3)]
    ids += [m["id"] for m in sent(conn)]
    for _ in range(3):
        for rid in list(ids[-3:]):
            reply(conn, rid, input_required(state="s"))
        conn.handle_timer(conn.next_deadline())  # type: ignore[arg-type]
        ids += [m["id"] for m in sent(conn)]
    assert len(ids) == 12
    assert len(set(ids)) == 12
    assert len(calls) == 3


# --- the retry ------------------------------------------------------------------------------


def test_retry_is_exact() -> None:
    conn = client()
    call = start(conn)
    reply(conn, 0, input_required({"who": FORM, "llm": SAMPLE}, "opaque-1"))
    who, llm = needed(conn)
    assert who == InputNeeded(call, "who", "elicitation/create", FORM["params"], 1)
    assert llm == InputNeeded(call, "llm", "sampling/createMessage", SAMPLE["params"], 1)
    assert conn.fulfil(who, ACCEPT)
    assert sent(conn) == []  # the round is not complete yet
    assert conn.fulfil(llm, SAMPLED)
    assert one(conn) == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            **TOOL,
            "_meta": meta(),
            "inputResponses": {"who": ACCEPT, "llm": SAMPLED},
            "requestState": "opaque-1",
        },
    }
    reply(conn, 1, {"content": [], "resultType": "complete"})
    assert conn.events() == [CallCompleted(call, {"content": [], "resultType": "complete"})]
    assert conn.next_event() is NEED_DATA


@pytest.mark.parametrize(
    "state",
    [
        "",
        "état ☃ 𝄞 日本語",
        '{"looks": ["like", "json"], "n": 1.50, "u": "\\u00e9"}',
        "  padded\twith\nwhitespace  ",
        "\x00\x1f\u2028\u2029",
        "\ud800 lone surrogate",
        "x" * 60_000,
        "eyJsb2NhdGlvbiI6Ik5ldyBZb3JrIn0",
    ],
    ids=["empty", "unicode", "json", "whitespace", "controls", "surrogate", "long", "b64"],
)
def test_request_state_is_echoed_exactly(state: str) -> None:
    # orjson (the default codec when installed) refuses lone surrogates; the stdlib carries them.
    conn = client(codec=StdlibJsonCodec()) if "\ud800" in state else client()
    start(conn)
    message = {"jsonrpc": "2.0", "id": 0, "result": input_required({"k": ROOTS}, state)}
    try:  # raw UTF-8 on the wire where possible, \u escapes for what UTF-8 cannot carry
        raw = json.dumps(message, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raw = json.dumps(message).encode("ascii")
    conn.receive_data(raw + b"\n")
    (event,) = needed(conn)
    conn.fulfil(event, ROOTS_ANSWER)
    (item,) = conn.outgoing()
    echoed = json.loads(item.data)["params"]["requestState"]
    assert echoed == state
    assert type(echoed) is str
    assert item.message["params"]["requestState"] is not None


def test_no_request_state_when_none_was_sent() -> None:
    conn = client()
    start(conn)
    reply(conn, 0, input_required({"k": ROOTS}))
    conn.fulfil(needed(conn)[0], ROOTS_ANSWER)
    params = one(conn)["params"]
    assert "requestState" not in params
    assert params["inputResponses"] == {"k": ROOTS_ANSWER}


def test_input_responses_are_replaced_each_round() -> None:
    conn = client()
    start(conn)
    reply(conn, 0, input_required({"a": FORM, "b": ROOTS}, "s1"))
    a, b = needed(conn)
    conn.fulfil(a, ACCEPT)
    conn.fulfil(b, ROOTS_ANSWER)
    first = one(conn)["params"]
    assert first["inputResponses"] == {"a": ACCEPT, "b": ROOTS_ANSWER}
    reply(conn, 1, input_required({"c": SAMPLE}))  # round 2: new key, no state
    (c,) = needed(conn)
    assert c.round == 2
    conn.fulfil(c, SAMPLED)
    second = one(conn)["params"]
    assert second["inputResponses"] == {"c": SAMPLED}
    assert "requestState" not in second
    reply(conn, 2, input_required({"a": FORM}, "s3"))  # round 3 reuses a key of round 1
    (a3,) = needed(conn)
    conn.fulfil(a3, {"action": "decline"})
    third = one(conn)["params"]
    assert third["inputResponses"] == {"a": {"action": "decline"}}
    assert third["requestState"] == "s3"


def test_parallel_calls_are_isolated() -> None:
    conn = client()
    a = conn.call("tools/call", {"name": "a"})
    one(conn)
    reply(conn, 0, input_required({"k": FORM}, "state-of-a"))
    (event,) = needed(conn)
    b = conn.call("tools/call", {"name": "b"})  # between A's rounds
    msg_b = one(conn)
    assert msg_b["params"] == {"name": "b", "_meta": meta()}
    reply(conn, msg_b["id"], input_required({"k": ROOTS}, "state-of-b"))
    (event_b,) = needed(conn)
    assert event_b.call is b
    c = conn.call("prompts/get", {"name": "c"})
    assert one(conn)["params"] == {"name": "c", "_meta": meta()}
    conn.fulfil(event, ACCEPT)
    retry_a = one(conn)["params"]
    assert retry_a == {
        "name": "a",
        "_meta": meta(),
        "inputResponses": {"k": ACCEPT},
        "requestState": "state-of-a",
    }
    conn.fulfil(event_b, ROOTS_ANSWER)
    assert one(conn)["params"] == {
        "name": "b",
        "_meta": meta(),
        "inputResponses": {"k": ROOTS_ANSWER},
        "requestState": "state-of-b",
    }
    assert conn.in_flight == {a, b, c}


def test_same_key_in_two_calls_is_answered_separately() -> None:
    conn = client()
    conn.call("tools/call", {"name": "a"})
    conn.call("tools/call", {"name": "b"})
    sent(conn)
    reply(conn, 0, input_required({"k": FORM}))
    reply(conn, 1, input_required({"k": FORM}))
    ea, eb = needed(conn)
    conn.fulfil(eb, {"action": "accept", "content": {"name": "B"}})
    assert one(conn)["params"]["inputResponses"] == {
        "k": {"action": "accept", "content": {"name": "B"}}
    }
    assert conn.fulfil(ea, ACCEPT)
    assert one(conn)["params"]["name"] == "a"


def test_fulfil_twice_or_after_the_round_returns_false() -> None:
    conn = client()
    start(conn)
    reply(conn, 0, input_required({"a": FORM, "b": FORM}))
    a, b = needed(conn)
    assert conn.fulfil(a, ACCEPT)
    assert not conn.fulfil(a, ACCEPT)  # already answered: the first answer stands
    conn.fulfil(b, ACCEPT)
    assert one(conn)["params"]["inputResponses"] == {"a": ACCEPT, "b": ACCEPT}
    assert not conn.fulfil(a, ACCEPT)
    assert sent(conn) == []


def test_an_equal_event_from_another_round_is_not_accepted() -> None:
    conn = client()
    start(conn)
    reply(conn, 0, input_required({"a": FORM}))
    (a,) = needed(conn)
    forged = InputNeeded(a.call, "a", a.method, dict(a.params), a.round)
    assert forged == a
    assert not conn.fulfil(forged, ACCEPT)
    assert conn.fulfil(a, ACCEPT)


@pytest.mark.parametrize(
    ("embedded", "answer"),
    [
        (FORM, {"content": {"name": "x"}}),
        (FORM, {"action": "maybe"}),
        (FORM, {"action": "accept", "content": ["x"]}),
        (SAMPLE, {"role": "assistant", "content": {"type": "text", "text": "4"}}),
        (SAMPLE, {"role": "robot", "content": {}, "model": "m"}),
        (ROOTS, {"roots": "file:///"}),
        (ROOTS, ["not", "a", "mapping"]),
    ],
)
def test_fulfil_rejects_an_answer_of_the_wrong_shape(embedded: Any, answer: Any) -> None:
    conn = client()
    start(conn)
    reply(conn, 0, input_required({"k": embedded}))
    (event,) = needed(conn)
    with pytest.raises(LocalProtocolError):
        conn.fulfil(event, answer)
    assert sent(conn) == []
    good = {"elicitation/create": ACCEPT, "sampling/createMessage": SAMPLED}.get(
        event.method, ROOTS_ANSWER
    )
    assert conn.fulfil(event, good)
    assert one(conn)["params"]["inputResponses"] == {"k": good}


def test_an_answer_that_cannot_be_serialized_is_taken_back() -> None:
    conn = client()
    start(conn)
    reply(conn, 0, input_required({"a": FORM, "b": FORM}))
    a, b = needed(conn)
    conn.fulfil(a, {"action": "accept", "content": {"name": object()}})
    with pytest.raises(LocalProtocolError, match="'a'"):
        conn.fulfil(b, ACCEPT)
    assert sent(conn) == []
    assert not conn.fulfil(b, ACCEPT)  # b's answer stands
    assert conn.fulfil(a, ACCEPT)  # a is pending again
    assert one(conn)["params"]["inputResponses"] == {"a": ACCEPT, "b": ACCEPT}


def test_mapping_answers_are_sent_as_plain_objects() -> None:
    conn = client()
    start(conn)
    reply(conn, 0, input_required({"k": ROOTS}))
    (event,) = needed(conn)

    class Answer(dict[str, Any]):
        pass

    conn.fulfil(event, Answer(ROOTS_ANSWER))
    assert one(conn)["params"]["inputResponses"]["k"] == ROOTS_ANSWER


def test_decline_and_dismiss_answer_elicitations() -> None:
    conn = client()
    start(conn)
    reply(conn, 0, input_required({"d": FORM, "c": URL, "s": SAMPLE}))
    d, c, s = needed(conn)
    assert conn.decline(d)
    with pytest.raises(TypeError, match=r"takes a Call, not InputNeeded; dismiss\(event\)"):
        conn.cancel(c)  # type: ignore[arg-type]
    assert conn.dismiss(c)
    with pytest.raises(LocalProtocolError, match="elicitation"):
        conn.decline(s)
    with pytest.raises(LocalProtocolError, match="dismiss answers elicitation/create"):
        conn.dismiss(s)
    conn.fulfil(s, SAMPLED)
    assert one(conn)["params"]["inputResponses"] == {
        "d": {"action": "decline"},
        "c": {"action": "cancel"},
        "s": SAMPLED,
    }


def test_reject_on_the_modern_wire_abandons_the_call() -> None:
    conn = client()
    start(conn)
    reply(conn, 0, input_required({"s": SAMPLE, "r": ROOTS}))
    s, r = needed(conn)
    assert conn.reject(s)
    assert sent(conn) == []
    assert conn.events() == []
    assert not conn.fulfil(r, ROOTS_ANSWER)
    assert not conn.reject(s)
    assert conn.in_flight == frozenset()


def test_api_type_errors() -> None:
    conn = client()
    start(conn)
    reply(conn, 0, input_required({"s": SAMPLE}))
    (event,) = needed(conn)
    with pytest.raises(TypeError):
        conn.fulfil("s", SAMPLED)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        conn.reject(event, "no")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        conn.cancel("call")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        conn.call(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        conn.call("tools/call", ["x"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        conn.call("tools/call", {"_meta": "x"})


@pytest.mark.parametrize(
    "params",
    [
        {"name": "t", "inputResponses": {}},
        {"name": "t", "requestState": "forged"},
        {"name": "t", "_meta": {"io.modelcontextprotocol/protocolVersion": "2025-11-25"}},
        {"name": "t", "_meta": {"io.modelcontextprotocol/clientCapabilities": {}}},
        {"name": "t", "_meta": {"io.modelcontextprotocol/clientInfo": {}}},
    ],
)
def test_call_refuses_what_the_connection_owns(params: Any) -> None:
    conn = client()
    with pytest.raises(LocalProtocolError):
        conn.call("tools/call", params)
    assert sent(conn) == []
    assert conn.in_flight == frozenset()


def test_call_with_params_that_cannot_be_serialized_leaves_no_trace() -> None:
    conn = client()
    with pytest.raises(LocalProtocolError):
        conn.call("tools/call", {"name": "t", "arguments": {"x": object()}})
    assert sent(conn) == []
    assert conn.in_flight == frozenset()
    call = conn.call("tools/call", TOOL)
    assert call.call_id == 0
    assert one(conn)["id"] == 1  # the id burnt by the failed send is not reused


def test_initialize_is_the_connections() -> None:
    with pytest.raises(LocalProtocolError):
        client().call("initialize", {})


def test_invalid_era_is_refused() -> None:
    with pytest.raises(ValueError, match="era"):
        ClientConnection(ClientConfig(era="future"))


@pytest.mark.parametrize("caps", [{"elicitation": "yes"}, {"roots": None}, {"sampling": []}])
def test_capabilities_must_be_objects(caps: Any) -> None:
    with pytest.raises(ValueError, match="capabilities"):
        ClientConnection(ClientConfig(capabilities=caps))


# --- rounds ---------------------------------------------------------------------------------


def test_round_cap() -> None:
    conn = client(max_rounds=3)
    call = start(conn)
    rid = 0  # each retry's id is read from the wire
    for rnd in range(1, 4):
        reply(conn, rid, input_required({"k": FORM}, f"s{rnd}"))
        (event,) = needed(conn)
        assert event.round == rnd
        conn.fulfil(event, ACCEPT)
        retry = one(conn)
        assert retry["params"]["requestState"] == f"s{rnd}"
        rid = retry["id"]
    last = input_required({"k": FORM}, "s4")
    reply(conn, rid, last)
    assert conn.events() == [RoundsExhausted(call, 3, last, ("k",))]
    assert sent(conn) == []
    assert conn.next_deadline() is None
    assert not conn.cancel(call)


def test_round_cap_names_only_the_keys_asked_again() -> None:
    """A key answered and asked again is named; a new key asked at the cap is not "again"."""
    conn = client(max_rounds=1)
    call = start(conn)
    reply(conn, 0, input_required({"k": FORM}, "s1"))
    (event,) = needed(conn)
    conn.fulfil(event, ACCEPT)
    rid = one(conn)["id"]
    last = input_required({"k": FORM, "j": FORM}, "s2")
    reply(conn, rid, last)
    assert conn.events() == [RoundsExhausted(call, 1, last, ("k",))]
    conn = client(max_rounds=1)
    call = start(conn)
    reply(conn, 0, input_required({"k": FORM}, "s1"))
    (event,) = needed(conn)
    conn.fulfil(event, ACCEPT)
    rid = one(conn)["id"]
    last = input_required({"j": FORM}, "s2")
    reply(conn, rid, last)
    assert conn.events() == [RoundsExhausted(call, 1, last, ())]


def test_round_cap_counts_state_only_rounds() -> None:
    clock = Clock()
    conn = client(max_rounds=2, clock=clock)
    call = start(conn)
    reply(conn, 0, input_required(state="busy"))
    clock.now += 1
    conn.handle_timer(clock.now)
    one(conn)
    reply(conn, 1, input_required({"k": ROOTS}))
    (event,) = needed(conn)
    assert event.round == 2
    conn.fulfil(event, ROOTS_ANSWER)
    one(conn)
    reply(conn, 2, input_required(state="busy"))
    assert conn.events() == [RoundsExhausted(call, 2, input_required(state="busy"), ())]
    assert conn.next_deadline() is None


def test_a_round_cap_of_one_allows_one_retry() -> None:
    conn = client(max_rounds=1)
    call = start(conn)
    reply(conn, 0, input_required({"k": ROOTS}))
    conn.fulfil(needed(conn)[0], ROOTS_ANSWER)
    one(conn)
    reply(conn, 1, input_required({"k": ROOTS}))
    assert type(conn.events()[0]) is RoundsExhausted
    assert call not in conn.in_flight


def test_state_only_rounds_back_off_through_the_timer() -> None:
    clock = Clock(1000.0)
    conn = client(clock=clock)
    call = start(conn)
    assert conn.next_deadline() is None
    delays = []
    rid = 0  # each retry's id is read from the wire
    for rnd in range(1, 6):
        reply(conn, rid, input_required(state=f"wait-{rnd}"))
        assert conn.events() == []  # nothing for the application to do
        assert sent(conn) == []
        due = conn.next_deadline()
        assert due is not None
        delays.append(round(due - clock.now, 6))
        conn.handle_timer(due - 0.001)
        assert sent(conn) == []
        clock.now = due
        conn.handle_timer(due)
        retry = one(conn)
        assert retry["params"] == {**TOOL, "_meta": meta(), "requestState": f"wait-{rnd}"}
        rid = retry["id"]
        assert conn.next_deadline() is None
    assert delays == [0.05, 0.1, 0.2, 0.25, 0.25]
    # a round with requests resets the backoff
    reply(conn, rid, input_required({"k": ROOTS}))
    conn.fulfil(needed(conn)[0], ROOTS_ANSWER)
    rid = one(conn)["id"]
    reply(conn, rid, input_required(state="again"))
    assert conn.next_deadline() == pytest.approx(clock.now + 0.05)
    clock.now += 0.05
    conn.handle_timer(clock.now)
    rid = one(conn)["id"]
    reply(conn, rid, {"content": []})
    assert conn.events() == [CallCompleted(call, {"content": []})]


def test_empty_input_requests_without_state_retries_plainly() -> None:
    conn = client()
    start(conn)
    reply(conn, 0, {"resultType": "input_required", "inputRequests": {}})
    assert conn.events() == []
    conn.handle_timer(conn.next_deadline())  # type: ignore[arg-type]
    assert one(conn) == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {**TOOL, "_meta": meta()},
    }


def test_backoff_is_configurable_and_timers_of_calls_are_independent() -> None:
    clock = Clock(0.0)
    conn = client(clock=clock, retry_backoff=1.0, max_retry_backoff=1.5)
    conn.call("tools/call", {"name": "a"})
    conn.call("tools/call", {"name": "b"})
    sent(conn)
    reply(conn, 0, input_required(state="a"))
    clock.now = 0.5
    reply(conn, 1, input_required(state="b"))
    assert conn.next_deadline() == 1.0
    conn.handle_timer(1.0)
    assert one(conn)["params"]["name"] == "a"
    assert conn.next_deadline() == 1.5
    reply(conn, 2, input_required(state="a"))
    assert conn.next_deadline() == 1.5  # b is still first; a waits 1.5 (capped) from 1.0
    conn.handle_timer(2.5)
    assert [m["params"]["name"] for m in sent(conn)] == ["b", "a"]


# --- results --------------------------------------------------------------------------------


def test_missing_result_type_is_complete() -> None:
    conn = client()
    call = start(conn)
    reply(conn, 0, {"content": [{"type": "text", "text": "old server"}]})
    assert conn.events() == [
        CallCompleted(call, {"content": [{"type": "text", "text": "old server"}]})
    ]


@pytest.mark.parametrize("kind", ["task", "INPUT_REQUIRED", "", None, 3, ["complete"]])
def test_unknown_result_type_is_an_invalid_response(kind: Any) -> None:
    conn = client()
    call = start(conn)
    reply(conn, 0, {"resultType": kind, "content": []})
    (event,) = conn.events()
    assert type(event) is CallFailed
    assert event.call is call
    assert event.local
    assert event.error.code == -32603
    assert "resultType" in event.error.message


def test_extension_result_types_complete_when_configured() -> None:
    conn = client(extra_result_types={"task"})
    call = start(conn)
    res = {"resultType": "task", "taskId": "t1", "status": "working"}
    reply(conn, 0, res)
    assert conn.events() == [CallCompleted(call, res)]


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/list", {}),
        ("server/discover", {}),
        ("resources/list", {}),
        (
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": "b"}},
        ),
    ],
)
def test_input_required_on_other_methods_is_invalid(method: str, params: Any) -> None:
    conn = client()
    call = start(conn, method, params)
    reply(conn, 0, input_required({"k": FORM}, "s"))
    (event,) = conn.events()
    assert type(event) is CallFailed
    assert event.call is call
    assert event.local
    assert method in event.error.message
    assert sent(conn) == []


@pytest.mark.parametrize("method", ["tools/call", "prompts/get", "resources/read"])
def test_input_required_on_the_three_methods(method: str) -> None:
    conn = client()
    call = start(conn, method, {"name": "x"} if method != "resources/read" else {"uri": "u:x"})
    reply(conn, 0, input_required({"k": ROOTS}))
    (event,) = needed(conn)
    assert event.call is call


@pytest.mark.parametrize(
    ("res", "why"),
    [
        ({"resultType": "input_required"}, "neither"),
        (input_required(state=5), "requestState"),
        ({"resultType": "input_required", "requestState": None}, "requestState"),
        ({"resultType": "input_required", "inputRequests": None}, "inputRequests"),
        ({"resultType": "input_required", "inputRequests": [FORM]}, "inputRequests"),
        (input_required({"k": "elicit"}), "'k'"),
        (input_required({"k": {"params": {}}}), "method"),
        (input_required({"k": {"method": "tools/call", "params": {}}}), "tools/call"),
        (input_required({"k": {"method": "ping"}}), "ping"),
        (input_required({"k": {"method": "elicitation/create"}}), "params"),
        (
            input_required(
                {"k": {"method": "elicitation/create", "params": {"requestedSchema": {}}}}
            ),
            "message",
        ),
        (
            input_required({"k": {"method": "elicitation/create", "params": {"message": "m"}}}),
            "requestedSchema",
        ),
        (
            input_required(
                {"k": {"method": "elicitation/create", "params": {"mode": "url", "message": "m"}}}
            ),
            "url",
        ),
        (
            input_required(
                {"k": {"method": "elicitation/create", "params": {"mode": "sms", "message": "m"}}}
            ),
            "mode",
        ),
        (
            input_required({"k": {"method": "sampling/createMessage", "params": {"maxTokens": 5}}}),
            "messages",
        ),
        (
            input_required(
                {
                    "k": {
                        "method": "sampling/createMessage",
                        "params": {"messages": [], "maxTokens": "5"},
                    }
                }
            ),
            "maxTokens",
        ),
        (input_required({"k": {"method": "roots/list", "params": []}}), "roots/list"),
    ],
)
def test_malformed_input_required_is_an_invalid_response(res: Any, why: str) -> None:
    conn = client()
    call = start(conn)
    reply(conn, 0, res)
    (event,) = conn.events()
    assert type(event) is CallFailed
    assert event.call is call
    assert event.local
    assert why in event.error.message
    assert sent(conn) == []


def test_non_string_keys_from_a_decoded_message_are_invalid() -> None:
    conn = client()
    start(conn)
    reply(conn, 0, {"resultType": "input_required", "inputRequests": {1: ROOTS}})
    (event,) = conn.events()
    assert type(event) is CallFailed
    assert "keys" in event.error.message


def test_roots_request_with_null_or_missing_params() -> None:
    conn = client()
    start(conn)
    reply(conn, 0, input_required({"a": {"method": "roots/list", "params": None}, "b": ROOTS}))
    a, b = needed(conn)
    assert a.params == {}
    assert b.params == {}


def test_limits_on_input_required() -> None:
    limits = Limits(max_input_requests=2, max_request_state_bytes=8)
    conn = client(limits=limits)
    conn.call("tools/call", {"name": "a"})
    conn.call("tools/call", {"name": "b"})
    conn.call("tools/call", {"name": "c"})
    conn.call("tools/call", {"name": "d"})
    sent(conn)
    reply(conn, 0, input_required({"a": ROOTS, "b": ROOTS, "c": ROOTS}))
    reply(conn, 1, input_required(state="123456789"))
    reply(conn, 2, input_required(state="é" * 5))  # 10 bytes in UTF-8
    reply(conn, 3, input_required({"a": ROOTS, "b": ROOTS}, "12345678"))
    evs = conn.events()
    assert [type(e) for e in evs] == [CallFailed, CallFailed, CallFailed, InputNeeded, InputNeeded]
    assert "more than 2" in evs[0].error.message  # type: ignore[attr-defined]
    assert "8 bytes" in evs[1].error.message  # type: ignore[attr-defined]
    assert "8 bytes" in evs[2].error.message  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("caps", "embedded", "missing"),
    [
        ({}, FORM, "elicitation.form"),
        ({"elicitation": {"form": {}}}, URL, "elicitation.url"),
        ({"elicitation": {}}, URL, "elicitation.url"),
        ({"elicitation": {"url": {}}}, FORM, "elicitation.form"),
        ({}, SAMPLE, "sampling"),
        (
            {"sampling": {}},
            {"method": "sampling/createMessage", "params": {**SAMPLE["params"], "tools": []}},
            "sampling.tools",
        ),
        (
            {"sampling": {}},
            {
                "method": "sampling/createMessage",
                "params": {**SAMPLE["params"], "toolChoice": {"mode": "auto"}},
            },
            "sampling.tools",
        ),
        (
            {"sampling": {"tools": {}}},
            {
                "method": "sampling/createMessage",
                "params": {**SAMPLE["params"], "includeContext": "thisServer"},
            },
            "sampling.context",
        ),
        ({"elicitation": {}, "sampling": {}}, ROOTS, "roots"),
    ],
)
def test_capability_violations_by_the_server(caps: Any, embedded: Any, missing: str) -> None:
    conn = client(capabilities=caps)
    call = start(conn)
    reply(
        conn,
        0,
        input_required({"ok": ROOTS, "bad": embedded} if "roots" in caps else {"bad": embedded}),
    )
    (event,) = conn.events()  # no InputNeeded at all, not even for the valid key
    assert type(event) is CallFailed
    assert event.call is call
    assert event.local
    assert missing in event.error.message
    assert "'bad'" in event.error.message


@pytest.mark.parametrize(
    ("caps", "embedded"),
    [
        ({"elicitation": {}}, FORM),
        (
            {"elicitation": {"form": {}}},
            {"method": "elicitation/create", "params": {**FORM["params"], "mode": "form"}},
        ),
        ({"elicitation": {"url": {}}}, URL),
        ({"sampling": {}}, SAMPLE),
        (
            {"sampling": {}},
            {
                "method": "sampling/createMessage",
                "params": {**SAMPLE["params"], "includeContext": "none"},
            },
        ),
        ({"roots": {}}, ROOTS),
    ],
)
def test_requests_within_the_declared_capabilities(caps: Any, embedded: Any) -> None:
    conn = client(capabilities=caps)
    start(conn)
    reply(conn, 0, input_required({"k": embedded}))
    (event,) = needed(conn)
    assert event.method == embedded["method"]


# --- errors ---------------------------------------------------------------------------------


def test_missing_capability_error_is_typed() -> None:
    conn = client()
    call = start(conn)
    data: dict[str, Any] = {"requiredCapabilities": {"elicitation": {"url": {}}}}
    reply_error(conn, 0, -32021, "URL-mode elicitation is required for this tool", data)
    (event,) = conn.events()
    assert event == CallFailed(
        call, JsonRpcError(-32021, "URL-mode elicitation is required for this tool", data)
    )
    assert type(event) is CallFailed
    assert not event.local
    assert event.required_capabilities == {"elicitation": {"url": {}}}
    assert event.supported_versions is None


def test_unsupported_version_error_is_typed() -> None:
    conn = client()
    call = start(conn)
    data = {"supported": ["2026-07-28", "2025-11-25", 7], "requested": "1900-01-01"}
    reply_error(conn, 0, -32022, "Unsupported protocol version", data)
    (event,) = conn.events()
    assert type(event) is CallFailed
    assert event.call is call
    assert event.supported_versions == ["2026-07-28", "2025-11-25"]
    assert event.required_capabilities is None


@pytest.mark.parametrize(
    "err",
    [
        {"code": -32602, "message": "Unknown tool: book"},
        {"code": -32603, "message": "boom", "data": {"trace": [1, 2]}},
        {"code": "x", "message": 5},
        "not an object",
    ],
)
def test_other_errors_are_passed_on(err: Any) -> None:
    conn = client()
    call = start(conn)
    conn.receive_message({"jsonrpc": "2.0", "id": 0, "error": err})
    (event,) = conn.events()
    assert event == CallFailed(call, JsonRpcError.from_wire(err))


def test_an_error_after_some_rounds_ends_the_call() -> None:
    conn = client()
    call = start(conn)
    reply(conn, 0, input_required({"k": ROOTS}, "s"))
    conn.fulfil(needed(conn)[0], ROOTS_ANSWER)
    one(conn)
    reply_error(conn, 1, -32602, "Invalid or expired requestState")
    assert conn.events() == [
        CallFailed(call, JsonRpcError(-32602, "Invalid or expired requestState"))
    ]


# --- cancellation ---------------------------------------------------------------------------


def test_cancel_in_flight_sends_cancelled_and_ignores_the_late_answer() -> None:
    conn = client()
    call = start(conn)
    assert conn.cancel(call, "user pressed stop")
    assert one(conn) == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 0, "reason": "user pressed stop"},
    }
    reply(conn, 0, {"content": []})
    assert conn.events() == []
    reply(conn, 0, {"content": []})  # a second copy is merely unexpected
    assert [type(e) for e in conn.events()] == [UnexpectedResponse]
    assert not conn.cancel(call)


def test_cancel_a_retry_in_flight_names_the_retry() -> None:
    conn = client()
    call = start(conn)
    reply(conn, 0, input_required({"k": ROOTS}, "s"))
    conn.fulfil(needed(conn)[0], ROOTS_ANSWER)
    one(conn)
    conn.cancel(call)
    assert one(conn) == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 1},
    }
    reply_error(conn, 1, -32603, "late")
    assert conn.events() == []


def test_cancel_between_rounds_sends_nothing_and_voids_the_input() -> None:
    conn = client()
    call = start(conn)
    reply(conn, 0, input_required({"a": FORM, "b": ROOTS}))
    a, b = needed(conn)
    conn.fulfil(a, ACCEPT)
    assert conn.cancel(call)
    assert sent(conn) == []
    assert not conn.fulfil(b, ROOTS_ANSWER)
    assert sent(conn) == []
    assert conn.events() == []


def test_cancel_during_backoff_stops_the_timer() -> None:
    conn = client()
    call = start(conn)
    reply(conn, 0, input_required(state="s"))
    assert conn.next_deadline() is not None
    conn.cancel(call)
    assert conn.next_deadline() is None
    conn.handle_timer(1e9)
    assert sent(conn) == []


def test_late_answers_to_cancelled_calls_are_remembered_within_a_bound() -> None:
    conn = client(limits=Limits(max_in_flight=2))
    calls = [conn.call("tools/list") for _ in range(3)]
    for call in calls:
        conn.cancel(call)
    sent(conn)
    for rid in (1, 2):
        reply(conn, rid, {"tools": []})
    assert conn.events() == []
    reply(conn, 0, {"tools": []})  # the oldest was forgotten: merely unexpected now
    assert [type(e) for e in conn.events()] == [UnexpectedResponse]


def test_cancel_one_call_leaves_the_others() -> None:
    conn = client()
    a = conn.call("tools/call", {"name": "a"})
    b = conn.call("tools/call", {"name": "b"})
    sent(conn)
    conn.cancel(a)
    sent(conn)
    reply(conn, 1, {"content": []})
    assert conn.events() == [CallCompleted(b, {"content": []})]


# --- what the server sends besides answers --------------------------------------------------


def test_notifications_are_passed_on() -> None:
    conn = client()
    start(conn)
    note = {"progressToken": "p", "progress": 1, "total": 2}
    conn.receive_message({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
    conn.receive_message(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}
    )
    assert conn.events() == [
        NotificationReceived("notifications/progress", note),
        NotificationReceived("notifications/cancelled", {"requestId": 9}),
    ]


def test_a_request_from_a_modern_server_is_reported_not_answered() -> None:
    conn = client()
    start(conn)
    conn.receive_message(
        {"jsonrpc": "2.0", "id": 5, "method": "elicitation/create", "params": FORM["params"]}
    )
    conn.receive_message({"jsonrpc": "2.0", "id": 6, "method": "ping"})
    evs = conn.events()
    assert [type(e) for e in evs] == [InvalidMessage, InvalidMessage]
    assert all(not e.answered for e in evs)  # type: ignore[attr-defined]
    assert sent(conn) == []


@pytest.mark.parametrize(
    "data",
    [
        b"not json\n",
        b"\xff\xfe\n",
        b"[]\n",
        b'[{"jsonrpc": "2.0", "id": 0, "result": {}}]\n',
        b"42\n",
        b'{"jsonrpc": "1.0", "id": 7, "result": {}}\n',
        b'{"jsonrpc": "2.0", "id": null, "result": {}}\n',
        b'{"jsonrpc": "2.0", "id": true, "result": {}}\n',
        b'{"jsonrpc": "2.0", "id": 0.0, "error": {"code": 1, "message": "m"}}\n',
        b'{"jsonrpc": "2.0", "method": 5}\n',
        b'{"jsonrpc": "2.0", "method": "x", "params": []}\n',
        b'{"jsonrpc": "2.0", "id": 99, "result": {}}\n',
        b'{"jsonrpc": "2.0", "id": "0", "result": {}}\n',
        b'{"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}}\n',
        b'{"jsonrpc": "2.0", "id": NaN, "result": {}}\n',
    ],
)
def test_garbage_is_reported_and_never_disturbs_calls(data: bytes) -> None:
    conn = client()
    call = start(conn)
    conn.receive_data(data)
    evs = conn.events()
    assert len(evs) == 1
    assert type(evs[0]) in (InvalidMessage, UnexpectedResponse)
    assert sent(conn) == []  # a client never answers junk
    reply(conn, 0, {"content": []})
    assert conn.events() == [CallCompleted(call, {"content": []})]


@pytest.mark.parametrize(
    "msg",
    [
        {"jsonrpc": "2.0", "id": 0},
        {"jsonrpc": "2.0", "id": 0, "result": {}, "error": {"code": 1, "message": "m"}},
        {"id": 0, "result": {}},
        {"jsonrpc": "1.0", "id": 0, "result": {}},
        {"jsonrpc": "2.0", "id": 0, "result": "text"},
        {"jsonrpc": "2.0", "id": 0, "result": None},
    ],
)
def test_a_broken_answer_to_a_call_fails_that_call_only(msg: Any) -> None:
    conn = client()
    a = conn.call("tools/call", {"name": "a"})
    b = conn.call("tools/call", {"name": "b"})
    sent(conn)
    conn.receive_message(msg)
    (event,) = conn.events()
    assert type(event) is CallFailed
    assert event.call is a
    assert event.local
    reply(conn, 1, {"content": []})
    assert conn.events() == [CallCompleted(b, {"content": []})]


def test_oversized_message_is_reported_not_answered() -> None:
    conn = client(limits=Limits(max_message_bytes=64))
    call = start(conn)
    conn.receive_data(b'{"jsonrpc": "2.0", "id": 0, "result": {"x": "' + b"y" * 100 + b'"}}\n')
    (event,) = conn.events()
    assert type(event) is InvalidMessage
    assert not event.answered
    assert sent(conn) == []
    conn.receive_message(b'{"jsonrpc":"2.0","id":0,"result":{}}')
    assert conn.events() == [CallCompleted(call, {})]


def test_receive_message_accepts_bytes_str_and_mappings() -> None:
    conn = client()
    calls = [conn.call("tools/list") for _ in range(3)]
    sent(conn)
    conn.receive_message(b'{"jsonrpc":"2.0","id":0,"result":{"tools":[]}}')
    conn.receive_message('{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}')
    conn.receive_message({"jsonrpc": "2.0", "id": 2, "result": {"tools": []}})
    assert conn.events() == [CallCompleted(c, {"tools": []}) for c in calls]


# --- closing --------------------------------------------------------------------------------


def test_close_fails_every_open_call() -> None:
    conn = client()
    a = conn.call("tools/call", {"name": "a"})
    b = conn.call("tools/call", {"name": "b"})
    c = conn.call("tools/call", {"name": "c"})
    sent(conn)
    reply(conn, 1, input_required({"k": ROOTS}))
    reply(conn, 2, input_required(state="s"))
    (event,) = needed(conn)
    conn.receive_data(b"")
    evs = conn.events()
    assert [type(e) for e in evs] == [CallFailed, CallFailed, CallFailed, ConnectionClosed]
    assert [e.call for e in evs[:3]] == [a, b, c]  # type: ignore[attr-defined]
    assert all(e.local for e in evs[:3])  # type: ignore[attr-defined]
    assert conn.next_deadline() is None
    assert not conn.fulfil(event, ROOTS_ANSWER)
    with pytest.raises(LocalProtocolError):
        conn.call("tools/list")


# --- HTTP -----------------------------------------------------------------------------------


def test_http_headers_of_modern_messages() -> None:
    conn = client()
    tool = conn.call("tools/call", {"name": "get_weather"})
    conn.call("resources/read", {"uri": "file:///café.txt"})
    conn.call("prompts/get", {"name": " padded "})
    conn.call("tools/list")
    conn.call("tools/call", {"arguments": {}})  # no name: nothing to mirror
    items = conn.outgoing()
    assert [conn.http_headers(i) for i in items] == [
        {
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": "get_weather",
        },
        {
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "resources/read",
            "Mcp-Name": "=?base64?ZmlsZTovLy9jYWbDqS50eHQ=?=",
        },
        {
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "prompts/get",
            "Mcp-Name": "=?base64?IHBhZGRlZCA=?=",
        },
        {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"},
        {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"},
    ]
    conn.cancel(tool)
    (note,) = conn.outgoing()
    assert conn.http_headers(note) == {"MCP-Protocol-Version": "2026-07-28"}


def test_http_headers_are_accepted_by_our_server() -> None:
    from mrtr_sansio import ServerConnection
    from mrtr_sansio.http import HttpRequestFacts

    conn = client()
    conn.call("tools/call", {"name": "日本"})
    (item,) = conn.outgoing()
    headers = {k.lower(): v for k, v in conn.http_headers(item).items()}
    server = ServerConnection()
    server.receive_message(item.data, http=HttpRequestFacts.from_headers(headers))
    (event,) = server.events()
    assert type(event) is RequestReceived
    assert event.name == "日本"


SQL_TOOL: dict[str, Any] = {
    "name": "execute_sql",
    "inputSchema": {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "query": {"type": "string"},
            "opts": {
                "type": "object",
                "properties": {
                    "dry": {"type": "boolean", "x-mcp-header": "Dry"},
                    "limit": {"type": ["integer", "null"], "x-mcp-header": "Limit"},
                },
            },
        },
    },
}


def test_http_headers_mirror_x_mcp_header_arguments() -> None:
    from mrtr_sansio.http import param_headers_for

    mirrored = param_headers_for([SQL_TOOL])
    conn = client()
    conn.call(
        "tools/call",
        {
            "name": "execute_sql",
            "arguments": {"region": "us-west1", "query": "q", "opts": {"dry": True, "limit": -7}},
        },
    )
    conn.call(
        "tools/call",
        {"name": "execute_sql", "arguments": {"region": "Hello, 世界", "opts": {"limit": None}}},
    )
    conn.call(
        "tools/call",
        {"name": "execute_sql", "arguments": {"region": "=?base64?literal?=", "opts": 5}},
    )
    conn.call("tools/call", {"name": "execute_sql"})
    conn.call("tools/call", {"name": "other", "arguments": {"region": "x"}})
    conn.call("prompts/get", {"name": "execute_sql", "arguments": {"region": "x"}})
    items = conn.outgoing()
    params = [
        {k: v for k, v in conn.http_headers(i, mirrored).items() if k.startswith("Mcp-Param-")}
        for i in items
    ]
    assert params == [
        {"Mcp-Param-Region": "us-west1", "Mcp-Param-Dry": "true", "Mcp-Param-Limit": "-7"},
        {"Mcp-Param-Region": "=?base64?SGVsbG8sIOS4lueVjA==?="},
        {"Mcp-Param-Region": "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="},
        {},
        {},
        {},
    ]
    assert conn.http_headers(items[0]) == {
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "execute_sql",
    }


def test_param_headers_are_accepted_by_our_server_on_every_leg() -> None:
    from mrtr_sansio import ServerConfig, ServerConnection
    from mrtr_sansio.http import HttpRequestFacts, param_headers_for

    mirrored = param_headers_for([SQL_TOOL])
    server = ServerConnection(ServerConfig(param_headers=mirrored))
    conn = client()
    args = {"region": "eu-west 3 ", "query": "q", "opts": {"dry": False}}
    conn.call("tools/call", {"name": "execute_sql", "arguments": args})
    seen = []
    for leg in range(2):  # the first request, then its retry: both mirror the arguments
        (item,) = conn.outgoing()
        headers = {k.lower(): v for k, v in conn.http_headers(item, mirrored).items()}
        assert headers["mcp-param-region"] == "=?base64?ZXUtd2VzdCAzIA==?="
        server.receive_message(item.data, http=HttpRequestFacts.from_headers(headers))
        (event,) = server.events()
        assert type(event) is RequestReceived
        seen.append(event.request_state)
        if leg == 0:
            server.respond(event.request_id, InputRequiredResult(request_state="s"))
            (answer,) = server.outgoing()
            conn.receive_message(answer.data)
            conn.handle_timer(conn.next_deadline())  # type: ignore[arg-type]
    assert seen == [None, "s"]


# --- against our ServerConnection -----------------------------------------------------------


def test_pair_multi_round_with_every_kind_of_input() -> None:
    seen: list[RequestReceived] = []

    def handler(ev: RequestReceived) -> Any:
        seen.append(ev)
        responses = ev.input_responses
        if not responses:
            return InputRequiredResult(
                {"who": elicit_form("Name?", SCHEMA), "llm": sample("2+2?", 5)},
                request_state="round-1 ☃",
            )
        if ev.request_state == "round-1 ☃":
            assert set(responses) == {"who", "llm"}
            return InputRequiredResult({"where": {"method": "roots/list"}})
        assert set(responses) == {"where"}
        assert ev.request_state is None
        name = responses.accepted_content("who")
        return {"content": [{"type": "text", "text": f"{name} {responses.root_uris('where')}"}]}

    pair = Pair(handler)
    call = pair.client.call("tools/call", {"name": "t"})
    answers: dict[Any, dict[str, Any]] = {"who": ACCEPT, "llm": SAMPLED, "where": ROOTS_ANSWER}

    def answer(event: Any) -> None:
        if type(event) is InputNeeded:
            pair.client.fulfil(event, answers[event.key])

    evs = pair.run(answer)
    assert [type(e).__name__ for e in evs] == [
        "InputNeeded",
        "InputNeeded",
        "InputNeeded",
        "CallCompleted",
    ]
    final = evs[-1]
    assert final.call is call  # type: ignore[attr-defined]
    assert final.result["content"][0]["text"] == "None ['file:///home/ada']"  # type: ignore[attr-defined]
    assert [e.request_id for e in seen] == [0, 1, 2]
    assert [e.round for e in seen] == [1, None, None]


def test_pair_state_only_round_through_the_timer() -> None:
    clock = Clock()

    def handler(ev: RequestReceived) -> Any:
        if ev.request_state is None:
            return InputRequiredResult(request_state="working")
        return {"content": [{"type": "text", "text": ev.request_state}]}

    pair = Pair(handler, ClientConfig(client_info=CLIENT, capabilities={}, clock=clock))
    call = pair.client.call("tools/call", {"name": "slow"})
    assert pair.run() == []
    due = pair.client.next_deadline()
    assert due == pytest.approx(clock.now + 0.05)
    pair.client.handle_timer(due)  # type: ignore[arg-type]
    assert pair.run() == [
        CallCompleted(
            call,
            {
                "content": [{"type": "text", "text": "working"}],
                "resultType": "complete",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "srv", "version": "1"}},
            },
        )
    ]


def test_pair_missing_capability_from_our_server() -> None:
    def handler(ev: RequestReceived) -> Any:
        return InputRequiredResult({"k": elicit_form("?", SCHEMA)})

    pair = Pair(handler, ClientConfig(client_info=CLIENT, capabilities={"roots": {}}))
    call = pair.client.call("tools/call", {"name": "t"})
    (event,) = pair.run()
    assert type(event) is CallFailed
    assert event.call is call
    assert not event.local
    assert event.error.code == -32021
    assert event.required_capabilities == {"elicitation": {"form": {}}}


def test_pair_cancel_reaches_the_server() -> None:
    from mrtr_sansio import RequestCancelled

    pair = Pair(lambda ev: {"content": []}, ClientConfig(client_info=CLIENT, capabilities={}))
    call = pair.client.call("tools/call", {"name": "t"})
    pair.client.cancel(call, "stop")
    pair.to_server()
    assert [type(e) for e in pair.server.events()] == [RequestReceived, RequestCancelled]
    assert pair.run() == []


def test_config_defaults() -> None:
    config = ClientConfig()
    assert config.era == "modern"
    assert config.max_rounds == 10
    assert config.retry_backoff == 0.05
    assert config.max_retry_backoff == 0.25
    assert config.extra_result_types == frozenset()
    assert ClientConfig(extra_result_types=["task"]).extra_result_types == {"task"}
    with pytest.raises(TypeError, match="string"):
        ClientConfig(extra_result_types="task")
    conn = ClientConnection()
    conn.call("tools/list")
    assert one(conn)["params"] == {"_meta": meta(caps={}, info=None)}
    assert CAPS == {
        "elicitation": {"form": {}, "url": {}},
        "sampling": {"tools": {}, "context": {}},
        "roots": {},
    }
