"""The task records a change makes, pure: a task in, the next task out.

What a run of the handler returned becomes the task's next record (:func:`outcome`: a result,
a failure, a round of input asked under fresh task keys, a rerun with new state); a lease that
ran out fails the task (:func:`lease_expired`). Every status comes from the table
:data:`~mrtr_sansio._lifecycle.TASK` (:func:`move`); nothing here reads a store or a clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from mrtr_sansio._errors import ErrorCode, JsonRpcError
from mrtr_sansio._lifecycle import TASK, TaskTrigger
from mrtr_sansio._mcp.mrtr_fields import COMPLETE, INPUT_REQUIRED
from mrtr_sansio._mcp.mrtr_fields import TASK as TASK_RESULT
from mrtr_sansio._mcp.values import InputRequiredResult

from ._bounds import PAYLOAD, sized
from ._settings import TaskSettings
from ._values import RunAsTask, Task

__all__ = [
    "evolve",
    "fail",
    "fresh_key",
    "lease_expired",
    "lease_until",
    "move",
    "outcome",
    "stamped",
    "terminal",
]

#: What a terminal task no longer needs (only a run of the handler reads them).
RUN_ONLY: dict[str, Any] = {
    "params": "{}",
    "state": None,
    "answers": {},
    "outstanding": {},
    "issued": (),
    "capabilities": {},
}


def terminal(task: Task) -> bool:
    """Whether ``task`` is in a status the table ends in."""
    return task.status in TASK.terminal


def lease_until(settings: TaskSettings, now: float) -> float | None:
    """When a run started at ``now`` loses its lease (None: runs hold no lease)."""
    seconds = settings.lease_seconds
    return None if seconds is None else now + seconds


def evolve(task: Task, **changes: Any) -> Task:
    """``task`` with ``changes``, its size taken again when they touch its payload."""
    new = attrs.evolve(task, **changes)
    return sized(new) if PAYLOAD.intersection(changes) else new


def stamped(task: Task, now: float, revision: int) -> Task:
    """``task`` as written at ``now`` with ``revision``."""
    return attrs.evolve(task, updated_at=max(now, task.created_at), revision=revision)


def move(task: Task, trigger: TaskTrigger, **changes: Any) -> Task:
    """The next record: the status the table gives (a terminal one drops what only a run
    needs); :func:`stamped` gives it a new revision and the update time when it is written."""
    status = TASK.step(task.status, trigger)
    if status in TASK.terminal:
        changes = {**changes, **RUN_ONLY}
    return evolve(task, status=status, **changes)


def fail(task: Task, error: JsonRpcError) -> Task:
    """``task`` failed with ``error``."""
    return move(
        task,
        TaskTrigger.ERROR,
        error=error.to_wire(),
        status_message=error.message,
        answers={},
        state=None,
        lease_until=None,
    )


def lease_expired(task: Task, now: float) -> Task:
    """``task`` failed because its run's lease ran out before ``now`` (else ``task``)."""
    if terminal(task) or task.lease_until is None or now <= task.lease_until:
        return task
    error = JsonRpcError(ErrorCode.INTERNAL_ERROR, "The worker running this task stopped")
    return move(
        task,
        TaskTrigger.LEASE_EXPIRED,
        error=error.to_wire(),
        status_message="The worker running this task stopped before it finished",
        outstanding={},
        lease_until=None,
    )


def outcome(
    task: Task,
    result: Any,
    settings: TaskSettings,
    max_input_requests: int,
    lease: float | None,
) -> Task:
    """The record after a run of ``task`` returned ``result`` (``lease``: the lease a rerun
    holds). Raises :class:`TypeError` for a result of no kind a handler may return."""
    if isinstance(result, JsonRpcError):
        return fail(task, result)
    if isinstance(result, RunAsTask):
        return fail(task, JsonRpcError.internal("A task's run cannot become a task"))
    if isinstance(result, Mapping) and result.get("resultType") == INPUT_REQUIRED:
        try:
            result = InputRequiredResult.from_wire(result)
        except (TypeError, ValueError) as exc:
            return fail(task, JsonRpcError.internal(f"invalid input_required: {exc}"))
    if isinstance(result, InputRequiredResult):
        return _ask(task, result, settings, max_input_requests, lease)
    if isinstance(result, Mapping):
        # Inlined as the original request's result (CallToolResult): resultType included.
        out = dict(result)
        kind = out.setdefault("resultType", COMPLETE)
        if kind == TASK_RESULT:
            return fail(task, JsonRpcError.internal("A task's run cannot become a task"))
        return move(task, TaskTrigger.RESULT, result=out, answers={}, state=None, lease_until=None)
    raise TypeError(
        "result must be a mapping, an InputRequiredResult or a JsonRpcError, not "
        f"{type(result).__name__}"
    )


def _ask(
    task: Task,
    ir: InputRequiredResult,
    settings: TaskSettings,
    max_input_requests: int,
    lease: float | None,
) -> Task:
    if task.round >= settings.max_rounds:
        return fail(
            task,
            JsonRpcError.internal(
                f"The task still needed input after {settings.max_rounds} rounds"
            ),
        )
    requests = ir.input_requests
    if not requests:  # state only: run again with the new state
        return move(
            task,
            TaskTrigger.RERUN,
            state=ir.request_state,
            answers={},
            round=task.round + 1,
            lease_until=lease,
        )
    if len(requests) > max_input_requests:
        return fail(
            task,
            JsonRpcError.internal(f"input_requests has more than {max_input_requests} entries"),
        )
    if not ir.allowed_by(task.capabilities):
        return fail(task, JsonRpcError.missing_capability(ir.required_capabilities()))
    issued = list(task.issued)
    outstanding: dict[str, Any] = {}
    for key, request in requests.items():
        task_key = fresh_key(key, issued)
        issued.append(task_key)
        outstanding[task_key] = {"key": key, "request": request.to_wire()}
    return move(
        task,
        TaskTrigger.ASKED,
        state=ir.request_state,
        answers={},
        outstanding=outstanding,
        issued=tuple(issued),
        lease_until=None,
    )


def fresh_key(key: str, issued: list[str]) -> str:
    """``key``, or ``key.N`` with the smallest N >= 2 not issued yet."""
    if key not in issued:
        return key
    n = 2
    while f"{key}.{n}" in issued:
        n += 1
    return f"{key}.{n}"
