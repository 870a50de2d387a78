"""Where a task's rounds run: the protocol between a server adapter and its task runner.

The server connection decides *that* a round must run: creating a task, a ``tasks/update``
that answers the last question, a state-only round, each gives a :class:`RequestReceived`
with ``task_id`` set; a ``tasks/cancel`` gives :class:`~mrtr_sansio.tasks.TaskCancelled`. The
adapter hands those values to its runner, which decides *where* the round runs: in a pool of
the serving process (``mrtr_sansio.adapters`` ``TaskRunner``, the default) or as a job for
worker processes (``mrtr_sansio.adapters.docket.DocketRunner``). Whatever the runner, the
round's outcome goes to the task store, where any server reads it.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from mrtr_sansio._events import RequestReceived

__all__ = ["RoundRunner"]


@runtime_checkable
class RoundRunner(Protocol):
    """What a server adapter asks of the runner of its tasks' rounds
    (``McpHttpApp(task_runner=...)``, ``anyio.serve(task_runner=...)``)."""

    def admit(self, result: Any, principal: str | None = None) -> Any:
        """What a handler returned (``result``), or a :class:`~mrtr_sansio.JsonRpcError`
        refusing a new task (``result`` a ``RunAsTask``) the runner cannot take now."""
        ...

    def start(self, run: RequestReceived) -> None:
        """Have the round ``run`` run (returns at once; needs :meth:`attach` with a group)."""
        ...

    async def run_all(self, runs: list[RequestReceived]) -> None:
        """Have the rounds ``runs`` run (emptying the list): handed over when attached to a
        group, else (the in-process runner) run here, one after the other."""
        ...

    def cancel(self, task_id: str) -> None:
        """The task ``task_id`` was cancelled: stop its round wherever it runs."""
        ...

    def attach(self, group: Any) -> None:
        """Start rounds in ``group`` (the adapter's task group) from now on; None detaches."""
        ...

    async def stop(self) -> None:
        """The server is stopping: end what this runner runs in this process and detach."""
        ...
