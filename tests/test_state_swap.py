"""SwappableStateProtector: a key ring replaced while connections run, through ServerConnection.

Two connections stand for two server processes behind a load balancer: a token sealed by one is
retried on the other, at every step of the documented rotation ``[old]`` -> ``[old, new]`` ->
``[new, old]`` -> ``[new]``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import helpers
from helpers import FORM_ONLY, INVALID_STATE_ERROR, drain
from mrtr_sansio import (
    Era,
    InputRequiredResult,
    InvalidMessage,
    RequestReceived,
    RequestStateRejected,
    ServerConfig,
    ServerConnection,
    elicit_form,
)
from mrtr_sansio.sealing import (
    HmacSha256Codec,
    OpenedState,
    RequestStateError,
    RequestStateSecurity,
    StateBinding,
    SwappableStateProtector,
)

OLD, NEW, OTHER = bytes(range(32)), bytes(range(1, 33)), bytes(range(2, 34))
T0 = 1_800_000_000.0
ARGS = {"destination": "Lisbon"}
FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
BINDING = StateBinding("tools/call", "book", ARGS, None)


def ring(*keys: bytes) -> RequestStateSecurity:
    return RequestStateSecurity(keys, ttl=60.0)


def instance(protector: SwappableStateProtector) -> ServerConnection:
    config = ServerConfig(
        server_info={"name": "s", "version": "1"}, request_state=protector, clock=lambda: T0
    )
    return ServerConnection(config)


call = partial(helpers.call, name="book", arguments=ARGS, envelope=FORM_ONLY)


def ask(conn: ServerConnection, rid: int, *, token: str | None = None) -> str:
    """One leg that asks for input again: the handler sees the previous state (if a token was
    sent) and keeps a new one; returns the token it was sealed into."""
    extra: dict[str, Any] = {}
    if token is not None:
        extra = {"inputResponses": {"ok": {"action": "accept", "content": {"ok": True}}}}
        extra["requestState"] = token
    conn.receive_message(call(rid, **extra))
    [request] = conn.events()
    assert isinstance(request, RequestReceived)
    expected = None if token is None else {"leg": rid - 1}
    assert request.request_state == expected
    conn.respond(rid, InputRequiredResult({"ok": elicit_form("Go?", FORM)}, {"leg": rid}))
    [out] = drain(conn, Era.MODERN, methods={rid: "tools/call"})
    sealed: str = out.message["result"]["requestState"]
    return sealed


def refused(conn: ServerConnection, rid: int, token: str) -> str:
    """Retry with ``token`` and expect the invalid-state answer; returns the logged reason."""
    answers = {"ok": {"action": "accept", "content": {"ok": True}}}
    conn.receive_message(call(rid, inputResponses=answers, requestState=token))
    rejected, invalid = conn.events()
    assert isinstance(rejected, RequestStateRejected)
    assert isinstance(invalid, InvalidMessage)
    assert (invalid.request_id, invalid.answered) == (rid, True)
    [out] = drain(conn, Era.MODERN, methods={rid: "tools/call"})
    assert out.message == {"jsonrpc": "2.0", "id": rid, "error": INVALID_STATE_ERROR}
    return rejected.reason


def sealed_by(token: str) -> set[bytes]:
    """Which of the keys sealed ``token`` (each alone as a ring: only its own tokens open)."""
    found = set()
    for key in (OLD, NEW, OTHER):
        try:
            HmacSha256Codec([key]).unseal(token)
        except RequestStateError:
            continue
        found.add(key)
    return found


def test_rotation_phases_across_two_instances_drop_no_token() -> None:
    a = SwappableStateProtector(ring(OLD))
    b = SwappableStateProtector(ring(OLD))
    conn_a, conn_b = instance(a), instance(b)
    t1 = ask(conn_a, 1)
    assert sealed_by(t1) == {OLD}
    # Phase 2 reaches A first: B still seals with OLD, and A accepts it.
    a.swap(ring(OLD, NEW))
    t2 = ask(conn_b, 2, token=t1)
    t3 = ask(conn_a, 3, token=t2)
    assert sealed_by(t2) == sealed_by(t3) == {OLD}  # [old, new] still seals with old
    b.swap(ring(OLD, NEW))
    # Phase 3 reaches B first: B seals with NEW, which A ([old, new]) already accepts.
    b.swap(ring(NEW, OLD))
    t4 = ask(conn_b, 4, token=t3)
    assert sealed_by(t4) == {NEW}
    t5 = ask(conn_a, 5, token=t4)
    assert sealed_by(t5) == {OLD}
    a.swap(ring(NEW, OLD))
    t6 = ask(conn_b, 6, token=t5)  # an OLD token still opens in phase 3
    t7 = ask(conn_a, 7, token=t6)
    assert sealed_by(t6) == sealed_by(t7) == {NEW}
    # Phase 4 (once every OLD token has expired): NEW only.
    a.swap(ring(NEW))
    b.swap(ring(NEW))
    t8 = ask(conn_b, 8, token=t7)
    assert sealed_by(t8) == {NEW}
    assert refused(conn_a, 9, t1) == "unknown_key"  # a token sealed in phase 1 is void now


def test_skipping_a_phase_breaks_retries_across_instances() -> None:
    """Why the phases exist: an instance that seals with a key another does not know yet
    hands out tokens that fail there."""
    a = SwappableStateProtector(ring(OLD))
    b = SwappableStateProtector(ring(OLD))
    a.swap(ring(NEW, OLD))  # [old] -> [new, old] directly on A
    token = ask(instance(a), 1)
    assert sealed_by(token) == {NEW}
    assert refused(instance(b), 2, token) == "unknown_key"


def test_a_connection_built_before_the_swap_uses_the_new_protector() -> None:
    """One stream connection serves many modern requests; a swap reaches it at once."""
    protector = SwappableStateProtector(ring(OLD))
    conn = instance(protector)
    before = ask(conn, 1)
    previous = protector.swap(ring(NEW))
    assert isinstance(previous, RequestStateSecurity)
    assert refused(conn, 2, before) == "unknown_key"
    after = ask(conn, 3)
    assert sealed_by(after) == {NEW}
    assert protector.current is not previous


def test_swap_returns_the_replaced_protector_and_forwards_every_argument() -> None:
    seen: list[tuple[Any, ...]] = []

    class Recorder:
        def seal(self, state: Any, binding: StateBinding, round: int, now: float) -> str:
            seen.append(("seal", state, binding, round, now))
            return "token"

        def unseal(self, token: str, binding: StateBinding, now: float) -> OpenedState:
            seen.append(("unseal", token, binding, now))
            return OpenedState({"x": 1}, 3)

    first, second = Recorder(), Recorder()
    protector = SwappableStateProtector(first)
    assert protector.current is first
    assert protector.seal({"s": 1}, BINDING, 2, 5.0) == "token"
    assert protector.swap(second) is first
    assert protector.current is second
    assert protector.unseal("t", BINDING, 6.0) == OpenedState({"x": 1}, 3)
    assert seen == [("seal", {"s": 1}, BINDING, 2, 5.0), ("unseal", "t", BINDING, 6.0)]


def test_refuses_what_cannot_protect_state_or_would_recurse() -> None:
    for bad in (None, "key", object(), type("SealOnly", (), {"seal": lambda *a: ""})()):
        with pytest.raises(TypeError, match=r"seal\(\) and unseal\(\)"):
            SwappableStateProtector(bad)  # type: ignore[arg-type]
    protector = SwappableStateProtector(ring(OLD))
    with pytest.raises(TypeError, match="itself"):
        protector.swap(protector)
    outer = SwappableStateProtector(protector)  # nesting is fine ...
    with pytest.raises(TypeError, match="itself"):
        protector.swap(outer)  # ... a cycle is not
    assert isinstance(protector.current, RequestStateSecurity)  # a refused swap changes nothing
    token = outer.seal({"a": 1}, BINDING, 1, T0)
    assert outer.unseal(token, BINDING, T0) == OpenedState({"a": 1}, 1)


KEYS = (OLD, NEW, OTHER)
rings = st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True)


@given(st.lists(st.tuples(rings, rings), min_size=1, max_size=6))
def test_a_token_opens_exactly_where_its_sealing_key_is_in_the_ring(
    steps: list[tuple[list[bytes], list[bytes]]],
) -> None:
    """Whatever rings are swapped in, a token sealed under one ring opens under another iff
    the second holds the first one's sealing key."""
    protector = SwappableStateProtector(ring(OLD))
    for sealing, opening in steps:
        protector.swap(ring(*sealing))
        token = protector.seal({"n": 1}, BINDING, 1, T0)
        protector.swap(ring(*opening))
        if sealing[0] in opening:
            assert protector.unseal(token, BINDING, T0) == OpenedState({"n": 1}, 1)
        else:
            with pytest.raises(RequestStateError, match="unknown_key"):
                protector.unseal(token, BINDING, T0)
