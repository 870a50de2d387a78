"""ClientConnection hooks for request-scoped transports (Streamable HTTP): the call behind a
request id, a request the transport lost, and server requests tied to the response stream that
carried them (SEP-2260's positional association)."""

from __future__ import annotations

from typing import Any

from helpers import (
    FORM,
    ROOTS_ANSWER,
    SAMPLE,
    client,
    input_required,
    legacy_ready,
    one,
    reply,
    sent,
)
from mrtr_sansio import (
    CallCompleted,
    CallFailed,
    ClientConnection,
    Era,
    EraDetected,
    HandshakeFailed,
    InputNeeded,
    InvalidMessage,
    JsonRpcError,
)

L = Era.LEGACY


def server_request(conn: ClientConnection, rid: Any, method: str, related: int | None) -> list[Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if method == "elicitation/create":
        msg["params"] = FORM["params"]
    elif method == "sampling/createMessage":
        msg["params"] = SAMPLE["params"]
    conn.receive_message(msg, related)
    return conn.events()


# --- request_call / request_failed ------------------------------------------------------------


def test_request_call_follows_every_leg_of_a_call() -> None:
    conn = client()
    call = conn.call("tools/call", {"name": "t"})
    first = one(conn)["id"]
    assert conn.request_call(first) is call
    assert conn.request_call(first + 1) is None
    reply(conn, first, input_required(state="s"))
    assert conn.request_call(first) is None  # answered: no longer awaited
    conn.handle_timer(10_000.0)
    retry = one(conn)["id"]
    assert conn.request_call(retry) is call
    reply(conn, retry, {"content": []})
    conn.events()
    assert conn.request_call(retry) is None


def test_a_lost_request_fails_its_call_locally_with_the_reason() -> None:
    conn = client()
    call = conn.call("tools/call", {"name": "t"})
    rid = one(conn)["id"]
    assert conn.request_failed(rid, "HTTP 502: Bad Gateway") is True
    assert conn.events() == [
        CallFailed(call, JsonRpcError(-32603, "HTTP 502: Bad Gateway"), local=True)
    ]
    assert conn.request_failed(rid, "again") is False
    assert conn.events() == []
    reply(conn, rid, {"content": []})  # a late answer matches nothing
    assert [type(e).__name__ for e in conn.events()] == ["UnexpectedResponse"]


def test_a_cancelled_request_is_not_failed_again() -> None:
    conn = client()
    call = conn.call("tools/call", {"name": "t"})
    rid = one(conn)["id"]
    conn.cancel(call)
    sent(conn)
    assert conn.request_failed(rid, "stream closed") is False
    assert conn.events() == []


def test_other_calls_survive_a_lost_request() -> None:
    conn = client()
    a = conn.call("tools/call", {"name": "a"})
    b = conn.call("tools/call", {"name": "b"})
    ida, idb = (m["id"] for m in sent(conn))
    conn.request_failed(ida, "connection reset")
    reply(conn, idb, {"content": []})
    assert conn.events() == [
        CallFailed(a, JsonRpcError(-32603, "connection reset"), local=True),
        CallCompleted(b, {"content": []}),
    ]


def test_a_lost_probe_falls_back_to_initialize() -> None:
    conn = client("auto")
    probe = one(conn)
    assert probe["method"] == "server/discover"
    assert conn.request_failed(probe["id"], "HTTP 400 with an empty body") is True
    init = one(conn, L)
    assert init["method"] == "initialize"
    assert conn.era is L


def test_a_lost_initialize_fails_the_handshake() -> None:
    conn = client("legacy")
    queued = conn.call("tools/call", {"name": "t"})
    init = one(conn, L)
    assert conn.request_failed(init["id"], "connection refused") is True
    events = conn.events()
    assert type(events[0]) is HandshakeFailed
    assert "connection refused" in events[0].error.message
    assert events[0].local is True
    assert type(events[1]) is CallFailed
    assert events[1].call is queued


def test_request_failed_ignores_ids_that_are_not_ours() -> None:
    conn = client()
    assert conn.request_failed(42, "x") is False
    assert conn.request_failed("42", "x") is False
    assert conn.events() == []


# --- positional association of legacy server requests ----------------------------------------


def test_a_request_on_a_calls_stream_is_linked_even_with_others_in_flight() -> None:
    conn = client("legacy")
    legacy_ready(conn)
    a = conn.call("tools/call", {"name": "a"})
    b = conn.call("tools/call", {"name": "b"})
    ida, idb = (m["id"] for m in sent(conn, L))
    (event,) = server_request(conn, 7, "roots/list", idb)
    assert event == InputNeeded(b, 7, "roots/list", {}, 1)
    (event_a,) = server_request(conn, 8, "elicitation/create", ida)
    assert event_a.call is a
    assert event_a.round == 1
    conn.fulfil(event, ROOTS_ANSWER)
    assert sent(conn, L) == [{"jsonrpc": "2.0", "id": 7, "result": ROOTS_ANSWER}]
    reply(conn, idb, {"content": []})
    assert conn.events() == [CallCompleted(b, {"content": []})]


def test_a_stream_overrides_the_unsettled_cancellation_rule() -> None:
    conn = client("legacy")
    legacy_ready(conn)
    a = conn.call("tools/call", {"name": "a"})
    b = conn.call("tools/call", {"name": "b"})
    _, idb = (m["id"] for m in sent(conn, L))
    conn.cancel(a)
    sent(conn, L)
    (event,) = server_request(conn, 9, "sampling/createMessage", idb)
    assert event.call is b  # on b's own stream: certain, whatever a's cancellation


def test_a_request_on_the_stream_of_a_request_no_longer_ours_is_refused() -> None:
    conn = client("legacy")
    legacy_ready(conn)
    call = conn.call("tools/call", {"name": "a"})
    other = conn.call("tools/call", {"name": "b"})
    ida, _ = (m["id"] for m in sent(conn, L))
    conn.cancel(call)
    sent(conn, L)
    (event,) = server_request(conn, 3, "roots/list", ida)
    assert type(event) is InvalidMessage
    (answer,) = sent(conn, L)
    assert answer["error"]["code"] == -32602
    assert other in conn.in_flight


def test_a_request_on_a_stream_that_cannot_originate_it_is_refused() -> None:
    conn = client("legacy")
    legacy_ready(conn)
    conn.call("tools/list")
    conn.call("tools/call", {"name": "t"})
    listing, _ = (m["id"] for m in sent(conn, L))
    (event,) = server_request(conn, 3, "roots/list", listing)
    assert type(event) is InvalidMessage
    assert sent(conn, L)[0]["error"]["code"] == -32602


def test_a_request_on_the_initialize_stream_is_refused() -> None:
    conn = client("legacy")
    init = one(conn, L)
    (event,) = server_request(conn, 3, "roots/list", init["id"])
    assert type(event) is InvalidMessage
    assert sent(conn, L)[0]["error"]["code"] == -32602
    reply(
        conn,
        init["id"],
        {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "s"}},
    )
    assert type(conn.events()[0]) is EraDetected
