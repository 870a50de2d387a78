"""``subscriptions/listen`` in the core: acknowledgement first, opt-in filtering, tagging."""

from __future__ import annotations

from typing import Any

import pytest

import mrtr_sansio as m
from helpers import (
    events,
    feed,
    meta,
    request,
    sent,
)

SID = m.protocol.SUBSCRIPTION_ID


def listen(rid: int = 7, wanted: Any = None) -> dict[str, Any]:
    notifications = {"toolsListChanged": True} if wanted is None else wanted
    return request(rid, "subscriptions/listen", {"notifications": notifications})


@pytest.fixture
def server_config() -> m.ServerConfig:
    return m.ServerConfig(server_info={"name": "s", "version": "1"})


@pytest.fixture
def listening(conn: m.ServerConnection) -> None:
    """``conn`` has received ``listen()`` (and its test acknowledges it, or not)."""
    feed(conn, listen())
    (event,) = events(conn)
    assert isinstance(event, m.RequestReceived)


pytestmark = pytest.mark.usefixtures("listening")


def test_acknowledge_is_the_first_message_and_is_tagged(conn: m.ServerConnection) -> None:
    conn.acknowledge(7)
    assert sent(conn) == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": {"toolsListChanged": True}, "_meta": {SID: 7}},
        }
    ]


def test_notifications_before_acknowledge_are_refused(conn: m.ServerConnection) -> None:
    with pytest.raises(m.LocalProtocolError, match="acknowledge"):
        conn.notify("notifications/tools/list_changed", None, 7)
    with pytest.raises(m.LocalProtocolError, match="acknowledge"):
        conn.notify("notifications/subscriptions/acknowledged", {"notifications": {}}, 7)
    assert sent(conn) == []


def test_only_opted_in_notifications_go_out_tagged(conn: m.ServerConnection) -> None:
    conn.acknowledge(7)
    sent(conn)
    conn.notify("notifications/prompts/list_changed", None, 7)  # not requested: dropped
    conn.notify("notifications/resources/updated", {"uri": "test://x"}, 7)  # not requested
    conn.notify("notifications/progress", {"progressToken": 1, "progress": 1}, 7)  # never
    conn.notify("notifications/tools/list_changed", {"_meta": {"k": 1}}, 7)
    assert sent(conn) == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
            "params": {"_meta": {"k": 1, SID: 7}},
        }
    ]


def test_resource_subscriptions_filter_by_uri() -> None:
    conn = m.ServerConnection()
    feed(conn, listen(3, {"resourceSubscriptions": ["test://a"]}))
    events(conn)
    conn.acknowledge(3)
    sent(conn)
    conn.notify("notifications/resources/updated", {"uri": "test://b"}, 3)
    conn.notify("notifications/resources/updated", {"uri": "test://a"}, 3)
    assert sent(conn) == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "test://a", "_meta": {SID: 3}},
        }
    ]


def test_acknowledge_may_narrow_but_not_widen(conn: m.ServerConnection) -> None:
    with pytest.raises(m.LocalProtocolError, match="requested"):
        conn.acknowledge(7, {"promptsListChanged": True})
    conn.acknowledge(7, {})
    assert sent(conn)[0]["params"] == {"notifications": {}, "_meta": {SID: 7}}
    conn.notify("notifications/tools/list_changed", None, 7)  # no longer honoured
    assert sent(conn) == []


def test_acknowledge_needs_an_open_listen_request() -> None:
    conn = m.ServerConnection()
    with pytest.raises(m.LocalProtocolError, match="not an open"):
        conn.acknowledge(1)
    feed(conn, request(1, "tools/list", {}))
    events(conn)
    with pytest.raises(m.LocalProtocolError, match="not an open"):
        conn.acknowledge(1)


def test_graceful_end_carries_the_subscription_id(conn: m.ServerConnection) -> None:
    conn.acknowledge(7)
    sent(conn)
    conn.respond(7, {})
    (result,) = sent(conn, methods={7: "subscriptions/listen"})
    assert result["result"]["_meta"] == {
        SID: 7,
        m.protocol.SERVER_INFO: {"name": "s", "version": "1"},
    }
    assert result["result"]["resultType"] == "complete"
    conn.notify("notifications/tools/list_changed", None, 7)  # the stream is over
    assert sent(conn) == []


def test_cancelled_listen_stops_notifications(conn: m.ServerConnection) -> None:
    conn.acknowledge(7)
    sent(conn)
    assert conn.cancel(7)
    conn.notify("notifications/tools/list_changed", None, 7)
    assert sent(conn) == []
    with pytest.raises(m.LocalProtocolError):
        conn.acknowledge(7)


def test_error_answer_ends_the_stream(conn: m.ServerConnection) -> None:
    conn.acknowledge(7)
    sent(conn)
    conn.respond(7, m.JsonRpcError.internal("shutting down"))
    assert sent(conn)[0]["error"]["code"] == -32603


@pytest.mark.parametrize("bad", [None, [], "tools", 1])
def test_listen_needs_a_filter_object(bad: Any) -> None:
    conn = m.ServerConnection()
    params: dict[str, Any] = {"_meta": meta()}
    if bad is not None:
        params["notifications"] = bad
    feed(conn, {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": params})
    (reply,) = sent(conn)
    assert reply["error"]["code"] == -32602
    assert "notifications" in reply["error"]["message"]
