"""Sealed requestState end to end through ServerConnection, on the exact wire messages."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pytest

import helpers
from helpers import FORM_ONLY, INVALID_STATE_ERROR, Clock, drain
from mrtr_sansio import (
    UNSEALED,
    Era,
    InputRequiredResult,
    InvalidMessage,
    JsonRpcError,
    RequestReceived,
    RequestStateRejected,
    ServerConfig,
    ServerConnection,
    elicit_form,
)
from mrtr_sansio.protocol import CLIENT_CAPABILITIES, LATEST_MODERN_VERSION, PROTOCOL_VERSION_KEY
from mrtr_sansio.sealing import MemoryReplayGuard, RequestStateSecurity
from mrtr_sansio.sealing._codecs import b64url_decode

KEY = bytes(range(32))
T0 = 1_800_000_000.0
ARGS = {"workItemId": 4522, "fields": {"System.State": "Resolved"}}
STATE = {"resolution": "Duplicate", "rounds": [1, 2]}
SCHEMA = {
    "type": "object",
    "properties": {"duplicateOfId": {"type": "number"}},
    "required": ["duplicateOfId"],
}
INVALID_STATE = JsonRpcError(
    -32602, "Invalid or expired requestState", {"reason": "invalid_request_state"}
)


def server(codec: str = "hmac-sha256", **options: Any) -> tuple[ServerConnection, Clock]:
    clock = Clock(T0)
    security = RequestStateSecurity([KEY], codec=codec, audience="https://mcp.example", **options)  # type: ignore[arg-type]
    config = ServerConfig(
        server_info={"name": "s", "version": "1"}, request_state=security, clock=clock
    )
    return ServerConnection(config, principal="user-1"), clock


call = partial(helpers.call, name="update_work_item", arguments=ARGS, envelope=FORM_ONLY)


def events(conn: ServerConnection) -> list[Any]:
    return conn.events()


def first_round(conn: ServerConnection) -> str:
    """Round 1: the handler asks for input and keeps STATE; returns the token sent."""
    conn.receive_message(call(1))
    [request] = events(conn)
    assert isinstance(request, RequestReceived)
    assert (request.round, request.request_state) == (1, None)
    conn.respond(
        1,
        InputRequiredResult(
            {"duplicate_of": elicit_form("Which item is the original?", SCHEMA)},
            request_state=STATE,
        ),
    )
    [out] = drain(conn, Era.MODERN, methods={1: "tools/call"})
    result = out.message["result"]
    assert result["resultType"] == "input_required"
    token: str = result["requestState"]
    return token


def retry(rid: int, token: Any, arguments: Any = ARGS) -> dict[str, Any]:
    answer = {"duplicate_of": {"action": "accept", "content": {"duplicateOfId": 4301}}}
    return call(rid, arguments=arguments, inputResponses=answer, requestState=token)


@pytest.mark.parametrize("codec", ["hmac-sha256", "aes-256-gcm"])
def test_sealed_state_round_trip(codec: str) -> None:
    conn, clock = server(codec)
    token = first_round(conn)
    plaintext = json.dumps(STATE, separators=(",", ":"))
    assert token != plaintext
    assert b64url_decode(token) is not None
    raw = b64url_decode(token)
    assert raw is not None
    if codec == "aes-256-gcm":
        assert b"Duplicate" not in raw  # confidential
    else:
        assert plaintext.encode() in raw  # integrity only: readable, not changeable

    clock.now += 30
    conn.receive_message(retry(2, token))
    [request] = events(conn)
    assert isinstance(request, RequestReceived)
    assert request.request_state == STATE
    assert request.round == 2
    assert request.input_response("duplicate_of") == {
        "action": "accept",
        "content": {"duplicateOfId": 4301},
    }
    conn.respond(2, {"content": [{"type": "text", "text": "Resolved as duplicate"}]})
    [out] = drain(conn, Era.MODERN, methods={2: "tools/call"})
    assert out.message == {
        "jsonrpc": "2.0",
        "id": 2,
        "result": {
            "content": [{"type": "text", "text": "Resolved as duplicate"}],
            "resultType": "complete",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}},
        },
    }


def test_third_round_counts_on() -> None:
    conn, _ = server()
    token = first_round(conn)
    conn.receive_message(retry(2, token))
    [request] = events(conn)
    conn.respond(2, InputRequiredResult(request_state={"again": True}))
    [out] = drain(conn, Era.MODERN, methods={2: "tools/call"})
    conn.receive_message(retry(3, out.message["result"]["requestState"]))
    [request] = events(conn)
    assert (request.round, request.request_state) == (3, {"again": True})


def rejected(conn: ServerConnection, message: dict[str, Any], **kw: Any) -> str:
    """Feed a retry that must be refused; return the precise reason from the event."""
    conn.receive_message(message, **kw)
    got = events(conn)
    assert not any(isinstance(e, RequestReceived) for e in got), "the handler must not run"
    [event, invalid] = got
    assert isinstance(event, RequestStateRejected)
    assert (event.request_id, event.method) == (message["id"], "tools/call")
    assert invalid == InvalidMessage(INVALID_STATE, message["id"], True)
    [out] = drain(conn, Era.MODERN, methods={message["id"]: "tools/call"})
    assert out.message == {"jsonrpc": "2.0", "id": message["id"], "error": INVALID_STATE_ERROR}
    assert message["id"] not in conn.in_flight
    return event.reason


@pytest.mark.parametrize("codec", ["hmac-sha256", "aes-256-gcm"])
def test_tampered_state_is_refused_and_the_handler_never_runs(codec: str) -> None:
    conn, _ = server(codec)
    token = first_round(conn)
    middle = len(token) // 2
    tampered = token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1 :]
    assert rejected(conn, retry(2, tampered)) == "bad_tag"
    # The reason stays off the wire.
    assert "bad_tag" not in json.dumps(INVALID_STATE_ERROR)


def test_each_binding_is_enforced_on_the_wire() -> None:
    conn, clock = server()
    token = first_round(conn)
    assert rejected(conn, retry(2, token, {**ARGS, "workItemId": 1})) == "arguments_mismatch"
    assert rejected(conn, retry(3, token), principal="user-2") == "principal_mismatch"
    other_tool = retry(4, token)
    other_tool["params"]["name"] = "delete_work_item"
    assert rejected(conn, other_tool) == "target_mismatch"
    as_prompt = retry(5, token)
    as_prompt["method"] = "prompts/get"
    conn.receive_message(as_prompt)
    [event, _] = events(conn)
    assert isinstance(event, RequestStateRejected)
    assert event.reason == "method_mismatch"
    drain(conn, Era.MODERN)
    clock.now += 600
    assert rejected(conn, retry(6, token)) == "expired"


def test_state_from_another_server_is_refused() -> None:
    conn, _ = server()
    other = RequestStateSecurity([KEY], audience="https://other.example")
    from mrtr_sansio.sealing import StateBinding

    binding = StateBinding("tools/call", "update_work_item", ARGS, "user-1")
    assert rejected(conn, retry(2, other.seal(STATE, binding, 1, T0))) == "audience_mismatch"


def test_plaintext_and_junk_are_refused() -> None:
    conn, _ = server()
    assert rejected(conn, retry(2, json.dumps(STATE))) == "malformed"
    assert rejected(conn, retry(3, "")) == "empty"


def test_replay_guard_on_the_wire() -> None:
    conn, _ = server(replay_guard=MemoryReplayGuard())
    token = first_round(conn)
    conn.receive_message(retry(2, token))
    [request] = events(conn)
    assert isinstance(request, RequestReceived)
    conn.respond(2, {"content": []})
    drain(conn, Era.MODERN)
    assert rejected(conn, retry(3, token)) == "replayed"


def test_other_requests_are_undisturbed_by_a_refusal() -> None:
    conn, _ = server()
    token = first_round(conn)
    conn.receive_message(call(10))
    [pending] = events(conn)
    assert rejected(conn, retry(11, token + "AA")) in {"bad_tag", "malformed"}
    assert conn.in_flight == frozenset({10})
    conn.respond(pending.request_id, {"content": []})
    [out] = drain(conn, Era.MODERN, methods={10: "tools/call"})
    assert out.message["id"] == 10
    assert out.message["result"]["resultType"] == "complete"


@pytest.mark.parametrize(
    ("method", "params", "other"),
    [
        ("resources/read", {"uri": "file:///a.txt"}, {"uri": "file:///b.txt"}),
        ("prompts/get", {"name": "greet", "arguments": {"who": "Ada"}}, {"name": "greet"}),
    ],
)
def test_resources_and_prompts_are_bound_too(
    method: str, params: dict[str, Any], other: dict[str, Any]
) -> None:
    conn, _ = server()
    envelope = {
        PROTOCOL_VERSION_KEY: LATEST_MODERN_VERSION,
        CLIENT_CAPABILITIES: {},
    }

    def request(rid: int, body: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": rid,
            "method": method,
            "params": {**body, "_meta": envelope, **extra},
        }

    conn.receive_message(request(1, params))
    [first] = events(conn)
    conn.respond(first.request_id, InputRequiredResult(request_state=["step", 2]))
    [out] = drain(conn, Era.MODERN, methods={1: method})
    token = out.message["result"]["requestState"]
    conn.receive_message(request(2, params, requestState=token))
    [again] = events(conn)
    assert isinstance(again, RequestReceived)
    assert (again.request_state, again.round) == (["step", 2], 2)
    conn.respond(2, JsonRpcError(-32603, "done here"))
    drain(conn, Era.MODERN)
    conn.receive_message(request(3, other, requestState=token))
    [event, _] = events(conn)
    assert isinstance(event, RequestStateRejected)
    assert event.reason == (
        "target_mismatch" if method == "resources/read" else "arguments_mismatch"
    )


def test_without_security_state_passes_through_untouched() -> None:
    conn = ServerConnection(ServerConfig(request_state=UNSEALED))
    conn.receive_message(call(1))
    [first] = events(conn)
    conn.respond(first.request_id, InputRequiredResult(request_state="plain:step=2"))
    [out] = drain(conn, Era.MODERN, methods={1: "tools/call"})
    assert out.message["result"]["requestState"] == "plain:step=2"
    conn.receive_message(retry(2, "plain:step=2 (edited by the client)"))
    [again] = events(conn)
    assert isinstance(again, RequestReceived)
    assert again.request_state == "plain:step=2 (edited by the client)"
