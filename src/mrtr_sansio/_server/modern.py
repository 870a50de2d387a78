"""The server's modern (2026-07-28) requests: the checks a request with the ``_meta`` envelope
passes before it reaches the application, in the order conformance pins.

``_meta`` must be an object (-32602); without a protocol version in it the request is a legacy
one (:mod:`.legacy` checks it). Then the envelope's fields (-32602), the HTTP mirror and
``Mcp-Param`` headers when given (-32020), the protocol version (-32022), legacy-only methods
(-32601), then per method: the task gate of ``tools/call`` (-32021), the MRTR fields of
``tools/call``/``prompts/get``/``resources/read`` (-32602, read by the :class:`StateGate`), the
filter of ``subscriptions/listen``, and the ``tasks/*`` requests, answered from the task store.
A pure part: it holds the connection's config, state gate and task machine, keeps nothing of a
request, and returns what the connection records (or raises the :class:`RemoteProtocolError`
it answers).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mrtr_sansio._config import ServerConfig
from mrtr_sansio._errors import JsonRpcError, RemoteProtocolError
from mrtr_sansio._events import Event
from mrtr_sansio._mcp.capabilities import declares_tasks
from mrtr_sansio._mcp.envelope import (
    CLIENT_CAPABILITIES,
    CLIENT_INFO,
    LOG_LEVEL,
    LOG_LEVEL_RANK,
    PROTOCOL_VERSION_KEY,
    envelope_error,
    invalid,
)
from mrtr_sansio._mcp.methods import LEGACY_ONLY_METHODS, MRTR_METHODS, PARAM_HEADER_METHOD
from mrtr_sansio._mcp.subscriptions import LISTEN
from mrtr_sansio.http._facts import HttpRequestFacts, check_headers
from mrtr_sansio.http._param_headers import check_param_headers
from mrtr_sansio.tasks._machine import TASK_METHOD, TaskMachine
from mrtr_sansio.tasks._server import (
    TASK_REQUESTS,
    answer_task_request,
    missing_tasks,
    required_task_error,
)

from .state import StateGate

__all__ = ["Admitted", "ModernRequests"]

#: What an admitted request carries: (handler state, round, the observer's carry, the answer
#: already known -- a ``tasks/*`` result and the event it causes -- or None).
Admitted = tuple[
    Any, int | None, Mapping[str, str] | None, tuple[dict[str, Any], Event | None] | None
]

# A request without MRTR fields: a first round, nothing carried (one value, never rebuilt).
_FIRST_ROUND: Admitted = (None, 1, None, None)


class ModernRequests:
    """The checks of one server connection's modern requests (see the module docstring)."""

    __slots__ = ("_config", "_gate", "_max_responses", "_supported", "_tasks")

    def __init__(self, config: ServerConfig, gate: StateGate, tasks: TaskMachine | None) -> None:
        self._config = config
        self._gate = gate
        self._tasks = tasks
        self._max_responses = config.limits.max_input_responses
        self._supported = config.supported_versions

    def admit(
        self,
        rid: Any,
        method: str,
        params: dict[str, Any],
        http: HttpRequestFacts | None,
        principal: str | None,
    ) -> Admitted | None:
        """Check request ``rid``: what the connection records of it, None when its ``_meta``
        names no protocol version (a legacy request), or a :class:`RemoteProtocolError` (a
        :class:`~mrtr_sansio._server.state.StateRejectedError` carries an event to queue)."""
        meta = params.get("_meta")
        if type(meta) is dict:
            version = meta.get(PROTOCOL_VERSION_KEY)
            if version is None:
                return None
        elif meta is None:
            return None
        else:
            raise invalid(rid, "_meta must be an object")
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
            mirrored_params = self._config.param_headers
            if method == PARAM_HEADER_METHOD and mirrored_params:
                name = params.get("name")
                mirrored = mirrored_params.get(name) if type(name) is str else None
                if mirrored:
                    check_param_headers(http, rid, params.get("arguments"), mirrored)
        if version not in self._supported:
            served = [*self._supported, *self._config.legacy_versions]
            raise RemoteProtocolError(JsonRpcError.unsupported_version(served, version), rid)
        tasks = self._tasks
        if method in MRTR_METHODS:
            if tasks is not None and method == TASK_METHOD:
                refused = required_task_error(tasks, rid, params, capabilities, legacy=False)
                if refused is not None:
                    raise refused
            if "inputResponses" in params or "requestState" in params:
                state, round_, carried = self._gate.read(rid, method, params, principal)
                return state, round_, carried, None
        elif method in LEGACY_ONLY_METHODS:
            raise RemoteProtocolError(JsonRpcError.method_not_found(method), rid)
        elif method == LISTEN:
            wanted = params.get("notifications")
            if type(wanted) is not dict:
                raise invalid(rid, "subscriptions/listen: notifications must be an object")
            if tasks is not None and "taskIds" in wanted and not declares_tasks(capabilities):
                raise missing_tasks(rid)
        elif method in TASK_REQUESTS and tasks is not None:
            result, found, caused = answer_task_request(
                tasks, rid, method, params, capabilities, principal, self._max_responses
            )
            return None, None, found, (result, caused)
        return _FIRST_ROUND
