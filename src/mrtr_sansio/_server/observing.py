"""What the server connection tells an observer, as values: each function builds the fact of
one moment (a request reaching the handler, an answer, a refusal, a shim leg) from what the
connection passes in. Nothing here observes, queues or keeps state; the connection hands the
facts to its observer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mrtr_sansio._errors import RemoteProtocolError
from mrtr_sansio._events import RequestReceived
from mrtr_sansio._mcp.envelope import PROTOCOL_VERSION_KEY
from mrtr_sansio._mcp.methods import NAME_FIELDS
from mrtr_sansio._mcp.mrtr_fields import COMPLETE, INPUT_REQUIRED
from mrtr_sansio._mcp.session import LegacySession
from mrtr_sansio._pending import Pending
from mrtr_sansio.observe import (
    LegAnswered,
    LegSent,
    LegTimedOut,
    RequestAnswered,
    RequestRefused,
    RequestStarted,
    Transport,
    trace_of,
)

from .shim import LegEnded, SendRequest

__all__ = [
    "answered",
    "leg_ended",
    "leg_sent",
    "refusal",
    "started",
    "target_of",
    "traced",
    "traced_leg",
]


def target_of(method: Any, params: Any) -> str | None:
    """What a request is about, for an observer: the task id of a ``tasks/*`` request, the
    URI of ``resources/read``, else ``params.name`` (a tool or prompt)."""
    if type(params) is not dict:
        return None
    target = params.get(NAME_FIELDS.get(method, "name"))
    return target if type(target) is str else None


def started(
    at: float,
    key: int,
    event: RequestReceived,
    carried: Mapping[str, str] | None,
    transport: Transport | None,
) -> RequestStarted:
    """The fact of ``event`` reaching the handler (a round, or a legacy request)."""
    meta = event.params.get("_meta")
    meta = meta if type(meta) is dict else None
    session = event.session
    if session is not None:
        version: Any = session.protocol_version
    else:
        version = meta.get(PROTOCOL_VERSION_KEY) if meta is not None else None
    return RequestStarted(
        at,
        key,
        event.request_id,
        event.method,
        target_of(event.method, event.params),
        event.round,
        session is not None,
        version if type(version) is str else None,
        None if session is None else session.session_id,  # the adapter's name
        event.principal,
        trace_of(meta),
        carried,
        transport,
    )


def answered(at: float, key: int, rid: Any, result: Mapping[str, Any]) -> RequestAnswered:
    """The fact of ``rid`` answered with ``result``."""
    kind = result.get("resultType", COMPLETE)
    requests = result.get("inputRequests") if kind == INPUT_REQUIRED else None
    keys = tuple(requests) if isinstance(requests, Mapping) else ()
    status = result.get("status")
    return RequestAnswered(
        at,
        key,
        rid,
        kind if type(kind) is str else "",
        keys,
        result.get("isError") is True,
        status if type(status) is str else None,
    )


def leg_ended(at: float, key: int, ended: LegEnded) -> LegAnswered | LegTimedOut:
    """The fact of a shim leg answered, failed or timed out."""
    if ended.how == "timed_out":
        return LegTimedOut(at, key, ended.request_id, ended.leg_id, ended.key)
    failed = ended.how == "failed"
    return LegAnswered(at, key, ended.request_id, ended.leg_id, ended.key, failed)


def leg_sent(at: float, key: int, action: SendRequest) -> LegSent:
    """The fact of a shim leg going out."""
    return LegSent(
        at, key, action.request_id, action.leg_id, action.key, action.method, action.round
    )


def traced(msg: Mapping[str, Any], carry: Any) -> dict[str, Any] | None:
    """``msg`` (a shim leg) with the trace keys of the observer's ``carry`` merged into its
    ``params._meta``, or None when the carry holds none (the leg goes as it is)."""
    trace = trace_of(carry) if isinstance(carry, Mapping) else None
    if not trace:
        return None
    params = dict(msg.get("params") or {})
    meta = params.get("_meta")
    params["_meta"] = {**meta, **trace} if isinstance(meta, Mapping) else dict(trace)
    return {**msg, "params": params}


def traced_leg(item: Pending, carry: Any, dumps: Callable[[Any], bytes]) -> Pending:
    """A shim leg's queue entry re-encoded (``dumps``) with the trace keys ``carry`` (the
    observer's) puts in its ``params._meta``; as is without any."""
    kind, _, msg, related, extra = item
    carried = traced(msg, carry)
    if carried is None:
        return item
    return (kind, dumps(carried), carried, related, extra)


def refusal(
    at: float,
    key: int,
    request: Any,
    exc: RemoteProtocolError,
    session: LegacySession | None = None,
    transport: Transport | None = None,
    header_version: str | None = None,
) -> RequestRefused:
    """The :class:`~mrtr_sansio.observe.RequestRefused` fact for ``request`` (the decoded
    message, or None when none could be read) refused with ``exc``; adapters that refuse a
    message before any connection reads it (an unknown session) report it with this too,
    with the ``MCP-Protocol-Version`` header as ``header_version``."""
    method = params = meta = None
    if type(request) is dict:
        method = request.get("method")
        method = method if type(method) is str else None
        params = request.get("params")
        meta = params.get("_meta") if type(params) is dict else None
        meta = meta if type(meta) is dict else None
    version = meta.get(PROTOCOL_VERSION_KEY) if meta is not None else None
    legacy = type(version) is not str
    if legacy and session is not None:
        version = session.protocol_version
    elif legacy and header_version is not None:
        version = header_version
    error = exc.error
    return RequestRefused(
        at,
        key,
        exc.request_id,
        method,
        target_of(method, params),
        error.code,
        error.message,
        legacy,
        version if type(version) is str else None,
        session.session_id if legacy and session is not None else None,
        trace_of(meta),
        transport,
    )
