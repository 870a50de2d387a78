"""Builders for the messages a modern client sends, and small drivers for a ServerConnection.

Tests assert on exact wire messages, so these stay plain dicts with nothing implicit beyond the
modern ``_meta`` envelope.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from mrtr_sansio import NEED_DATA, Era, Event, Outgoing, ServerConnection
from mrtr_sansio.protocol import (
    CLIENT_CAPABILITIES,
    CLIENT_INFO,
    LATEST_MODERN_VERSION,
    LOG_LEVEL,
    PROTOCOL_VERSION,
    LegacySession,
)
from wire import drain

#: Every capability an embedded request can need.
ALL_CAPS: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}, "context": {}},
    "roots": {},
}
CLIENT = {"name": "test-client", "version": "1.0.0"}
SERVER = {"name": "test-server", "version": "2.0.0"}

FORM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}

_UNSET: Any = object()


def meta(
    caps: Mapping[str, Any] | None = None,
    *,
    version: Any = LATEST_MODERN_VERSION,
    info: Any = _UNSET,
    log_level: Any = None,
    **extra: Any,
) -> dict[str, Any]:
    """A modern ``_meta`` envelope (all capabilities unless ``caps`` is given)."""
    out: dict[str, Any] = {
        PROTOCOL_VERSION: version,
        CLIENT_CAPABILITIES: dict(ALL_CAPS if caps is None else caps),
    }
    if info is not _UNSET:
        if info is not None:
            out[CLIENT_INFO] = info
    else:
        out[CLIENT_INFO] = CLIENT
    if log_level is not None:
        out[LOG_LEVEL] = log_level
    out.update(extra)
    return out


def request(
    rid: Any,
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    envelope: Mapping[str, Any] | None = None,
    caps: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A modern request: ``params`` plus the envelope (``meta(caps)`` unless given)."""
    body = dict(params or {})
    body["_meta"] = dict(envelope) if envelope is not None else meta(caps)
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": body}


def legacy_request(
    rid: Any, method: str, params: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A request without the modern envelope."""
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = dict(params)
    return msg


def notification(method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = dict(params)
    return msg


def call(
    rid: Any, name: str = "book", arguments: Mapping[str, Any] | None = None, **kw: Any
) -> dict[str, Any]:
    """A modern ``tools/call``; ``kw`` goes to :func:`request` (``caps``, ``envelope``)."""
    params: dict[str, Any] = {"name": name, "arguments": dict(arguments or {"x": 1})}
    for key in ("inputResponses", "requestState"):
        if key in kw:
            params[key] = kw.pop(key)
    return request(rid, "tools/call", params, **kw)


def line(message: Any) -> bytes:
    """One NDJSON line."""
    return json.dumps(message).encode() + b"\n"


def feed(conn: ServerConnection, *messages: Any) -> None:
    """Send messages as one stream chunk."""
    conn.receive_data(b"".join(line(m) for m in messages))


def events(conn: ServerConnection) -> list[Event]:
    out: list[Event] = []
    while (event := conn.next_event()) is not NEED_DATA:
        out.append(event)
    return out


def sent(conn: ServerConnection, era: Era = Era.MODERN, **kw: Any) -> list[dict[str, Any]]:
    """The messages the connection wants to write, schema-validated."""
    return [dict(item.message) for item in drain(conn, era, **kw)]


def only(items: list[Any]) -> Any:
    """The single element of ``items``."""
    assert len(items) == 1, items
    return items[0]


def error(code: int, message: str, rid: Any = None, data: Any = None) -> dict[str, Any]:
    """The exact error response we expect."""
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    if rid is None:
        return {"jsonrpc": "2.0", "error": err}
    return {"jsonrpc": "2.0", "id": rid, "error": err}


def _by_value(_inst: Any, _field: Any, value: Any) -> Any:
    if isinstance(value, LegacySession):
        return ("LegacySession", *(getattr(value, name) for name in LegacySession.__slots__))
    return value


def normalize(event: Any) -> tuple[str, Any]:
    """A comparable form of an event (``RequestReceived`` and ``LegacySession`` compare by
    identity)."""
    if attrs.has(type(event)):
        return type(event).__name__, attrs.asdict(event, value_serializer=_by_value)
    return type(event).__name__, None


def out_items(items: list[Outgoing]) -> list[tuple[str, bytes, Any]]:
    return [(type(i).__name__, i.data, i.related_request_id) for i in items]
