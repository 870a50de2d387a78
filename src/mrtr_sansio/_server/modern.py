"""The checks of a modern (2026-07-28) request before anything of it is kept, in the order
conformance pins: the required ``_meta`` fields (-32602), the mirror and param headers when an
HTTP request carried it (-32020), the protocol version (-32022), then per method the legacy-only
methods (-32601), a task-required tool the client cannot run as a task (-32021) and the
``subscriptions/listen`` filter. Each check raises :class:`RemoteProtocolError` or returns; the
MRTR fields are the state gate's (:mod:`.state`), the ``tasks/*`` requests the tasks part's.
"""

from __future__ import annotations

from typing import Any

from mrtr_sansio._config import ServerConfig
from mrtr_sansio._errors import JsonRpcError, RemoteProtocolError
from mrtr_sansio._mcp.capabilities import declares_tasks
from mrtr_sansio._mcp.envelope import (
    CLIENT_CAPABILITIES,
    CLIENT_INFO,
    LOG_LEVEL,
    LOG_LEVEL_RANK,
    envelope_error,
    invalid,
)
from mrtr_sansio._mcp.methods import PARAM_HEADER_METHOD
from mrtr_sansio._mcp.subscriptions import LISTEN
from mrtr_sansio._mcp.values import MRTR_METHODS
from mrtr_sansio.http._facts import HttpRequestFacts, check_headers
from mrtr_sansio.http._param_headers import check_param_headers
from mrtr_sansio.tasks._machine import TASK_METHOD, TaskMachine
from mrtr_sansio.tasks._server import missing_tasks, required_task_error

__all__ = ["LEGACY_ONLY_METHODS", "check_modern"]

#: Methods of the legacy wire that the modern wire removed; with an envelope they are -32601.
LEGACY_ONLY_METHODS = frozenset(
    {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)


def check_modern(
    config: ServerConfig,
    tasks: TaskMachine | None,
    rid: Any,
    method: str,
    params: dict[str, Any],
    meta: dict[str, Any],
    version: Any,
    http: HttpRequestFacts | None,
) -> None:
    """Refuse the request ``rid`` whose ``_meta`` carries a protocol ``version`` unless its
    envelope, headers, version and method-level gates pass."""
    info = meta.get(CLIENT_INFO)
    level = meta.get(LOG_LEVEL)
    capabilities = meta.get(CLIENT_CAPABILITIES)
    if not (
        type(capabilities) is dict
        and type(version) is str
        and (info is None or type(info) is dict)
        and (level is None or (type(level) is str and level in LOG_LEVEL_RANK))
    ):
        raise envelope_error(rid, meta)
    if http is not None:
        check_headers(http, rid, method, params, version)
        mirrored_params = config.param_headers
        if method == PARAM_HEADER_METHOD and mirrored_params:
            name = params.get("name")
            mirrored = mirrored_params.get(name) if type(name) is str else None
            if mirrored:
                check_param_headers(http, rid, params.get("arguments"), mirrored)
    if version not in config.supported_versions:
        raise RemoteProtocolError(
            JsonRpcError.unsupported_version(
                [*config.supported_versions, *config.legacy_versions], version
            ),
            rid,
        )
    if method in MRTR_METHODS:
        if tasks is not None and method == TASK_METHOD:
            refused = required_task_error(tasks, rid, params, capabilities, legacy=False)
            if refused is not None:
                raise refused
    elif method in LEGACY_ONLY_METHODS:
        raise RemoteProtocolError(JsonRpcError.method_not_found(method), rid)
    elif method == LISTEN:
        wanted = params.get("notifications")
        if type(wanted) is not dict:
            raise invalid(rid, "subscriptions/listen: notifications must be an object")
        if tasks is not None and "taskIds" in wanted and not declares_tasks(capabilities):
            raise missing_tasks(rid)
