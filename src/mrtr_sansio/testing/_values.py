"""Strategies for well-formed and malformed MRTR wire values (see :mod:`.strategies`)."""

from __future__ import annotations

import string
from functools import cache
from typing import Any

from hypothesis import strategies as st

from mrtr_sansio.protocol import (
    CLIENT_CAPABILITIES,
    CLIENT_INFO,
    LATEST_MODERN_VERSION,
    PROTOCOL_VERSION_KEY,
)
from mrtr_sansio.tasks import EXTENSION as TASKS_EXTENSION

__all__ = [
    "FULL_CAPABILITIES",
    "MAX_SAFE_INTEGER",
    "client_capabilities",
    "client_infos",
    "invalid_client_capabilities",
    "invalid_envelopes",
    "invalid_request_ids",
    "invalid_request_states",
    "json_values",
    "modern_envelopes",
    "modern_requests",
    "request_ids",
    "request_states",
    "tampered_states",
]

Json = Any
Strategy = st.SearchStrategy

#: Largest integer every JSON implementation represents exactly (2**53 - 1).
MAX_SAFE_INTEGER = 2**53 - 1
#: Capabilities that allow every embedded request kind.
FULL_CAPABILITIES: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}, "context": {}},
    "roots": {},
}

_KEY_ALPHABET = string.ascii_letters + string.digits + "_-."

# --- JSON building blocks -----------------------------------------------------------------


@cache
def short_texts(max_size: int = 24) -> Strategy[str]:
    return st.text(max_size=max_size)


@cache
def short_names(max_size: int = 16) -> Strategy[str]:
    return st.text(_KEY_ALPHABET, min_size=1, max_size=max_size)


@cache
def json_values(max_leaves: int = 8) -> Strategy[Json]:
    """Any JSON value that every codec round-trips (safe integers, finite floats)."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
        st.floats(allow_nan=False, allow_infinity=False),
        short_texts(),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(short_texts(8), inner, max_size=4)
        ),
        max_leaves=max_leaves,
    )


@cache
def _json_objects(max_leaves: int = 6) -> Strategy[dict[str, Json]]:
    return st.dictionaries(short_texts(8), json_values(max_leaves), max_size=3)


@cache
def not_an_object(*, null: bool = True, array: bool = True) -> Strategy[Json]:
    """JSON values that are not objects (``null`` and arrays only when asked for)."""
    kinds: list[Strategy[Json]] = [st.booleans(), st.integers(), short_texts()]
    if null:
        kinds.append(st.none())
    if array:
        kinds.append(st.lists(json_values(3), max_size=2))
    return st.one_of(kinds)


@cache
def not_a_string(*, null: bool = True) -> Strategy[Json]:
    kinds: list[Strategy[Json]] = [
        st.booleans(),
        st.integers(),
        st.lists(short_texts(4), max_size=2),
        _json_objects(2),
    ]
    if null:
        kinds.append(st.none())
    return st.one_of(kinds)


# --- JSON-RPC -----------------------------------------------------------------------------


@cache
def request_ids() -> Strategy[str | int]:
    """JSON-RPC ids as MCP allows them: strings (any text, empty included) and integers."""
    return st.one_of(
        st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
        st.text(max_size=16),
    )


@cache
def invalid_request_ids() -> Strategy[Json]:
    """Ids a receiver must refuse: null, booleans, floats, arrays, objects."""
    return st.one_of(
        st.none(),
        st.booleans(),
        st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer()),
        st.lists(st.integers(), max_size=2),
        st.dictionaries(short_names(4), st.integers(), max_size=2),
    )


# --- envelope and capabilities ------------------------------------------------------------


@cache
def client_infos() -> Strategy[dict[str, Any]]:
    """``Implementation`` objects (``name`` and ``version``, sometimes a ``title``)."""
    return st.fixed_dictionaries(
        {"name": short_texts(), "version": short_texts(8)}, optional={"title": short_texts()}
    )


@cache
def client_capabilities() -> Strategy[dict[str, Any]]:
    """Client capabilities, including the edge forms a server must read correctly.

    ``elicitation`` is drawn from ``{}`` (form only, by the backward-compatibility rule),
    ``{"form": {}}``, ``{"url": {}}`` (url only: no form) and both; ``sampling`` from ``{}``,
    ``{"tools": {}}``, ``{"context": {}}`` and both; plus ``roots`` and unrelated
    ``experimental``/``extensions`` entries that grant nothing.
    """
    elicitation: Strategy[dict[str, Any]] = st.sampled_from(
        [{}, {"form": {}}, {"url": {}}, {"form": {}, "url": {}}]
    )
    sampling: Strategy[dict[str, Any]] = st.sampled_from(
        [{}, {"tools": {}}, {"context": {}}, {"tools": {}, "context": {}}]
    )
    extensions: Strategy[dict[str, Any]] = st.dictionaries(
        st.sampled_from(["com.example/feature", TASKS_EXTENSION]),
        st.just({}),
        max_size=1,
    )
    return st.fixed_dictionaries(
        {},
        optional={
            "elicitation": elicitation,
            "sampling": sampling,
            "roots": st.just({}),
            "experimental": st.dictionaries(short_names(8), st.just({}), max_size=1),
            "extensions": extensions,
        },
    )


@cache
def invalid_client_capabilities() -> Strategy[Json]:
    """Capabilities that are not a ``ClientCapabilities`` object: a non-object, or a known
    capability whose value is not an object (such a capability grants nothing)."""
    bad_member = st.builds(
        lambda name, value: {name: value},
        st.sampled_from(["elicitation", "sampling", "roots"]),
        st.one_of(st.none(), st.booleans(), st.integers(), short_texts(4), st.lists(st.integers())),
    )
    return st.one_of(not_an_object(), bad_member)


def modern_envelopes(
    capabilities: Strategy[dict[str, Any]] | None = None,
    *,
    version: str = LATEST_MODERN_VERSION,
    extra_keys: bool = True,
) -> Strategy[dict[str, Any]]:
    """A modern ``_meta`` envelope: version, capabilities, maybe client info, a progress token
    and unknown (but well-formed) keys a server must ignore."""
    caps = capabilities if capabilities is not None else client_capabilities()
    optional: dict[str, Strategy[Any]] = {
        CLIENT_INFO: client_infos(),
        "progressToken": st.one_of(st.integers(0, 10**6), short_names()),
    }
    if extra_keys:
        optional["com.example.model/note"] = json_values(3)
        optional["traceparent"] = st.just("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    return st.fixed_dictionaries(
        {PROTOCOL_VERSION_KEY: st.just(version), CLIENT_CAPABILITIES: caps}, optional=optional
    )


def invalid_envelopes(version: str = LATEST_MODERN_VERSION) -> Strategy[Json]:
    """``_meta`` values a modern server must answer with an error (-32602, or -32022 for an
    unknown version): not an object, a missing or mistyped required field, a mistyped
    ``clientInfo``, an unknown log level, or a version nobody serves."""
    caps = client_capabilities()

    def with_field(key: str, value: Strategy[Any]) -> Strategy[dict[str, Any]]:
        return st.builds(
            lambda c, v: {PROTOCOL_VERSION_KEY: version, CLIENT_CAPABILITIES: c, key: v},
            caps,
            value,
        )

    return st.one_of(
        not_an_object(null=False),
        st.builds(lambda c: {CLIENT_CAPABILITIES: c, "progressToken": 1}, caps),
        st.just({PROTOCOL_VERSION_KEY: version}),
        with_field(CLIENT_CAPABILITIES, not_an_object()),
        with_field(PROTOCOL_VERSION_KEY, not_a_string()),
        with_field(CLIENT_INFO, not_an_object(null=False)),
        with_field("io.modelcontextprotocol/logLevel", st.sampled_from(["loud", "", "DEBUG"])),
        with_field(
            PROTOCOL_VERSION_KEY, st.sampled_from(["1900-01-01", "2099-12-31", "latest", ""])
        ),
    )


# --- results and state --------------------------------------------------------------------


@cache
def request_states() -> Strategy[str]:
    """Opaque ``requestState`` strings (printable ASCII tokens and arbitrary text)."""
    token = st.text(string.ascii_letters + string.digits + "-_.~", min_size=1, max_size=64)
    return st.one_of(token, st.text(min_size=1, max_size=32))


def invalid_request_states(max_bytes: int = 64 * 1024) -> Strategy[Json]:
    """``requestState`` values a server must refuse: not a string, or longer than
    ``max_bytes``."""
    return st.one_of(not_a_string(), st.just("A" * (max_bytes + 1)))


_TAMPERINGS = ("suffix", "flip", "truncate", "empty", "other")


def _tamper(state: str, how: str, position: int, other: str) -> str:
    if how == "flip" and len(state) >= 2:
        i = position % (len(state) // 2)  # the first half: base64 ignores only trailing bits
        swap = "B" if state[i] == "A" else "A"
        out = state[:i] + swap + state[i + 1 :]
    elif how == "truncate":
        out = state[: len(state) // 2]
    elif how == "empty":
        out = ""
    elif how == "other":
        out = other
    else:
        out = state + "-TAMPERED"
    return out if out != state else state + "-TAMPERED"


@cache
def _tamperings() -> Strategy[tuple[str, int, str]]:
    return st.tuples(st.sampled_from(_TAMPERINGS), st.integers(0, 2**16), request_states())


def tampered_states(state: str) -> Strategy[str]:
    """Strings that differ from ``state`` in a way no honest encoding tolerates: a suffix, a
    character changed in the first half (base64 ignores only trailing bits), truncation, an
    empty string, or another token altogether.

    What is drawn does not depend on ``state``, so a state machine can tamper with tokens that
    differ from run to run (time stamps, nonces) and still replay its examples."""
    return _tamperings().map(lambda t: _tamper(state, *t))


# --- whole requests -----------------------------------------------------------------------


def modern_requests(
    method: str | Strategy[str] = "tools/call",
    params: Strategy[dict[str, Any]] | None = None,
    *,
    envelope: Strategy[dict[str, Any]] | None = None,
    ids: Strategy[str | int] | None = None,
) -> Strategy[dict[str, Any]]:
    """Modern JSON-RPC requests: ``params`` (default: a name and arguments) plus the envelope."""
    methods = st.just(method) if isinstance(method, str) else method
    body = (
        params
        if params is not None
        else st.fixed_dictionaries({"name": short_names(), "arguments": _json_objects(4)})
    )
    meta = envelope if envelope is not None else modern_envelopes()

    def build(rid: Any, m: str, p: dict[str, Any], e: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": rid, "method": m, "params": {**p, "_meta": e}}

    return st.builds(build, ids if ids is not None else request_ids(), methods, body, meta)
