"""The client's reading of task results (pure): ``CreateTaskResult`` and ``tasks/get``
answers validated into :class:`TaskView` values the client connection acts on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from mrtr_sansio._errors import InvalidResponseError, JsonRpcError
from mrtr_sansio._lifecycle import TaskStatus

__all__ = ["TaskView", "read_task"]


@attrs.frozen
class TaskView:
    """What one ``CreateTaskResult`` or ``tasks/get`` result says about a task."""

    task_id: str
    status: TaskStatus
    poll_interval_ms: int | None
    #: ``inputRequests`` (input_required), as sent.
    input_requests: Mapping[str, Any] | None = None
    #: The tool's result (completed).
    result: Mapping[str, Any] | None = None
    #: The JSON-RPC error (failed).
    error: JsonRpcError | None = None


def read_task(result: Mapping[str, Any], expected_id: str | None) -> TaskView:
    """Validate a task-shaped result. Raises :class:`InvalidResponseError`."""
    task_id = result.get("taskId")
    if type(task_id) is not str or not task_id:
        raise InvalidResponseError("the task result has no taskId string")
    if expected_id is not None and task_id != expected_id:
        raise InvalidResponseError(f"tasks/get answered for task {task_id!r}")
    try:
        status = TaskStatus(result.get("status"))
    except ValueError:
        raise InvalidResponseError(f"unknown task status {result.get('status')!r}") from None
    poll = result.get("pollIntervalMs")
    if poll is not None and (type(poll) is not int or poll < 0):
        raise InvalidResponseError("pollIntervalMs must be a non-negative integer")
    if status is TaskStatus.INPUT_REQUIRED:
        requests = result.get("inputRequests")
        if type(requests) is not dict:
            raise InvalidResponseError("an input_required task must carry inputRequests")
        return TaskView(task_id, status, poll, input_requests=requests)
    if status is TaskStatus.COMPLETED:
        value = result.get("result")
        if type(value) is not dict:
            raise InvalidResponseError("a completed task must carry its result")
        return TaskView(task_id, status, poll, result=value)
    if status is TaskStatus.FAILED:
        error = result.get("error")
        if type(error) is not dict:
            raise InvalidResponseError("a failed task must carry its JSON-RPC error")
        return TaskView(task_id, status, poll, error=JsonRpcError.from_wire(error))
    return TaskView(task_id, status, poll)
