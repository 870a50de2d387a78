"""What the server's answer to one of a call's requests means (pure): the trigger that moves
the call through :data:`~mrtr_sansio._lifecycle.CLIENT_CALL`, and what goes with it.

:func:`read_answer` reads the answer to the call's own request (the first one or a retry):
a final result, a JSON-RPC error, ``input_required`` (its requests checked against our
capabilities and limits, the round cap applied) or, with the tasks extension, a
``CreateTaskResult``. ``task_follow.read_task_answer`` reads the answer to a ``tasks/get`` or
``tasks/update`` of a call that became a task. Each returns ``(trigger, detail)``:

=====================================  ==============================================
trigger                                detail
=====================================  ==============================================
``COMPLETE``, ``ERROR``, ``INVALID``,  the event that ends the call
``ROUND_CAP``
``INPUT_REQUESTS``                     ``(requests, requestState)`` of the new round
``STATE_ONLY``                         the ``requestState`` to echo after the backoff
``TASK_CREATED``                       the task's :class:`~mrtr_sansio.tasks._client.TaskView`
``TASK_INPUT_REQUESTS``                ``(requests, pollIntervalMs)``: the task's
                                       requests not surfaced before
``TASK_WORKING``                       the task's ``pollIntervalMs`` (None when it
                                       named none): poll again later
=====================================  ==============================================
"""

from __future__ import annotations

from typing import Any

from mrtr_sansio._config import ClientConfig
from mrtr_sansio._errors import ErrorCode, InvalidResponseError, JsonRpcError
from mrtr_sansio._events import CallCompleted, CallFailed, RoundsExhausted
from mrtr_sansio._lifecycle import CallTrigger
from mrtr_sansio._mcp.envelope import Era
from mrtr_sansio._mcp.methods import MRTR_METHODS
from mrtr_sansio._mcp.mrtr_fields import COMPLETE, INPUT_REQUIRED, TASK
from mrtr_sansio.tasks._client import read_task
from mrtr_sansio.tasks._machine import TASK_METHOD

from .calls import CallState
from .checks import read_input_required

__all__ = ["Reading", "invalid", "read_answer", "unanswered"]

#: What an answer means for its call: the trigger, and what goes with it (see the module).
Reading = tuple[CallTrigger, Any]

# Bound once: an enum member's attribute lookup costs several times a global's.
_COMPLETE, _ERROR, _INVALID = CallTrigger.COMPLETE, CallTrigger.ERROR, CallTrigger.INVALID
_INPUT_REQUESTS, _STATE_ONLY = CallTrigger.INPUT_REQUESTS, CallTrigger.STATE_ONLY


def invalid(st: CallState, reason: str) -> CallFailed:
    """The event ending a call whose server answered it in a way the protocol forbids."""
    error = JsonRpcError(ErrorCode.INTERNAL_ERROR, f"Invalid response from the server: {reason}")
    return CallFailed(st.call, error, True)


def unanswered(st: CallState, reason: str, lost: bool) -> Reading:
    """What ends a call whose request gets no usable answer: none at all (``lost``: the
    transport says why in ``reason``), or one that is not valid JSON-RPC."""
    if lost:
        return CallTrigger.LOST, CallFailed(
            st.call, JsonRpcError(ErrorCode.INTERNAL_ERROR, reason), True
        )
    return _INVALID, invalid(st, reason)


def read_answer(
    st: CallState, msg: dict[str, Any], era: Era | None, tasks: bool, config: ClientConfig
) -> Reading:
    """The answer ``msg`` to the call's own request (``tasks``: we declare the extension)."""
    if "error" in msg:
        return _ERROR, CallFailed(st.call, JsonRpcError.from_wire(msg["error"]))
    result = msg["result"]
    if type(result) is not dict:
        return _INVALID, invalid(st, "the result is not an object")
    kind = result.get("resultType", COMPLETE)
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
    if kind == TASK and tasks and era is Era.MODERN and TASK not in config.extra_result_types:
        if st.call.method != TASK_METHOD:
            return _INVALID, invalid(st, f"CreateTaskResult on {st.call.method}")
        try:
            return CallTrigger.TASK_CREATED, read_task(result, None)
        except InvalidResponseError as exc:
            return _INVALID, invalid(st, str(exc))
    if (
        kind == COMPLETE
        or era is not Era.MODERN
        or (type(kind) is str and kind in config.extra_result_types)
    ):
        return _COMPLETE, CallCompleted(st.call, result)
    return _INVALID, invalid(st, f"unknown resultType {kind!r}")
