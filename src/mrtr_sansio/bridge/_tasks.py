"""The era bridge's task rules (tasks extension, SEP-2663): which tasks a downstream principal
may reach through the bridge.

The upstream server sees one client, the bridge, whoever sent the request downstream; it cannot
tell principals apart, so the bridge does. A task id the upstream returned to a principal's
``tools/call`` is bound to that principal, and a ``tasks/*`` request relays only with a task id
bound to the principal sending it. Every other id gets the answer an unknown task gets, from the
bridge itself, so that nothing a principal sends about another's task reaches the upstream and a
guess learns nothing (ext-tasks "Security Considerations": auth binding).

The legacy wire's tasks (2025-11-25: ``CreateTaskResult`` is ``{"task": {...}}``, and
``tasks/result`` and ``tasks/list`` join the requests) are held to the same binding, and a
``tasks/list`` answer is cut to the sender's own tasks (that revision's "Security
Considerations": a list must not expose other requestors' tasks).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from mrtr_sansio._errors import JsonRpcError
from mrtr_sansio._mcp.capabilities import declares_tasks
from mrtr_sansio._mcp.mrtr_fields import TASK
from mrtr_sansio.tasks._machine import NOT_FOUND
from mrtr_sansio.tasks._server import missing_tasks

__all__ = [
    "LIST_TASKS",
    "TASK_PREFIX",
    "UNKNOWN_TASK",
    "TaskOwners",
    "created_task",
    "owned_listing",
    "task_refusal",
]

#: The method prefix the tasks extension reserves (ext-tasks "Reservations"): every request
#: under it names a task, and is relayed only for that task's owner.
TASK_PREFIX = "tasks/"
#: The answer to a ``tasks/*`` request naming a task the sender did not create through this
#: bridge process: the words and code of this package's server for an unknown task (-32602,
#: ext-tasks "Protocol Errors"), whether the id is another principal's, forgotten or made up.
UNKNOWN_TASK = JsonRpcError.invalid_params(f"Failed to retrieve task: {NOT_FOUND}")
#: The legacy wire's request that lists tasks rather than naming one (2025-11-25).
LIST_TASKS = "tasks/list"


def created_task(result: Mapping[str, Any], legacy: bool = False) -> str | None:
    """The task id of a ``CreateTaskResult`` (``resultType: "task"``; ``legacy``, from a
    2025-11-25 upstream: ``{"task": {"taskId": ...}}``), else None."""
    if legacy:
        task = result.get("task")
        task_id = task.get("taskId") if isinstance(task, Mapping) else None
    elif result.get("resultType") == TASK:
        task_id = result.get("taskId")
    else:
        return None
    return task_id if isinstance(task_id, str) else None


def task_refusal(
    owners: TaskOwners,
    principal: str | None,
    method: str,
    params: Mapping[str, Any],
    capabilities: Mapping[str, Any],
    legacy: bool = False,
) -> JsonRpcError | None:
    """Why a ``tasks/*`` request of ``principal`` is not relayed, or None to relay it: modern,
    -32021 when its sender did not declare the extension (ext-tasks "Protocol Errors": MUST);
    then :data:`UNKNOWN_TASK` unless ``params.taskId`` is bound to ``principal``. ``legacy``
    (a 2025-11-25 upstream, whose own capabilities negotiate its tasks): ``tasks/list`` is
    relayed, its answer cut by :func:`owned_listing`."""
    if legacy and method == LIST_TASKS:
        return None
    if not legacy and not declares_tasks(capabilities):
        return missing_tasks(None).error
    if not owners.owns(principal, params.get("taskId")):
        return UNKNOWN_TASK
    return None


def owned_listing(
    result: Mapping[str, Any], owners: TaskOwners, principal: str | None
) -> dict[str, Any]:
    """A legacy ``tasks/list`` answer with only ``principal``'s tasks (the upstream lists all
    the bridge's, every principal's); its ``nextCursor`` kept, pages may then be short."""
    tasks = result.get("tasks")
    listed = tasks if isinstance(tasks, list) else []
    mine = [t for t in listed if isinstance(t, Mapping) and owners.owns(principal, t.get("taskId"))]
    return {**result, "tasks": mine}


class TaskOwners:
    """The task ids the upstream returned through the bridge, each bound to the principal whose
    call created it; at most ``max_per_principal`` for one principal and ``max_tasks`` in all.

    Past a bound the least recently used id (of that principal first) is forgotten: its
    ``tasks/*`` requests then get :data:`UNKNOWN_TASK`, as a task the upstream purged would.
    """

    def __init__(self, max_tasks: int, max_per_principal: int) -> None:
        self.max_tasks = max_tasks
        self.max_per_principal = max_per_principal
        self._owner: OrderedDict[str, str | None] = OrderedDict()  # oldest use first
        self._count: dict[str | None, int] = {}

    def __len__(self) -> int:
        return len(self._owner)

    def bind(self, principal: str | None, task_id: str) -> None:
        """Bind ``task_id`` to ``principal`` (a task the upstream created for its call)."""
        if task_id in self._owner:  # an upstream reusing an id: it stays its first owner's
            return
        if self._count.get(principal, 0) >= self.max_per_principal:
            self._forget(next(k for k, p in self._owner.items() if p == principal))
        elif len(self._owner) >= self.max_tasks:
            self._forget(next(iter(self._owner)))
        self._owner[task_id] = principal
        self._count[principal] = self._count.get(principal, 0) + 1

    def owns(self, principal: str | None, task_id: object) -> bool:
        """True when ``task_id`` is bound to ``principal`` (a use: it is then the newest)."""
        if not isinstance(task_id, str) or task_id not in self._owner:
            return False
        if self._owner[task_id] != principal:
            return False
        self._owner.move_to_end(task_id)
        return True

    def _forget(self, task_id: str) -> None:
        principal = self._owner.pop(task_id)
        left = self._count[principal] - 1
        if left:
            self._count[principal] = left
        else:
            del self._count[principal]
