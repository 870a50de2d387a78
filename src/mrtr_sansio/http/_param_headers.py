"""Tool arguments mirrored in HTTP headers: ``x-mcp-header`` annotations and their checks.

A tool may mark properties of its ``inputSchema`` with ``"x-mcp-header": "<Name>"``; on
Streamable HTTP the client then sends each such argument's value in an ``Mcp-Param-<Name>``
header too, so that intermediaries can route on it without reading the body. The server must
check every header against the body (2026-07-28, transports: Server Behavior for Custom
Headers): a missing header, a header the body does not back, a value with characters outside
visible ASCII, space and tab, a malformed ``=?base64?...?=`` value, or any difference is -32020.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from mrtr_sansio._errors import ErrorCode, JsonRpcError, RemoteProtocolError

from ._facts import HttpRequestFacts, decode_header_value, is_field_value
from ._names import PARAM_DISPLAY

__all__ = ["check_param_headers", "header_text", "mirrored_params", "param_headers_for"]

ANNOTATION = "x-mcp-header"
#: RFC 9110 ``token`` (``1*tchar``): what a header name may be made of.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_PRIMITIVE = frozenset({"string", "integer", "boolean"})
#: Keywords whose values are data, not schemas: never searched for annotations.
_DATA_KEYWORDS = frozenset({"const", "default", "enum", "examples"})
_ABSENT = object()


def mirrored_params(input_schema: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """A tool's annotations: header ``<Name>`` -> the property path it mirrors.

    Raises ``ValueError`` for a definition the spec makes invalid: a name that is not an HTTP
    token or repeats another (case-insensitively), an annotation on a non-primitive property
    (``number`` included), or one not reachable from the root through ``properties`` alone.
    """
    found: dict[str, tuple[str, ...]] = {}
    seen: set[str] = set()

    def walk(node: Any, path: tuple[str, ...] | None) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, None)
            return
        if not isinstance(node, Mapping):
            return
        if ANNOTATION in node:
            name = node[ANNOTATION]
            if not path:
                raise ValueError(
                    f"{ANNOTATION} {name!r}: only properties reachable from the root through "
                    "'properties' keys may be mirrored"
                )
            where = ".".join(path)
            if not isinstance(name, str) or not _TOKEN.fullmatch(name):
                raise ValueError(f"{ANNOTATION} of {where}: {name!r} is not an HTTP token")
            if name.lower() in seen:
                raise ValueError(f"{ANNOTATION} of {where}: {name!r} is used twice")
            if not _primitive(node.get("type")):
                raise ValueError(f"{ANNOTATION} of {where}: only string, integer or boolean")
            seen.add(name.lower())
            found[name] = path
        for key, child in node.items():
            if key == "properties" and path is not None and isinstance(child, Mapping):
                for prop, schema in child.items():
                    walk(schema, (*path, str(prop)))
            elif key not in _DATA_KEYWORDS and key != ANNOTATION:
                walk(child, None)

    walk(input_schema, ())
    return found


def _primitive(kinds: Any) -> bool:
    """A ``type`` of string, integer or boolean (optionally with null)."""
    listed = [kinds] if isinstance(kinds, str) else kinds
    if not isinstance(listed, list) or not all(isinstance(k, str) for k in listed):
        return False
    types = set(listed) - {"null"}
    return bool(types) and types <= _PRIMITIVE


def param_headers_for(tools: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, tuple[str, ...]]]:
    """``ServerConfig.param_headers`` for tool definitions as ``tools/list`` shows them."""
    out = {}
    for tool in tools:
        mirrored = mirrored_params(tool.get("inputSchema") or {})
        if mirrored:
            out[str(tool["name"])] = mirrored
    return out


def header_text(value: Any) -> str | None:
    """How a client writes an argument in a header (None: not a mirrorable value)."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (str, int)):
        return str(value)
    return None


def _mismatch(message: str, request_id: Any) -> RemoteProtocolError:
    return RemoteProtocolError(JsonRpcError(ErrorCode.HEADER_MISMATCH, message), request_id)


def check_param_headers(
    facts: HttpRequestFacts,
    request_id: Any,
    arguments: Any,
    mirrored: Mapping[str, tuple[str, ...]],
) -> None:
    """Raise -32020 unless every mirrored argument and its ``Mcp-Param-*`` header agree.

    A repeated ``Mcp-Param-*`` header never gets here: :func:`check_headers` refuses it first.
    """
    for name, path in mirrored.items():
        value: Any = arguments
        for step in path:
            value = value.get(step, _ABSENT) if isinstance(value, Mapping) else _ABSENT
        raw = facts.params.get(name.lower())
        header = PARAM_DISPLAY + name
        if value is _ABSENT or value is None:
            if raw is not None:
                raise _mismatch(f"Header {header} has no value in the body to mirror", request_id)
            continue
        if raw is None:
            raise _mismatch(f"Missing required header {header}", request_id)
        raw = raw.strip()
        if not is_field_value(raw):
            raise _mismatch(f"Header {header} has invalid characters", request_id)
        try:
            text = decode_header_value(raw)
        except ValueError:
            raise _mismatch(f"Header {header} has a malformed Base64 value", request_id) from None
        if text != header_text(value):
            raise _mismatch(
                f"Header mismatch: {header} header value does not match body value at "
                f"arguments.{'.'.join(path)}",
                request_id,
            )
