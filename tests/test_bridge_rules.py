"""The bridge's IO-free rules (``mrtr_sansio.bridge``), each against the spec rule it names."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mrtr_sansio as m
from helpers import Clock
from mrtr_sansio._mcp.session import LegacySession
from mrtr_sansio.bridge import (
    HOLD_META,
    UNKNOWN_TASK,
    UPSTREAMS_EXHAUSTED,
    BridgeLimits,
    BridgeRefusedError,
    HeldCalls,
    TaskOwners,
    UpstreamKey,
    answers_for,
    created_task,
    downstream_config,
    idle_upstreams,
    input_lane,
    input_required_for,
    legacy_error,
    mirrored_headers,
    notification_target,
    one_input_call_each,
    over_round_cap,
    owned_listing,
    relay_error,
    relay_params,
    task_refusal,
    upstream_capabilities,
    upstream_key,
    upstream_to_close,
)
from mrtr_sansio.protocol import CLIENT_CAPABILITIES, PROTOCOL_VERSION_KEY


def table(**limits: Any) -> tuple[HeldCalls[str], Clock]:
    clock = Clock()
    counter = iter(range(1000))
    return HeldCalls(BridgeLimits(**limits), clock, lambda n: f"id{next(counter)}"), clock


def test_holds_at_and_past_the_per_principal_and_total_bounds() -> None:
    holds, _ = table(max_held=3, max_held_per_principal=2)
    holds.hold("a", "a1")
    holds.hold("a", "a2")  # at the limit
    with pytest.raises(BridgeRefusedError) as past:
        holds.hold("a", "a3")
    assert past.value.error.data == {"reason": "bridge_holds_exhausted"}
    holds.hold("b", "b1")  # another principal's share; the whole table is now full
    with pytest.raises(BridgeRefusedError):
        holds.hold("c", "c1")
    assert len(holds) == 3


def test_a_hold_is_its_principals_only_and_ends_at_its_deadline() -> None:
    holds, clock = table(hold_timeout=10.0)
    hold_id = holds.hold("alice", "call")
    for who in ("mallory", None):
        with pytest.raises(BridgeRefusedError) as refused:
            holds.get(hold_id, who)
        assert refused.value.error.code == -32602
    with pytest.raises(BridgeRefusedError):
        holds.get("guess", "alice")
    clock.now += 9.9
    assert holds.get(hold_id, "alice") == "call"  # renewed: 10 s from now
    clock.now += 9.9
    assert holds.expire() == []
    assert holds.next_deadline() == pytest.approx(clock.now + 0.1)
    clock.now += 0.1  # exactly at the deadline: gone
    with pytest.raises(BridgeRefusedError):
        holds.get(hold_id, "alice")
    assert holds.expire() == ["call"]
    assert len(holds) == 0


def test_a_hold_in_use_is_renewed_rather_than_expired() -> None:
    holds, clock = table(hold_timeout=1.0)
    holds.hold(None, "busy")
    holds.hold(None, "idle")
    clock.now += 1.0
    assert holds.expire(keep=lambda v: v == "busy") == ["idle"]
    assert len(holds) == 1


def test_relayed_params_drop_the_downstream_round_and_envelope() -> None:
    """DIGEST §2.5: the same params; the upstream client makes its own envelope and retry
    fields (items 3-5); a downstream's hold tag is never trusted."""
    params = {
        "name": "t",
        "arguments": {"x": 1},
        "inputResponses": {"k": {}},
        "requestState": "s",
        "_meta": {
            PROTOCOL_VERSION_KEY: "2026-07-28",
            CLIENT_CAPABILITIES: {},
            HOLD_META: "forged",
            "progressToken": 7,
        },
    }
    assert relay_params(params) == {
        "name": "t",
        "arguments": {"x": 1},
        "_meta": {"progressToken": 7},
    }
    tagged = relay_params(params, "h1")
    assert tagged["_meta"] == {"progressToken": 7, HOLD_META: "h1"}
    assert relay_params({"uri": "u", "_meta": {PROTOCOL_VERSION_KEY: "x"}}) == {"uri": "u"}


def test_capabilities_declared_upstream_are_what_the_downstream_declared() -> None:
    """S7 / §3: only the three embedded-request capabilities, as the downstream gave them."""
    caps = {"elicitation": {"url": {}}, "roots": {"listChanged": True}, "experimental": {"x": {}}}
    assert upstream_capabilities(caps) == {
        "elicitation": {"url": {}},
        "roots": {"listChanged": True},
    }
    params = {"_meta": {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES: caps}}
    a = upstream_key(m.RequestReceived(1, "tools/call", params, principal="a"))
    b = upstream_key(m.RequestReceived(1, "tools/call", params, principal="b"))
    assert a != b  # never shared across principals
    assert a.capabilities == b.capabilities


def test_a_round_goes_down_under_its_upstream_keys_with_the_hold_as_state() -> None:
    call = m.Call(1, "tools/call", {})
    needs = [
        m.InputNeeded(call, "name", "elicitation/create", {"message": "?"}, 1),
        m.InputNeeded(call, 7, "roots/list", {}, 1),  # a legacy server's request id
    ]
    result = input_required_for(needs, "h1")
    assert set(result.input_requests or {}) == {"name", "7"}
    assert result.request_state == "h1"
    assert input_required_for([], "h1").input_requests is None  # state-only (S6, C1)
    answered = m.InputResponses({"name": {"action": "accept", "content": {}}, "7": {"roots": []}})
    assert answers_for(needs, answered) == [{"action": "accept", "content": {}}, {"roots": []}]
    assert answers_for(needs, m.InputResponses({"name": {"action": "decline"}})) is None  # S13


def test_the_round_cap_is_the_shims_on_a_legacy_session_only() -> None:
    config = m.ServerConfig(legacy_max_rounds=2)
    modern = m.RequestReceived(1, "tools/call", {}, round=None)
    assert not over_round_cap(modern, config)
    session = LegacySession("2025-11-25", {}, None)
    at = m.RequestReceived(1, "tools/call", {}, session=session, round=2)
    past = m.RequestReceived(1, "tools/call", {}, session=session, round=3)
    assert not over_round_cap(at, config)  # the second run may still ask: round 2 of 2
    assert over_round_cap(past, config)


def test_errors_relay_as_they_are_unless_the_bridge_made_them() -> None:
    assert relay_error(-32602, "bad", {"x": 1}, local=False) == m.JsonRpcError(
        -32602, "bad", {"x": 1}
    )
    local = relay_error(-32000, "closed", None, local=True)
    assert local.code == -32603
    assert local.data == {"reason": "bridge_upstream_failed"}


def test_a_legacy_downstream_gets_minus_32603_for_an_upstream_minus_32021() -> None:
    """-32021 is modern only (DIGEST §3.4): a legacy client reads the shim's code, with the
    capabilities still named; other codes pass unchanged."""
    missing = m.JsonRpcError.missing_capability({"elicitation": {}})
    legacy = legacy_error(missing)
    assert legacy.code == m.ErrorCode.INTERNAL_ERROR
    assert legacy.message == missing.message
    assert legacy.data == {"requiredCapabilities": {"elicitation": {}}}
    for other in (m.JsonRpcError.invalid_params("bad"), m.JsonRpcError(-32000, "x", [1])):
        assert legacy_error(other) is other


def test_initialize_and_discover_come_from_the_upstreams_facts() -> None:
    config = downstream_config(
        m.ServerConfig(),
        {"name": "up", "version": "2"},
        {"tools": {}, "extensions": {"x": {}}},
        "hi",
    )
    assert config.server_info == {"name": "up", "version": "2"}
    assert dict(config.capabilities) == {"tools": {}}
    assert config.instructions == "hi"


def test_the_upstream_tools_header_annotations_are_checked_downstream() -> None:
    """SEP-2243: the downstream server checks ``Mcp-Param-*`` against the upstream's tools,
    since the upstream sees only the headers the bridge's client writes anew."""
    region = {"type": "string", "x-mcp-header": "Region"}
    tools = [
        {"name": "query", "inputSchema": {"type": "object", "properties": {"region": region}}},
        {"name": "plain", "inputSchema": {"type": "object", "properties": {"q": {}}}},
        {"name": "bad", "inputSchema": {"x-mcp-header": "Root"}},  # unusable: left out
    ]
    assert mirrored_headers(tools) == {"query": {"Region": ("region",)}}
    config = downstream_config(m.ServerConfig(), None, {"tools": {}}, None, tools)
    assert dict(config.param_headers) == {"query": {"Region": ("region",)}}


def test_an_expired_hold_frees_its_place_and_is_still_returned_for_cancelling() -> None:
    holds, clock = table(max_held_per_principal=1, hold_timeout=1.0)
    holds.hold("a", "old")
    clock.now += 1.0
    holds.hold("a", "new")  # the expired one does not count against the bound
    assert holds.expire() == ["old"]  # ... and is still handed back, to be cancelled upstream


OPS = st.lists(
    st.tuples(
        st.sampled_from(["hold", "get", "release", "tick", "expire"]),
        st.sampled_from(["a", "b", None]),
        st.integers(0, 20),
    ),
    max_size=60,
)


@settings(deadline=None)  # a busy 2-core machine: time is not the property
@given(OPS)
def test_no_sequence_exceeds_a_bound_or_reaches_another_principals_hold(ops: Any) -> None:
    holds, clock = table(max_held=4, max_held_per_principal=2, hold_timeout=5.0)
    owners: dict[str, str | None] = {}
    for op, who, n in ops:
        ids = sorted(owners)
        if op == "hold":
            made, refused = _attempt(holds.hold, who, f"v{n}")
            if made is not None:
                owners[made] = who
            else:
                assert refused == {"reason": "bridge_holds_exhausted"}
        elif op == "get" and ids:
            hold_id = ids[n % len(ids)]
            live_before = _live(holds, hold_id)
            got, refused = _attempt(holds.get, hold_id, who)
            if got is not None:  # only its owner's, and only while live
                assert owners[hold_id] == who
                assert live_before
            else:
                assert refused == {"reason": "bridge_hold_unknown"}
        elif op == "release" and ids:
            holds.release(ids[n % len(ids)])
            del owners[ids[n % len(ids)]]
        elif op == "tick":
            clock.now += n / 4
        elif op == "expire":
            holds.expire()
        owners = {k: v for k, v in owners.items() if k in _ids(holds)}  # released, expired
        live = [k for k in owners if _live(holds, k)]
        assert len(live) <= 4
        for principal in ("a", "b", None):
            assert sum(1 for k in live if owners[k] == principal) <= 2


def _attempt(op: Any, *args: Any) -> tuple[Any, Any]:
    """``(op(*args), None)``, or ``(None, the refusal's data)``."""
    try:
        return op(*args), None
    except BridgeRefusedError as exc:
        return None, exc.error.data


def _ids(holds: HeldCalls[str]) -> set[str]:
    return set(holds._holds)


def _live(holds: HeldCalls[str], hold_id: str) -> bool:
    return holds._holds[hold_id].deadline > holds._clock()


# --- tasks (ext-tasks, "Security Considerations": auth binding) -------------------------------

TASKS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def test_task_ids_are_bounded_per_principal_and_in_all_at_and_past_the_limits() -> None:
    owners = TaskOwners(max_tasks=3, max_per_principal=2)
    owners.bind("a", "t1")
    owners.bind("a", "t2")  # at a's bound: both kept
    assert owners.owns("a", "t1")
    assert owners.owns("a", "t2")
    assert len(owners) == 2
    owners.bind("a", "t3")  # past it: a's least recently used (t1) forgotten
    assert not owners.owns("a", "t1")
    assert owners.owns("a", "t2")
    assert owners.owns("a", "t3")
    owners.bind("b", "u1")  # at the total bound
    assert len(owners) == 3
    owners.bind("c", "v1")  # past it: the least recently used of all (t2) forgotten
    assert len(owners) == 3
    assert not owners.owns("a", "t2")
    assert owners.owns("a", "t3")
    assert owners.owns("b", "u1")
    assert owners.owns("c", "v1")


def test_a_task_id_is_only_its_creators() -> None:
    owners = TaskOwners(max_tasks=8, max_per_principal=8)
    owners.bind("a", "t1")
    owners.bind("b", "t1")  # an upstream reusing an id does not hand it to another
    assert owners.owns("a", "t1")
    assert not owners.owns("b", "t1")
    assert not owners.owns(None, "t1")
    assert not owners.owns("a", 7)
    assert not owners.owns("a", None)
    assert len(owners) == 1


def test_task_requests_are_refused_unless_declared_and_owned() -> None:
    owners = TaskOwners(max_tasks=8, max_per_principal=8)
    owners.bind("a", "t1")
    get = "tasks/get"
    assert task_refusal(owners, "a", get, {"taskId": "t1"}, TASKS) is None
    for principal, params in [("b", {"taskId": "t1"}), ("a", {"taskId": "t2"}), ("a", {})]:
        assert task_refusal(owners, principal, get, params, TASKS) == UNKNOWN_TASK
        assert task_refusal(owners, principal, get, params, {}, legacy=True) == UNKNOWN_TASK
    assert task_refusal(owners, "a", "tasks/list", {}, TASKS) == UNKNOWN_TASK  # not modern
    assert task_refusal(owners, "b", "tasks/list", {}, {}, legacy=True) is None  # cut below
    assert task_refusal(owners, "a", "tasks/result", {"taskId": "t1"}, {}, legacy=True) is None
    missing = task_refusal(owners, "a", get, {"taskId": "t1"}, {"elicitation": {}})
    assert missing is not None
    assert missing.code == m.ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert UNKNOWN_TASK.code == -32602


def test_created_task_reads_a_create_task_result_only() -> None:
    assert created_task({"resultType": "task", "taskId": "t1", "status": "working"}) == "t1"
    assert created_task({"resultType": "complete", "taskId": "t1"}) is None
    assert created_task({"resultType": "task", "taskId": 3}) is None
    assert created_task({"content": []}) is None
    legacy = {"task": {"taskId": "t1", "status": "working"}}  # 2025-11-25
    assert created_task(legacy, legacy=True) == "t1"
    assert created_task(legacy) is None  # a modern result's "task" field is not one
    assert created_task({"task": "t1"}, legacy=True) is None
    assert created_task({"content": []}, legacy=True) is None


def test_a_legacy_task_listing_is_cut_to_the_senders_tasks() -> None:
    owners = TaskOwners(max_tasks=8, max_per_principal=8)
    owners.bind("a", "t1")
    owners.bind("b", "t2")
    listing = {"tasks": [{"taskId": "t1"}, {"taskId": "t2"}, {"taskId": "t3"}], "nextCursor": "c"}
    assert owned_listing(listing, owners, "a") == {"tasks": [{"taskId": "t1"}], "nextCursor": "c"}
    assert owned_listing(listing, owners, "c")["tasks"] == []
    assert owned_listing({"tasks": "junk"}, owners, "a") == {"tasks": []}


def test_the_tasks_extension_is_declared_upstream_and_downstream_only_when_each_side_does() -> None:
    assert upstream_capabilities({"elicitation": {}, **TASKS}) == {"elicitation": {}, **TASKS}
    other: dict[str, Any] = {"extensions": {"io.example/other": {}}}
    assert upstream_capabilities({"roots": {}, **other}) == {"roots": {}}
    both = {"tools": {}, "extensions": {**TASKS["extensions"], "io.example/other": {}}}
    assert downstream_config(m.ServerConfig(), None, both, None).capabilities == {
        "tools": {},
        **TASKS,
    }
    assert downstream_config(m.ServerConfig(), None, {"tools": {}, **other}, None).capabilities == {
        "tools": {}
    }


def test_a_task_requests_own_input_responses_are_relayed() -> None:
    answers = {"k": {"action": "accept"}}
    params = {"taskId": "t1", "inputResponses": answers}
    assert relay_params(params, method="tasks/update") == params
    assert "inputResponses" not in relay_params({"name": "x", "inputResponses": answers})


# --- upstream connections ----------------------------------------------------------------------


def key(principal: str | None, session: str | None = None) -> UpstreamKey:
    return UpstreamKey(principal, session, "{}")


def test_an_upstream_is_closed_to_make_room_only_at_a_bound_and_only_when_idle() -> None:
    limits = BridgeLimits(max_upstreams=3, max_upstreams_per_principal=2)
    a1, a2, b1, a3 = key("a", "1"), key("a", "2"), key("b", "1"), key("a", "3")
    assert upstream_to_close(a3, [(a1, 0, 5.0)], limits) is None  # under both
    # at a's bound: a's longest idle goes, never b's
    assert upstream_to_close(a3, [(a1, 0, 5.0), (a2, 0, 2.0), (b1, 0, 0.0)], limits) == a2
    assert upstream_to_close(a3, [(a1, 1, 5.0), (a2, 0, 9.0), (b1, 0, 0.0)], limits) == a2
    # at the total bound (c has none): the longest idle of all
    assert upstream_to_close(key("c"), [(a1, 0, 5.0), (a2, 1, 2.0), (b1, 0, 1.0)], limits) == b1
    with pytest.raises(BridgeRefusedError) as refused:  # at a bound, every one in use
        upstream_to_close(a3, [(a1, 1, 5.0), (a2, 2, 2.0)], limits)
    assert refused.value.error == UPSTREAMS_EXHAUSTED
    assert UPSTREAMS_EXHAUSTED.data == {"reason": "bridge_upstreams_exhausted"}


def test_idle_upstreams_are_those_unused_for_the_timeout() -> None:
    limits = BridgeLimits(upstream_idle_timeout=10.0)
    a, b, c = key("a"), key("b"), key("c")
    uses = [(a, 0, 0.0), (b, 0, 1.0), (c, 1, 0.0)]
    assert idle_upstreams(uses, 10.0, limits) == [a]  # at the timeout; b just under; c in use
    assert idle_upstreams(uses, 11.0, limits) == [a, b]


def test_only_a_stdio_legacy_upstream_takes_one_input_call_at_a_time() -> None:
    assert one_input_call_each(True, "legacy")
    assert not one_input_call_each(True, "modern")  # its requests name their call in _meta
    assert not one_input_call_each(False, "legacy")  # on HTTP each rides its call's stream
    assert not one_input_call_each(True, None)


def test_an_input_call_takes_the_first_free_lane_else_the_least_busy() -> None:
    limits = BridgeLimits(max_upstreams_per_principal=3)
    a = key("a")
    lane = [UpstreamKey("a", None, "{}", i) for i in range(3)]
    assert input_lane(a, {}, limits) == lane[0]
    assert input_lane(a, {lane[0]: 1}, limits) == lane[1]
    assert input_lane(a, {lane[0]: 1, lane[1]: 0}, limits) == lane[1]  # open but free
    assert input_lane(a, {lane[0]: 1, lane[2]: 2, lane[1]: 1}, limits) == lane[0]  # all busy
    assert input_lane(a, {key("b"): 0, lane[0]: 1}, limits) == lane[1]  # b's lanes are b's
    # never past the per-principal bound: the calls then go in turn on the least busy lane
    assert input_lane(a, dict.fromkeys(lane, 1), limits) == lane[0]
    # a legacy downstream session keeps its one upstream session
    assert input_lane(key("a", "s"), {key("a", "s"): 1}, limits) == key("a", "s")


def test_an_upstream_notification_goes_only_to_the_request_it_is_about() -> None:
    waiting: list[dict[str, Any]] = [{"progressToken": 1}, {"progressToken": "t"}, {}]
    assert notification_target("notifications/progress", {"progressToken": "t"}, waiting) == 1
    assert notification_target("notifications/progress", {"progressToken": 9}, waiting) is None
    assert notification_target("notifications/progress", None, waiting) is None
    log = {"level": "info", "data": "x"}
    assert notification_target("notifications/message", log, waiting) is None  # whose?
    assert notification_target("notifications/message", log, [{}]) == 0
    assert notification_target("notifications/tasks", {"taskId": "t"}, [{}]) is None
