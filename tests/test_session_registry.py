"""The legacy HTTP session registry: ownership, idle expiry, per-principal and global caps."""

from __future__ import annotations

from typing import Any

import pytest

from mrtr_sansio import ServerConfig
from mrtr_sansio._server.registry import Admission, SessionRegistry


def registry(
    max_sessions: int = 4, max_per_principal: int = 2, idle_timeout: float = 10.0
) -> SessionRegistry[str]:
    return SessionRegistry(
        max_sessions=max_sessions, max_per_principal=max_per_principal, idle_timeout=idle_timeout
    )


def test_defaults_are_documented_values() -> None:
    config = ServerConfig()
    assert (config.max_sessions, config.max_sessions_per_principal) == (1024, 64)
    assert config.session_idle_timeout == 1800.0


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("max_sessions", 0),
        ("max_sessions_per_principal", 0),
        ("session_idle_timeout", 0),
        ("session_idle_timeout", -1.0),
    ],
)
def test_config_refuses_non_positive_bounds(field: str, bad: float) -> None:
    values: dict[str, Any] = {field: bad}
    with pytest.raises(ValueError, match=rf"^{field}: must be a positive"):
        ServerConfig(**values)


def test_a_session_belongs_to_its_principal() -> None:
    reg = registry()
    assert reg.open("s1", "alice's", "alice", 0.0) == Admission(True)
    assert "s1" in reg
    assert "s2" not in reg
    assert list(reg) == ["s1"]
    assert reg.get("s1", "alice") == "alice's"
    assert reg.get("s1", "bob") is None
    assert reg.get("s1", None) is None  # an unauthenticated caller is someone else too
    assert reg.get("nope", "alice") is None
    reg.open("s2", "anon", None, 0.0)
    assert reg.get("s2", None) == "anon"
    assert reg.get("s2", "alice") is None


def test_reusing_a_live_id_is_a_bug() -> None:
    reg = registry()
    reg.open("s1", "a", "alice", 0.0)
    with pytest.raises(ValueError, match="already in use"):
        reg.open("s1", "b", "bob", 0.0)


def test_idle_session_expires_at_the_timeout_not_before() -> None:
    reg = registry(idle_timeout=10.0)
    reg.open("s1", "one", "alice", 100.0)
    assert reg.next_deadline() == 110.0
    assert reg.expire(109.999) == []
    assert reg.get("s1", "alice") == "one"
    assert reg.expire(110.0) == ["one"]
    assert reg.get("s1", "alice") is None
    assert reg.next_deadline() is None
    assert len(reg) == 0


def test_a_busy_session_does_not_expire_and_its_idle_time_restarts() -> None:
    reg = registry(idle_timeout=10.0)
    reg.open("s1", "one", None, 0.0)
    reg.enter("s1")
    reg.enter("s1")  # two exchanges at once
    assert reg.next_deadline() is None
    assert reg.expire(1000.0) == []
    reg.leave("s1", 1000.0)
    assert reg.next_deadline() is None  # one exchange is still open
    reg.leave("s1", 1005.0)
    assert reg.next_deadline() == 1015.0
    assert reg.expire(1014.0) == []
    assert reg.expire(1015.0) == ["one"]


def test_expiry_takes_the_longest_idle_first_and_stops_at_the_first_alive() -> None:
    reg = registry(idle_timeout=10.0)
    reg.open("a", "A", None, 0.0)
    reg.open("b", "B", None, 1.0)
    reg.open("c", "C", None, 2.0)
    reg.enter("a")
    reg.leave("a", 3.0)  # "a" is now the most recently active
    assert reg.expire(12.0) == ["B", "C"]
    assert reg.values() == ["A"]


def test_closed_sessions_ignore_late_bookkeeping() -> None:
    reg = registry()
    reg.open("s1", "one", "alice", 0.0)
    reg.enter("s1")
    assert reg.close("s1") == "one"
    reg.leave("s1", 5.0)  # the exchange that was open when DELETE came
    reg.enter("s1")
    assert reg.close("s1") is None
    assert len(reg) == 0
    assert reg.open("s2", "two", "alice", 6.0).accepted


def test_global_cap_admits_up_to_the_limit_then_evicts_the_longest_idle() -> None:
    reg = registry(max_sessions=3, max_per_principal=3)
    for n in range(3):  # at the limit: every one admitted, nothing evicted
        assert reg.open(f"s{n}", f"v{n}", None, float(n)) == Admission(True)
    reg.enter("s0")
    reg.leave("s0", 10.0)  # s1 is now the longest idle
    assert reg.open("s3", "v3", None, 11.0) == Admission(True, ("v1",))  # one past
    assert sorted(reg.values()) == ["v0", "v2", "v3"]
    assert reg.get("s1", None) is None


def test_global_cap_refuses_the_newcomer_only_when_nothing_is_idle() -> None:
    reg = registry(max_sessions=2, max_per_principal=2)
    reg.open("s0", "v0", None, 0.0)
    reg.open("s1", "v1", "bob", 0.0)
    reg.enter("s0")
    reg.enter("s1")
    assert reg.open("s2", "v2", "carol", 1.0) == Admission(False)
    assert sorted(reg.values()) == ["v0", "v1"]  # nothing changed
    reg.leave("s1", 2.0)
    assert reg.open("s2", "v2", "carol", 3.0) == Admission(True, ("v1",))


def test_per_principal_cap_evicts_only_that_principals_own_longest_idle() -> None:
    reg = registry(max_sessions=10, max_per_principal=2)
    reg.open("b0", "bob0", "bob", 0.0)
    reg.open("a0", "alice0", "alice", 1.0)
    reg.open("a1", "alice1", "alice", 2.0)  # at alice's limit
    reg.enter("a0")
    reg.leave("a0", 3.0)  # a1 is alice's longest idle now
    assert reg.open("a2", "alice2", "alice", 4.0) == Admission(True, ("alice1",))
    assert sorted(reg.values()) == ["alice0", "alice2", "bob0"]  # bob untouched


def test_per_principal_cap_refuses_when_all_of_hers_are_busy() -> None:
    reg = registry(max_sessions=10, max_per_principal=1)
    reg.open("a0", "alice0", "alice", 0.0)
    reg.open("b0", "bob0", "bob", 0.0)  # idle, but bob's: never evicted for alice
    reg.enter("a0")
    assert reg.open("a1", "alice1", "alice", 1.0) == Admission(False)
    assert sorted(reg.values()) == ["alice0", "bob0"]
    assert reg.open("c0", "carol0", "carol", 1.0) == Admission(True)


def test_anonymous_sessions_have_no_per_principal_cap() -> None:
    reg = registry(max_sessions=5, max_per_principal=1)
    for n in range(5):
        assert reg.open(f"s{n}", str(n), None, 0.0) == Admission(True)
    assert len(reg) == 5


def test_a_principal_with_no_sessions_left_is_forgotten() -> None:
    reg = registry(max_per_principal=1)
    reg.open("a0", "x", "alice", 0.0)
    assert reg.close("a0") == "x"
    assert reg.open("a1", "y", "alice", 1.0) == Admission(True)
    assert reg.expire(11.0) == ["y"]
    assert reg.open("a2", "z", "alice", 12.0) == Admission(True)
