"""Following a task a call became (tasks extension, SEP-2663), pure: the params of the
``tasks/get`` / ``tasks/update`` / ``tasks/cancel`` the connection sends for it, when it polls,
and what each answer means (the trigger that moves the call through
:data:`~mrtr_sansio._lifecycle.CLIENT_CALL`, as ``results.py`` says for a call's own answers).

A task's input requests surface as :class:`~mrtr_sansio.InputNeeded` like a round's; their keys
are unique for the task's lifetime, so a key surfaced once is never asked again. The
:class:`~mrtr_sansio.ClientConnection` that owns the call carries out what these decide.
"""

from __future__ import annotations

from typing import Any

from mrtr_sansio._config import ClientConfig
from mrtr_sansio._errors import ErrorCode, InvalidResponseError, JsonRpcError, LocalProtocolError
from mrtr_sansio._events import Call, CallCompleted, CallFailed, RoundsExhausted
from mrtr_sansio._lifecycle import CallPhase, CallTrigger, TaskStatus
from mrtr_sansio._mcp.mrtr_fields import COMPLETE
from mrtr_sansio._wire.jsonrpc import request_message
from mrtr_sansio.tasks._client import read_task
from mrtr_sansio.tasks._machine import TASK_METHOD

from .calls import TASK_LEGS, CallState
from .checks import read_input_required
from .results import Reading, invalid

__all__ = ["cancel_message", "read_task_answer", "resumed", "task_params"]

# Bound once: an enum member's attribute lookup costs several times a global's.
_COMPLETE, _ERROR, _INVALID = CallTrigger.COMPLETE, CallTrigger.ERROR, CallTrigger.INVALID
_TASK_WORKING, _TASK_UPDATING = CallTrigger.TASK_WORKING, CallPhase.TASK_UPDATING


def resumed(call_id: int, task_id: Any, resumable: bool, backoff: float) -> CallState:
    """The call ``call_id`` following the task ``task_id`` of an earlier connection, as a
    ``tools/call``. Raises unless ``task_id`` is a non-empty string and the connection is
    ``resumable`` (the modern wire, the tasks extension declared)."""
    if type(task_id) is not str or not task_id:
        raise TypeError("task_id: must be a non-empty string")
    if not resumable:
        raise LocalProtocolError(
            "resume_task needs the modern wire and the tasks extension in the capabilities"
        )
    st = CallState(Call(call_id, TASK_METHOD, {}), backoff)
    st.task_id = task_id
    return st


def task_params(st: CallState, answers: bool, envelope: dict[str, Any]) -> dict[str, Any]:
    """The params of ``tasks/get``, or of ``tasks/update`` with this round's answers."""
    params: dict[str, Any] = {"taskId": st.task_id}
    if answers:
        params["inputResponses"] = st.answers
    params["_meta"] = dict(envelope)
    return params


def cancel_message(rid: int, st: CallState, envelope: dict[str, Any]) -> dict[str, Any]:
    """The ``tasks/cancel`` of the call's task, under ``rid`` (its answer is ignored)."""
    return request_message(rid, "tasks/cancel", {"taskId": st.task_id, "_meta": dict(envelope)})


def read_task_answer(st: CallState, msg: dict[str, Any], config: ClientConfig) -> Reading:
    """The answer ``msg`` to the ``tasks/get`` (phase ``TASK_POLLING``) or ``tasks/update``
    (``TASK_UPDATING``) of the call's task. Keys of the task's input requests are unique for
    its lifetime, so a key surfaced once is never asked again."""
    if "error" in msg:
        return _ERROR, CallFailed(st.call, JsonRpcError.from_wire(msg["error"]))
    result = msg["result"]
    updating = st.phase is _TASK_UPDATING
    if type(result) is not dict or result.get("resultType", COMPLETE) != COMPLETE:
        return _INVALID, invalid(st, f"{TASK_LEGS[st.phase]} must answer a complete result object")
    if updating:
        return _TASK_WORKING, None
    try:
        view = read_task(result, st.task_id)
    except InvalidResponseError as exc:
        return _INVALID, invalid(st, str(exc))
    poll_ms = view.poll_interval_ms
    status = view.status
    if status is TaskStatus.COMPLETED:
        assert view.result is not None
        return _COMPLETE, CallCompleted(st.call, view.result)
    if status is TaskStatus.FAILED:
        assert view.error is not None
        return _ERROR, CallFailed(st.call, view.error)
    if status is TaskStatus.CANCELLED:
        error = JsonRpcError(ErrorCode.INTERNAL_ERROR, "The task was cancelled")
        return _ERROR, CallFailed(st.call, error)
    if status is not TaskStatus.INPUT_REQUIRED:
        return _TASK_WORKING, poll_ms
    requests = view.input_requests or {}
    try:
        embedded, _ = read_input_required(
            {"inputRequests": requests}, config.capabilities, config.limits
        )
    except InvalidResponseError as exc:
        return _INVALID, invalid(st, str(exc))
    new = [r for r in embedded if r[0] not in st.task_seen]
    if not new:
        return _TASK_WORKING, poll_ms
    if st.round >= config.max_rounds:
        return CallTrigger.ROUND_CAP, RoundsExhausted(st.call, st.round, result)
    return CallTrigger.TASK_INPUT_REQUESTS, (new, poll_ms)
