"""The server's legacy (2025-11-25) session: ``initialize``, and requests without the envelope.

``initialize`` selects legacy semantics for the connection (a stdio process or one HTTP
session): the version is negotiated (the requested one if served, else the newest legacy one),
the client's capabilities and info are recorded, and later requests without the modern envelope
are served under them. ``ping`` and ``logging/setLevel`` are answered here; everything else
reaches the application as a :class:`RequestReceived` with the session attached.

Pure functions of the config, the session and the message: the server connection owns the
session and its queues, and applies what these return.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mrtr_sansio._config import ServerConfig
from mrtr_sansio._errors import ErrorCode, JsonRpcError, LocalProtocolError, RemoteProtocolError
from mrtr_sansio._events import RequestReceived, SessionInitialized
from mrtr_sansio._mcp.envelope import (
    LOG_LEVEL_RANK,
    NOT_INITIALIZED,
    invalid,
    missing_meta_message,
)
from mrtr_sansio._mcp.methods import MRTR_METHODS
from mrtr_sansio._mcp.session import LegacySession
from mrtr_sansio.http._facts import HttpRequestFacts
from mrtr_sansio.http._names import VERSION_HEADER
from mrtr_sansio.tasks._machine import TASK_METHOD, TaskMachine
from mrtr_sansio.tasks._server import required_task_error

from .state import MRTR_FIELDS

__all__ = [
    "NO_SHIM",
    "check_header",
    "initialize_result",
    "on_initialize",
    "on_request",
    "receive",
    "session_opened",
    "unsessioned",
]

#: The answer to a legacy request whose handler needs input where the shim cannot run.
NO_SHIM = JsonRpcError.internal(
    "The handler needs client input, which this server can only request on the 2026-07-28 "
    "protocol (input_required result)"
)


def check_header(
    config: ServerConfig,
    session: LegacySession,
    http: HttpRequestFacts,
    rid: Any,
    method: str,
    meta: Any,
) -> None:
    """Legacy HTTP: the only MCP header is ``MCP-Protocol-Version``, absent on initialize.

    The modern mirror headers do not exist before 2026-07-28. The version header must name the
    session's negotiated version and come once; any other value is refused (400). A modern
    version on a body without the envelope is the modern wire's missing ``_meta`` (-32602).
    """
    header = http.protocol_version
    if VERSION_HEADER in http.repeated:
        raise RemoteProtocolError(
            JsonRpcError(
                ErrorCode.INVALID_REQUEST, "Bad Request: MCP-Protocol-Version header is repeated"
            ),
            rid,
        )
    if header is None or method == "initialize" or header.strip() == session.protocol_version:
        return
    if header in config.supported_versions:
        raise invalid(rid, missing_meta_message(meta))
    raise RemoteProtocolError(
        JsonRpcError(
            ErrorCode.INVALID_REQUEST,
            f"Bad Request: unsupported MCP-Protocol-Version header '{header}'",
            {"supported": list(config.legacy_versions)},
        ),
        rid,
    )


def on_initialize(
    config: ServerConfig, session: LegacySession | None, rid: Any, params: dict[str, Any]
) -> LegacySession:
    """The session ``initialize`` opens (raises for a second one or malformed params)."""
    if session is not None:
        raise RemoteProtocolError(
            JsonRpcError(
                ErrorCode.INVALID_REQUEST, "Invalid Request: the session is already initialized"
            ),
            rid,
        )
    requested = params.get("protocolVersion")
    caps = params.get("capabilities")
    info = params.get("clientInfo")
    if type(requested) is not str:
        raise invalid(rid, "initialize: protocolVersion must be a string")
    if type(caps) is not dict:
        raise invalid(rid, "initialize: capabilities must be an object")
    if info is not None and type(info) is not dict:
        raise invalid(rid, "initialize: clientInfo must be an object")
    legacy = config.legacy_versions
    version = requested if requested in legacy else legacy[0]
    return LegacySession(version, caps, info)


def on_request(
    session: LegacySession, rid: Any, method: str, params: dict[str, Any], principal: str | None
) -> RequestReceived | str | None:
    """A request in the session: the event for the application; or, answered here with an
    empty result, None for ``ping`` and the level ``logging/setLevel`` sets (the connection
    records it in the session it owns)."""
    if method == "ping":
        return None
    if method == "logging/setLevel":
        level = params.get("level")
        if type(level) is not str or level not in LOG_LEVEL_RANK:
            raise invalid(rid, "logging/setLevel: unknown level")
        return level
    if method in MRTR_METHODS and not MRTR_FIELDS.isdisjoint(params):
        # Not fields of the legacy wire: on a first round they could only be forged answers.
        params = {k: v for k, v in params.items() if k not in MRTR_FIELDS}
    return RequestReceived(rid, method, params, session, None, 1, principal)


def receive(
    config: ServerConfig,
    session: LegacySession | None,
    tasks: TaskMachine | None,
    rid: Any,
    method: str,
    params: dict[str, Any],
    meta: dict[str, Any] | None,
    http: HttpRequestFacts | None,
    principal: str | None,
) -> RequestReceived | str | None:
    """A request without the modern envelope, checked: ``initialize`` (its event carries the
    new session, for the connection to keep), a request in the session (as :func:`on_request`
    says), or a :class:`RemoteProtocolError` (also for a request with no session)."""
    if http is not None and session is not None:
        check_header(config, session, http, rid, method, meta)
    if method == "initialize" and config.legacy_versions:
        session = on_initialize(config, session, rid, params)
        return RequestReceived(rid, "initialize", params, session)
    if session is None:
        raise unsessioned(config, rid, method, meta)
    if tasks is not None and method == TASK_METHOD:
        refused = required_task_error(tasks, rid, params, None, legacy=True)
        if refused is not None:
            raise refused
    return on_request(session, rid, method, params, principal)


def initialize_result(
    config: ServerConfig, session: LegacySession | None, protocol_version: str | None = None
) -> dict[str, Any]:
    """The ``InitializeResult`` for the session (its negotiated version unless given)."""
    if protocol_version is None:
        if session is None:
            raise LocalProtocolError("no initialize has been received")
        protocol_version = session.protocol_version
    result: dict[str, Any] = {
        "protocolVersion": protocol_version,
        "capabilities": dict(config.capabilities),
        "serverInfo": config.server_info or {"name": "mrtr-sansio", "version": "0"},
    }
    if config.instructions is not None:
        result["instructions"] = config.instructions
    return result


def session_opened(session: LegacySession, result: Mapping[str, Any]) -> SessionInitialized:
    """``initialize`` was answered: the version in the answer is the negotiated one (the
    connection records it in the session)."""
    version = result.get("protocolVersion")
    return SessionInitialized(
        version if isinstance(version, str) else session.protocol_version,
        session.client_capabilities,
        session.client_info,
    )


def unsessioned(
    config: ServerConfig, rid: Any, method: str, meta: dict[str, Any] | None
) -> RemoteProtocolError:
    """The refusal of a request with neither the modern envelope nor a legacy session:
    ``initialize`` on a modern-only server (-32601 naming the versions served), a request
    without ``_meta`` on a server that speaks the legacy wire (send ``initialize`` first), else
    the envelope the request lacks (-32602)."""
    if method == "initialize":
        return RemoteProtocolError(
            JsonRpcError(
                ErrorCode.METHOD_NOT_FOUND,
                "initialize is not supported: send the 2026-07-28 _meta envelope on every request",
                {"supported": list(config.supported_versions)},
            ),
            rid,
        )
    if meta is None and config.legacy_versions:  # likely a legacy client
        return invalid(rid, NOT_INITIALIZED)
    return invalid(rid, missing_meta_message(meta))
