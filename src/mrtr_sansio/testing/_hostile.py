"""Strategies for hostile input: wrong types anywhere, huge and deep values, raw JSON texts
that break parsers, and arbitrary chunkings of a byte stream (see :mod:`.strategies`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from ._values import Json, json_values, modern_requests, short_names, short_texts

__all__ = [
    "chunked",
    "hostile_json_texts",
    "hostile_messages",
    "wrong_type_variants",
]

Strategy = st.SearchStrategy


# --- hostile input ------------------------------------------------------------------------


def _paths(value: Json, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (keys and indexes) to a member of ``value``."""
    out: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append((*prefix, k))
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.append((*prefix, i))
            out.extend(_paths(v, (*prefix, i)))
    return out


def _replace(value: Json, path: tuple[Any, ...], new: Json) -> Json:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


def _other_type(value: Json) -> Strategy[Json]:
    """A JSON value of a different JSON type than ``value``."""
    kinds: dict[str, Strategy[Json]] = {
        "null": st.none(),
        "bool": st.booleans(),
        "number": st.one_of(st.integers(-(2**63), 2**63), st.floats(-1e6, 1e6)),
        "string": short_texts(8),
        "array": st.lists(st.integers(), max_size=2),
        "object": st.dictionaries(short_names(4), st.integers(), max_size=2),
    }
    if value is None:
        own = "null"
    elif isinstance(value, bool):
        own = "bool"
    elif isinstance(value, (int, float)):
        own = "number"
    elif isinstance(value, str):
        own = "string"
    elif isinstance(value, list):
        own = "array"
    else:
        own = "object"
    return st.one_of([s for name, s in kinds.items() if name != own])


def wrong_type_variants(message: Mapping[str, Any]) -> Strategy[dict[str, Any]]:
    """``message`` with one member, anywhere in it, replaced by a value of another JSON type."""
    base = dict(message)
    paths = _paths(base)
    if not paths:
        return st.just(base)

    def at(path: tuple[Any, ...]) -> Strategy[dict[str, Any]]:
        old: Json = base
        for step in path:
            old = old[step]
        return _other_type(old).map(lambda new: _replace(base, path, new))

    return st.sampled_from(paths).flatmap(at)


def _params_of(message: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``message``'s params, or a new object when they are absent or not one."""
    params = message.get("params")
    return dict(params) if isinstance(params, Mapping) else {}


def hostile_messages(
    valid: Strategy[dict[str, Any]] | None = None, *, max_string: int = 4096
) -> Strategy[dict[str, Any]]:
    """Well-formed JSON objects meant to hurt a receiver: a valid message with one field of the
    wrong type, with huge strings, with deep nesting inside ``params``, or with unknown keys."""
    base = valid if valid is not None else modern_requests()

    def huge(m: dict[str, Any], n: int) -> dict[str, Any]:
        params = _params_of(m)
        params["name"] = "x" * n
        return {**m, "params": params}

    def nested(m: dict[str, Any], depth: int) -> dict[str, Any]:
        deep: Json = []
        for _ in range(depth):
            deep = {"a": deep}
        params = _params_of(m)
        params["arguments"] = deep
        return {**m, "params": params}

    def extra(m: dict[str, Any], key: str, value: Json) -> dict[str, Any]:
        return {**m, key: value}

    return st.one_of(
        base.flatmap(wrong_type_variants),
        st.builds(huge, base, st.integers(max_string // 2, max_string * 2)),
        st.builds(nested, base, st.integers(50, 400)),
        st.builds(extra, base, short_names(), json_values(3)),
    )


def hostile_json_texts(max_bytes: int = 4096) -> Strategy[bytes]:
    """Raw JSON texts a parser must survive: deep nesting beyond any recursion limit, numbers
    out of every range, duplicate keys, invalid UTF-8, lone surrogate escapes, bare values,
    and truncations of valid messages."""
    valid = modern_requests().map(lambda m: json.dumps(m).encode())
    depth = st.integers(1000, 100_000)
    return st.one_of(
        depth.map(lambda n: b"[" * n + b"]" * n),
        depth.map(lambda n: b'{"jsonrpc":"2.0","id":1,"method":"x","params":' + b'{"a":' * n),
        st.sampled_from(
            [
                b'{"jsonrpc":"2.0","id":1e400,"method":"tools/list"}',
                b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":-1e400}}',
                b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"tools/list"}',
                b'{"jsonrpc":"2.0","id":' + b"9" * 400 + b',"method":"tools/list"}',
                b'{"jsonrpc":"2.0","id":1.0,"method":"tools/list"}',
                b'{"jsonrpc":"2.0","id":-0,"method":"tools/list"}',
                b'{"jsonrpc":"2.0","id":1,"id":"x","method":"tools/list"}',
                b'{"jsonrpc":"2.0","jsonrpc":"1.0","id":1,"method":"tools/list"}',
                b'{"jsonrpc":"2.0","id":1,"method":"tools/list","method":7}',
                b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list"}',
                b'{"jsonrpc":"2.0","id":1,"method":"\\udfff"}',
                b'{"jsonrpc":"2.0","id":"\xff\xfe","method":"tools/list"}',
                b"\xef\xbb\xbf{}",
                b"NaN",
                b"Infinity",
                b"[]",
                b"null",
                b'"just a string"',
                b"{",
                b"\x00",
            ]
        ),
        st.builds(lambda d, i: d[: i % max(1, len(d))], valid, st.integers(0, 10**6)),
        st.binary(max_size=64),
        st.integers(max_bytes + 1, max_bytes * 2).map(lambda n: b'"' + b"a" * n + b'"'),
    )


def chunked(data: bytes) -> Strategy[list[bytes]]:
    """``data`` split at arbitrary points (every chunk non-empty)."""
    if len(data) < 2:
        return st.just([data] if data else [])
    return st.lists(st.integers(1, len(data) - 1), unique=True, max_size=12).map(
        lambda cuts: [
            data[a:b] for a, b in zip([0, *sorted(cuts)], [*sorted(cuts), len(data)], strict=True)
        ]
    )
