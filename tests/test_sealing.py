"""RequestStateSecurity: the envelope, its binding, expiry, rotation, replay, size and errors."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_sansio import LocalProtocolError
from mrtr_sansio.config import OrjsonCodec, StdlibJsonCodec
from mrtr_sansio.sealing import (
    REQUEST_STATE_REASONS,
    MemoryReplayGuard,
    OpenedState,
    RequestStateError,
    RequestStateSecurity,
    StateBinding,
    StateProtector,
)
from mrtr_sansio.sealing._codecs import b64url_decode, b64url_encode
from mrtr_sansio.sealing._envelope import canonical_chunks, hash_texts, state_chunks

OLD = bytes(range(32))
NEW = bytes(range(100, 132))
NOW = 1_800_000_000.0
ARGS = {"workItemId": 4522, "fields": {"System.State": "Resolved"}}
BINDING = StateBinding("tools/call", "update_work_item", ARGS, "user-1")
CODECS = ["hmac-sha256", "aes-256-gcm"]

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def security(codec: str = "hmac-sha256", **options: Any) -> RequestStateSecurity:
    return RequestStateSecurity([OLD], codec=codec, **options)  # type: ignore[arg-type]


def reason_of(
    sec: RequestStateSecurity, token: Any, binding: StateBinding = BINDING, now: float = NOW
) -> str:
    with pytest.raises(RequestStateError) as info:
        sec.unseal(token, binding, now)
    assert info.value.reason in REQUEST_STATE_REASONS
    return info.value.reason


class PlainCodec:
    """A codec that authenticates nothing, to reach the envelope checks directly; it records
    every call so that tests can prove which work was (not) done."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def seal(self, payload: bytes) -> str:
        self.calls.append("seal")
        return b64url_encode(payload)

    def unseal(self, token: str) -> bytes:
        self.calls.append("unseal")
        raw = b64url_decode(token)
        if raw is None:
            raise RequestStateError("malformed")
        return raw


def test_is_a_state_protector() -> None:
    sec: StateProtector = security()
    assert isinstance(sec.unseal(sec.seal(1, BINDING, 1, NOW), BINDING, NOW), OpenedState)


# --- round trips ----------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@given(state=JSON_VALUES, round_=st.integers(1, 2**32 - 1))
def test_round_trip_any_json_state(codec: str, state: Any, round_: int) -> None:
    sec = security(codec)
    token = sec.seal(state, BINDING, round_, NOW)
    assert isinstance(token, str)
    assert b64url_decode(token) is not None
    unsealed = sec.unseal(token, BINDING, NOW + 1)
    assert unsealed == OpenedState(state, round_)


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_awkward_strings(codec: str) -> None:
    sec = security(codec)
    # (Two lone surrogates that form a pair come back as one character: JSON cannot tell.)
    for state in ["", "\ud800", "\udfff!", "\x00", "é" * 50, {"😀": ["\u2028"]}, 2**200, -0.0]:
        assert sec.unseal(sec.seal(state, BINDING, 1, NOW), BINDING, NOW).state == state


def _dump_state(value: Any) -> str:
    return "".join(state_chunks(value, 0))


def _dump_canonical(value: Any) -> str:
    return "".join(canonical_chunks(value, 0))


def test_state_json_is_compact_ascii() -> None:
    assert _dump_state({"a": ["é", 1.5]}) == json.dumps(
        {"a": ["é", 1.5]}, separators=(",", ":"), ensure_ascii=True
    )


@given(JSON_VALUES)
def test_fast_encoders_match_the_public_encoder(value: Any) -> None:
    common: dict[str, Any] = {"separators": (",", ":"), "ensure_ascii": True, "allow_nan": False}
    assert _dump_state(value) == json.dumps(value, **common)
    assert _dump_canonical(value) == json.dumps(value, sort_keys=True, **common)


JSON_VALUES_64 = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(JSON_VALUES_64)
def test_a_json_codec_can_replace_the_state_json_and_instances_may_differ(state: Any) -> None:
    fast = security(json_codec=OrjsonCodec())
    strict = security(json_codec=StdlibJsonCodec())
    default = security()
    for sealer in (fast, strict, default):
        token = sealer.seal(state, BINDING, 2, NOW)
        for unsealer in (fast, strict, default):
            assert unsealer.unseal(token, BINDING, NOW) == OpenedState(state, 2)


def test_json_codec_errors() -> None:
    with pytest.raises(LocalProtocolError, match="not a JSON value"):
        security(json_codec=OrjsonCodec()).seal({1, 2}, BINDING, 1, NOW)
    with pytest.raises(LocalProtocolError, match="not a JSON value"):
        security(json_codec=OrjsonCodec()).seal(2**70, BINDING, 1, NOW)
    codec = PlainCodec()
    payload = b64url_decode(RequestStateSecurity(codec=codec).seal(1, BINDING, 1, NOW))
    assert payload is not None
    broken = b64url_encode(payload[:-1] + b"}")
    fast = RequestStateSecurity(codec=codec, json_codec=OrjsonCodec())
    assert reason_of(fast, broken) == "malformed_state"


# --- tampering ------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=300)
@given(data=st.data())
def test_any_single_character_edit_is_rejected(codec: str, data: st.DataObject) -> None:
    sec = security(codec)
    token = sec.seal({"resolution": "Duplicate"}, BINDING, 1, NOW)
    edit = data.draw(st.sampled_from(["flip", "insert", "delete"]))
    where = data.draw(st.integers(0, len(token) - (0 if edit == "insert" else 1)))
    if edit == "flip":
        char = data.draw(st.characters(codec="ascii").filter(lambda c: c != token[where]))
        tampered = token[:where] + char + token[where + 1 :]
    elif edit == "insert":
        tampered = token[:where] + data.draw(st.characters(codec="ascii")) + token[where:]
    else:
        tampered = token[:where] + token[where + 1 :]
    assert reason_of(sec, tampered) in {
        "malformed",
        "truncated",
        "unsupported_version",
        "unknown_key",
        "bad_tag",
    }


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=200)
@given(data=st.data())
def test_any_single_byte_edit_is_rejected(codec: str, data: st.DataObject) -> None:
    sec = security(codec)
    raw = b64url_decode(sec.seal({"resolution": "Duplicate"}, BINDING, 1, NOW))
    assert raw is not None
    where = data.draw(st.integers(0, len(raw) - 1))
    flip = data.draw(st.integers(1, 255))
    tampered = raw[:where] + bytes([raw[where] ^ flip]) + raw[where + 1 :]
    inserted = raw[:where] + bytes([flip]) + raw[where:]
    deleted = raw[:where] + raw[where + 1 :]
    for candidate in (tampered, inserted, deleted):
        assert reason_of(sec, b64url_encode(candidate)) in {
            "truncated",
            "unsupported_version",
            "unknown_key",
            "bad_tag",
        }


@pytest.mark.parametrize("codec", CODECS)
def test_each_failure_has_its_reason(codec: str) -> None:
    sec = security(codec, audience="https://a.example")
    token = sec.seal({"resolution": "Duplicate"}, BINDING, 1, NOW)
    assert sec.unseal(token, BINDING, NOW).state == {"resolution": "Duplicate"}

    assert reason_of(sec, token[:-10]) in {"bad_tag", "malformed"}
    assert reason_of(sec, token[:8]) == "truncated"
    assert reason_of(sec, "") == "empty"
    assert reason_of(sec, None) == "not_a_string"
    assert reason_of(sec, b"bytes") == "not_a_string"
    assert reason_of(sec, token + "=") == "malformed"
    impossible_length = token + "A" * ((1 - len(token)) % 4)
    assert len(impossible_length) % 4 == 1
    assert reason_of(sec, impossible_length) == "malformed"
    assert reason_of(sec, "é" + token) == "malformed"
    raw = b64url_decode(token)
    assert raw is not None
    assert reason_of(sec, b64url_encode(b"\x09" + raw[1:])) == "unsupported_version"
    other_key = RequestStateSecurity([NEW], codec=codec, audience="https://a.example")  # type: ignore[arg-type]
    assert reason_of(sec, other_key.seal(1, BINDING, 1, NOW)) == "unknown_key"

    assert reason_of(sec, token, now=NOW + 600) == "expired"
    assert reason_of(sec, token, now=math.nan) == "expired"
    assert sec.unseal(token, BINDING, NOW + 599.999).round == 1

    def bound(**changes: Any) -> StateBinding:
        fields = {
            "method": BINDING.method,
            "target": BINDING.target,
            "arguments": BINDING.arguments,
            "principal": BINDING.principal,
        }
        return StateBinding(**{**fields, **changes})

    assert reason_of(sec, token, bound(method="prompts/get")) == "method_mismatch"
    assert reason_of(sec, token, bound(target="delete_work_item")) == "target_mismatch"
    assert reason_of(sec, token, bound(target=None)) == "target_mismatch"
    assert reason_of(sec, token, bound(arguments={**ARGS, "workItemId": 4523})) == (
        "arguments_mismatch"
    )
    assert reason_of(sec, token, bound(arguments=None)) == "arguments_mismatch"
    assert reason_of(sec, token, bound(arguments={1, 2})) == "arguments_mismatch"
    assert reason_of(sec, token, bound(principal="user-2")) == "principal_mismatch"
    assert reason_of(sec, token, bound(principal=None)) == "principal_mismatch"
    other_audience = RequestStateSecurity([OLD], codec=codec, audience="https://b.example")  # type: ignore[arg-type]
    assert reason_of(other_audience, token) == "audience_mismatch"
    assert reason_of(security(codec), token) == "audience_mismatch"


@pytest.mark.parametrize("codec", CODECS)
def test_no_arguments_and_empty_arguments_bind_apart(codec: str) -> None:
    """None, ``{}`` (an empty mapping of any type) and ``[]`` are different arguments: a token
    sealed for one is refused for the others, by a fresh instance (no memory) too."""
    if codec == "aes-256-gcm":
        pytest.importorskip("cryptography")

    class Args(dict[str, Any]):
        pass

    cases: list[Any] = [None, {}, [], {"a": 1}]
    for sealed_for in cases:
        sec = security(codec)
        token = sec.seal("s", StateBinding("tools/call", "t", sealed_for, None), 1, NOW)
        for checked in (*cases, Args() if sealed_for == {} else Args(a=1)):
            binding = StateBinding("tools/call", "t", checked, None)
            same = type(checked) is type(sealed_for) or isinstance(checked, Args)
            same = same and checked == sealed_for
            for verifier in (sec, security(codec)):
                if same:
                    assert verifier.unseal(token, binding, NOW).state == "s"
                else:
                    assert reason_of(verifier, token, binding) == "arguments_mismatch"


def test_arguments_digest_ignores_key_order_only() -> None:
    sec = security()
    token = sec.seal("s", BINDING, 1, NOW)
    reordered = {"fields": {"System.State": "Resolved"}, "workItemId": 4522}
    assert sec.unseal(token, StateBinding("tools/call", BINDING.target, reordered, "user-1"), NOW)
    for different in ({"workItemId": 4522.0, "fields": ARGS["fields"]}, {}, [ARGS], "x"):
        wrong = StateBinding("tools/call", BINDING.target, different, "user-1")
        assert reason_of(sec, token, wrong) == "arguments_mismatch"
    empty = StateBinding("tools/call", "t", {}, None)
    assert reason_of(sec, sec.seal(1, empty, 1, NOW), StateBinding("tools/call", "t", None, None))


def test_string_fields_cannot_run_into_each_other() -> None:
    sec = security()
    token = sec.seal(1, StateBinding("x/y", "ab", None, None), 1, NOW)
    assert reason_of(sec, token, StateBinding("x/ya", "b", None, None)) == "target_mismatch"
    assert hash_texts(b"t", "", None).digest() != hash_texts(b"t", None, "").digest()
    assert hash_texts(b"t", "\x00").digest() != hash_texts(b"t", None).digest()


def test_unknown_methods_are_bound_through_the_target_digest() -> None:
    sec = security()
    token = sec.seal(1, StateBinding("x/one", "t", None, None), 1, NOW)
    assert sec.unseal(token, StateBinding("x/one", "t", None, None), NOW).state == 1
    assert reason_of(sec, token, StateBinding("x/two", "t", None, None)) == "target_mismatch"
    wrong_method = StateBinding("tools/call", "t", None, None)
    assert reason_of(sec, token, wrong_method) == "method_mismatch"


def test_identity_cache_stays_bounded_and_correct() -> None:
    sec = security()
    first = StateBinding("tools/call", "tool-first", None, "p")
    early = sec.seal("first", first, 1, NOW)
    for i in range(1100):
        binding = StateBinding("tools/call", f"tool-{i}", None, f"p{i % 7}")
        assert sec.unseal(sec.seal(i, binding, 1, NOW), binding, NOW).state == i
    # The cache of identities is a map fed by peers' target names: its bound has no public
    # view, so this one reach-in stays (invariant 6: every peer-fed map is bounded).
    assert len(sec._identities) <= 1024
    # A token sealed before the cache was cleared still unseals.
    assert sec.unseal(early, first, NOW).state == "first"


# --- the arguments digest reused from unseal to seal ----------------------------------------


def test_seal_reuses_what_unseal_verified_even_if_the_handler_changed_it() -> None:
    sec = security()
    args = {"workItemId": 4522}
    binding = StateBinding("tools/call", "t", args, None)
    token = sec.seal("round 1", binding, 1, NOW)
    assert sec.unseal(token, binding, NOW).state == "round 1"
    args["workItemId"] = 9999  # a handler edits the request it was given
    token2 = sec.seal("round 2", binding, 2, NOW)
    # Bound to what the client sent, which is what its retry will carry again.
    original = StateBinding("tools/call", "t", {"workItemId": 4522}, None)
    assert sec.unseal(token2, original, NOW).state == "round 2"


def test_unseal_never_trusts_a_remembered_digest() -> None:
    sec = security()
    args = {"workItemId": 4522}
    binding = StateBinding("tools/call", "t", args, None)
    token = sec.seal("s", binding, 1, NOW)
    sec.unseal(token, binding, NOW)
    args["workItemId"] = 1
    assert reason_of(sec, token, binding) == "arguments_mismatch"


def test_a_reused_digest_is_released_after_one_seal() -> None:
    sec = security()
    args = {"a": 1}
    binding = StateBinding("tools/call", "t", args, None)
    sec.unseal(sec.seal("s", binding, 1, NOW), binding, NOW)
    sec.seal("s", binding, 2, NOW)
    args["a"] = 2
    token = sec.seal("s", binding, 3, NOW)  # computed afresh: binds {"a": 2}
    assert sec.unseal(token, StateBinding("tools/call", "t", {"a": 2}, None), NOW).round == 3


# --- rotation, ephemeral keys ---------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_rotation_phases_through_the_envelope(codec: str) -> None:
    def ring(*keys: bytes) -> RequestStateSecurity:
        return RequestStateSecurity(list(keys), codec=codec)  # type: ignore[arg-type]

    old, old_new, new_old, new = ring(OLD), ring(OLD, NEW), ring(NEW, OLD), ring(NEW)
    from_old = old.seal("o", BINDING, 1, NOW)
    from_old_new = old_new.seal("o", BINDING, 1, NOW)
    from_new_old = new_old.seal("n", BINDING, 1, NOW)
    from_new = new.seal("n", BINDING, 1, NOW)
    accepted = {
        # phase: tokens it must accept (every other one is refused with unknown_key)
        "old": (old, {from_old, from_old_new}),
        "old+new": (old_new, {from_old, from_old_new, from_new_old, from_new}),
        "new+old": (new_old, {from_old, from_old_new, from_new_old, from_new}),
        "new": (new, {from_new_old, from_new}),
    }
    for sec, tokens in accepted.values():
        for token in (from_old, from_old_new, from_new_old, from_new):
            if token in tokens:
                assert sec.unseal(token, BINDING, NOW).state in {"o", "n"}
            else:
                assert reason_of(sec, token) == "unknown_key"


def test_ephemeral_keys_are_per_instance() -> None:
    a = RequestStateSecurity.ephemeral(ttl=30.0, audience="x")
    b = RequestStateSecurity.ephemeral()
    token = a.seal({"k": 1}, BINDING, 1, NOW)
    assert a.unseal(token, BINDING, NOW).state == {"k": 1}
    assert a.ttl == 30.0
    assert a.audience == "x"
    assert reason_of(b, token) == "unknown_key"
    assert "instance" in (RequestStateSecurity.ephemeral.__doc__ or "")


def test_ephemeral_key_comes_from_token_bytes() -> None:
    sec = RequestStateSecurity.ephemeral(token_bytes=lambda n: b"\x05" * n)
    twin = RequestStateSecurity([b"\x05" * 32])
    assert twin.unseal(sec.seal(1, BINDING, 1, NOW), BINDING, NOW).state == 1


# --- envelope internals, through a codec that authenticates nothing -------------------------


def test_envelope_layout() -> None:
    codec = PlainCodec()
    sec = RequestStateSecurity(codec=codec, ttl=60, token_bytes=lambda n: b"\x11" * n)
    payload = b64url_decode(sec.seal({"a": 1}, BINDING, 7, NOW))
    assert payload is not None
    version, round_, expires, token_id = struct.unpack_from(">BId16s", payload)
    assert (version, round_, expires, token_id) == (1, 7, NOW + 60, b"\x11" * 16)
    assert payload[29] == 1  # tools/call
    assert payload[29 + 1 + 6 + 16 :] == b'{"a":1}'


def test_envelope_rejections() -> None:
    codec = PlainCodec()
    sec = RequestStateSecurity(codec=codec)
    payload = b64url_decode(sec.seal({"a": 1}, BINDING, 1, NOW))
    assert payload is not None
    assert reason_of(sec, b64url_encode(payload[:51])) == "malformed_envelope"
    assert reason_of(sec, b64url_encode(b"\x03" + payload[1:])) == "unsupported_envelope_version"
    assert reason_of(sec, b64url_encode(payload + b" ")) == "malformed_state"
    assert reason_of(sec, b64url_encode(payload[:-1])) == "malformed_state"
    assert reason_of(sec, b64url_encode(payload[:52] + b"\xff")) == "malformed_state"
    assert reason_of(sec, b64url_encode(payload[:52] + b"[" * 20_000)) == "malformed_state"
    zero_round = payload[:1] + b"\x00\x00\x00\x00" + payload[5:]
    assert reason_of(sec, b64url_encode(zero_round)) == "malformed_state"


def test_the_digest_decides_not_the_hints() -> None:
    sec = RequestStateSecurity(codec=PlainCodec())
    mine = StateBinding("tools/call", "t", {"a": 1}, "alice")
    theirs = StateBinding("tools/call", "t", {"a": 1}, "mallory")
    payload = b64url_decode(sec.seal("s", mine, 1, NOW))
    other = b64url_decode(sec.seal("s", theirs, 1, NOW))
    assert payload is not None
    assert other is not None
    # Give alice's token mallory's hints: only the digest still tells them apart.
    forged = payload[:29] + other[29:36] + payload[36:]
    assert reason_of(sec, b64url_encode(forged), theirs) == "arguments_mismatch"
    assert reason_of(sec, b64url_encode(payload), theirs) == "principal_mismatch"


def test_codec_misbehaviour_fails_closed() -> None:
    class Broken:
        def __init__(self, result: Any) -> None:
            self.result = result

        def seal(self, payload: bytes) -> str:
            return "t"

        def unseal(self, token: str) -> bytes:
            if isinstance(self.result, Exception):
                raise self.result
            return self.result  # type: ignore[no-any-return]

    assert reason_of(RequestStateSecurity(codec=Broken(KeyError("kms"))), "t") == "codec_error"
    with pytest.raises(RequestStateError, match="mine"):
        RequestStateSecurity(codec=Broken(RequestStateError("mine"))).unseal("t", BINDING, NOW)
    assert reason_of(RequestStateSecurity(codec=Broken("str")), "t") == "malformed_envelope"
    assert reason_of(RequestStateSecurity(codec=Broken(bytearray(200))), "t") == (
        "malformed_envelope"
    )


# --- size limit: checked before any work ----------------------------------------------------


def test_oversized_tokens_never_reach_the_codec() -> None:
    codec = PlainCodec()
    sec = RequestStateSecurity(codec=codec, max_token_bytes=200)
    assert reason_of(sec, "A" * 201) == "oversized"
    assert reason_of(sec, "é" * 201) == "oversized"
    assert reason_of(sec, "A" * 10**6) == "oversized"
    assert codec.calls == []
    assert reason_of(sec, "A" * 200) != "oversized"
    assert codec.calls == ["unseal"]


def test_default_limit_is_64_kib() -> None:
    sec = security()
    assert sec.max_token_bytes == 64 * 1024
    assert reason_of(sec, "A" * (64 * 1024 + 1)) == "oversized"


def test_sealing_refuses_a_token_it_would_not_accept_back() -> None:
    sec = security(max_token_bytes=300)
    sec.seal("x" * 50, BINDING, 1, NOW)
    with pytest.raises(LocalProtocolError, match="max_token_bytes"):
        sec.seal("x" * 500, BINDING, 1, NOW)


# --- replay guard ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_replay_guard_rejects_a_second_use(codec: str) -> None:
    sec = security(codec, replay_guard=MemoryReplayGuard())
    token = sec.seal({"voucher": "A1"}, BINDING, 1, NOW)
    assert sec.unseal(token, BINDING, NOW).state == {"voucher": "A1"}
    assert reason_of(sec, token) == "replayed"
    # Another token for the same state is another redemption.
    assert sec.unseal(sec.seal({"voucher": "A1"}, BINDING, 1, NOW), BINDING, NOW)


def test_replay_guard_sees_only_valid_tokens_with_their_id_and_expiry() -> None:
    seen: list[tuple[bytes, float, float]] = []

    class Recorder:
        def consume(self, token_id: bytes, expires: float, now: float) -> bool:
            seen.append((token_id, expires, now))
            return True

    sec = RequestStateSecurity(
        [OLD], ttl=60, replay_guard=Recorder(), token_bytes=lambda n: b"\x01" * n
    )
    token = sec.seal(1, BINDING, 1, NOW)
    reason_of(sec, token, StateBinding("tools/call", "other", ARGS, "user-1"))
    reason_of(sec, token, now=NOW + 61)
    assert seen == []
    sec.unseal(token, BINDING, NOW + 5)
    assert seen == [(b"\x01" * 16, NOW + 60, NOW + 5)]


def test_memory_replay_guard_forgets_expired_ids() -> None:
    guard = MemoryReplayGuard(max_entries=10)
    assert guard.consume(b"a", 100.0, 0.0)
    assert not guard.consume(b"a", 100.0, 50.0)
    assert guard.consume(b"b", 200.0, 50.0)
    assert len(guard) == 2
    assert guard.consume(b"c", 300.0, 150.0)  # "a" expired and is forgotten
    assert len(guard) == 2
    # The clock stepping back cannot revive a forgotten id.
    assert not guard.consume(b"a", 100.0, 10.0)


def test_memory_replay_guard_is_bounded_and_fails_closed() -> None:
    guard = MemoryReplayGuard(max_entries=3)
    for i in range(3):
        assert guard.consume(bytes([i]), 100.0 + i, 0.0)
    assert guard.consume(b"new", 200.0, 0.0)  # evicts id 0 (expiry 100)
    assert len(guard) == 3
    assert not guard.consume(bytes([0]), 100.0, 0.0)  # forgotten, still refused
    assert not guard.consume(b"never seen", 99.0, 0.0)  # cannot be vouched for
    assert guard.consume(b"later", 150.0, 0.0)
    # Full again: making room forgets id 2 (expiry 102), so a token expiring before it,
    # though above the floor so far (101), can no longer be vouched for.
    assert not guard.consume(b"early", 101.5, 0.0)
    # The refusal recorded nothing: the same id, expiring later, is still a first use.
    assert guard.consume(b"early", 300.0, 0.0)
    assert not guard.consume(b"early", 300.0, 0.0)
    for i in range(1000):
        guard.consume(i.to_bytes(4, "big"), 1000.0 + i, 0.0)
    assert len(guard) == 3


def test_memory_replay_guard_validates_size() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        MemoryReplayGuard(0)


# --- sealing errors and configuration -------------------------------------------------------


@pytest.mark.parametrize("state", [{1, 2}, math.nan, math.inf, b"bytes", object()])
def test_non_json_state_is_a_local_error(state: Any) -> None:
    with pytest.raises(LocalProtocolError, match="not a JSON value"):
        security().seal(state, BINDING, 1, NOW)


def test_cyclic_state_is_a_local_error() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(LocalProtocolError, match="not a JSON value"):
        security().seal(cyclic, BINDING, 1, NOW)


def test_unbindable_arguments_are_a_local_error() -> None:
    binding = StateBinding("tools/call", "t", {"x": math.nan}, None)
    with pytest.raises(LocalProtocolError, match="arguments"):
        security().seal(1, binding, 1, NOW)


@pytest.mark.parametrize("round_", [0, -1, 2**32, 1.0, True, None])
def test_round_must_be_a_positive_u32(round_: Any) -> None:
    with pytest.raises(LocalProtocolError, match="round"):
        security().seal(1, BINDING, round_, NOW)


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"keys": None}, ValueError, "keys are required"),
        ({"codec": "rot13"}, ValueError, "unknown codec"),
        ({"codec": PlainCodec()}, ValueError, "not both"),
        ({"ttl": 0}, ValueError, "ttl"),
        ({"ttl": -5.0}, ValueError, "ttl"),
        ({"ttl": math.inf}, ValueError, "ttl"),
        ({"ttl": True}, ValueError, "ttl"),
        ({"ttl": "600"}, ValueError, "ttl"),
        ({"audience": 5}, TypeError, "audience"),
        ({"max_token_bytes": 0}, ValueError, "max_token_bytes"),
        ({"max_token_bytes": 1.5}, ValueError, "max_token_bytes"),
        ({"keys": [b"short"]}, ValueError, "32"),
    ],
)
def test_configuration_is_validated(options: dict[str, Any], error: type, match: str) -> None:
    kwargs: dict[str, Any] = {"keys": [OLD], **options}
    with pytest.raises(error, match=match):
        RequestStateSecurity(**kwargs)


@pytest.mark.parametrize("codec", CODECS)
def test_token_bytes_must_give_what_was_asked(codec: str) -> None:
    sec = security(codec, token_bytes=lambda n: b"x" * (n - 1))
    with pytest.raises(ValueError, match="token_bytes"):
        sec.seal(1, BINDING, 1, NOW)


def test_bring_your_own_codec() -> None:
    codec = PlainCodec()
    sec = RequestStateSecurity(codec=codec, audience="me")
    assert sec.codec is codec
    assert sec.unseal(sec.seal([1, "two"], BINDING, 3, NOW), BINDING, NOW) == OpenedState(
        [1, "two"], 3
    )
    assert codec.calls == ["seal", "unseal"]


def test_reasons_are_all_listed() -> None:
    assert {
        "bad_tag",
        "expired",
        "replayed",
        "oversized",
        "principal_mismatch",
    } <= REQUEST_STATE_REASONS
    assert all(r.isidentifier() and r.islower() for r in REQUEST_STATE_REASONS)


# --- the observer's carry (envelope version 2) ------------------------------------------


def test_a_carry_is_sealed_beside_the_state_and_returned() -> None:
    sec = RequestStateSecurity(keys=[b"k" * 32])
    carry = {"flow": "f", "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    token = sec.seal({"a": 1}, BINDING, 2, NOW, carry=carry)
    opened = sec.unseal(token, BINDING, NOW)
    assert (opened.state, opened.round, opened.carried) == ({"a": 1}, 2, carry)
    assert sec.unseal(sec.seal({"a": 1}, BINDING, 2, NOW), BINDING, NOW).carried is None


@pytest.mark.parametrize("carry", [{"flow": 1}, {1: "x"}, {"flow": "x" * 0x10000}])
def test_a_carry_that_is_not_short_strings_is_refused(carry: Any) -> None:
    with pytest.raises(LocalProtocolError, match="carry"):
        RequestStateSecurity(keys=[b"k" * 32]).seal("s", BINDING, 1, NOW, carry=carry)


def test_malformed_carries_fail_closed() -> None:
    sec = RequestStateSecurity(codec=PlainCodec())
    payload = b64url_decode(sec.seal("s", BINDING, 1, NOW, carry={"f": "v"}))
    assert payload is not None
    head, rest = payload[:52], payload[52:]
    size = int.from_bytes(rest[:2], "big")
    carry, state = rest[2 : 2 + size], rest[2 + size :]
    assert carry == b'{"f":"v"}'
    assert state == b'"s"'

    def with_carry(data: bytes, declared: int | None = None) -> str:
        n = len(data) if declared is None else declared
        return b64url_encode(head + n.to_bytes(2, "big") + data + state)

    assert reason_of(sec, b64url_encode(head + b"\x00")) == "malformed_envelope"
    assert reason_of(sec, with_carry(b'{"f":"v"}', 500)) == "malformed_envelope"
    assert reason_of(sec, with_carry(b"{not json")) == "malformed_envelope"
    assert reason_of(sec, with_carry(b'["f"]')) == "malformed_envelope"
    assert reason_of(sec, with_carry(b'{"f":1}')) == "malformed_envelope"
    assert sec.unseal(with_carry(b'{"g":"w"}'), BINDING, NOW).carried == {"g": "w"}
