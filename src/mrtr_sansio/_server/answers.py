"""What the server sends for a handler's answer, as values: a result stripped for the legacy
wire, the checks of an ``input_required`` answer and its -32021 refusal, and the
``DiscoverResult``; the methods whose results carry cache hints. The connection decides which
applies and queues what comes back (it decorates a modern complete result itself: that runs
on every answer, and a call there would cost every exchange).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mrtr_sansio._config import ServerConfig
from mrtr_sansio._errors import JsonRpcError, LocalProtocolError
from mrtr_sansio._mcp.capabilities import capability_paths, missing_capabilities
from mrtr_sansio._mcp.envelope import SERVER_INFO
from mrtr_sansio._mcp.methods import CACHEABLE_METHODS, MRTR_METHODS
from mrtr_sansio._mcp.values import InputRequiredResult
from mrtr_sansio.tasks._values import EXTENSION as TASKS_EXTENSION

__all__ = [
    "CACHEABLE_METHODS",
    "MODERN_RESULT_FIELDS",
    "check_input_required",
    "discover_result",
    "legacy_result",
    "missing_capability",
    "parse_input_required",
]


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
