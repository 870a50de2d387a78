"""The lifecycle tables decide what the machines do: pinned by behaviour on the wire.

Each test drives a real :class:`ServerConnection` with plain messages and checks what it
sends, emits or refuses: the legacy shim holds, writes, accepts answers and lets the handler
answer only where its table says so, and a modern answer goes out as the item of the state
:data:`MODERN_REQUEST` moves the request to.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from mrtr_sansio import (
    InputRequiredResult,
    JsonRpcError,
    LocalProtocolError,
    RequestReceived,
    ServerConfig,
    ServerConnection,
    UnexpectedResponse,
    elicit_form,
    sample,
)
from mrtr_sansio._lifecycle import (
    ANSWER_CARRIER,
    LEGACY_SHIM,
    MODERN_REQUEST,
    RequestPhase,
    RequestTrigger,
    ShimPhase,
    ShimTrigger,
)
from mrtr_sansio.events import OutgoingError, OutgoingInputRequired, OutgoingResult
from mrtr_sansio.protocol import CLIENT_CAPABILITIES, PROTOCOL_VERSION_KEY

FORM = elicit_form("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
ASK = InputRequiredResult({"name": FORM}, "s1")
DONE = {"content": [{"type": "text", "text": "done"}], "isError": False}
CAPS: dict[str, Any] = {"elicitation": {"form": {}}}


def _send(conn: ServerConnection, msg: dict[str, Any]) -> None:
    conn.receive_data(json.dumps(msg).encode() + b"\n")


def _wire(conn: ServerConnection) -> list[dict[str, Any]]:
    return [json.loads(line) for line in conn.data_to_send().splitlines()]


def _legacy(*, initialized: bool = True) -> ServerConnection:
    conn = ServerConnection(ServerConfig(server_info={"name": "s", "version": "1"}))
    params = {"protocolVersion": "2025-11-25", "capabilities": CAPS, "clientInfo": {"name": "c"}}
    _send(conn, {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": params})
    assert [m["id"] for m in _wire(conn)] == ["init"]
    if initialized:
        _send(conn, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    conn.events()
    return conn


def _call(conn: ServerConnection, rid: Any, meta: dict[str, Any] | None = None) -> RequestReceived:
    params: dict[str, Any] = {"name": "t", "arguments": {}}
    if meta is not None:
        params["_meta"] = meta
    _send(conn, {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})
    (event,) = conn.events()
    assert isinstance(event, RequestReceived)
    return event


# --- the legacy shim -------------------------------------------------------------------------


def test_the_handler_cannot_answer_while_its_legs_are_with_the_client() -> None:
    conn = _legacy()
    _call(conn, 1)
    conn.respond(1, ASK)
    (leg,) = _wire(conn)
    assert leg["method"] == "elicitation/create"
    with pytest.raises(LocalProtocolError, match="waiting for the client's input"):
        conn.respond(1, DONE)
    assert conn.in_flight == {1}
    assert _wire(conn) == []
    _send(conn, {"jsonrpc": "2.0", "id": leg["id"], "result": {"action": "decline"}})
    (replay,) = conn.events()
    assert isinstance(replay, RequestReceived)
    assert replay.round == 2
    conn.respond(1, DONE)
    (answer,) = _wire(conn)
    assert answer == {"jsonrpc": "2.0", "id": 1, "result": DONE}


def test_legs_are_held_until_initialized_and_the_handler_cannot_answer_meanwhile() -> None:
    conn = _legacy(initialized=False)
    _call(conn, 1)
    conn.respond(1, ASK)
    assert _wire(conn) == []  # held: a server sends no request before initialized
    with pytest.raises(LocalProtocolError, match="legs held until initialized"):
        conn.respond(1, DONE)
    # An answer to a leg never written is nobody's: reported, and the run goes on.
    _send(conn, {"jsonrpc": "2.0", "id": 0, "result": {"action": "decline"}})
    (unexpected,) = conn.events()
    assert isinstance(unexpected, UnexpectedResponse)
    assert unexpected.response_id == 0
    _send(conn, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    conn.events()
    (leg,) = _wire(conn)
    assert leg["id"] == 0
    assert leg["method"] == "elicitation/create"
    _send(conn, {"jsonrpc": "2.0", "id": 0, "result": {"action": "decline"}})
    (replay,) = conn.events()
    assert isinstance(replay, RequestReceived)
    assert replay.round == 2


def test_a_held_run_cancelled_sends_nothing_and_a_written_one_withdraws_its_legs() -> None:
    held = _legacy(initialized=False)
    _call(held, 1)
    held.respond(1, ASK)
    _send(held, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    _send(held, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert _wire(held) == []  # never written: nothing to withdraw, nothing to write later
    written = _legacy()
    _call(written, 1)
    written.respond(1, ASK)
    (leg,) = _wire(written)
    _send(
        written, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    )
    (withdrawn,) = _wire(written)
    assert withdrawn["method"] == "notifications/cancelled"
    assert withdrawn["params"]["requestId"] == leg["id"]


def test_only_a_run_awaiting_its_legs_takes_their_answers() -> None:
    # The states the shim accepts a leg's answer in are the table's, and nothing else.
    takes = {phase for phase in ShimPhase if LEGACY_SHIM.allows(phase, ShimTrigger.LEG_ANSWERED)}
    assert takes == {ShimPhase.AWAITING_INPUT}
    answerable = {phase for phase in ShimPhase if LEGACY_SHIM.allows(phase, ShimTrigger.RESULT)}
    assert answerable == {ShimPhase.RUNNING}


# --- the modern request ----------------------------------------------------------------------


def _modern(conn: ServerConnection, rid: Any, caps: dict[str, Any]) -> RequestReceived:
    return _call(conn, rid, {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES: caps})


ANSWERS: dict[RequestTrigger, tuple[dict[str, Any], Any]] = {
    RequestTrigger.RESULT: (CAPS, DONE),
    RequestTrigger.INPUT_REQUIRED: (CAPS, ASK),
    RequestTrigger.MISSING_CAPABILITY: ({}, InputRequiredResult({"s": sample("hi", 5)})),
    RequestTrigger.ERROR: (CAPS, JsonRpcError.invalid_params("Unknown tool: t")),
}


@pytest.mark.parametrize("trigger", list(ANSWERS), ids=lambda t: t.name)
def test_each_modern_answer_goes_out_as_the_state_the_table_moves_to(
    trigger: RequestTrigger,
) -> None:
    conn = ServerConnection()
    caps, answer = ANSWERS[trigger]
    _modern(conn, 7, caps)
    conn.respond(7, answer)
    (item,) = conn.outgoing()
    target = MODERN_REQUEST.step(RequestPhase.RECEIVED, trigger)
    expected = {
        RequestPhase.COMPLETE: OutgoingResult,
        RequestPhase.INPUT_REQUIRED: OutgoingInputRequired,
        RequestPhase.ERROR: OutgoingError,
    }[target]
    assert type(item) is expected is ANSWER_CARRIER[trigger]
    assert item.related_request_id == 7
    assert conn.in_flight == frozenset()  # every answer ends the request: no memory kept


def test_the_carriers_cover_every_answer_the_table_declares() -> None:
    answers = {
        t for (s, t), end in MODERN_REQUEST.table.items() if end is not RequestPhase.CANCELLED
    }
    assert set(ANSWER_CARRIER) == answers == set(ANSWERS)


def test_an_ended_modern_request_takes_no_second_answer() -> None:
    conn = ServerConnection()
    _modern(conn, 7, CAPS)
    conn.respond(7, DONE)
    conn.outgoing()
    with pytest.raises(LocalProtocolError, match="no request with id 7 awaits an answer"):
        conn.respond(7, DONE)
    assert conn.outgoing() == []
