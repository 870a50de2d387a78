"""``era="auto"``: the ``server/discover`` probe (DIGEST §1.8). A DiscoverResult or a recognised
modern error means modern; any other error, a non-DiscoverResult, or silence until the deadline
means legacy (``initialize``). Calls made meanwhile are queued and sent once the era is known."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import (
    CAPS,
    CLIENT,
    Clock,
    Pair,
    client,
    meta,
    one,
    reply,
    reply_error,
    sent,
)
from mrtr_sansio import (
    CallCompleted,
    CallFailed,
    ClientConfig,
    Era,
    EraDetected,
    HandshakeFailed,
    JsonRpcError,
    LocalProtocolError,
    RequestReceived,
    ServerConfig,
    UnexpectedResponse,
)

DISCOVER = {
    "resultType": "complete",
    "supportedVersions": ["2026-07-28", "2025-11-25"],
    "capabilities": {"tools": {}},
    "instructions": "Hello",
    "ttlMs": 0,
    "cacheScope": "private",
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "srv", "version": "2"}},
}
INIT_RESULT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "serverInfo": {"name": "old", "version": "1"},
}


def probing(**kwargs: Any) -> Any:
    clock = Clock(50.0)
    conn = client("auto", clock=clock, **kwargs)
    probe = one(conn)
    assert probe == {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "server/discover",
        "params": {"_meta": meta(version=kwargs.get("protocol_version", "2026-07-28"))},
    }
    assert conn.era is None
    assert conn.next_deadline() == 50.0 + kwargs.get("probe_timeout", 5.0)
    return conn, clock


def test_discover_result_means_modern_and_releases_queued_calls() -> None:
    conn, _ = probing()
    a = conn.call("tools/call", {"name": "a"})
    b = conn.call("tools/list")
    assert sent(conn) == []
    reply(conn, 0, DISCOVER)
    assert conn.events() == [
        EraDetected(
            Era.MODERN, "2026-07-28", {"tools": {}}, {"name": "srv", "version": "2"}, "Hello"
        )
    ]
    assert sent(conn) == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "a", "_meta": meta()},
        },
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta()}},
    ]
    assert conn.next_deadline() is None
    c = conn.call("tools/list")
    assert one(conn)["id"] == 3
    reply(conn, 1, {"content": []})
    reply(conn, 2, {"tools": []})
    reply(conn, 3, {"tools": []})
    assert conn.events() == [
        CallCompleted(a, {"content": []}),
        CallCompleted(b, {"tools": []}),
        CallCompleted(c, {"tools": []}),
    ]


def test_discover_result_with_odd_optional_fields() -> None:
    conn, _ = probing()
    reply(conn, 0, {"supportedVersions": ["2026-07-28"], "capabilities": [], "_meta": "x"})
    assert conn.events() == [EraDetected(Era.MODERN, "2026-07-28", None, None, None)]


@pytest.mark.parametrize("code", [-32020, -32021])
def test_recognised_modern_errors_mean_modern(code: int) -> None:
    conn, _ = probing()
    call = conn.call("tools/list")
    reply_error(
        conn, 0, code, "modern error", {"requiredCapabilities": {}} if code == -32021 else None
    )
    assert conn.events() == [EraDetected(Era.MODERN, "2026-07-28", None, None, None)]
    assert one(conn)["params"] == {"_meta": meta()}
    assert call in conn.in_flight


def test_unsupported_version_picks_a_mutual_modern_version() -> None:
    conn, _ = probing(protocol_version="2099-01-01")
    conn.call("tools/list")
    reply_error(
        conn,
        0,
        -32022,
        "Unsupported protocol version",
        {"supported": ["2026-07-28"], "requested": "2099-01-01"},
    )
    assert conn.events() == [EraDetected(Era.MODERN, "2026-07-28", None, None, None)]
    assert one(conn)["params"] == {"_meta": meta(version="2026-07-28")}


def test_discover_result_picks_a_mutual_modern_version() -> None:
    conn, _ = probing(protocol_version="2099-01-01")
    reply(conn, 0, {**DISCOVER, "supportedVersions": ["2026-07-28"]})
    (event,) = conn.events()
    assert type(event) is EraDetected
    assert event.protocol_version == "2026-07-28"


def test_unsupported_version_with_only_legacy_versions_goes_through_initialize() -> None:
    conn, _ = probing()
    conn.call("tools/list")
    reply_error(
        conn,
        0,
        -32022,
        "Unsupported protocol version",
        {"supported": ["2025-06-18"], "requested": "2026-07-28"},
    )
    assert conn.events() == []
    (init,) = sent(conn, Era.LEGACY)
    assert init["method"] == "initialize"
    assert conn.era is Era.LEGACY


@pytest.mark.parametrize("data", [{"supported": ["1999-01-01"]}, {"supported": "x"}, None])
def test_no_mutual_version_fails_the_handshake(data: Any) -> None:
    conn, _ = probing()
    call = conn.call("tools/list")
    reply_error(conn, 0, -32022, "Unsupported protocol version", data)
    err = JsonRpcError(-32022, "Unsupported protocol version", data)
    assert conn.events() == [HandshakeFailed(err), CallFailed(call, err)]
    assert sent(conn) == []
    assert conn.next_deadline() is None
    with pytest.raises(LocalProtocolError):
        conn.call("tools/list")


def test_discover_result_with_no_mutual_version_fails_locally() -> None:
    conn, _ = probing()
    reply(conn, 0, {**DISCOVER, "supportedVersions": ["1999-01-01"]})
    (event,) = conn.events()
    assert type(event) is HandshakeFailed
    assert event.error.data == {"supported": ["1999-01-01"]}


@pytest.mark.parametrize(
    "err",
    [
        {"code": -32601, "message": "Method not found"},
        {"code": -32602, "message": "Invalid params"},
        {"code": -32600, "message": "Server not initialized"},
        {"code": -32603, "message": "Internal error"},
        {"code": -32000, "message": "Bad Request: No valid session ID provided"},
        {"code": -32002, "message": "Not initialized"},
        {"code": 42, "message": "whatever"},
        "garbage",
    ],
)
def test_any_other_error_means_legacy(err: Any) -> None:
    conn, _ = probing()
    call = conn.call("tools/call", {"name": "t"})
    conn.receive_message({"jsonrpc": "2.0", "id": 0, "error": err})
    assert conn.events() == []
    assert conn.era is Era.LEGACY
    assert conn.next_deadline() is None
    assert sent(conn, Era.LEGACY) == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": CAPS, "clientInfo": CLIENT},
        }
    ]
    reply(conn, 1, INIT_RESULT)
    assert conn.events() == [
        EraDetected(Era.LEGACY, "2025-11-25", {}, {"name": "old", "version": "1"}, None)
    ]
    assert sent(conn, Era.LEGACY) == [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t"}},
    ]
    reply(conn, 2, {"content": []})
    assert conn.events() == [CallCompleted(call, {"content": []})]


@pytest.mark.parametrize(
    "res", [{}, {"protocolVersion": "2025-11-25"}, {"supportedVersions": "2026-07-28"}, []]
)
def test_a_result_that_is_not_a_discover_result_means_legacy(res: Any) -> None:
    conn, _ = probing()
    reply(conn, 0, res)
    assert sent(conn, Era.LEGACY)[0]["method"] == "initialize"


def test_a_broken_answer_to_the_probe_means_legacy() -> None:
    conn, _ = probing()
    conn.receive_message({"jsonrpc": "2.0", "id": 0})
    assert sent(conn, Era.LEGACY)[0]["method"] == "initialize"


def test_silence_until_the_deadline_means_legacy() -> None:
    conn, _ = probing(probe_timeout=2.5)
    conn.call("tools/list")
    assert conn.next_deadline() == 52.5
    conn.handle_timer(52.4)
    assert sent(conn) == []
    conn.handle_timer(52.5)
    (init,) = sent(conn, Era.LEGACY)
    assert init["method"] == "initialize"
    assert conn.next_deadline() is None
    reply(conn, 0, DISCOVER)  # the probe's late answer is dropped silently
    assert conn.events() == []
    reply(conn, 1, INIT_RESULT)
    assert [type(e) for e in conn.events()] == [EraDetected]
    assert [m.get("method") for m in sent(conn, Era.LEGACY)] == [
        "notifications/initialized",
        "tools/list",
    ]


def test_cancel_a_queued_call_sends_nothing() -> None:
    conn, _ = probing()
    a = conn.call("tools/list")
    b = conn.call("tools/list")
    assert conn.cancel(a)
    reply(conn, 0, DISCOVER)
    conn.events()
    (msg,) = sent(conn)
    assert msg["id"] == 1
    reply(conn, 1, {"tools": []})
    assert conn.events() == [CallCompleted(b, {"tools": []})]


def test_close_while_probing_fails_queued_calls() -> None:
    conn, _ = probing()
    call = conn.call("tools/list")
    conn.receive_data(b"")
    evs = conn.events()
    assert type(evs[0]) is CallFailed
    assert evs[0].call is call
    assert conn.next_deadline() is None


def test_unexpected_responses_while_probing() -> None:
    conn, _ = probing()
    reply(conn, 7, {})
    assert [type(e) for e in conn.events()] == [UnexpectedResponse]
    assert conn.era is None


def test_http_headers_of_the_probe() -> None:
    conn = client("auto")
    (probe,) = conn.outgoing()
    assert conn.http_headers(probe) == {
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "server/discover",
    }


# --- against our ServerConnection -----------------------------------------------------------


def echo(ev: RequestReceived) -> Any:
    return {"content": [{"type": "text", "text": ev.era.value}]}


def test_pair_auto_finds_our_dual_era_server_modern() -> None:
    pair = Pair(echo, ClientConfig(client_info=CLIENT, era="auto"))
    call = pair.client.call("tools/call", {"name": "t"})
    evs = pair.run()
    assert type(evs[0]) is EraDetected
    assert evs[0].era is Era.MODERN
    assert evs[0].server_info == {"name": "srv", "version": "1"}
    assert type(evs[1]) is CallCompleted
    assert evs[1].call is call
    assert evs[1].result["content"][0]["text"] == "modern"


def test_pair_auto_falls_back_when_our_server_serves_only_legacy() -> None:
    pair = Pair(
        echo,
        ClientConfig(client_info=CLIENT, era="auto"),
        ServerConfig(supported_versions=(), server_info={"name": "srv", "version": "1"}),
    )
    call = pair.client.call("tools/call", {"name": "t"})
    evs = pair.run()
    assert [type(e) for e in evs] == [EraDetected, CallCompleted]
    assert evs[0].era is Era.LEGACY  # type: ignore[attr-defined]
    assert evs[1] == CallCompleted(call, {"content": [{"type": "text", "text": "legacy"}]})
