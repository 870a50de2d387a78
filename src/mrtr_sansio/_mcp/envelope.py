"""The modern per-request ``_meta`` envelope, protocol versions and eras.

A request whose ``params._meta`` carries ``io.modelcontextprotocol/protocolVersion`` is a modern
(2026-07-28) request and must also carry ``clientCapabilities``; anything else is legacy traffic,
which is only served inside an ``initialize``-d session.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from mrtr_sansio._errors import ErrorCode, JsonRpcError, LocalProtocolError, RemoteProtocolError

__all__ = [
    "CLIENT_CAPABILITIES",
    "CLIENT_INFO",
    "LATEST_LEGACY_VERSION",
    "LATEST_MODERN_VERSION",
    "LEGACY_VERSIONS",
    "LOG_LEVEL",
    "MODERN_VERSIONS",
    "PROTOCOL_VERSION_KEY",
    "SERVER_INFO",
    "SUBSCRIPTION_ID",
    "Era",
    "modern_envelope",
]

#: ``_meta`` key of a modern request's protocol version; its presence makes a request modern.
PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
#: ``_meta`` key of the client capabilities a modern request declares (required with the version).
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
#: ``_meta`` key of a modern client's optional name and version.
CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
#: ``_meta`` key by which a modern request asks for log messages of this level and above.
LOG_LEVEL = "io.modelcontextprotocol/logLevel"
#: ``_meta`` key of the server's name and version on every modern result.
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
#: ``_meta`` key tagging each notification of a ``subscriptions/listen`` stream with its id.
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"

#: The protocol revision with MRTR on the wire (per-request envelope, stateless).
LATEST_MODERN_VERSION = "2026-07-28"
#: The newest revision of the ``initialize`` handshake and real server-to-client requests.
LATEST_LEGACY_VERSION = "2025-11-25"
#: Modern revisions this package implements.
MODERN_VERSIONS: tuple[str, ...] = (LATEST_MODERN_VERSION,)
#: Legacy revisions whose ``initialize`` handshake this package accepts, newest first.
LEGACY_VERSIONS: tuple[str, ...] = (LATEST_LEGACY_VERSION, "2025-06-18", "2025-03-26", "2024-11-05")

#: RFC 5424 severities in increasing order, as MCP's ``LoggingLevel`` names them.
LOG_LEVELS: tuple[str, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
LOG_LEVEL_RANK = {name: rank for rank, name in enumerate(LOG_LEVELS)}


class Era(enum.Enum):
    """Which wire a request arrived on, or a server speaks (a client's ``era``)."""

    #: 2026-07-28 and later: per-request ``_meta`` envelope, stateless, MRTR on the wire.
    MODERN = "modern"
    #: 2025-11-25 and earlier: ``initialize`` handshake, real server-to-client requests.
    LEGACY = "legacy"


def invalid(request_id: Any, message: str) -> RemoteProtocolError:
    """A -32602 for ``request_id`` (the answer to every malformed-envelope case)."""
    return RemoteProtocolError(JsonRpcError(ErrorCode.INVALID_PARAMS, message), request_id)


def envelope_error(request_id: Any, meta: Mapping[str, Any]) -> RemoteProtocolError:
    """The -32602 for the first rule a modern ``_meta`` envelope breaks (the checks in order:
    capabilities, version, client info, log level); called once the envelope is known bad."""
    caps = meta.get(CLIENT_CAPABILITIES)
    if type(caps) is not dict:
        if caps is None:
            return invalid(request_id, f"Missing required _meta field {CLIENT_CAPABILITIES}")
        return invalid(request_id, f"_meta field {CLIENT_CAPABILITIES} must be an object")
    if type(meta.get(PROTOCOL_VERSION_KEY)) is not str:
        return invalid(request_id, f"_meta field {PROTOCOL_VERSION_KEY} must be a string")
    info = meta.get(CLIENT_INFO)
    if info is not None and type(info) is not dict:
        return invalid(request_id, f"_meta field {CLIENT_INFO} must be an object")
    return invalid(request_id, f"Unknown log level in _meta field {LOG_LEVEL}")


def log_allowed(params: Mapping[str, Any] | None, request: Any, session: Any) -> bool:
    """Whether a ``notifications/message`` may go out.

    Modern: only when ``request`` (the request it belongs to) asked for logs with ``_meta``
    logLevel, at or above that level; never unrelated to a request. Legacy: at or above the
    session's ``logging/setLevel`` level, every level before one is set. Raises
    :class:`LocalProtocolError` when ``params.level`` is not a ``LoggingLevel``.
    """
    level = params.get("level") if params is not None else None
    if type(level) is not str or level not in LOG_LEVEL_RANK:
        raise LocalProtocolError(
            f"notifications/message: params.level must be one of {', '.join(LOG_LEVELS)}"
        )
    if request is not None and request.session is None:
        wanted = request.meta.get(LOG_LEVEL)
    elif session is None:
        return False  # modern clients ask per request; nothing asked for this message
    else:
        wanted = session.log_level
        if wanted is None:
            return True
    if wanted is None:
        return False
    return LOG_LEVEL_RANK[level] >= LOG_LEVEL_RANK[wanted]


#: The -32602 message for a request with neither a session nor ``_meta``, on a server that
#: speaks both wires: a legacy client that skipped the handshake is told to initialize.
NOT_INITIALIZED = (
    "Not initialized: send initialize first (protocol 2025-11-25), or give every request the "
    "2026-07-28 _meta envelope (io.modelcontextprotocol/protocolVersion, clientCapabilities)"
)


def missing_meta_message(meta: Any) -> str:
    """The -32602 message for a request without the modern envelope (or without its version)."""
    if meta is None:
        return (
            "Missing required _meta (io.modelcontextprotocol/protocolVersion, clientCapabilities)"
        )
    return f"Missing required _meta field {PROTOCOL_VERSION_KEY}"


def modern_envelope(
    version: str,
    capabilities: Mapping[str, Any],
    client_info: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The ``_meta`` entries a modern client puts on every request."""
    meta: dict[str, Any] = {PROTOCOL_VERSION_KEY: version, CLIENT_CAPABILITIES: capabilities}
    if client_info is not None:
        meta[CLIENT_INFO] = client_info
    return meta
