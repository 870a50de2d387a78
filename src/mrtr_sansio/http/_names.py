"""The Streamable HTTP names, written once: MCP's header names and the status of an error.

Header names are given lower-case, as HTTP compares them and as ASGI hands them over; the
``*_DISPLAY`` spellings are the ones the spec writes, which a client sends and an error
message quotes. :func:`http_status` is the one mapping from a JSON-RPC error code to the HTTP
status the modern transport answers it with (DIGEST §1.2, §1.5, §3.3).
``tests/test_facts_once.py`` fails if another module spells one of these names.
"""

from __future__ import annotations

from typing import Final

from mrtr_sansio._errors import ErrorCode

__all__ = [
    "LAST_EVENT_ID_HEADER",
    "MCP_HEADERS",
    "METHOD_DISPLAY",
    "METHOD_HEADER",
    "NAME_DISPLAY",
    "NAME_HEADER",
    "PARAM_DISPLAY",
    "PARAM_PREFIX",
    "SESSION_HEADER",
    "SESSION_HEADER_BYTES",
    "VERSION_DISPLAY",
    "VERSION_HEADER",
    "http_status",
]

VERSION_HEADER: Final = "mcp-protocol-version"
METHOD_HEADER: Final = "mcp-method"
NAME_HEADER: Final = "mcp-name"
#: ``Mcp-Param-{Name}``: a tool argument mirrored in a header (lower-case prefix).
PARAM_PREFIX: Final = "mcp-param-"
SESSION_HEADER: Final = "mcp-session-id"
SESSION_HEADER_BYTES: Final = SESSION_HEADER.encode()
LAST_EVENT_ID_HEADER: Final = "last-event-id"
#: The MCP headers of one request that must each come once and mirror the body.
MCP_HEADERS = frozenset({VERSION_HEADER, METHOD_HEADER, NAME_HEADER})
VERSION_DISPLAY: Final = "MCP-Protocol-Version"
METHOD_DISPLAY: Final = "Mcp-Method"
NAME_DISPLAY: Final = "Mcp-Name"
PARAM_DISPLAY: Final = "Mcp-Param-"

#: The errors a modern transport answers with 400: parse, request, params, header, capability
#: and version errors.
_BAD_REQUEST = frozenset(
    {
        ErrorCode.PARSE_ERROR,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_PARAMS,
        ErrorCode.HEADER_MISMATCH,
        ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY,
        ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
    }
)


#: The errors the legacy transport answers with 400 inside a session: unreadable messages.
_LEGACY_BAD_REQUEST = frozenset({ErrorCode.PARSE_ERROR, ErrorCode.INVALID_REQUEST})


def http_status(code: object, *, legacy: bool = False) -> int:
    """The HTTP status for an error response with ``code``: 404 for -32601, 400 for the
    request's own faults, else 200 (the error travels in the body). Inside a ``legacy``
    session only an unreadable message is 400."""
    if not isinstance(code, int):
        return 200
    if legacy:
        return 400 if code in _LEGACY_BAD_REQUEST else 200
    if code == ErrorCode.METHOD_NOT_FOUND:
        return 404
    return 400 if code in _BAD_REQUEST else 200
