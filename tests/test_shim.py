"""The legacy shim: ``input_required`` fulfilled on the 2025-11-25 wire with real server requests.

A real :class:`ServerConnection` talks to a scripted legacy client (plain dicts in, exact
messages out, each validated against the 2025-11-25 schema); the handler is a plain function
that returns an :class:`InputRequiredResult` until it has what it needs.

What "8 rounds" means (``legacy_max_rounds``): a round is one ``input_required`` answer that the
shim fulfils -- its legs sent and all answered, or, for a state-only result, nothing sent -- and
that ends with the request replayed to the handler. The shim fulfils at most
``legacy_max_rounds`` rounds, so the handler runs at most ``legacy_max_rounds + 1`` times; the
next ``input_required`` fails the request.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import (
    LEGACY,
    LEGACY_CAPS,
    SERVER,
    App,
    ScriptedClient,
    drain,
    server,
    session,
)
from mrtr_sansio import (
    UNSEALED,
    Era,
    InputRequest,
    InputRequiredResult,
    Limits,
    LocalProtocolError,
    PingAnswered,
    RequestCancelled,
    RequestReceived,
    RoundsExhausted,
    UnexpectedResponse,
    elicit_form,
    elicit_url,
    list_roots,
    sample,
)
from mrtr_sansio.events import (
    FulfilRequest,
    OutgoingError,
    OutgoingInputRequired,
    OutgoingNotification,
    OutgoingResult,
)
from mrtr_sansio.protocol import CLIENT_CAPABILITIES, PROTOCOL_VERSION_KEY
from mrtr_sansio.sealing import OpenedState, StateBinding

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
LOGIN = elicit_form("Please provide your GitHub username", SCHEMA)
TEXT = {"content": [{"type": "text", "text": "done"}], "isError": False}
ACCEPT = {"action": "accept", "content": {"name": "octocat"}}
SAMPLED = {
    "role": "assistant",
    "content": {"type": "text", "text": "Paris"},
    "model": "m",
    "stopReason": "endTurn",
}
ROOTS = {"roots": [{"uri": "file:///home/user/project", "name": "Project"}]}
RESULTS: dict[str, dict[str, Any]] = {
    "tools/call": TEXT,
    "prompts/get": {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]},
    "resources/read": {"contents": [{"uri": "file:///a", "text": "a"}]},
}
TARGET: dict[str, dict[str, Any]] = {
    "tools/call": {"name": "get_weather", "arguments": {"location": "New York"}},
    "prompts/get": {"name": "review", "arguments": {"code": "x"}},
    "resources/read": {"uri": "file:///a"},
}


def one_question(event: RequestReceived) -> Any:
    """Asks for a login once, then answers with what it got."""
    if event.input_response("login") is None:
        return InputRequiredResult({"login": LOGIN}, request_state={"step": 1})
    return RESULTS[event.method]


def leg_message(leg_id: int, request: InputRequest) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": leg_id, "method": request.method, "params": request.params}


def cancelled(leg_id: int, reason: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": leg_id, "reason": reason},
    }


def internal(rid: Any, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": -32603, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": error}


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# --- the basic round trip -------------------------------------------------------------------


def test_tools_call_completes_through_a_real_elicitation_leg() -> None:
    state = {"step": 1, "seen": ["a", 2, None]}

    def handler(event: RequestReceived) -> Any:
        if event.round == 1:
            return InputRequiredResult({"login": LOGIN}, request_state=state)
        return {**TEXT, "resultType": "complete"}

    conn, client, app = session(handler)
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    (leg,) = client.take_items()
    assert isinstance(leg, FulfilRequest)
    assert leg.message == {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "elicitation/create",
        "params": {
            "message": "Please provide your GitHub username",
            "requestedSchema": SCHEMA,
        },
    }
    assert leg.related_request_id == rid
    assert leg.request_id == 0
    assert leg.key == "login"
    assert conn.in_flight == {rid}
    assert conn.next_deadline() == 1000.0 + 600.0

    client.answer(0, ACCEPT)
    assert app.run() == []
    first, replay = app.seen
    assert (replay.request_id, replay.method, replay.era) == (rid, "tools/call", Era.LEGACY)
    assert replay.round == 2
    assert replay.request_state is state  # in-process: exactly what the handler wrote
    assert replay.input_responses == {"login": ACCEPT}
    assert replay.input_responses.accepted_content("login") == {"name": "octocat"}
    assert replay.params == {**TARGET["tools/call"], "inputResponses": {"login": ACCEPT}}
    assert replay.client_capabilities == first.client_capabilities == LEGACY_CAPS
    assert replay.protocol_version == LEGACY
    (final,) = client.take_items()
    assert isinstance(final, OutgoingResult)
    assert final.message == {"jsonrpc": "2.0", "id": rid, "result": TEXT}
    assert final.related_request_id == rid
    assert len(app.seen) == 2
    assert conn.in_flight == frozenset()
    assert conn.next_deadline() is None


@pytest.mark.parametrize("method", ["prompts/get", "resources/read"])
def test_prompts_get_and_resources_read_are_shimmed_the_same_way(method: str) -> None:
    _conn, client, app = session(one_question)
    rid = client.request(method, TARGET[method])
    app.run()
    (leg,) = client.take()
    assert leg == leg_message(0, LOGIN)
    client.answer(0, ACCEPT)
    app.run()
    assert [e.round for e in app.seen] == [1, 2]
    assert app.seen[1].input_responses == {"login": ACCEPT}
    assert app.seen[1].request_state == {"step": 1}
    assert client.take() == [{"jsonrpc": "2.0", "id": rid, "result": RESULTS[method]}]


class ManglingProtector:
    """A StateProtector that would wreck anything passing through it, and counts calls."""

    def __init__(self) -> None:
        self.calls = 0

    def seal(self, state: Any, binding: StateBinding, round: int, now: float) -> str:
        self.calls += 1
        return "MANGLED"

    def unseal(self, token: str, binding: StateBinding, now: float) -> OpenedState:
        self.calls += 1
        return OpenedState("MANGLED", 99)


@pytest.mark.parametrize("state", [{"cart": [1, 2]}, "plain", 7, [None, True], 0.5])
def test_the_shim_bypasses_request_state_protection(state: Any) -> None:
    protector = ManglingProtector()
    seen: list[Any] = []

    def handler(event: RequestReceived) -> Any:
        seen.append(event.request_state)
        if event.round == 1:
            return InputRequiredResult({"login": LOGIN}, request_state=state)
        return TEXT

    _conn, client, app = session(handler, request_state=protector)
    client.request("tools/call", TARGET["tools/call"])
    app.run()
    client.take()
    client.answer(0, ACCEPT)
    app.run()
    assert seen == [None, state]
    assert protector.calls == 0


def test_sampling_and_roots_legs_are_sent_verbatim() -> None:
    ask = {
        "capital": sample("What is the capital of France?", 100, system_prompt="Be brief"),
        "roots": list_roots(),
        "bare_roots": InputRequest("roots/list"),
    }

    def handler(event: RequestReceived) -> Any:
        if event.round == 1:
            return InputRequiredResult(ask)
        return TEXT

    _conn, client, app = session(handler)
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    assert client.take() == [
        leg_message(0, ask["capital"]),
        leg_message(1, ask["roots"]),
        {"jsonrpc": "2.0", "id": 2, "method": "roots/list"},
    ]
    client.answer(0, SAMPLED)
    client.answer(1, ROOTS)
    client.answer(2, {"roots": []})
    app.run()
    replay = app.seen[1]
    assert replay.request_state is None
    assert replay.input_responses.sampled_text("capital") == "Paris"
    assert replay.input_responses.root_uris("roots") == ["file:///home/user/project"]
    assert replay.input_responses.root_uris("bare_roots") == []
    assert client.take() == [{"jsonrpc": "2.0", "id": rid, "result": TEXT}]


# --- several rounds -------------------------------------------------------------------------


def test_each_round_sees_only_its_own_answers() -> None:
    def handler(event: RequestReceived) -> Any:
        if event.round == 1:
            return InputRequiredResult({"a": LOGIN, "b": sample("q", 10)}, request_state="after-1")
        if event.round == 2:
            return InputRequiredResult({"c": list_roots()}, request_state="after-2")
        return TEXT

    _conn, client, app = session(handler)
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    assert [m["id"] for m in client.take()] == [0, 1]
    client.answer(1, SAMPLED)
    client.answer(0, ACCEPT)
    app.run()
    (leg,) = client.take()
    assert leg == leg_message(2, list_roots())
    client.answer(2, ROOTS)
    app.run()
    assert [(e.round, dict(e.input_responses), e.request_state) for e in app.seen] == [
        (1, {}, None),
        (2, {"a": ACCEPT, "b": SAMPLED}, "after-1"),
        (3, {"c": ROOTS}, "after-2"),
    ]
    assert client.take() == [{"jsonrpc": "2.0", "id": rid, "result": TEXT}]


def test_state_only_result_reruns_at_once_and_counts_as_a_round() -> None:
    def handler(event: RequestReceived) -> Any:
        state = event.request_state or 0
        if state < 3:
            return InputRequiredResult(request_state=state + 1)
        return TEXT

    conn, client, app = session(handler)
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    assert [(e.round, e.request_state, dict(e.input_responses)) for e in app.seen] == [
        (1, None, {}),
        (2, 1, {}),
        (3, 2, {}),
        (4, 3, {}),
    ]
    assert client.take() == [{"jsonrpc": "2.0", "id": rid, "result": TEXT}]
    assert conn.next_deadline() is None


# --- url mode -------------------------------------------------------------------------------


def test_url_elicitation_gains_an_elicitation_id() -> None:
    ask = elicit_url("Please provide your API key", "https://mcp.example.com/ui/key")

    def handler(event: RequestReceived) -> Any:
        if event.round == 1:
            return InputRequiredResult({"key": ask})
        return TEXT

    _conn, client, app = session(handler, token_hex=lambda n: "ab" * n)
    client.request("tools/call", TARGET["tools/call"])
    app.run()
    assert client.take() == [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "elicitation/create",
            "params": {
                "mode": "url",
                "message": "Please provide your API key",
                "url": "https://mcp.example.com/ui/key",
                "elicitationId": "ab" * 16,
            },
        }
    ]
    assert ask.params is not None
    assert "elicitationId" not in ask.params  # the handler's request is not modified
    client.answer(0, {"action": "accept"})
    app.run()
    assert app.seen[1].input_responses.accepted_content("key") == {}


def test_a_handler_supplied_elicitation_id_rides_unchanged() -> None:
    ask = elicit_url(
        "Please provide your API key",
        "https://mcp.example.com/ui/key",
        elicitation_id="550e8400-e29b-41d4-a716-446655440000",
    )

    def handler(event: RequestReceived) -> Any:
        return InputRequiredResult({"key": ask}) if event.round == 1 else TEXT

    _conn, client, app = session(handler)
    client.request("tools/call", TARGET["tools/call"])
    app.run()
    (leg,) = client.take()
    assert leg == leg_message(0, ask)
    assert leg["params"]["elicitationId"] == "550e8400-e29b-41d4-a716-446655440000"


# --- failures -------------------------------------------------------------------------------


def test_a_leg_answered_with_an_error_fails_the_original() -> None:
    def handler(event: RequestReceived) -> Any:
        return InputRequiredResult({"a": LOGIN, "b": sample("q", 10), "c": list_roots()})

    conn, client, app = session(handler)
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    client.take()
    client.answer(0, ACCEPT)
    client.answer_error(1, -1, "User rejected sampling request", {"why": "no"})
    app.run()
    items = client.take_items()
    assert [i.message for i in items] == [
        cancelled(2, "The original request failed"),
        internal(
            rid,
            "The client answered sampling/createMessage with an error: User rejected sampling "
            "request (code -1)",
            {
                "clientError": {
                    "code": -1,
                    "message": "User rejected sampling request",
                    "data": {"why": "no"},
                }
            },
        ),
    ]
    assert all(i.related_request_id == rid for i in items)
    assert isinstance(items[0], OutgoingNotification)
    assert isinstance(items[1], OutgoingError)
    assert len(app.seen) == 1  # the handler is not re-run
    assert conn.in_flight == frozenset()
    assert conn.next_deadline() is None
    client.answer(2, ROOTS)  # too late
    (event,) = app.run()
    assert isinstance(event, UnexpectedResponse)
    assert event.response_id == 2
    assert client.take() == []


def test_a_leg_answered_with_a_malformed_error_still_fails_cleanly() -> None:
    _conn, client, app = session(one_question)
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    client.take()
    client.send({"jsonrpc": "2.0", "id": 0, "error": "nope"})
    app.run()
    (msg,) = client.take()
    assert msg["id"] == rid
    assert msg["error"]["code"] == -32603
    assert msg["error"]["message"].startswith(
        "The client answered elicitation/create with an error"
    )


@pytest.mark.parametrize("result", [5, "accept", None, [ACCEPT]])
def test_a_leg_result_that_is_not_an_object_fails_the_original(result: Any) -> None:
    _conn, client, app = session(one_question)
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    client.take()
    client.send({"jsonrpc": "2.0", "id": 0, "result": result})
    app.run()
    assert client.take() == [
        internal(rid, "The client's elicitation/create result is not an object")
    ]
    assert len(app.seen) == 1


def test_round_cap_fails_after_eight_rounds() -> None:
    def handler(event: RequestReceived) -> Any:
        return InputRequiredResult({f"q{event.round}": LOGIN}, request_state=event.round)

    conn, client, app = session(handler)
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    for leg_id in range(8):
        (leg,) = client.take()
        assert leg["id"] == leg_id
        client.answer(leg_id, ACCEPT)
        app.run()
    assert [e.round for e in app.seen] == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert client.take() == [
        internal(rid, "The handler still needed input after 8 rounds (legacy_max_rounds=8)")
    ]
    (event,) = app.other
    assert isinstance(event, RoundsExhausted)
    assert event.call is app.seen[0]
    assert event.rounds == 8
    assert event.last_result == {
        "resultType": "input_required",
        "inputRequests": {"q9": LOGIN.to_wire()},
        "requestState": 9,
    }
    assert conn.in_flight == frozenset()


def test_round_cap_is_configurable_and_counts_state_only_rounds() -> None:
    def handler(event: RequestReceived) -> Any:
        return InputRequiredResult(request_state="again")

    _conn, client, app = session(handler, legacy_max_rounds=3)
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    assert len(app.seen) == 4
    assert client.take() == [
        internal(rid, "The handler still needed input after 3 rounds (legacy_max_rounds=3)")
    ]
    (event,) = app.other
    assert isinstance(event, RoundsExhausted)
    assert event.rounds == 3


def test_capability_gate_fails_before_any_client_contact() -> None:
    def handler(event: RequestReceived) -> Any:
        return InputRequiredResult(
            {
                "form": LOGIN,
                "url": elicit_url("m", "https://x.example"),
                "llm": sample("q", 5, tools=[{"name": "t", "inputSchema": {"type": "object"}}]),
            }
        )

    conn, client, app = session(handler, {"elicitation": {}})
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    assert client.take() == [
        internal(
            rid,
            "The handler needs client capabilities this session did not declare: "
            "elicitation.url, sampling.tools",
            {
                "requiredCapabilities": {
                    "elicitation": {"form": {}, "url": {}},
                    "sampling": {"tools": {}},
                }
            },
        )
    ]
    assert conn.in_flight == frozenset()
    assert conn.next_deadline() is None


def test_capability_gate_runs_again_on_every_round() -> None:
    def handler(event: RequestReceived) -> Any:
        if event.round == 1:
            return InputRequiredResult({"a": LOGIN})
        return InputRequiredResult({"r": list_roots()})

    _conn, client, app = session(handler, {"elicitation": {"form": {}}})
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    (leg,) = client.take()
    client.answer(leg["id"], ACCEPT)
    app.run()
    assert client.take() == [
        internal(
            rid,
            "The handler needs client capabilities this session did not declare: roots",
            {"requiredCapabilities": {"roots": {}}},
        )
    ]


def test_opting_out_of_the_shim_restores_the_strict_rejection() -> None:
    _conn, client, app = session(one_question, legacy_shim=False)
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    assert client.take() == [
        internal(
            rid,
            "The handler needs client input, which this server can only request on the "
            "2026-07-28 protocol (input_required result)",
        )
    ]


def test_a_session_that_cannot_carry_server_requests_rejects_shim_needing_requests() -> None:
    conn = server(server_requests=False)
    client = ScriptedClient(conn)
    client.initialize()
    app = App(conn, one_question)
    app.run()
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    assert client.take() == [
        internal(
            rid,
            "The handler needs client input, which this server can only request on the "
            "2026-07-28 protocol (input_required result)",
        )
    ]


def test_a_leg_without_an_answer_times_out() -> None:
    clock = Clock()

    def handler(event: RequestReceived) -> Any:
        return InputRequiredResult({"a": LOGIN, "b": list_roots()})

    conn, client, app = session(handler, clock=clock, legacy_leg_timeout=30)
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    client.take()
    assert conn.next_deadline() == 1030.0
    client.answer(0, ACCEPT)
    conn.handle_timer(1029.999)
    assert client.take() == []
    clock.now = 1030.0
    conn.handle_timer(1030.0)
    items = client.take_items()
    assert [i.message for i in items] == [
        cancelled(1, "Timed out waiting for the client's answer"),
        internal(
            rid,
            "Timed out waiting for the client's answer to an input request "
            "(legacy_leg_timeout=30s)",
        ),
    ]
    assert all(i.related_request_id == rid for i in items)
    assert conn.next_deadline() is None
    assert conn.in_flight == frozenset()
    conn.handle_timer(5000.0)
    assert client.take() == []
    client.answer(1, ROOTS)
    (event,) = app.run()
    assert isinstance(event, UnexpectedResponse)
    assert len(app.seen) == 1


def test_each_round_gets_a_fresh_deadline() -> None:
    clock = Clock()

    def handler(event: RequestReceived) -> Any:
        return InputRequiredResult({"a": LOGIN}) if (event.round or 0) < 3 else TEXT

    conn, client, app = session(handler, clock=clock)
    client.request("tools/call", TARGET["tools/call"])
    app.run()
    assert conn.next_deadline() == 1600.0
    clock.now = 1500.0
    client.answer(0, ACCEPT)
    app.run()
    assert conn.next_deadline() == 2100.0
    conn.handle_timer(1600.0)
    assert [m["id"] for m in client.take()] == [0, 1]


def test_client_cancellation_cancels_every_outstanding_leg() -> None:
    def handler(event: RequestReceived) -> Any:
        return InputRequiredResult({"a": LOGIN, "b": sample("q", 5), "c": list_roots()})

    conn, client, app = session(handler)
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    client.take()
    client.answer(1, SAMPLED)
    client.cancel(rid, "never mind")
    items = client.take_items()
    assert [i.message for i in items] == [
        cancelled(0, "The original request was cancelled"),
        cancelled(2, "The original request was cancelled"),
    ]
    assert all(i.related_request_id == rid for i in items)
    assert app.run() == [RequestCancelled(rid, "never mind")]
    assert conn.in_flight == frozenset()
    assert conn.next_deadline() is None
    client.answer(0, ACCEPT)
    client.answer(2, ROOTS)
    assert [type(e) for e in app.run()] == [UnexpectedResponse, UnexpectedResponse]
    assert client.take() == []
    assert len(app.seen) == 1


def test_cancellation_after_the_last_answer_drops_the_late_handler_answer() -> None:
    conn = server()
    client = ScriptedClient(conn)
    client.initialize()
    conn.events()
    rid = client.request("tools/call", TARGET["tools/call"])
    (first,) = conn.events()
    assert isinstance(first, RequestReceived)
    conn.respond(rid, InputRequiredResult({"login": LOGIN}))
    client.take()
    client.answer(0, ACCEPT)
    client.cancel(rid)
    replay, gone = conn.events()
    assert isinstance(replay, RequestReceived)
    assert replay.round == 2
    assert gone == RequestCancelled(rid, None)
    conn.respond(rid, TEXT)  # the handler's late answer: dropped
    assert client.take() == []
    with pytest.raises(LocalProtocolError):  # the drop is once; the id is now unknown
        conn.respond(rid, InputRequiredResult({"login": LOGIN}))
    assert client.take() == []


def test_unknown_and_duplicate_leg_responses_are_reported_and_ignored() -> None:
    def handler(event: RequestReceived) -> Any:
        return InputRequiredResult({"a": LOGIN, "b": list_roots()}) if event.round == 1 else TEXT

    conn, client, app = session(handler)
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    client.take()
    client.answer(0, ACCEPT)
    client.answer(0, {"action": "decline"})  # duplicate: must not count for leg 1
    client.answer(99, {})  # unknown
    client.answer("1", ROOTS)  # a string id is not our integer id 1
    client.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "x"}})
    events = app.run()
    assert [type(e) for e in events] == [UnexpectedResponse] * 4
    assert [e.response_id for e in events] == [0, 99, "1", None]  # type: ignore[attr-defined]
    assert len(app.seen) == 1
    assert conn.in_flight == {rid}
    client.answer(1, ROOTS)
    app.run()
    assert app.seen[1].input_responses == {"a": ACCEPT, "b": ROOTS}
    assert client.take() == [{"jsonrpc": "2.0", "id": rid, "result": TEXT}]


def test_answers_arriving_out_of_order_are_collected_under_their_keys() -> None:
    keys = ["k0", "k1", "k2", "k3"]

    def handler(event: RequestReceived) -> Any:
        if event.round == 1:
            return InputRequiredResult(dict.fromkeys(keys, LOGIN))
        return TEXT

    _conn, client, app = session(handler)
    client.request("tools/call", TARGET["tools/call"])
    app.run()
    legs = client.take()
    assert [(m["id"], m["method"]) for m in legs] == [(i, "elicitation/create") for i in range(4)]
    for leg_id in (2, 0, 3, 1):
        assert len(app.seen) == 1
        client.answer(leg_id, {"action": "accept", "content": {"name": f"n{leg_id}"}})
        app.run()
    assert len(app.seen) == 2
    assert {k: v["content"]["name"] for k, v in app.seen[1].input_responses.items()} == {
        "k0": "n0",
        "k1": "n1",
        "k2": "n2",
        "k3": "n3",
    }


def test_several_shimmed_requests_interleave() -> None:
    def handler(event: RequestReceived) -> Any:
        name = event.name
        if event.round == 1:
            return InputRequiredResult({f"ask-{name}": LOGIN}, request_state=name)
        answer = event.input_responses.accepted_content(f"ask-{name}")
        assert answer is not None
        return {"content": [{"type": "text", "text": f"{name}:{answer['name']}"}]}

    conn, client, app = session(handler)
    r1 = client.request("tools/call", {"name": "one"})
    r2 = client.request("tools/call", {"name": "two"})
    r3 = client.request("tools/call", {"name": "three"})
    app.run()
    legs = client.take_items()
    assert [(i.request_id, i.related_request_id, i.key) for i in legs] == [  # type: ignore[attr-defined]
        (0, r1, "ask-one"),
        (1, r2, "ask-two"),
        (2, r3, "ask-three"),
    ]
    assert conn.in_flight == {r1, r2, r3}
    client.answer(2, {"action": "accept", "content": {"name": "C"}})
    client.answer(0, {"action": "accept", "content": {"name": "A"}})
    app.run()
    assert client.take() == [
        {"jsonrpc": "2.0", "id": r3, "result": {"content": [{"type": "text", "text": "three:C"}]}},
        {"jsonrpc": "2.0", "id": r1, "result": {"content": [{"type": "text", "text": "one:A"}]}},
    ]
    assert conn.in_flight == {r2}
    client.answer(1, {"action": "accept", "content": {"name": "B"}})
    app.run()
    assert client.take() == [
        {"jsonrpc": "2.0", "id": r2, "result": {"content": [{"type": "text", "text": "two:B"}]}}
    ]
    assert [e.request_state for e in app.seen if e.round == 2] == ["three", "one", "two"]


def test_client_and_server_id_spaces_do_not_mix() -> None:
    """The client may use id 0 for its own request while our leg 0 is pending."""
    _conn, client, app = session(one_question)
    r1 = client.request("tools/call", TARGET["tools/call"], request_id=0)
    app.run()
    (leg,) = client.take()
    assert leg["id"] == 0
    client.answer(0, ACCEPT)
    app.run()
    assert client.take() == [{"jsonrpc": "2.0", "id": r1, "result": TEXT}]


def test_pings_and_legs_share_one_id_space() -> None:
    conn, client, app = session(one_question)
    assert conn.ping() == 0
    client.request("tools/call", TARGET["tools/call"])
    app.run()
    assert [m.get("method") for m in client.take()] == ["ping", "elicitation/create"]
    assert conn.ping() == 2
    client.answer(2, {})
    client.answer(1, ACCEPT)
    client.answer(0, {})
    events = app.run()
    assert events == [PingAnswered(2, True), PingAnswered(0, True)]
    assert len(app.seen) == 2


# --- bounds ---------------------------------------------------------------------------------


def test_max_shimmed_requests() -> None:
    conn, client, app = session(one_question, limits=Limits(max_shimmed_requests=2))
    r1 = client.request("tools/call", TARGET["tools/call"])
    r2 = client.request("tools/call", TARGET["tools/call"])
    r3 = client.request("tools/call", TARGET["tools/call"])
    app.run()
    assert client.take() == [
        leg_message(0, LOGIN),
        leg_message(1, LOGIN),
        internal(r3, "Too many requests are waiting for input"),
    ]
    client.answer(0, ACCEPT)
    app.run()
    r4 = client.request("tools/call", TARGET["tools/call"])  # a slot is free again
    app.run()
    assert client.take() == [
        {"jsonrpc": "2.0", "id": r1, "result": TEXT},
        leg_message(2, LOGIN),
    ]
    assert conn.in_flight == {r2, r4}


def test_max_pending_legs() -> None:
    def handler(event: RequestReceived) -> Any:
        count = int(event.name or "0")
        return InputRequiredResult({f"k{i}": LOGIN for i in range(count)})

    conn, client, app = session(handler, limits=Limits(max_pending_legs=3))
    r1 = client.request("tools/call", {"name": "2"})
    r2 = client.request("tools/call", {"name": "2"})
    r3 = client.request("tools/call", {"name": "1"})
    app.run()
    assert client.take() == [
        leg_message(0, LOGIN),
        leg_message(1, LOGIN),
        internal(r2, "Too many requests to the client are pending"),
        leg_message(2, LOGIN),
    ]
    assert conn.in_flight == {r1, r3}


def test_legs_per_round_are_bounded_by_max_input_requests() -> None:
    conn, client, app = session(lambda e: None, limits=Limits(max_input_requests=2))
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    too_many = InputRequiredResult({"a": LOGIN, "b": LOGIN, "c": LOGIN})
    with pytest.raises(LocalProtocolError):
        conn.respond(rid, too_many)
    assert client.take() == []
    assert conn.in_flight == {rid}  # still open: the application can answer differently
    conn.respond(rid, InputRequiredResult({"a": LOGIN, "b": LOGIN}))
    assert len(client.take()) == 2


def test_answering_while_legs_are_pending_is_a_local_error() -> None:
    conn, client, app = session(one_question)
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    with pytest.raises(LocalProtocolError):
        conn.respond(rid, TEXT)
    (leg,) = client.take()
    client.answer(leg["id"], ACCEPT)
    app.run()
    assert client.take() == [{"jsonrpc": "2.0", "id": rid, "result": TEXT}]


# --- eras and the stream --------------------------------------------------------------------


def test_modern_requests_on_a_dual_era_connection_still_get_input_required() -> None:
    conn, client, app = session(
        lambda e: InputRequiredResult({"login": LOGIN}, request_state="s-1"),
        request_state=UNSEALED,  # to see the state on the wire
    )
    meta = {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES: {"elicitation": {}}}
    client.request("tools/call", {**TARGET["tools/call"], "_meta": meta}, request_id="m-1")
    app.run()
    (item,) = drain(conn, Era.MODERN)
    assert isinstance(item, OutgoingInputRequired)
    assert item.message == {
        "jsonrpc": "2.0",
        "id": "m-1",
        "result": {
            "resultType": "input_required",
            "inputRequests": {"login": LOGIN.to_wire()},
            "requestState": "s-1",
            "_meta": {"io.modelcontextprotocol/serverInfo": SERVER},
        },
    }
    assert conn.next_deadline() is None
    assert conn.in_flight == frozenset()


def test_closing_the_stream_drops_pending_legs() -> None:
    conn, client, app = session(one_question)
    client.request("tools/call", TARGET["tools/call"])
    app.run()
    client.take()
    conn.receive_data(b"")
    assert conn.next_deadline() is None
    assert client.take() == []  # nothing is written to a closed stream
    conn.handle_timer(1e12)
    assert client.take() == []


def test_closing_the_stream_forgets_requests_waiting_for_the_client() -> None:
    """A request waiting on legs can never complete; one whose replay is queued still can."""
    conn = server()
    client = ScriptedClient(conn)
    client.initialize()
    conn.events()
    waiting = client.request("tools/call", {"name": "a"})
    replayed = client.request("tools/call", {"name": "b"})
    conn.events()
    conn.respond(waiting, InputRequiredResult({"login": LOGIN}))
    conn.respond(replayed, InputRequiredResult({"login": LOGIN}))
    client.take()
    client.answer(1, ACCEPT)
    conn.receive_data(b"")
    assert conn.in_flight == {replayed}
    replay, _closed = conn.events()
    assert isinstance(replay, RequestReceived)
    assert replay.request_id == replayed
    conn.respond(replayed, TEXT)  # the application may still finish it
    with pytest.raises(LocalProtocolError):
        conn.respond(waiting, TEXT)


# --- before notifications/initialized -------------------------------------------------------


def uninitialized(handler: Any, **config: Any) -> tuple[Any, ScriptedClient, App]:
    conn = server(**config)
    client = ScriptedClient(conn)
    client.initialize(initialized=False)
    app = App(conn, handler)
    app.run()
    app.other.clear()
    return conn, client, app


def test_legs_wait_for_the_initialized_notification() -> None:
    """A server sends no request but ping before notifications/initialized (2025-11-25)."""
    clock = Clock()
    conn, client, app = uninitialized(one_question, clock=clock)
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    assert client.take() == []
    assert conn.in_flight == {rid}
    assert conn.next_deadline() == 1600.0
    client.answer(0, ACCEPT)  # a guess at an id we never wrote
    assert [type(e) for e in app.run()] == [UnexpectedResponse]
    clock.now = 1100.0
    client.notify("notifications/initialized")
    (leg,) = client.take_items()
    assert isinstance(leg, FulfilRequest)
    assert leg.message == leg_message(0, LOGIN)
    assert leg.related_request_id == rid
    assert conn.next_deadline() == 1700.0  # the clock starts when the client can see it
    client.answer(0, ACCEPT)
    app.run()
    assert client.take() == [{"jsonrpc": "2.0", "id": rid, "result": TEXT}]


def test_held_legs_are_never_cancelled_on_the_wire() -> None:
    conn, client, app = uninitialized(one_question)
    cancelled_rid = client.request("tools/call", TARGET["tools/call"])
    timed_out = client.request("tools/call", TARGET["tools/call"])
    app.run()
    client.cancel(cancelled_rid)
    conn.handle_timer(1600.0)
    assert client.take() == [
        internal(
            timed_out,
            "Timed out waiting for the client's answer to an input request "
            "(legacy_leg_timeout=600.0s)",
        )
    ]
    assert conn.next_deadline() is None
    client.notify("notifications/initialized")
    assert client.take() == []


def test_ping_does_not_wait_for_initialized() -> None:
    conn, client, _app = uninitialized(one_question)
    assert conn.ping() == 0
    assert client.take() == [{"jsonrpc": "2.0", "id": 0, "method": "ping"}]


# --- robustness -------------------------------------------------------------------------------


def test_an_unserializable_leg_changes_nothing() -> None:
    conn, client, _app = session(lambda e: None)
    rid = client.request("tools/call", TARGET["tools/call"])
    conn.events()
    bad = InputRequest("elicitation/create", {"message": object(), "requestedSchema": SCHEMA})
    with pytest.raises(LocalProtocolError):
        conn.respond(rid, InputRequiredResult({"ok": LOGIN, "bad": bad}))
    assert client.take() == []
    assert conn.in_flight == {rid}
    assert conn.next_deadline() is None
    conn.respond(rid, InputRequiredResult({"ok": LOGIN}))
    (leg,) = client.take()
    assert leg["params"] == LOGIN.params
    client.answer(leg["id"], ACCEPT)
    (replay,) = conn.events()
    assert isinstance(replay, RequestReceived)
    assert replay.round == 2


def test_a_null_elicitation_id_is_replaced() -> None:
    ask = InputRequest(
        "elicitation/create",
        {"mode": "url", "message": "m", "url": "https://x.example", "elicitationId": None},
    )
    _conn, client, app = session(lambda e: InputRequiredResult({"k": ask}))
    client.request("tools/call", TARGET["tools/call"])
    app.run()
    (leg,) = client.take()
    assert leg["params"]["elicitationId"] == "e" * 32


def test_a_wire_form_input_required_mapping_is_shimmed_too() -> None:
    def handler(event: RequestReceived) -> Any:
        if event.round == 1:
            return {
                "resultType": "input_required",
                "inputRequests": {"login": LOGIN.to_wire()},
                "requestState": "s",
            }
        return TEXT

    _conn, client, app = session(handler)
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    assert client.take() == [leg_message(0, LOGIN)]
    client.answer(0, ACCEPT)
    app.run()
    assert app.seen[1].request_state == "s"
    assert client.take() == [{"jsonrpc": "2.0", "id": rid, "result": TEXT}]


def test_local_cancel_withdraws_the_legs_on_the_wire() -> None:
    """ServerConnection.cancel (e.g. the HTTP stream is gone) acts like the client's cancel."""
    conn, client, app = session(one_question)
    rid = client.request("tools/call", TARGET["tools/call"])
    app.run()
    client.take()
    assert conn.cancel(rid, "The HTTP client disconnected") is True
    assert client.take() == [cancelled(0, "The original request was cancelled")]
    assert app.run() == [RequestCancelled(rid, "The HTTP client disconnected")]
    assert conn.cancel(rid) is False
    assert conn.next_deadline() is None


# --- properties -----------------------------------------------------------------------------


@given(
    plans=st.lists(
        st.lists(st.integers(min_value=0, max_value=3), min_size=0, max_size=3),
        min_size=1,
        max_size=4,
    ),
    data=st.data(),
)
@settings(max_examples=150, deadline=None)
def test_any_answer_order_completes_every_request_exactly_once(
    plans: list[list[int]], data: st.DataObject
) -> None:
    """Each request asks ``plan[r]`` questions in round r+1 (0 = state-only); the client
    answers pending legs in any order, with stray responses mixed in. Every request completes
    once, every replay sees exactly its round's keys, and no leg is cancelled or sent twice."""

    def handler(event: RequestReceived) -> Any:
        plan = plans[int(event.name or "0")]
        done = (event.round or 1) - 1
        if done >= len(plan):
            return {"content": [{"type": "text", "text": f"{event.name}:{done}"}]}
        count = plan[done]
        if count == 0:
            return InputRequiredResult(request_state=done)
        return InputRequiredResult(
            {f"r{done}k{i}": LOGIN for i in range(count)}, request_state=done
        )

    conn, client, app = session(handler)
    ids = [client.request("tools/call", {"name": str(i)}) for i in range(len(plans))]
    app.run()
    pending: dict[int, dict[str, Any]] = {}
    finals: dict[Any, dict[str, Any]] = {}
    sent: set[int] = set()
    strays = 0
    while True:
        for msg in client.take():
            if "method" in msg:
                assert msg["method"] == "elicitation/create"
                assert msg["id"] not in sent
                sent.add(msg["id"])
                pending[msg["id"]] = msg
            else:
                assert msg["id"] not in finals
                finals[msg["id"]] = msg
        if not pending:
            break
        if data.draw(st.booleans()):  # a duplicate answer to a finished leg, or a bogus id
            answered = sorted(sent - pending.keys())
            client.answer(data.draw(st.sampled_from([*answered, 10_000])), {})
            strays += 1
        leg_id = data.draw(st.sampled_from(sorted(pending)))
        del pending[leg_id]
        client.answer(leg_id, ACCEPT)
        app.run()
    assert set(finals) == set(ids)
    for i, rid in enumerate(ids):
        assert finals[rid]["result"]["content"][0]["text"] == f"{i}:{len(plans[i])}"
        replays = [e for e in app.seen if e.request_id == rid]
        assert [e.round for e in replays] == list(range(1, len(plans[i]) + 2))
        for e in replays[1:]:
            done = (e.round or 1) - 2
            assert set(e.input_responses) == {f"r{done}k{k}" for k in range(plans[i][done])}
            assert e.request_state == done
    assert conn.in_flight == frozenset()
    assert conn.next_deadline() is None
    assert [type(e) for e in app.other] == [UnexpectedResponse] * strays
