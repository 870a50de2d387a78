"""What the server's answer to one of a call's requests means (pure): the trigger that moves
the call through :data:`~mrtr_sansio._lifecycle.CLIENT_CALL`, and what goes with it.

:func:`read_answer` reads the answer to the call's own request (the first one or a retry):
a final result, a JSON-RPC error, ``input_required`` (its requests checked against our
capabilities and limits, the round cap applied) or, with the tasks extension, a
``CreateTaskResult``. :func:`read_task_answer` reads the answer to a ``tasks/get`` or
``tasks/update`` of a call that became a task. Each returns ``(trigger, detail)``:

=====================================  ==============================================
trigger                                detail
=====================================  ==============================================
``COMPLETE``, ``ERROR``, ``INVALID``,  the event that ends the call
``ROUND_CAP``
``INPUT_REQUESTS``                     ``(requests, requestState)`` of the new round
``STATE_ONLY``                         the ``requestState`` to echo after the backoff
``TASK_CREATED``                       the task's :class:`~mrtr_sansio.tasks._client.TaskView`
``TASK_INPUT_REQUESTS``                the task's requests not surfaced before
``TASK_WORKING``                       None: poll again later
=====================================  ==============================================
"""

from __future__ import annotations

from typing import Any

from mrtr_sansio._config import ClientConfig
from mrtr_sansio._errors import ErrorCode, InvalidResponseError, JsonRpcError
from mrtr_sansio._events import CallCompleted, CallFailed, RoundsExhausted
from mrtr_sansio._lifecycle import CallPhase, CallTrigger
from mrtr_sansio._mcp.envelope import Era
from mrtr_sansio._mcp.values import INPUT_REQUIRED, MRTR_METHODS
from mrtr_sansio.tasks._client import read_task
from mrtr_sansio.tasks._machine import TASK_METHOD
from mrtr_sansio.tasks._table import TaskStatus

from .calls import CallState
from .checks import read_input_required

__all__ = ["Reading", "invalid", "read_answer", "read_task_answer"]

#: What an answer means for its call: the trigger, and what goes with it (see the module).
Reading = tuple[CallTrigger, Any]

# Bound once: an enum member's attribute lookup costs several times a global's.
_COMPLETE, _ERROR, _INVALID = CallTrigger.COMPLETE, CallTrigger.ERROR, CallTrigger.INVALID
_INPUT_REQUESTS, _STATE_ONLY = CallTrigger.INPUT_REQUESTS, CallTrigger.STATE_ONLY
_TASK_WORKING, _TASK_UPDATING = CallTrigger.TASK_WORKING, CallPhase.TASK_UPDATING


def invalid(st: CallState, reason: str) -> CallFailed:
    """The event ending a call whose server answered it in a way the protocol forbids."""
    error = JsonRpcError(ErrorCode.INTERNAL_ERROR, f"Invalid response from the server: {reason}")
    return CallFailed(st.call, error, True)


def read_answer(
    st: CallState, msg: dict[str, Any], era: Era | None, tasks: bool, config: ClientConfig
) -> Reading:
    """The answer ``msg`` to the call's own request (``tasks``: we declare the extension)."""
    if "error" in msg:
        return _ERROR, CallFailed(st.call, JsonRpcError.from_wire(msg["error"]))
    result = msg["result"]
    if type(result) is not dict:
        return _INVALID, invalid(st, "the result is not an object")
    kind = result.get("resultType", "complete")
    if kind == INPUT_REQUIRED:
        if era is not Era.MODERN:
            return _INVALID, invalid(st, "input_required result on the legacy wire")
        if st.call.method not in MRTR_METHODS:
            return _INVALID, invalid(st, f"input_required result on {st.call.method}")
        try:
            requests, state = read_input_required(result, config.capabilities, config.limits)
        except InvalidResponseError as exc:
            return _INVALID, invalid(st, str(exc))
        if st.round >= config.max_rounds:
            again = tuple(key for key, _, _ in requests if key in st.answers)
            return CallTrigger.ROUND_CAP, RoundsExhausted(st.call, st.round, result, again)
        if not requests:
            return _STATE_ONLY, state
        return _INPUT_REQUESTS, (requests, state)
    if kind == "task" and tasks and era is Era.MODERN:
        if st.call.method != TASK_METHOD:
            return _INVALID, invalid(st, f"CreateTaskResult on {st.call.method}")
        try:
            return CallTrigger.TASK_CREATED, read_task(result, None)
        except InvalidResponseError as exc:
            return _INVALID, invalid(st, str(exc))
    if (
        kind == "complete"
        or era is not Era.MODERN
        or (type(kind) is str and kind in config.extra_result_types)
    ):
        return _COMPLETE, CallCompleted(st.call, result)
    return _INVALID, invalid(st, f"unknown resultType {kind!r}")


def read_task_answer(st: CallState, msg: dict[str, Any], config: ClientConfig) -> Reading:
    """The answer ``msg`` to the ``tasks/get`` (phase ``TASK_POLLING``) or ``tasks/update``
    (``TASK_UPDATING``) of the call's task. Keys of the task's input requests are unique for
    its lifetime, so a key surfaced once is never asked again."""
    if "error" in msg:
        return _ERROR, CallFailed(st.call, JsonRpcError.from_wire(msg["error"]))
    result = msg["result"]
    updating = st.phase is _TASK_UPDATING
    if type(result) is not dict or result.get("resultType", "complete") != "complete":
        method = "tasks/update" if updating else "tasks/get"
        return _INVALID, invalid(st, f"{method} must answer a complete result object")
    if updating:
        return _TASK_WORKING, None
    try:
        view = read_task(result, st.task_id)
    except InvalidResponseError as exc:
        return _INVALID, invalid(st, str(exc))
    if view.poll_interval_ms is not None:
        st.task_poll = view.poll_interval_ms
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
        return _TASK_WORKING, None
    requests = view.input_requests or {}
    try:
        embedded, _ = read_input_required(
            {"inputRequests": requests}, config.capabilities, config.limits
        )
    except InvalidResponseError as exc:
        return _INVALID, invalid(st, str(exc))
    new = [r for r in embedded if r[0] not in st.task_seen]
    if not new:
        return _TASK_WORKING, None
    if st.round >= config.max_rounds:
        return CallTrigger.ROUND_CAP, RoundsExhausted(st.call, st.round, result)
    st.task_seen.update(key for key, _, _ in new)
    return CallTrigger.TASK_INPUT_REQUESTS, new
