"""What the server sends, as values: a result decorated for the modern wire or stripped for
the legacy one, the checks of an ``input_required`` answer and its -32021 refusal, the
``DiscoverResult``, and which notifications may go out (and with which params). The connection
decides which applies and queues what comes back.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from mrtr_sansio._config import ServerConfig
from mrtr_sansio._errors import ErrorCode, JsonRpcError, LocalProtocolError
from mrtr_sansio._events import RequestReceived
from mrtr_sansio._mcp.capabilities import capability_paths, missing_capabilities
from mrtr_sansio._mcp.envelope import SERVER_INFO, log_allowed
from mrtr_sansio._mcp.methods import CACHEABLE_METHODS, MRTR_METHODS
from mrtr_sansio._mcp.mrtr_fields import COMPLETE
from mrtr_sansio._mcp.session import LegacySession
from mrtr_sansio._mcp.subscriptions import LISTEN, on_stream, tag
from mrtr_sansio._mcp.values import InputRequiredResult
from mrtr_sansio.tasks._values import EXTENSION as TASKS_EXTENSION

__all__ = [
    "CACHEABLE_METHODS",
    "DROP",
    "ID_IN_USE",
    "MODERN_RESULT_FIELDS",
    "TOO_MANY_IN_FLIGHT",
    "check_input_required",
    "discover_result",
    "honoured",
    "legacy_result",
    "missing_capability",
    "modern_result",
    "notification_params",
    "parse_input_required",
]

#: The refusal of a request whose id names one in flight (or cancelled and not yet answered).
ID_IN_USE = JsonRpcError(ErrorCode.INVALID_REQUEST, "Invalid Request: id is already in use")
#: The refusal of a request past ``Limits.max_in_flight``.
TOO_MANY_IN_FLIGHT = JsonRpcError(ErrorCode.INTERNAL_ERROR, "Too many requests in flight")


class _Drop(enum.Enum):
    DROP = "drop"


#: What :func:`notification_params` returns for a notification that must not go out.
DROP = _Drop.DROP


def modern_result(
    result: Mapping[str, Any],
    method: str,
    rid: Any,
    server_info: Mapping[str, Any] | None,
    config: ServerConfig,
) -> dict[str, Any]:
    """A handler's complete ``result`` to ``method`` as the modern wire sends it: a
    ``resultType`` (complete unless the handler said), ``serverInfo`` in ``_meta`` unless the
    handler gave one, a listen stream's subscription tag, cache hints (SEP-2549)."""
    out = dict(result)
    if "resultType" not in out:
        out["resultType"] = COMPLETE
    if server_info is not None:
        meta = out.get("_meta")
        if meta is None:
            out["_meta"] = {SERVER_INFO: server_info}
        elif SERVER_INFO not in meta:
            out["_meta"] = {**meta, SERVER_INFO: server_info}
    if method == LISTEN:
        out["_meta"] = tag(out, rid)["_meta"]
    elif method in CACHEABLE_METHODS and out["resultType"] == COMPLETE:
        if "ttlMs" not in out:
            out["ttlMs"] = config.cache_ttl_ms
        if "cacheScope" not in out:
            out["cacheScope"] = config.cache_scope
    return out


def notification_params(
    method: str,
    params: Mapping[str, Any] | None,
    related: bool,
    request: RequestReceived | None,
    acknowledged: bool,
    session: LegacySession | None,
) -> Mapping[str, Any] | _Drop | None:
    """The params to send notification ``method`` with, or :data:`DROP`. ``related``: it
    belongs to a client request, ``request`` when that is still in flight (progress and logs
    for a request that is over must stop); on a listen stream (``acknowledged`` or not) only
    the types the client opted in to go, tagged; a log message goes only at the level asked
    for. Raises :class:`LocalProtocolError` for a notification that may never go."""
    if related:
        if request is None:
            return DROP
        if request.method == LISTEN:
            tagged = on_stream(request, acknowledged, method, params)
            return DROP if tagged is None else tagged
    if method == "notifications/message" and not log_allowed(params, request, session):
        return DROP
    return params


def honoured(
    request: RequestReceived | None, request_id: Any, notifications: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The filter a ``subscriptions/listen`` acknowledgement honours: ``notifications`` (all
    that was requested when None). Raises :class:`LocalProtocolError` when ``request`` is not
    an open listen request or the filter names a type the client did not request."""
    if request is None or request.method != LISTEN:
        raise LocalProtocolError(f"{request_id!r} is not an open subscriptions/listen request")
    requested = request.params["notifications"]
    out = dict(requested) if notifications is None else dict(notifications)
    if not all(k in requested for k in out):
        raise LocalProtocolError("acknowledge() may only honour notification types requested")
    return out


#: What only a 2026-07-28 result carries at its top level (``resultType``, a cacheable
#: result's hints): never sent on the legacy wire, where a handler written for both eras, or a
#: bridge relaying a modern server, may still have put them.
MODERN_RESULT_FIELDS = frozenset({"resultType", "ttlMs", "cacheScope"})


def legacy_result(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """``result`` for the legacy wire: without the modern-only fields and without the modern
    ``serverInfo`` in its ``_meta`` (2025-11-25 names the server once, in ``initialize``)."""
    meta = result.get("_meta")
    if not isinstance(meta, Mapping) or SERVER_INFO not in meta:
        meta = None
    if meta is None and MODERN_RESULT_FIELDS.isdisjoint(result):
        return result
    out = {k: v for k, v in result.items() if k not in MODERN_RESULT_FIELDS}
    if meta is not None:
        rest = {k: v for k, v in meta.items() if k != SERVER_INFO}
        if rest:
            out["_meta"] = rest
        else:
            del out["_meta"]
    return out


def check_input_required(
    method: str, ir: InputRequiredResult, max_input_requests: int, seals: bool
) -> None:
    """Refuse (LocalProtocolError) ``input_required`` on a method that does not allow it, with
    more input requests than the limit, or with a state that could not travel unsealed on a
    server that does not ``seals`` it. That last rule holds on both wires: the legacy shim
    keeps state in memory, but a handler that works there must not fail when the same request
    arrives on the modern wire."""
    if method not in MRTR_METHODS:
        raise LocalProtocolError(
            f"input_required is only allowed on {', '.join(sorted(MRTR_METHODS))}, not on {method}"
        )
    requests = ir.input_requests
    if requests is not None and len(requests) > max_input_requests:
        raise LocalProtocolError(f"input_requests has more than {max_input_requests} entries")
    state = ir.request_state
    if state is not None and not seals and type(state) is not str:
        raise LocalProtocolError(
            f"request_state must be a string on a server that does not seal state "
            f"(ServerConfig.request_state=UNSEALED), got {type(state).__name__}; "
            f"encode it yourself, or keep the default sealing"
        )


def missing_capability(ir: InputRequiredResult, capabilities: Any) -> JsonRpcError:
    """The -32021 for the input requests of ``ir`` that the client's ``capabilities`` do not
    allow (the caller asked :meth:`InputRequiredResult.allowed_by` first: the hot path skips
    this call): ``data`` carries the full merged set, the message names what is missing."""
    required = ir.required_capabilities()
    names = ", ".join(capability_paths(missing_capabilities(required, capabilities)))
    return JsonRpcError.missing_capability(required, f"Missing required client capability: {names}")


def parse_input_required(
    result: Mapping[str, Any],
) -> tuple[InputRequiredResult, Mapping[str, Any] | None]:
    """An application's ``input_required`` mapping, validated like a constructed value, and
    its ``_meta`` (kept on the wire, merged with serverInfo)."""
    meta = result.get("_meta")
    try:
        if meta is not None and not isinstance(meta, Mapping):
            raise TypeError("_meta: must be an object")
        return InputRequiredResult.from_wire(result), meta
    except (TypeError, ValueError) as exc:
        raise LocalProtocolError(f"invalid input_required result: {exc}") from exc


def discover_result(config: ServerConfig) -> dict[str, Any]:
    """The ``DiscoverResult`` of ``config``: versions, capabilities, instructions, the tasks
    extension when it is on."""
    result: dict[str, Any] = {
        "supportedVersions": [*config.supported_versions, *config.legacy_versions],
        "capabilities": dict(config.capabilities),
    }
    if config.instructions is not None:
        result["instructions"] = config.instructions
    if config.tasks is not None:
        capabilities = result["capabilities"]
        extensions = capabilities.get("extensions")
        extensions = dict(extensions) if isinstance(extensions, Mapping) else {}
        extensions.setdefault(TASKS_EXTENSION, {})
        capabilities["extensions"] = extensions
    return result
