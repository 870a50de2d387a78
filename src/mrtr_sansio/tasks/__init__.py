"""The tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) for the server role.

Configure it with ``ServerConfig(tasks=TaskSettings(tools={"slow": "optional"}))``. A handler
becomes a task by returning :class:`RunAsTask` when ``request.can_create_task``; the server
answers ``CreateTaskResult`` and hands the same handler a run of the task
(``request.task_id`` set), which the adapter answers with ``ServerConnection.settle_task``.
What the run returns is the task's outcome: a result (``completed``, ``isError`` included), a
JSON-RPC error (``failed``), or an :class:`~mrtr_sansio.InputRequiredResult` (the task waits in
``input_required`` until ``tasks/update`` answers, then the handler runs again).

Records live in a :class:`TaskStore`: :class:`InMemoryTaskStore` here; SQLite in
:mod:`mrtr_sansio.adapters.stores`. Where a round runs is a :class:`RoundRunner`'s choice (the
serving process, or worker processes).
"""

from __future__ import annotations

from mrtr_sansio._lifecycle import TASK, TaskStatus, TaskTrigger

from ._machine import EXPIRED, NOT_FOUND, TASK_METHOD, TaskLimitError, TaskMachine
from ._runner import RoundRunner
from ._settings import TaskSettings
from ._store import (
    BatchTaskStore,
    InMemoryTaskStore,
    MeteredTaskStore,
    TaskChanged,
    TaskStore,
    TaskStoreError,
    WatchableTaskStore,
)
from ._values import (
    EXTENSION,
    RunAsTask,
    StoredParams,
    Task,
    TaskCancelled,
    TaskStarted,
    TaskSupport,
    iso_time,
)

__all__ = [
    "EXPIRED",
    "EXTENSION",
    "NOT_FOUND",
    "TASK",
    "TASK_METHOD",
    "BatchTaskStore",
    "InMemoryTaskStore",
    "MeteredTaskStore",
    "RoundRunner",
    "RunAsTask",
    "StoredParams",
    "Task",
    "TaskCancelled",
    "TaskChanged",
    "TaskLimitError",
    "TaskMachine",
    "TaskSettings",
    "TaskStarted",
    "TaskStatus",
    "TaskStore",
    "TaskStoreError",
    "TaskSupport",
    "TaskTrigger",
    "WatchableTaskStore",
    "iso_time",
]

from mrtr_sansio._public import publish_errors  # after __all__, which it reads

publish_errors(globals(), __name__)
del publish_errors
