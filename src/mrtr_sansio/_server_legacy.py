"""The server's legacy (2025-11-25) session: ``initialize``, and requests without the envelope.

``initialize`` selects legacy semantics for the connection (a stdio process or one HTTP
session): the version is negotiated (the requested one if served, else the newest legacy one),
the client's capabilities and info are recorded, and later requests without the modern envelope
are served under them. ``ping`` and ``logging/setLevel`` are answered here; everything else
reaches the application as a :class:`RequestReceived` with the session attached.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._envelope import LOG_LEVEL_RANK, invalid, missing_meta_message
from ._errors import INVALID_REQUEST, JsonRpcError, LocalProtocolError, RemoteProtocolError
from ._events import OutgoingResult, RequestReceived, SessionInitialized
from ._http import HttpRequestFacts
from ._jsonrpc import result_message
from ._mrtr import MRTR_METHODS
from ._server_state import MRTR_FIELDS
from ._session import LegacySession

if TYPE_CHECKING:
    from ._server import ServerConnection

__all__ = ["check_header", "initialize_result", "on_initialize", "on_request", "session_opened"]


def check_header(
    conn: ServerConnection, http: HttpRequestFacts, rid: Any, method: str, meta: Any
) -> None:
    """Legacy HTTP: the only MCP header is ``MCP-Protocol-Version``, absent on initialize.

    The modern mirror headers do not exist before 2026-07-28. The version header must name the
    session's negotiated version and come once; any other value is refused (400). A modern
    version on a body without the envelope is the modern wire's missing ``_meta`` (-32602).
    """
    config = conn.config
    header = http.protocol_version
    if "mcp-protocol-version" in http.repeated:
        raise RemoteProtocolError(
            JsonRpcError(INVALID_REQUEST, "Bad Request: MCP-Protocol-Version header is repeated"),
            rid,
        )
    session = conn._session
    negotiated = session.protocol_version if session is not None else None
    if header is None or method == "initialize" or header.strip() == negotiated:
        return
    if header in config.supported_versions:
        raise invalid(rid, missing_meta_message(meta))
    raise RemoteProtocolError(
        JsonRpcError(
            INVALID_REQUEST,
            f"Bad Request: unsupported MCP-Protocol-Version header '{header}'",
            {"supported": list(config.legacy_versions)},
        ),
        rid,
    )


def on_initialize(conn: ServerConnection, rid: Any, params: dict[str, Any]) -> None:
    """Open the session; answer from the config unless the application answers itself."""
    if conn._session is not None:
        raise RemoteProtocolError(
            JsonRpcError(INVALID_REQUEST, "Invalid Request: the session is already initialized"),
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
    legacy = conn.config.legacy_versions
    version = requested if requested in legacy else legacy[0]
    session = conn._session = LegacySession(version, caps, info)
    event = RequestReceived(rid, "initialize", params, session)
    conn._inflight[rid] = event
    if conn.config.answer_discovery:
        conn._respond_complete(event, initialize_result(conn, version))
    else:
        conn._events.append(event)


def on_request(
    conn: ServerConnection, rid: Any, method: str, params: dict[str, Any], principal: str | None
) -> None:
    """A request in the session: ``ping`` and ``logging/setLevel`` here, the rest upward."""
    session = conn._session
    assert session is not None
    if method == "ping":
        msg = result_message(rid, {})
        conn._out.append((OutgoingResult, conn._dumps(msg), msg, rid))
        return
    if method == "logging/setLevel":
        level = params.get("level")
        if type(level) is not str or level not in LOG_LEVEL_RANK:
            raise invalid(rid, "logging/setLevel: unknown level")
        session.log_level = level
        msg = result_message(rid, {})
        conn._out.append((OutgoingResult, conn._dumps(msg), msg, rid))
        return
    if method in MRTR_METHODS and ("inputResponses" in params or "requestState" in params):
        # Not fields of the legacy wire: on a first round they could only be forged answers.
        params = {k: v for k, v in params.items() if k not in MRTR_FIELDS}
    event = RequestReceived(rid, method, params, session, None, 1, principal)
    conn._inflight[rid] = event
    if conn._observer is not None:
        conn._observe_start(event, None)
    conn._events.append(event)


def initialize_result(
    conn: ServerConnection, protocol_version: str | None = None
) -> dict[str, Any]:
    """The ``InitializeResult`` for the session (its negotiated version unless given)."""
    if protocol_version is None:
        if conn._session is None:
            raise LocalProtocolError("no initialize has been received")
        protocol_version = conn._session.protocol_version
    config = conn.config
    result: dict[str, Any] = {
        "protocolVersion": protocol_version,
        "capabilities": dict(config.capabilities),
        "serverInfo": config.server_info or {"name": "mrtr-sansio", "version": "0"},
    }
    if config.instructions is not None:
        result["instructions"] = config.instructions
    return result


def session_opened(
    conn: ServerConnection, session: LegacySession, result: Mapping[str, Any]
) -> None:
    """``initialize`` was answered: the version in the answer is the negotiated one."""
    version = result.get("protocolVersion")
    if isinstance(version, str):
        session.protocol_version = version
    conn._events.append(
        SessionInitialized(
            session.protocol_version, session.client_capabilities, session.client_info
        )
    )
