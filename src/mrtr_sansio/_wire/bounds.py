"""Bounds on a JSON message's nesting depth and on how many values it decodes to.

Both codecs decode far deeper nesting than the code after them can walk (a message 990 levels
deep parses, then overflows the stack wherever it is read, encoded or logged), and a few MiB of
``[{},{},...]`` decode to tens of MiB of objects. :func:`bounded_loads` refuses such text from
its raw bytes, before the codec allocates anything; :func:`check_value` does the same for a
message handed over already decoded. Counting, a value is an array, an object, an object key
or a scalar: ``{"a": [1, 2]}`` holds 5 values and is 2 levels deep.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from itertools import accumulate, count
from operator import sub
from typing import Any

__all__ = ["JsonBoundsError", "bounded_dumps", "bounded_loads", "check_bytes", "check_value"]

# One JSON string (escapes included); outside strings a JSON text holds no other quote.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_WHITESPACE = b" \t\n\r"
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
# Openers become 2 and closers 0, so that the running sum minus the position is the depth.
_SIGNS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


class JsonBoundsError(ValueError):
    """A JSON text or value nested deeper, or holding more values, than the limits allow."""


def too_deep(max_depth: int) -> JsonBoundsError:
    return JsonBoundsError(
        f"JSON nested deeper than the {max_depth}-level limit (Limits.max_json_depth)"
    )


def too_many(max_nodes: int) -> JsonBoundsError:
    return JsonBoundsError(
        f"JSON holds more than the {max_nodes}-value limit (Limits.max_json_nodes)"
    )


def check_bytes(data: bytes, max_depth: int, max_nodes: int) -> None:
    """Raise :class:`JsonBoundsError` if the JSON text ``data`` is too deep or too big.

    Exact for valid JSON; for invalid text the answer does not matter, as the codec refuses it.
    """
    bare = _STRING.sub(b"0", data) if b'"' in data else data
    bare = bare.translate(None, _WHITESPACE)
    # Every value but the first follows a "[" or "{" (the first in its container), a ","
    # or a ":"; an empty container has no first child.
    nodes = (
        1
        + bare.count(b",")
        + bare.count(b":")
        + bare.count(b"[")
        + bare.count(b"{")
        - bare.count(b"[]")
        - bare.count(b"{}")
    )
    if nodes > max_nodes:
        raise too_many(max_nodes)
    brackets = bare.translate(None, _NOT_BRACKETS)
    if len(brackets) > 2 * max_depth:
        signs = brackets.translate(_SIGNS)
        if max(map(sub, accumulate(signs), count(1))) > max_depth:
            raise too_deep(max_depth)


def bounded_loads(
    loads: Callable[[bytes], Any], max_depth: int, max_nodes: int
) -> Callable[[bytes], Any]:
    """``loads`` that first refuses, with :class:`JsonBoundsError`, text past the limits.

    The common message is checked with three C calls: text shorter than ``2 * max_nodes``
    bytes cannot hold more values (each but the last takes a byte and a separator), and text
    with no more openers than ``max_depth`` cannot nest deeper.
    """
    node_bytes = 2 * max_nodes

    def decode(data: bytes) -> Any:
        if (
            len(data) >= node_bytes
            or data.count(b"{") + (data.count(b"[") if b"[" in data else 0) > max_depth
        ):
            check_bytes(data, max_depth, max_nodes)
        return loads(data)

    return decode


def bounded_dumps(dumps: Callable[[Any], bytes], max_depth: int) -> Callable[[Any], bytes]:
    """``dumps`` that refuses, with :class:`JsonBoundsError`, to write what a peer with the
    same limits would refuse to read as too deep."""

    def encode(obj: Any) -> bytes:
        data = dumps(obj)
        if data.count(b"[") + data.count(b"{") > max_depth:
            check_bytes(data, max_depth, len(data))
        return data

    return encode


def check_value(value: Any, max_depth: int, max_nodes: int) -> None:
    """Raise :class:`JsonBoundsError` if the decoded ``value`` is too deep or too big.

    Walks one level at a time, so the walk itself never recurses.
    """
    nodes = 1
    if nodes > max_nodes:
        raise too_many(max_nodes)
    level = [value] if isinstance(value, (Mapping, list, tuple)) else []
    depth = 0
    while level:
        depth += 1
        if depth > max_depth:
            raise too_deep(max_depth)
        below: list[Any] = []
        for container in level:
            children = container.values() if isinstance(container, Mapping) else container
            nodes += 2 * len(container) if isinstance(container, Mapping) else len(container)
            below.extend(c for c in children if isinstance(c, (Mapping, list, tuple)))
        if nodes > max_nodes:
            raise too_many(max_nodes)
        level = below
