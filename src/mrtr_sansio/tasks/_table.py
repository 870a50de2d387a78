"""The task status table: the only ways a task's ``status`` may move (SEP-2663).

``working → input_required → working → completed | failed | cancelled``. The task machine
consults :data:`TASK` to choose every next status; a transition the table lacks raises
:class:`~mrtr_sansio.LocalProtocolError`. Terminal statuses have no transitions: the machine
checks :attr:`Lifecycle.terminal` first (a late result, a cancel of a finished task), so such an
event changes nothing instead of reaching the table.
"""

from __future__ import annotations

from mrtr_sansio._lifecycle import Lifecycle, Member

__all__ = ["TASK", "TaskStatus", "TaskTrigger"]


class TaskStatus(Member):
    """A task's ``status`` on the wire."""

    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class TaskTrigger(Member):
    """What moves a task."""

    ASKED = "the handler asked for input"
    RERUN = "the handler returned state only: run again"
    ANSWERED_SOME = "tasks/update answered some of the outstanding requests"
    ANSWERED = "tasks/update answered the last outstanding request"
    RESULT = "the handler returned a result (isError included)"
    ERROR = "the handler returned a JSON-RPC error"
    CANCEL = "tasks/cancel"
    LEASE_EXPIRED = "the worker's lease ran out"


_ENDINGS = {
    TaskTrigger.CANCEL: TaskStatus.CANCELLED,
    TaskTrigger.LEASE_EXPIRED: TaskStatus.FAILED,
}

#: The task status table.
TASK: Lifecycle[TaskStatus, TaskTrigger] = Lifecycle(
    "task",
    "Task (tasks extension, SEP-2663)",
    TaskStatus.WORKING,
    (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED),
    {
        (TaskStatus.WORKING, TaskTrigger.ASKED): TaskStatus.INPUT_REQUIRED,
        (TaskStatus.WORKING, TaskTrigger.RERUN): TaskStatus.WORKING,
        (TaskStatus.WORKING, TaskTrigger.RESULT): TaskStatus.COMPLETED,
        (TaskStatus.WORKING, TaskTrigger.ERROR): TaskStatus.FAILED,
        **{(TaskStatus.WORKING, t): end for t, end in _ENDINGS.items()},
        (TaskStatus.INPUT_REQUIRED, TaskTrigger.ANSWERED_SOME): TaskStatus.INPUT_REQUIRED,
        (TaskStatus.INPUT_REQUIRED, TaskTrigger.ANSWERED): TaskStatus.WORKING,
        **{(TaskStatus.INPUT_REQUIRED, t): end for t, end in _ENDINGS.items()},
    },
)
