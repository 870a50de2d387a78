"""The lifecycle tables (``_lifecycle.py``) and the code that moves through them.

Three checks, one per direction:

* every transition the code takes is declared: :meth:`Lifecycle.step` raises otherwise, so the
  whole suite (fuzzing and the state machines included) enforces it;
* every declared transition is taken: the scripted runs below record what the shim and the
  client ask of their tables, each run asserts its exact path, and the union must be the table;
* the modern server request keeps no state object: its outcomes, read off what the connection
  emits, must walk the declared table and end in its terminal states, and all of them occur.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import (
    ACCEPT,
    CAPS,
    CLIENT,
    FORM,
    SAMPLE,
    SAMPLED,
    App,
    Clock,
    Pair,
    ScriptedClient,
    call,
    client,
    drain,
    feed,
    input_required,
    meta,
    reply_error,
    request,
    server,
    session,
)
from helpers import (
    one as client_one,
)
from helpers import (
    reply as client_result,
)
from mrtr_sansio import (
    NEED_DATA,
    ClientConfig,
    ClientConnection,
    Era,
    InputNeeded,
    InputRequiredResult,
    JsonRpcError,
    LocalProtocolError,
    Outgoing,
    RequestCancelled,
    RequestReceived,
    ServerConnection,
    elicit_form,
    sample,
)
from mrtr_sansio._lifecycle import (
    CLIENT_CALL,
    LEGACY_SHIM,
    LIFECYCLES,
    MODERN_REQUEST,
    CallPhase,
    CallTrigger,
    Lifecycle,
    Member,
    RequestPhase,
    RequestTrigger,
    ShimPhase,
    ShimTrigger,
    modern_trigger,
)
from mrtr_sansio.tasks import TASK

Taken = list[tuple[Any, Any]]

# --- recording ------------------------------------------------------------------------------


@contextlib.contextmanager
def recording() -> Iterator[dict[str, Taken]]:
    """Per lifecycle name, the (state, trigger) pairs the code looks up in its table, in order
    (undeclared ones too, which still raise).

    Each trigger's map (:meth:`Lifecycle.moves`, the object hot paths bind once) is emptied
    meanwhile, so every lookup misses and is answered here from the table; on exit the maps
    are refilled. The seam is the test's own: the tables carry no recorder.
    """
    logs: dict[str, Taken] = {name: [] for name in LIFECYCLES}
    owners: dict[int, tuple[Taken, Lifecycle[Any, Any], Any]] = {}
    saved = []
    for name, lifecycle in LIFECYCLES.items():
        triggers = type(next(iter(lifecycle.table))[1])
        for trigger in triggers:
            moves = lifecycle.moves(trigger)
            owners[id(moves)] = (logs[name], lifecycle, trigger)
            saved.append((moves, dict(moves)))
            moves.clear()  # type: ignore[attr-defined]
    kind = type(saved[0][0])
    undeclared = kind.__missing__  # type: ignore[attr-defined]

    def missing(moves: Any, state: Any) -> Any:
        log, lifecycle, trigger = owners[id(moves)]
        log.append((state, trigger))
        if lifecycle.allows(state, trigger):
            return lifecycle.table[state, trigger]
        return undeclared(moves, state)

    kind.__missing__ = missing  # type: ignore[attr-defined]
    try:
        yield logs
    finally:
        kind.__missing__ = undeclared  # type: ignore[attr-defined]
        for moves, contents in saved:
            moves.update(contents)  # type: ignore[attr-defined]


@pytest.fixture
def taken() -> Iterator[dict[str, Taken]]:
    """The transitions the test's code takes, recorded by :func:`recording`."""
    with recording() as logs:
        yield logs


def test_the_recorder_records_and_puts_every_table_back() -> None:
    with recording() as taken:
        assert CLIENT_CALL.step(CallPhase.SENDING, CallTrigger.SENT) is CallPhase.AWAITING_ANSWER
        assert taken["client-call"] == [(CallPhase.SENDING, CallTrigger.SENT)]
        with pytest.raises(LocalProtocolError, match="declares no transition"):
            CLIENT_CALL.step(CallPhase.AWAITING_ANSWER, CallTrigger.SENT)
    # Back: every declared move answers without the recorder, an undeclared one raises again.
    for lifecycle in LIFECYCLES.values():
        for (state, trigger), target in lifecycle.table.items():
            assert lifecycle.moves(trigger)[state] is target
    with pytest.raises(LocalProtocolError, match="internal error"):
        CLIENT_CALL.step(CallPhase.AWAITING_ANSWER, CallTrigger.SENT)
    assert taken["client-call"] == [
        (CallPhase.SENDING, CallTrigger.SENT),
        (CallPhase.AWAITING_ANSWER, CallTrigger.SENT),
    ]


def test_moves_are_the_table_by_trigger() -> None:
    for lifecycle in LIFECYCLES.values():
        for (state, trigger), target in lifecycle.table.items():
            assert lifecycle.moves(trigger)[state] is target
            assert lifecycle.step(state, trigger) is target
        for trigger in {trigger for _, trigger in lifecycle.table}:
            declared = {s: t for (s, tr), t in lifecycle.table.items() if tr is trigger}
            assert dict(lifecycle.moves(trigger)) == declared


# --- the Lifecycle class --------------------------------------------------------------------


class _S(Member):
    A = "start"
    B = "end"


class _T(Member):
    GO = "go"
    STAY = "stay"


def test_step_follows_the_table_and_refuses_anything_else() -> None:
    lc: Lifecycle[_S, _T] = Lifecycle("toy", "Toy", _S.A, [_S.B], {(_S.A, _T.GO): _S.B})
    assert lc.step(_S.A, _T.GO) is _S.B
    with pytest.raises(LocalProtocolError, match="toy lifecycle declares no transition from A"):
        lc.step(_S.A, _T.STAY)
    with pytest.raises(LocalProtocolError, match="from B on GO"):
        lc.step(_S.B, _T.GO)
    with pytest.raises(LocalProtocolError, match="from B on GO"):
        lc.moves(_T.GO)[_S.B]
    assert lc.moves(_T.STAY) == {}


def test_mermaid_draws_every_state_and_one_arrow_per_trigger() -> None:
    lc: Lifecycle[_S, _T] = Lifecycle(
        "toy", "Toy", _S.A, [_S.B], {(_S.A, _T.STAY): _S.A, (_S.A, _T.GO): _S.B}
    )
    assert lc.mermaid() == (
        "stateDiagram-v2\n"
        '    state "start" as A\n'
        '    state "end" as B\n'
        "    [*] --> A\n"
        "    A : ↺ stay\n"
        "    A --> B : go\n"
        "    B --> [*]"
    )
    both: Lifecycle[_S, _T] = Lifecycle(
        "toy", "Toy", _S.A, [_S.B], {(_S.A, _T.GO): _S.B, (_S.A, _T.STAY): _S.B}
    )
    assert "    A --> B : go\n    A --> B : stay\n" in both.mermaid()


def test_a_numbered_mermaid_labels_arrows_with_table_rows_and_may_run_left_to_right() -> None:
    lc: Lifecycle[_S, _T] = Lifecycle(
        "toy", "Toy", _S.A, [_S.B], {(_S.A, _T.STAY): _S.A, (_S.A, _T.GO): _S.B}
    )
    assert lc.mermaid(numbered=True, left_to_right=True) == (
        "stateDiagram-v2\n"
        "    direction LR\n"
        '    state "start" as A\n'
        '    state "end" as B\n'
        "    [*] --> A\n"
        "    A : ↺ 1\n"
        "    A --> B : 2\n"
        "    B --> [*]"
    )
    both: Lifecycle[_S, _T] = Lifecycle(
        "toy", "Toy", _S.A, [_S.B], {(_S.A, _T.GO): _S.B, (_S.A, _T.STAY): _S.B}
    )
    assert "    A --> B : 1, 2\n" in both.mermaid(numbered=True)


@pytest.mark.parametrize(
    ("terminal", "table", "problem"),
    [
        ([_S.B], {(_S.A, _T.GO): _S.B, (_S.B, _T.GO): _S.A}, "terminal state has transitions"),
        ([], {(_S.A, _T.GO): _S.B}, "not terminal has no transition"),
        ([_S.B], {(_S.A, _T.STAY): _S.A}, r"unreachable states \['B'\]"),
    ],
)
def test_a_malformed_table_is_refused(
    terminal: list[_S], table: dict[tuple[_S, _T], _S], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        Lifecycle("toy", "Toy", _S.A, terminal, table)


def test_members_hash_by_identity() -> None:
    assert hash(CallPhase.SENDING) == object.__hash__(CallPhase.SENDING)
    assert {CallPhase.SENDING: 1}[CallPhase.SENDING] == 1


def test_the_tables_are_the_documented_ones() -> None:
    assert LIFECYCLES == {
        "modern-request": MODERN_REQUEST,
        "legacy-shim": LEGACY_SHIM,
        "client-call": CLIENT_CALL,
        "task": TASK,
    }
    assert MODERN_REQUEST.terminal == set(RequestPhase) - {RequestPhase.RECEIVED}
    assert LEGACY_SHIM.terminal == {
        ShimPhase.COMPLETE,
        ShimPhase.FAILED,
        ShimPhase.ROUNDS_EXHAUSTED,
        ShimPhase.CANCELLED,
    }
    assert CLIENT_CALL.terminal == {
        CallPhase.COMPLETE,
        CallPhase.FAILED,
        CallPhase.ROUNDS_EXHAUSTED,
        CallPhase.CANCELLED,
    }


# --- the legacy shim: scripted runs -----------------------------------------------------------

P = ShimPhase
T = ShimTrigger
TOOL = {"name": "book", "arguments": {"city": "Paris"}}
DONE = {"content": [{"type": "text", "text": "done"}]}
FORM_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}
ASK_TWO = InputRequiredResult(
    {"a": elicit_form("A?", FORM_SCHEMA), "b": elicit_form("B?", FORM_SCHEMA)},
    request_state="s",
)
ASK_ONE = InputRequiredResult({"a": elicit_form("A?", FORM_SCHEMA)}, request_state="s")


def _asking(*answers: Any) -> Callable[[RequestReceived], Any]:
    """A handler that returns ``answers[n]`` on its n-th run (None: leave it unanswered)."""
    runs = iter(answers)
    return lambda _event: next(runs)


def _legs(client: ScriptedClient) -> list[Any]:
    return [m["id"] for m in client.take() if m.get("method") == "elicitation/create"]


def shim_answered_in_two_legs(_taken: dict[str, Taken]) -> Taken:
    _conn, client, app = session(_asking(ASK_TWO, DONE))
    client.request("tools/call", TOOL)
    app.run()
    first, second = _legs(client)
    client.answer(first, ACCEPT)
    app.run()
    client.answer(second, ACCEPT)
    app.run()
    assert client.take()[-1]["result"] == DONE
    return [
        (P.RUNNING, T.LEGS_SENT),
        (P.AWAITING_INPUT, T.LEG_ANSWERED),
        (P.AWAITING_INPUT, T.ALL_ANSWERED),
        (P.RUNNING, T.RESULT),
    ]


def shim_state_only_then_error(_taken: dict[str, Taken]) -> Taken:
    failure = JsonRpcError.invalid_params("no")
    _conn, client, app = session(_asking(InputRequiredResult(request_state="x"), failure))
    client.request("tools/call", TOOL)
    app.run()
    assert client.take()[-1]["error"]["code"] == -32602
    return [(P.RUNNING, T.STATE_ONLY), (P.RUNNING, T.ERROR)]


def shim_refused_for_a_missing_capability(_taken: dict[str, Taken]) -> Taken:
    _conn, client, app = session(_asking(InputRequiredResult({"s": sample("hi", 5)})), {})
    client.request("tools/call", TOOL)
    app.run()
    assert client.take()[-1]["error"]["code"] == -32603
    return [(P.RUNNING, T.REFUSED)]


def shim_round_cap(_taken: dict[str, Taken]) -> Taken:
    _conn, client, app = session(_asking(ASK_ONE, ASK_ONE), legacy_max_rounds=1)
    client.request("tools/call", TOOL)
    app.run()
    (leg,) = _legs(client)
    client.answer(leg, ACCEPT)
    app.run()
    assert "after 1 rounds" in client.take()[-1]["error"]["message"]
    return [(P.RUNNING, T.LEGS_SENT), (P.AWAITING_INPUT, T.ALL_ANSWERED), (P.RUNNING, T.ROUND_CAP)]


def shim_held_until_initialized(_taken: dict[str, Taken]) -> Taken:
    conn = server()
    client = ScriptedClient(conn)
    client.initialize(initialized=False)
    app = App(conn, _calls_only(_asking(ASK_TWO, DONE)))
    client.request("tools/call", TOOL)
    app.run()
    assert _legs(client) == []
    client.notify("notifications/initialized")
    app.run()
    for leg in _legs(client):  # both written now, in order
        client.answer(leg, ACCEPT)
    app.run()
    assert client.take()[-1]["result"] == DONE
    return [
        (P.RUNNING, T.LEGS_HELD),
        (P.HELD, T.INITIALIZED),
        (P.AWAITING_INPUT, T.LEG_ANSWERED),
        (P.AWAITING_INPUT, T.ALL_ANSWERED),
        (P.RUNNING, T.RESULT),
    ]


def shim_held_legs_time_out_are_cancelled_or_closed(_taken: dict[str, Taken]) -> Taken:
    now = [1000.0]
    for ending in ("timeout", "cancel", "close"):
        conn = server(clock=lambda: now[0], legacy_leg_timeout=5.0)
        client = ScriptedClient(conn)
        client.initialize(initialized=False)
        app = App(conn, _calls_only(_asking(ASK_ONE)))
        rid = client.request("tools/call", TOOL)
        app.run()
        if ending == "timeout":
            conn.handle_timer(now[0] + 5.0)
            assert client.take()[-1]["error"]["code"] == -32603
        elif ending == "cancel":
            client.cancel(rid)
            assert client.take() == []
        else:
            conn.receive_data(b"")
    return [
        (P.RUNNING, T.LEGS_HELD),
        (P.HELD, T.LEG_TIMEOUT),
        (P.RUNNING, T.LEGS_HELD),
        (P.HELD, T.CANCELLED),
        (P.RUNNING, T.LEGS_HELD),
        (P.HELD, T.CLOSED),
    ]


def shim_awaiting_input_ends(_taken: dict[str, Taken]) -> Taken:
    for ending in ("error", "not-object", "timeout", "cancel", "close"):
        conn, client, app = session(_asking(ASK_ONE), legacy_leg_timeout=5.0)
        rid = client.request("tools/call", TOOL)
        app.run()
        (leg,) = _legs(client)
        if ending == "error":
            client.answer_error(leg, -1, "User rejected")
        elif ending == "not-object":
            client.send({"jsonrpc": "2.0", "id": leg, "result": [1]})
        elif ending == "timeout":
            conn.handle_timer(1000.0 + 5.0)
        elif ending == "cancel":
            client.cancel(rid)
        else:
            conn.receive_data(b"")
    return [
        (P.RUNNING, T.LEGS_SENT),
        (P.AWAITING_INPUT, T.LEG_FAILED),
        (P.RUNNING, T.LEGS_SENT),
        (P.AWAITING_INPUT, T.LEG_FAILED),
        (P.RUNNING, T.LEGS_SENT),
        (P.AWAITING_INPUT, T.LEG_TIMEOUT),
        (P.RUNNING, T.LEGS_SENT),
        (P.AWAITING_INPUT, T.CANCELLED),
        (P.RUNNING, T.LEGS_SENT),
        (P.AWAITING_INPUT, T.CLOSED),
    ]


def shim_replay_cancelled_or_closed(_taken: dict[str, Taken]) -> Taken:
    for ending in ("cancel", "close"):
        conn, client, app = session(_asking(ASK_ONE, None))
        rid = client.request("tools/call", TOOL)
        app.run()
        (leg,) = _legs(client)
        client.answer(leg, ACCEPT)
        app.run()  # the replay reaches the handler, which does not answer yet
        if ending == "cancel":
            client.cancel(rid)
        else:
            conn.receive_data(b"")
    return [
        (P.RUNNING, T.LEGS_SENT),
        (P.AWAITING_INPUT, T.ALL_ANSWERED),
        (P.RUNNING, T.CANCELLED),
        (P.RUNNING, T.LEGS_SENT),
        (P.AWAITING_INPUT, T.ALL_ANSWERED),
        (P.RUNNING, T.CLOSED),
    ]


def _calls_only(handler: Callable[[RequestReceived], Any]) -> Callable[[RequestReceived], Any]:
    """``handler`` for ``tools/call`` requests; every other request is left unanswered."""
    return lambda event: handler(event) if event.method == "tools/call" else None


SHIM_RUNS = [
    shim_answered_in_two_legs,
    shim_state_only_then_error,
    shim_refused_for_a_missing_capability,
    shim_round_cap,
    shim_held_until_initialized,
    shim_held_legs_time_out_are_cancelled_or_closed,
    shim_awaiting_input_ends,
    shim_replay_cancelled_or_closed,
]


# --- the client call: scripted runs ------------------------------------------------------------

C = CallPhase
K = CallTrigger
LEGACY_INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "srv", "version": "1"},
}


def _sent_ids(conn: ClientConnection, era: Era = Era.MODERN) -> list[Any]:
    return [item.message.get("id") for item in drain(conn, era, sender="client")]


def _server_request(conn: ClientConnection, rid: Any, request: dict[str, Any] = FORM) -> None:
    conn.receive_message({"jsonrpc": "2.0", "id": rid, **request})


def _legacy_client(**config: Any) -> tuple[ClientConnection, int]:
    """A legacy client past ``initialize``, with one tools/call in flight (its id)."""
    conn = client("legacy", **config)
    (init,) = _sent_ids(conn, Era.LEGACY)
    client_result(conn, init, LEGACY_INIT)
    conn.events()
    conn.outgoing()
    conn.call("tools/call", TOOL)
    return conn, client_one(conn, Era.LEGACY)["id"]


def call_modern_round_trip(_taken: dict[str, Taken]) -> Taken:
    conn = client()
    conn.call("tools/call", TOOL)
    (rid,) = _sent_ids(conn)
    client_result(conn, rid, input_required({"a": FORM, "b": FORM}, "s"))
    first, second = conn.events()
    assert isinstance(first, InputNeeded)
    assert isinstance(second, InputNeeded)
    conn.fulfil(first, ACCEPT)
    conn.fulfil(second, ACCEPT)
    (retry,) = _sent_ids(conn)
    client_result(conn, retry, DONE)
    return [
        (C.SENDING, K.SENT),
        (C.AWAITING_ANSWER, K.INPUT_REQUESTS),
        (C.GATHERING_INPUT, K.ANSWERED),
        (C.GATHERING_INPUT, K.RETRY),
        (C.AWAITING_ANSWER, K.COMPLETE),
    ]


def call_state_only_backoff_then_error(_taken: dict[str, Taken]) -> Taken:
    clock = Clock()
    conn = client(clock=clock)
    conn.call("tools/call", TOOL)
    (rid,) = _sent_ids(conn)
    client_result(conn, rid, input_required(state="s"))
    deadline = conn.next_deadline()
    assert deadline is not None
    conn.handle_timer(deadline)
    (retry,) = _sent_ids(conn)
    reply_error(conn, retry, -32602, "Unknown tool")
    return [
        (C.SENDING, K.SENT),
        (C.AWAITING_ANSWER, K.STATE_ONLY),
        (C.BACKING_OFF, K.RETRY),
        (C.AWAITING_ANSWER, K.ERROR),
    ]


def call_invalid_response_and_round_cap(_taken: dict[str, Taken]) -> Taken:
    conn = client(max_rounds=1)
    conn.call("tools/call", TOOL)
    (rid,) = _sent_ids(conn)
    client_result(conn, rid, 5)  # not an object
    conn.call("tools/call", TOOL)
    (rid,) = _sent_ids(conn)
    client_result(conn, rid, input_required({"a": FORM}))
    events = conn.events()
    (need,) = [e for e in events if isinstance(e, InputNeeded)]
    conn.fulfil(need, ACCEPT)
    (retry,) = _sent_ids(conn)
    client_result(conn, retry, input_required({"a": FORM}))
    return [
        (C.SENDING, K.SENT),
        (C.AWAITING_ANSWER, K.INVALID),
        (C.SENDING, K.SENT),
        (C.AWAITING_ANSWER, K.INPUT_REQUESTS),
        (C.GATHERING_INPUT, K.RETRY),
        (C.AWAITING_ANSWER, K.ROUND_CAP),
    ]


def call_cancelled_in_every_phase(_taken: dict[str, Taken]) -> Taken:
    conn = client()
    in_flight = conn.call("tools/call", TOOL)
    gathering = conn.call("tools/call", TOOL)
    backing_off = conn.call("tools/call", TOOL)
    _first, second, third = _sent_ids(conn)
    client_result(conn, second, input_required({"a": FORM}))
    client_result(conn, third, input_required(state="s"))
    conn.events()
    for handle in (in_flight, gathering, backing_off):
        assert conn.cancel(handle)
    queued_conn = client("legacy")
    queued = queued_conn.call("tools/call", TOOL)
    assert queued_conn.cancel(queued)
    legacy, _rid = _legacy_client()
    _server_request(legacy, "s1")
    (answering,) = legacy.in_flight
    assert legacy.cancel(answering)
    return [
        (C.SENDING, K.SENT),
        (C.SENDING, K.SENT),
        (C.SENDING, K.SENT),
        (C.AWAITING_ANSWER, K.INPUT_REQUESTS),
        (C.AWAITING_ANSWER, K.STATE_ONLY),
        (C.AWAITING_ANSWER, K.CANCELLED),
        (C.GATHERING_INPUT, K.CANCELLED),
        (C.BACKING_OFF, K.CANCELLED),
        (C.SENDING, K.QUEUED),
        (C.QUEUED, K.CANCELLED),
        (C.SENDING, K.SENT),
        (C.AWAITING_ANSWER, K.SERVER_REQUEST),
        (C.ANSWERING_SERVER, K.CANCELLED),
    ]


def call_stream_closed_in_every_phase(_taken: dict[str, Taken]) -> Taken:
    conn = client()
    for _ in range(3):
        conn.call("tools/call", TOOL)
    _first, second, third = _sent_ids(conn)
    client_result(conn, second, input_required({"a": FORM}))
    client_result(conn, third, input_required(state="s"))
    conn.receive_data(b"")
    queued_conn = client("legacy")
    queued_conn.call("tools/call", TOOL)
    queued_conn.receive_data(b"")
    legacy, _rid = _legacy_client()
    _server_request(legacy, "s1")
    legacy.receive_data(b"")
    return [
        (C.SENDING, K.SENT),
        (C.SENDING, K.SENT),
        (C.SENDING, K.SENT),
        (C.AWAITING_ANSWER, K.INPUT_REQUESTS),
        (C.AWAITING_ANSWER, K.STATE_ONLY),
        (C.AWAITING_ANSWER, K.CLOSED),
        (C.GATHERING_INPUT, K.CLOSED),
        (C.BACKING_OFF, K.CLOSED),
        (C.SENDING, K.QUEUED),
        (C.QUEUED, K.CLOSED),
        (C.SENDING, K.SENT),
        (C.AWAITING_ANSWER, K.SERVER_REQUEST),
        (C.ANSWERING_SERVER, K.CLOSED),
    ]


def call_legacy_rounds_of_server_requests(_taken: dict[str, Taken]) -> Taken:
    conn = client("legacy")
    conn.call("tools/call", TOOL)
    (init,) = _sent_ids(conn, Era.LEGACY)
    client_result(conn, init, LEGACY_INIT)
    rid = next(i for i in _sent_ids(conn, Era.LEGACY) if i is not None)
    _server_request(conn, "s1")
    _server_request(conn, "s2", SAMPLE)
    first, second = [e for e in conn.events() if isinstance(e, InputNeeded)]
    conn.fulfil(first, ACCEPT)
    conn.fulfil(second, SAMPLED)
    _server_request(conn, "s3")
    conn.events()
    client_result(conn, rid, DONE)
    return [
        (C.SENDING, K.QUEUED),
        (C.QUEUED, K.SENT),
        (C.AWAITING_ANSWER, K.SERVER_REQUEST),
        (C.ANSWERING_SERVER, K.SERVER_REQUEST),
        (C.ANSWERING_SERVER, K.ANSWERED),
        (C.ANSWERING_SERVER, K.LAST_ANSWERED),
        (C.AWAITING_ANSWER, K.SERVER_REQUEST),
        (C.ANSWERING_SERVER, K.COMPLETE),
    ]


def call_legacy_answer_ends_while_answering(_taken: dict[str, Taken]) -> Taken:
    for ending in ("error", "invalid"):
        conn, rid = _legacy_client()
        _server_request(conn, "s1")
        if ending == "error":
            reply_error(conn, rid, -32603, "boom")
        else:
            client_result(conn, rid, "not an object")
    return [
        (C.SENDING, K.SENT),
        (C.AWAITING_ANSWER, K.SERVER_REQUEST),
        (C.ANSWERING_SERVER, K.ERROR),
        (C.SENDING, K.SENT),
        (C.AWAITING_ANSWER, K.SERVER_REQUEST),
        (C.ANSWERING_SERVER, K.INVALID),
    ]


def call_legacy_withdrawal_and_round_cap(_taken: dict[str, Taken]) -> Taken:
    conn, _rid = _legacy_client(max_rounds=1)
    _server_request(conn, "s1")
    conn.receive_message(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "s1"}}
    )
    _server_request(conn, "s2")
    return [
        (C.SENDING, K.SENT),
        (C.AWAITING_ANSWER, K.SERVER_REQUEST),
        (C.ANSWERING_SERVER, K.LAST_ANSWERED),
        (C.AWAITING_ANSWER, K.ROUND_CAP),
    ]


def call_request_lost_by_the_transport(_taken: dict[str, Taken]) -> Taken:
    conn = client()
    conn.call("tools/call", TOOL)
    (rid,) = _sent_ids(conn)
    assert conn.request_failed(rid, "HTTP 502 without a JSON-RPC body")
    legacy, legacy_rid = _legacy_client()
    _server_request(legacy, "s1")
    assert legacy.request_failed(legacy_rid, "the response stream ended first")
    return [
        (C.SENDING, K.SENT),
        (C.AWAITING_ANSWER, K.LOST),
        (C.SENDING, K.SENT),
        (C.AWAITING_ANSWER, K.SERVER_REQUEST),
        (C.ANSWERING_SERVER, K.LOST),
    ]


def call_handshake_failed_while_queued(_taken: dict[str, Taken]) -> Taken:
    conn = client("legacy")
    conn.call("tools/call", TOOL)
    (init,) = _sent_ids(conn, Era.LEGACY)
    reply_error(conn, init, -32602, "Unsupported protocol version")
    return [(C.SENDING, K.QUEUED), (C.QUEUED, K.HANDSHAKE_FAILED)]


TASKS = {**CAPS, "extensions": {"io.modelcontextprotocol/tasks": {}}}


def _task_client() -> tuple[ClientConnection, Clock]:
    """A client whose tools/call has just become task ``t`` (CreateTaskResult answered)."""
    clock = Clock()
    conn = client(capabilities=TASKS, clock=clock)
    conn.call("tools/call", TOOL)
    (item,) = conn.outgoing()
    created = {"resultType": "task", "taskId": "t", "status": "working"}
    conn.receive_message({"jsonrpc": "2.0", "id": item.message["id"], "result": created})
    return conn, clock


def _poll(conn: ClientConnection, clock: Clock, status: str, **fields: Any) -> None:
    deadline = conn.next_deadline()
    assert deadline is not None
    clock.now = deadline
    conn.handle_timer(deadline)
    (item,) = conn.outgoing()
    answer = {"resultType": "complete", "taskId": "t", "status": status, **fields}
    conn.receive_message({"jsonrpc": "2.0", "id": item.message["id"], "result": answer})


def _events(conn: ClientConnection) -> list[Any]:
    out = []
    while (event := conn.next_event()) is not NEED_DATA:
        out.append(event)
    return out


def call_task_polled_answered_and_completed(_taken: dict[str, Taken]) -> Taken:
    conn, clock = _task_client()
    _poll(conn, clock, "working")
    _poll(conn, clock, "input_required", inputRequests={"a": FORM, "b": FORM})
    first, second = [e for e in _events(conn) if isinstance(e, InputNeeded)]
    conn.fulfil(first, ACCEPT)
    conn.fulfil(second, ACCEPT)
    (update,) = conn.outgoing()
    assert update.message["method"] == "tasks/update"
    ack = {"resultType": "complete"}
    conn.receive_message({"jsonrpc": "2.0", "id": update.message["id"], "result": ack})
    _poll(conn, clock, "completed", result=DONE)
    assert _events(conn)[-1].result == DONE
    return [
        (C.SENDING, K.SENT),
        (C.AWAITING_ANSWER, K.TASK_CREATED),
        (C.TASK_WAITING, K.POLL),
        (C.TASK_POLLING, K.TASK_WORKING),
        (C.TASK_WAITING, K.POLL),
        (C.TASK_POLLING, K.TASK_INPUT_REQUESTS),
        (C.TASK_INPUT, K.ANSWERED),
        (C.TASK_INPUT, K.TASK_UPDATE),
        (C.TASK_UPDATING, K.TASK_WORKING),
        (C.TASK_WAITING, K.POLL),
        (C.TASK_POLLING, K.COMPLETE),
    ]


def call_task_cancelled_or_closed_while_waiting_or_answering(_taken: dict[str, Taken]) -> Taken:
    expected: Taken = []
    for answering in (False, True):
        for ending in ("cancel", "close"):
            conn, clock = _task_client()
            expected += [(C.SENDING, K.SENT), (C.AWAITING_ANSWER, K.TASK_CREATED)]
            phase = C.TASK_WAITING
            if answering:
                _poll(conn, clock, "input_required", inputRequests={"a": FORM})
                expected += [(C.TASK_WAITING, K.POLL), (C.TASK_POLLING, K.TASK_INPUT_REQUESTS)]
                phase = C.TASK_INPUT
            if ending == "cancel":
                (started, *_rest) = _events(conn)
                assert conn.cancel(started.call)
                assert [i.message["method"] for i in conn.outgoing()] == ["tasks/cancel"]
                expected.append((phase, K.CANCELLED))
            else:
                conn.receive_data(b"")
                expected.append((phase, K.CLOSED))
    return expected


#: How a task leg in flight is ended, and the trigger that ending is for its call.
TASK_LEG_ENDINGS = {
    "error": K.ERROR,
    "invalid": K.INVALID,
    "lost": K.LOST,
    "cancel": K.CANCELLED,
    "close": K.CLOSED,
}


def _end_task_leg(conn: ClientConnection, ending: str) -> None:
    (item,) = conn.outgoing()
    rid = item.message["id"]
    if ending == "error":
        reply_error(conn, rid, -32603, "boom")
    elif ending == "invalid":
        client_result(conn, rid, 5)  # not an object
    elif ending == "lost":
        assert conn.request_failed(rid, "the response stream ended first")
    elif ending == "cancel":
        (call,) = conn.in_flight
        assert conn.cancel(call)
    else:
        conn.receive_data(b"")


def call_task_legs_end_every_way(_taken: dict[str, Taken]) -> Taken:
    """A resumed task's ``tasks/get`` and a ``tasks/update`` in flight, each ended every way;
    then a task asking for one round more than ``max_rounds``."""
    expected: Taken = []
    for ending, trigger in TASK_LEG_ENDINGS.items():
        resumed = client(capabilities=TASKS)
        resumed.resume_task("t")
        _end_task_leg(resumed, ending)
        expected += [(C.SENDING, K.POLL), (C.TASK_POLLING, trigger)]
        conn, clock = _task_client()
        _poll(conn, clock, "input_required", inputRequests={"a": FORM})
        (need,) = [e for e in _events(conn) if isinstance(e, InputNeeded)]
        conn.fulfil(need, ACCEPT)
        _end_task_leg(conn, ending)
        expected += [
            (C.SENDING, K.SENT),
            (C.AWAITING_ANSWER, K.TASK_CREATED),
            (C.TASK_WAITING, K.POLL),
            (C.TASK_POLLING, K.TASK_INPUT_REQUESTS),
            (C.TASK_INPUT, K.TASK_UPDATE),
            (C.TASK_UPDATING, trigger),
        ]
    capped = client(capabilities=TASKS, max_rounds=1)
    capped.resume_task("t")
    (item,) = capped.outgoing()
    asking = {"taskId": "t", "status": "input_required", "inputRequests": {"a": FORM}}
    client_result(capped, item.message["id"], {"resultType": "complete", **asking})
    (need,) = [e for e in _events(capped) if isinstance(e, InputNeeded)]
    capped.fulfil(need, ACCEPT)
    (update,) = capped.outgoing()
    client_result(capped, update.message["id"], {"resultType": "complete"})
    deadline = capped.next_deadline()
    assert deadline is not None
    capped.handle_timer(deadline)
    (poll,) = capped.outgoing()
    asking["inputRequests"] = {"a": FORM, "b": FORM}
    client_result(capped, poll.message["id"], {"resultType": "complete", **asking})
    assert type(_events(capped)[-1]).__name__ == "RoundsExhausted"
    return [
        *expected,
        (C.SENDING, K.POLL),
        (C.TASK_POLLING, K.TASK_INPUT_REQUESTS),
        (C.TASK_INPUT, K.TASK_UPDATE),
        (C.TASK_UPDATING, K.TASK_WORKING),
        (C.TASK_WAITING, K.POLL),
        (C.TASK_POLLING, K.ROUND_CAP),
    ]


CALL_RUNS = [
    call_task_legs_end_every_way,
    call_task_polled_answered_and_completed,
    call_task_cancelled_or_closed_while_waiting_or_answering,
    call_modern_round_trip,
    call_state_only_backoff_then_error,
    call_invalid_response_and_round_cap,
    call_cancelled_in_every_phase,
    call_stream_closed_in_every_phase,
    call_legacy_rounds_of_server_requests,
    call_legacy_answer_ends_while_answering,
    call_legacy_withdrawal_and_round_cap,
    call_request_lost_by_the_transport,
    call_handshake_failed_while_queued,
]


# --- every path, and every declared transition --------------------------------------------------


@pytest.mark.parametrize("run", SHIM_RUNS, ids=lambda f: f.__name__)
def test_shim_run_takes_exactly_its_path(run: Any, taken: dict[str, Taken]) -> None:
    expected = run(taken)
    assert taken["legacy-shim"] == expected
    assert taken["client-call"] == []


@pytest.mark.parametrize("run", CALL_RUNS, ids=lambda f: f.__name__)
def test_client_call_takes_exactly_its_path(run: Any, taken: dict[str, Taken]) -> None:
    expected = run(taken)
    assert taken["client-call"] == expected
    assert taken["legacy-shim"] == []


@pytest.mark.parametrize(("name", "runs"), [("legacy-shim", SHIM_RUNS), ("client-call", CALL_RUNS)])
def test_every_declared_transition_is_taken(
    name: str, runs: list[Any], taken: dict[str, Taken]
) -> None:
    for run in runs:
        run(taken)
    assert set(taken[name]) == set(LIFECYCLES[name].table)


# --- the modern server request: outcomes read off the wire ---------------------------------------


class ModernOutcomes:
    """Each modern request's phase, derived from the events and outgoing items the connection
    emits, stepped through :data:`MODERN_REQUEST` (an undeclared step raises)."""

    def __init__(self) -> None:
        self.phase: dict[Any, RequestPhase] = {}
        self.taken: set[tuple[RequestPhase, RequestTrigger]] = set()
        self.ended: list[RequestPhase] = []

    def received(self, event: RequestReceived) -> None:
        assert self.phase.get(event.request_id) in (None, *MODERN_REQUEST.terminal)
        self.phase[event.request_id] = MODERN_REQUEST.initial

    def observe(self, item: Outgoing | RequestCancelled) -> None:
        trigger = modern_trigger(item)
        if trigger is None:
            return
        rid = item.request_id if isinstance(item, RequestCancelled) else item.related_request_id
        if rid not in self.phase:
            return  # answered by the connection before any application saw it
        phase = self.phase[rid]
        target = MODERN_REQUEST.step(phase, trigger)
        self.taken.add((phase, trigger))
        self.phase[rid] = target
        self.ended.append(target)


def _modern_step(
    conn: ServerConnection,
    outcomes: ModernOutcomes,
    message: Any,
    answer: Callable[[RequestReceived], Any] | None,
) -> None:
    feed(conn, message)
    received = set()
    while (event := conn.next_event()) is not NEED_DATA:
        if isinstance(event, RequestReceived):
            received.add(event.request_id)
            outcomes.received(event)
            if answer is not None:
                conn.respond(event.request_id, answer(event))
        elif isinstance(event, RequestCancelled):
            outcomes.observe(event)
    refused = message.get("id") if "method" in message and "id" in message else None
    for item in drain(conn, Era.MODERN):
        if item.related_request_id == refused and refused not in received:
            continue  # refused before any application saw it (here: its id is in use)
        outcomes.observe(item)


NO_CAPS: dict[str, Any] = {}
ANSWERS: dict[str, Callable[[RequestReceived], Any]] = {
    "result": lambda _e: DONE,
    "input_required": lambda _e: ASK_ONE,
    "missing_capability": lambda _e: InputRequiredResult({"s": sample("hi", 5)}),
    "error": lambda _e: JsonRpcError.invalid_params("Unknown tool: book"),
}


def test_modern_outcomes_are_exactly_the_declared_terminal_states() -> None:
    conn = ServerConnection()
    outcomes = ModernOutcomes()
    for rid, (kind, answer) in enumerate(ANSWERS.items()):
        caps = NO_CAPS if kind == "missing_capability" else CAPS
        _modern_step(conn, outcomes, call(rid, caps=caps), answer)
    _modern_step(conn, outcomes, call("c"), None)
    cancel = {"requestId": "c", "reason": "user"}
    _modern_step(conn, outcomes, _notification("notifications/cancelled", cancel), None)
    _modern_step(conn, outcomes, request("d", "server/discover"), None)  # the connection's own
    assert outcomes.ended == [
        RequestPhase.COMPLETE,
        RequestPhase.INPUT_REQUIRED,
        RequestPhase.ERROR,
        RequestPhase.ERROR,
        RequestPhase.CANCELLED,
    ]
    assert set(outcomes.ended) == MODERN_REQUEST.terminal
    assert outcomes.taken == set(MODERN_REQUEST.table)
    assert all(phase in MODERN_REQUEST.terminal for phase in outcomes.phase.values())


def _notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def test_a_modern_request_answered_after_cancellation_emits_nothing() -> None:
    conn = ServerConnection()
    outcomes = ModernOutcomes()
    _modern_step(conn, outcomes, call(1), None)
    _modern_step(conn, outcomes, _notification("notifications/cancelled", {"requestId": 1}), None)
    conn.respond(1, DONE)  # dropped: no (CANCELLED, RESULT) step is ever attempted
    assert drain(conn, Era.MODERN) == []
    assert outcomes.phase == {1: RequestPhase.CANCELLED}


def test_notifications_and_requests_change_no_request_state() -> None:
    conn = ServerConnection()
    conn.receive_message(call(1, envelope={**meta(), "progressToken": "p"}))
    (event,) = conn.events()
    assert isinstance(event, RequestReceived)
    conn.notify("notifications/progress", {"progressToken": "p", "progress": 1}, 1)
    (item,) = conn.outgoing()
    assert modern_trigger(item) is None


Action = tuple[str, Any]


@st.composite
def _traffic(draw: st.DrawFn) -> list[Action]:
    """Modern requests (some reusing an id once it is answered), answers and cancellations."""
    actions: list[Action] = []
    for _ in range(draw(st.integers(1, 12))):
        rid = draw(st.integers(0, 3))
        kind = draw(st.sampled_from(["call", "call-no-caps", "list", "cancel", "cancel-unknown"]))
        answer = draw(st.sampled_from([None, *ANSWERS]))
        actions.append((kind, (rid, answer)))
    return actions


@given(_traffic())
@settings(max_examples=150, deadline=None)
def test_any_modern_traffic_walks_the_table_and_ends_terminal(actions: list[Action]) -> None:
    conn = ServerConnection()
    outcomes = ModernOutcomes()
    unanswered: set[Any] = set()
    for kind, (rid, answer_kind) in actions:
        answer = ANSWERS.get(answer_kind) if answer_kind is not None else None
        if kind.startswith("call"):
            caps = NO_CAPS if kind == "call-no-caps" else CAPS
            message = call(rid, caps=caps)
        elif kind == "list":
            message = request(rid, "tools/list")
            if answer_kind in ("input_required", "missing_capability"):
                answer = ANSWERS["result"]  # input_required is refused locally on tools/list
        else:
            target = rid if kind == "cancel" else "nobody"
            message = _notification("notifications/cancelled", {"requestId": target})
        _modern_step(conn, outcomes, message, answer)
        unanswered = set(conn.in_flight)
    for rid in _sorted(unanswered):
        conn.respond(rid, DONE)
        for item in drain(conn, Era.MODERN):
            outcomes.observe(item)
    assert set(outcomes.ended) <= MODERN_REQUEST.terminal
    assert all(phase in MODERN_REQUEST.terminal for phase in outcomes.phase.values())


def _sorted(ids: set[Any]) -> Iterator[Any]:
    return iter(sorted(ids, key=str))


def test_lifecycles_are_stepped_by_a_real_pair(taken: dict[str, Taken]) -> None:
    """Our client against our server on the legacy wire: both tables walked in step."""
    pair = Pair(
        _asking(ASK_ONE, DONE),
        ClientConfig(client_info=CLIENT, capabilities=CAPS, era="legacy"),
    )
    pair.client.call("tools/call", TOOL)

    def answer(event: Any) -> None:
        if isinstance(event, InputNeeded):
            pair.client.fulfil(event, ACCEPT)

    pair.run(answer)
    assert taken["legacy-shim"] == [
        (P.RUNNING, T.LEGS_SENT),
        (P.AWAITING_INPUT, T.ALL_ANSWERED),
        (P.RUNNING, T.RESULT),
    ]
    assert taken["client-call"] == [
        (C.SENDING, K.QUEUED),
        (C.QUEUED, K.SENT),
        (C.AWAITING_ANSWER, K.SERVER_REQUEST),
        (C.ANSWERING_SERVER, K.LAST_ANSWERED),
        (C.AWAITING_ANSWER, K.COMPLETE),
    ]
