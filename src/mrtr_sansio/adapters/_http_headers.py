"""The headers of :class:`~._http_wire.HttpWire`'s requests: the caller's extra headers less
those the client sets itself, and the session's, version's and resumption's on top."""

from __future__ import annotations

from collections.abc import Mapping

from mrtr_sansio.http._names import (
    LAST_EVENT_ID_HEADER,
    MCP_HEADERS,
    PARAM_PREFIX,
    SESSION_HEADER,
    VERSION_DISPLAY,
)

__all__ = ["ACCEPT", "extra_headers", "get_headers", "post_headers"]

ACCEPT = "application/json, text/event-stream"
#: Headers the client sets itself: extra headers cannot override them.
_MANAGED_HEADERS = frozenset({"content-type", "accept", SESSION_HEADER, *MCP_HEADERS})


def extra_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    """The caller's headers the client sends as given: all but those it sets itself."""
    return {name: value for name, value in (headers or {}).items() if not _managed(name)}


def post_headers(
    extra: Mapping[str, str], mcp: Mapping[str, str], session_id: str | None
) -> dict[str, str]:
    """The headers of a POST: ``extra``, the content negotiation, the connection's own
    headers for the message (``mcp``), and the legacy session's id when there is one."""
    headers = {**extra, "content-type": "application/json", "accept": ACCEPT}
    headers.update(mcp)
    if session_id is not None:
        headers[SESSION_HEADER] = session_id
    return headers


def get_headers(
    extra: Mapping[str, str],
    session_id: str | None,
    protocol_version: str | None,
    last_id: str | None,
) -> dict[str, str]:
    """The headers of a GET of the legacy session: its standalone or a resumed stream."""
    headers = {**extra, "accept": "text/event-stream"}
    if session_id is not None:
        headers[SESSION_HEADER] = session_id
    if protocol_version is not None:
        headers[VERSION_DISPLAY] = protocol_version
    if last_id is not None:
        headers[LAST_EVENT_ID_HEADER] = last_id
    return headers


def _managed(header: str) -> bool:
    """Whether the client sets ``header`` itself (the caller's value is dropped)."""
    name = header.lower()
    return name in _MANAGED_HEADERS or name.startswith(PARAM_PREFIX)
