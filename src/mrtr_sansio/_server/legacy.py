"""The server's legacy (2025-11-25) side: ``initialize``, the session it opens, and requests
without the modern envelope.

``initialize`` negotiates the version (the requested one if served, else the newest legacy
one) and records the client's capabilities; later requests without the envelope are served
under them. ``ping`` and ``logging/setLevel`` are answered here. :class:`LegacyRequests` owns
the session and returns actions the server connection applies; the functions are pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

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
from mrtr_sansio._mcp.values import InputRequiredResult
from mrtr_sansio._wire.jsonrpc import request_message
from mrtr_sansio.http._facts import HttpRequestFacts
from mrtr_sansio.http._names import VERSION_HEADER
from mrtr_sansio.tasks._machine import TASK_METHOD, TaskMachine
from mrtr_sansio.tasks._server import required_task_error

from .shim import Fail, LegacyShim, ShimAction
from .state import MRTR_FIELDS

__all__ = [
    "NO_SHIM",
    "Admit",
    "EmptyResult",
    "LegacyAction",
    "LegacyRequests",
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


@attrs.frozen
class Admit:
    """Record the new request ``event`` in flight; answer it with ``result`` when given (an
    ``initialize`` the library answers), else hand it to the application, telling an observer
    it started when ``observed``."""

    event: RequestReceived
    result: Mapping[str, Any] | None = None
    observed: bool = True


@attrs.frozen
class EmptyResult:
    """Answer ``request_id`` (a ``ping`` or ``logging/setLevel``, never in flight) with ``{}``."""

    request_id: Any


#: What a :class:`LegacyRequests` call asks its connection to do, in order.
LegacyAction = ShimAction | Admit | EmptyResult


class LegacyRequests:
    """The legacy side of one server connection: it owns the session, and decides with it
    what the connection's shim may do (hold legs until ``notifications/initialized``, send a
    ``ping``). ``server_requests``: the transport carries server-to-client requests."""

    __slots__ = ("_config", "_server_requests", "_session", "_shim", "_tasks")

    def __init__(
        self,
        config: ServerConfig,
        shim: LegacyShim,
        tasks: TaskMachine | None,
        server_requests: bool,
    ) -> None:
        self._config = config
        self._shim = shim
        self._tasks = tasks
        self._server_requests = server_requests
        self._session: LegacySession | None = None

    @property
    def session(self) -> LegacySession | None:
        """The session ``initialize`` opened (None before it, and after it failed)."""
        return self._session

    def admit(
        self,
        rid: Any,
        method: str,
        params: dict[str, Any],
        meta: dict[str, Any] | None,
        http: HttpRequestFacts | None,
        principal: str | None,
    ) -> list[LegacyAction]:
        """What a request without the modern envelope does (checked by :func:`receive`, which
        raises its :class:`RemoteProtocolError`)."""
        config = self._config
        event = receive(
            config, self._session, self._tasks, rid, method, params, meta, http, principal
        )
        if not isinstance(event, RequestReceived):  # ping, logging/setLevel
            if event is not None:
                self._session.log_level = event  # type: ignore[union-attr]
            return [EmptyResult(rid)]
        if event.method != "initialize":
            return [Admit(event)]
        session = self._session = event.session
        answer = initialize_result(config, session) if config.answer_discovery else None
        return [Admit(event, answer, observed=False)]

    def initialized(self) -> list[ShimAction]:
        """``notifications/initialized`` arrived: the shim's held legs go out."""
        if self._session is None:
            return []
        self._session.initialized = True
        return self._shim.release()

    def start_round(
        self, event: RequestReceived, ir: InputRequiredResult, encode: Callable[[Any], bytes]
    ) -> list[ShimAction]:
        """The handler answered legacy ``event`` with ``ir``: the shim's round, or -32603 where
        the shim cannot run (switched off, or no server-to-client requests)."""
        if not (self._config.legacy_shim and self._server_requests):
            return [Fail(event.request_id, NO_SHIM)]
        session = self._session
        hold = session is not None and not session.initialized
        return self._shim.start_round(event, ir, encode, hold)

    def failed(self, event: RequestReceived) -> None:
        """``event`` was answered with an error: a failed ``initialize`` ends the session, so
        the client may try again."""
        if event.session is not None and event.method == "initialize":
            self._session = None

    def ping(self, closed: bool) -> tuple[int, dict[str, Any]]:
        """A ``ping`` to send and its id (raises :class:`LocalProtocolError` without an open
        session that carries server requests)."""
        if self._session is None or not self._server_requests or closed:
            raise LocalProtocolError(
                "ping needs an open legacy session that carries server requests"
            )
        ping_id = self._shim.new_ping()
        return ping_id, request_message(ping_id, "ping", None)

    def close(self, in_flight: Iterable[Any]) -> list[Any]:
        """The stream closed: the shim forgets everything; returns which of ``in_flight``
        waited for the client's input (they can never be answered now)."""
        shim = self._shim
        waiting = [rid for rid in in_flight if shim.waiting(rid)]
        shim.abandon_all()
        return waiting


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
