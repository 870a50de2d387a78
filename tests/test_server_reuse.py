"""``ServerConnection.reusable``: a connection that holds nothing of any request serves the next
stateless request as a new one would (what the ASGI app's idle connections rely on)."""

from __future__ import annotations

import json

from helpers import (
    call,
    events,
    feed,
    legacy_request,
    notification,
    request,
    sent,
)
from mrtr_sansio import (
    UNSEALED,
    Era,
    InputRequiredResult,
    RequestReceived,
    ServerConfig,
    ServerConnection,
    elicit_form,
)

CONFIG = ServerConfig(request_state=UNSEALED)
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def body(message: object) -> bytes:
    return json.dumps(message).encode()


def received(conn: ServerConnection) -> RequestReceived:
    (event,) = events(conn)
    assert isinstance(event, RequestReceived)
    return event


def test_a_new_connection_is_reusable() -> None:
    assert ServerConnection(CONFIG).reusable


def test_a_request_in_flight_is_held_until_answered_and_written() -> None:
    conn = ServerConnection(CONFIG)
    conn.receive_message(body(call(1)))
    assert not conn.reusable  # in flight, and its event is queued
    event = received(conn)
    assert not conn.reusable  # in flight
    conn.respond(event.request_id, {"content": []})
    assert not conn.reusable  # answered, the answer not yet taken
    assert sent(conn)[0]["id"] == 1
    assert conn.reusable


def test_after_input_required_the_same_id_serves_the_retry() -> None:
    """The server keeps no memory of a modern request once it is answered: the retry (even
    under the id of the first leg) finds the connection as a new one would."""
    conn = ServerConnection(CONFIG)
    conn.receive_message(body(call(7)))
    ask = InputRequiredResult({"q": elicit_form("Sure?", SCHEMA)}, "s1")
    conn.respond(received(conn).request_id, ask)
    assert sent(conn)[0]["result"]["resultType"] == "input_required"
    assert conn.reusable
    answers = {"q": {"action": "accept", "content": {"ok": True}}}
    conn.receive_message(body(call(7, inputResponses=answers, requestState="s1")))
    retry = received(conn)
    assert retry.request_state == "s1"
    conn.respond(retry.request_id, {"content": []})
    assert sent(conn)[0]["result"]["resultType"] == "complete"
    assert conn.reusable


def test_a_cancelled_request_is_remembered_so_the_connection_is_not_reusable() -> None:
    conn = ServerConnection(CONFIG)
    conn.receive_message(body(call(1)))
    received(conn)
    assert conn.cancel(1, "gone")
    events(conn)
    assert not conn.reusable  # a late answer to id 1 is still to be dropped here


def test_a_refusal_is_held_until_written() -> None:
    conn = ServerConnection(CONFIG)
    conn.receive_message(b"{not json")
    assert not conn.reusable
    assert sent(conn)[0]["error"]["code"] == -32700
    events(conn)  # the InvalidMessage event
    assert conn.reusable


def test_an_open_listen_stream_is_held() -> None:
    conn = ServerConnection(CONFIG)
    listen = request(1, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    conn.receive_message(body(listen))
    conn.acknowledge(received(conn).request_id)
    sent(conn)
    assert not conn.reusable


def test_a_legacy_session_is_never_reusable() -> None:
    conn = ServerConnection(ServerConfig(request_state=UNSEALED))
    init = legacy_request(
        1,
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c"}},
    )
    conn.receive_message(body(init))
    events(conn)
    sent(conn, Era.LEGACY)
    assert conn.session is not None
    assert not conn.reusable


def test_a_closed_stream_is_not_reusable() -> None:
    conn = ServerConnection(CONFIG)
    feed(conn, notification("notifications/tools/list_changed"))
    events(conn)
    assert conn.reusable
    conn.receive_data(b"")
    events(conn)
    assert not conn.reusable
