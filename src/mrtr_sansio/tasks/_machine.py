"""The task machine: a pure part of the server role.

It takes values in (a request, the client's answers, what a handler returned) and returns
values out (a task record, the request for the handler's next run), reading and writing
records only through the :class:`TaskStore` it was given. It never answers the wire itself:
the server connection turns its outcomes into responses. Every status change goes through
the table :data:`~mrtr_sansio._lifecycle.TASK`.

One handler style for three modes: a task's run is a :class:`RequestReceived` like any other
(``task_id`` set), with the creating request's arguments and, after a round of input, the
client's answers under the handler's own keys. When the handler asks again
(:class:`InputRequiredResult`) the task parks in ``input_required`` with task keys that are
unique for its lifetime (a handler key reused in a later round gets a suffix).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from mrtr_sansio._errors import JsonRpcError, LocalProtocolError
from mrtr_sansio._events import RequestReceived
from mrtr_sansio._lifecycle import TASK, TaskStatus, TaskTrigger
from mrtr_sansio._mcp.methods import TASK_METHOD
from mrtr_sansio._mcp.mrtr_fields import RETRY_FIELDS
from mrtr_sansio.observe import Observer, TaskKey, TaskStatusChanged, trace_of

from ._bounds import sized, too_big
from ._outcomes import evolve, fail, lease_expired, lease_until, move, outcome, stamped, terminal
from ._settings import TaskSettings
from ._store import GuardedStore, TaskStoreError
from ._values import RunAsTask, Task, client_capabilities, encoded

__all__ = ["EXPIRED", "NOT_FOUND", "TASK_METHOD", "TaskLimitError", "TaskMachine"]

#: Why a task cannot be read: unknown, or another principal's (the same answer for both).
NOT_FOUND = "Task not found"
#: Why a task cannot be read: its TTL has passed (it is deleted on that read).
EXPIRED = "Task has expired"
#: Attempts of a read-compute-write cycle before giving up (another writer kept winning).
_CAS_ATTEMPTS = 16
#: A retried write waits ``settle_backoff`` times 2**n, n at most this.
_MAX_DOUBLINGS = 4


class TaskLimitError(Exception):
    """A task cannot be created or grow: the principal holds ``max_tasks`` already, or the
    bytes it would store pass ``max_task_bytes`` (per task, per principal or in all)."""


@attrs.frozen
class _Pending:
    """A run's outcome the store refused: written again at ``due``; ``failing``: it is the
    task's failure now (the outcome itself could not be saved)."""

    task_id: str
    result: Any
    attempts: int
    due: float
    failing: bool = False


class TaskMachine:
    """Creates, reads, updates and settles tasks in ``settings.store``."""

    __slots__ = (
        "_clock",
        "_max_input_requests",
        "_new_id",
        "_next_sweep",
        "_obs_key",
        "_observer",
        "_pending",
        "settings",
        "store",
    )

    def __init__(
        self,
        settings: TaskSettings,
        clock: Callable[[], float],
        token_hex: Callable[[int], str],
        max_input_requests: int,
        observer: Observer | None = None,
        observer_key: int = 0,
    ) -> None:
        self.settings = settings
        #: The settings' store; every fault it raises is a :class:`TaskStoreError`.
        self.store = GuardedStore(settings.store)
        self._clock = clock
        self._next_sweep = clock() + settings.sweep_interval
        self._pending: list[_Pending] = []
        self._new_id = token_hex
        self._max_input_requests = max_input_requests
        self._observer = observer
        self._obs_key = observer_key

    # --- creation -----------------------------------------------------------------------

    def create(self, event: RequestReceived, run: RunAsTask) -> tuple[Task, RequestReceived]:
        """Create the task for ``event`` (durably: the store has it when this returns) and
        the request for its first run. Raises :class:`TaskLimitError` and
        :class:`TaskStoreError`."""
        settings = self.settings
        store = self.store
        now = self._clock()
        if store.count(event.principal, now) >= settings.max_tasks:
            raise TaskLimitError(f"Too many tasks (the limit is {settings.max_tasks})")
        params = dict(event.params)
        answers = params.get("inputResponses")
        for name in RETRY_FIELDS:
            params.pop(name, None)
        trace = None
        if self._observer is not None:
            carry = self._observer.carry(self._obs_key, TaskKey(event.request_id))
            trace = trace_of(carry) if isinstance(carry, Mapping) else None
        params_json = encoded(params)  # kept once, compactly: the first run reuses ``params``
        for _ in range(_CAS_ATTEMPTS):  # a 128-bit id collides only by a broken token source
            task = sized(
                Task(
                    task_id=self._new_id(16),
                    owner=event.principal,
                    status=TASK.initial,
                    created_at=now,
                    updated_at=now,
                    ttl_ms=settings.ttl_ms,
                    poll_interval_ms=settings.poll_interval_ms,
                    params=params_json,
                    state=run.state if run.state is not None else event.request_state,
                    round=event.round or 1,
                    status_message=run.status_message,
                    answers=answers if isinstance(answers, dict) else {},
                    lease_until=self._lease(now),
                    capabilities=client_capabilities(params),
                    trace=trace or None,
                )
            )
            refused = too_big(self.settings, self.store, None, task, now)
            if refused is not None:
                raise TaskLimitError(refused)
            if store.create(task):
                if self._observer is not None:
                    self._observe(task, event.request_id)
                return task, self.run_request(task, params)
        raise LocalProtocolError("the task id source keeps returning ids in use")

    def run_request(self, task: Task, params: Mapping[str, Any] | None = None) -> RequestReceived:
        """The request a run of ``task`` hands the handler (``params``: the task's params
        already decoded, else they are read from the record). The machine reads them before
        the write that starts the run: a store that cannot give them leaves the task as it
        was, and params dropped meanwhile (the task ended) come with a write that fails."""
        params = task.params if params is None else dict(params)
        if task.answers:
            params["inputResponses"] = dict(task.answers)
        return RequestReceived(
            task.task_id,
            TASK_METHOD,
            params,
            request_state=task.state,
            round=task.round,
            principal=task.owner,
            task_id=task.task_id,
        )

    # --- the client's requests ------------------------------------------------------------

    def find(self, task_id: Any, principal: str | None) -> Task | str:
        """The task, or why it cannot be read (:data:`NOT_FOUND` also for another principal's
        task, so that ids cannot be probed). An expired task is deleted; a run whose lease
        ran out fails the task here."""
        if type(task_id) is not str:
            return NOT_FOUND
        return self._readable(task_id, self.store.get(task_id), principal)

    def find_many(self, task_ids: Sequence[str], principal: str | None) -> list[Task | str]:
        """:meth:`find` for each of ``task_ids`` (strings), read from the store in one call
        when it can (``subscriptions/listen``: the first read and the resyncs of a stream)."""
        found = self.store.get_many(task_ids)
        return [self._readable(i, task, principal) for i, task in zip(task_ids, found, strict=True)]

    def _readable(self, task_id: str, task: Task | None, principal: str | None) -> Task | str:
        if task is None or task.owner != principal:
            return NOT_FOUND
        now = self._clock()
        if task.expired(now):
            self.store.delete(task_id)
            return EXPIRED
        if task.lease_until is not None and now > task.lease_until and not terminal(task):
            failed = self._swap(task_id, lambda t: lease_expired(t, now))
            return failed if failed is not None else NOT_FOUND
        return task

    def update(
        self, task_id: Any, principal: str | None, responses: Mapping[str, Any]
    ) -> tuple[Task | str, RequestReceived | None]:
        """Apply ``tasks/update``: answers to outstanding keys are kept, others ignored. When
        the last outstanding key is answered the task is working again and the request for
        its next run is returned."""
        found = self.find(task_id, principal)
        if isinstance(found, str):
            return found, None
        resumed: list[dict[str, Any]] = []  # the params of the run it resumes

        def answer(task: Task) -> Task:
            resumed.clear()
            if task.status is not TaskStatus.INPUT_REQUIRED:
                return task
            taken = {k: v for k, v in responses.items() if k in task.outstanding}
            if not taken:
                return task
            outstanding = {k: v for k, v in task.outstanding.items() if k not in taken}
            answers = dict(task.answers)
            for key, response in taken.items():
                answers[task.outstanding[key]["key"]] = response
            if outstanding:
                new = move(
                    task, TaskTrigger.ANSWERED_SOME, outstanding=outstanding, answers=answers
                )
            else:
                new = move(
                    task,
                    TaskTrigger.ANSWERED,
                    outstanding={},
                    answers=answers,
                    round=task.round + 1,
                    status_message=None,
                    lease_until=self._lease(self._clock()),
                )
            refused = too_big(self.settings, self.store, task, new, self._clock())
            if refused is not None:
                raise TaskLimitError(refused)
            if not outstanding:
                resumed.append(task.params)
            return new

        task = self._swap(found.task_id, answer)
        if task is None:
            return NOT_FOUND, None
        return task, (self.run_request(task, resumed[0]) if resumed else None)

    def cancel(self, task_id: Any, principal: str | None) -> tuple[Task | str, bool]:
        """Apply ``tasks/cancel``: a task that is not terminal is cancelled now (True); a
        terminal one is left as it is (cancelling is idempotent)."""
        found = self.find(task_id, principal)
        if isinstance(found, str):
            return found, False
        changed: list[bool] = []

        def cancel(task: Task) -> Task:
            changed.clear()
            if terminal(task):
                return task
            changed.append(True)
            return move(
                task,
                TaskTrigger.CANCEL,
                outstanding={},
                status_message="Cancelled by the client",
                lease_until=None,
            )

        task = self._swap(found.task_id, cancel)
        return (task if task is not None else NOT_FOUND), bool(changed)

    # --- the handler's answers ------------------------------------------------------------

    def settle(self, task_id: str, result: Any) -> RequestReceived | None:
        """Record what a run of the handler returned. Returns the request for another run
        when the handler returned state only; a result for a task that is gone or terminal
        (cancelled meanwhile) is dropped. When the store fails, the write is retried through
        the timer (:meth:`handle_timer`)."""
        try:
            return self._settle(task_id, result)
        except TaskStoreError as exc:
            self._retry(_Pending(task_id, result, 0, 0.0), exc, self._clock())
            return None

    def _settle(self, task_id: str, result: Any) -> RequestReceived | None:
        rerun: list[dict[str, Any]] = []  # the params of the next run

        def settle(task: Task) -> Task:
            rerun.clear()
            if terminal(task):
                return task
            if task.status is not TaskStatus.WORKING:
                raise LocalProtocolError(f"task {task_id!r} is not running a handler")
            now = self._clock()
            new = outcome(task, result, self.settings, self._max_input_requests, self._lease(now))
            refused = too_big(self.settings, self.store, task, new, now)
            if refused is not None:
                new = fail(task, JsonRpcError.internal(refused))
            if new.status is TaskStatus.WORKING:
                rerun.append(task.params)
            return new

        task = self._swap(task_id, settle)
        return self.run_request(task, rerun[0]) if task is not None and rerun else None

    def renew(self, task_id: str) -> bool:
        """Extend the lease of a running task (a worker's heartbeat); False when the task is
        gone or no longer running. A store fault is no reason to stop the run: True (its
        outcome is saved, or retried, when it ends)."""
        if self.settings.lease_seconds is None:
            return True
        now = self._clock()

        def renew(task: Task) -> Task:
            if task.status is not TaskStatus.WORKING:
                return task
            return evolve(task, lease_until=self._lease(now))

        try:
            task = self._swap(task_id, renew)
        except TaskStoreError:
            return True
        return task is not None and task.status is TaskStatus.WORKING

    # --- the timer ---------------------------------------------------------------------------

    @property
    def unsaved(self) -> int:
        """How many outcomes the store refused are kept for a retry."""
        return len(self._pending)

    def next_deadline(self) -> float:
        """When :meth:`handle_timer` must next be called: the next sweep of expired tasks, or
        an earlier retry of a write the store refused."""
        deadline = self._next_sweep
        for pending in self._pending:
            deadline = min(deadline, pending.due)
        return deadline

    def handle_timer(self, now: float) -> list[RequestReceived]:
        """Do what is due at ``now``: sweep at most ``sweep_batch`` expired tasks, retry the
        writes whose time has come. Returns the requests for runs a retried write queued."""
        settings = self.settings
        if now >= self._next_sweep:
            try:
                swept = self.store.sweep(now, settings.sweep_batch)
            except TaskStoreError:
                swept = 0
            # A full batch may have left more: sweep again on the next call.
            self._next_sweep = (
                now if swept >= settings.sweep_batch else now + settings.sweep_interval
            )
        due = [p for p in self._pending if p.due <= now]
        if not due:
            return []
        self._pending = [p for p in self._pending if p.due > now]
        runs = []
        for pending in due:
            try:
                run = self._settle(pending.task_id, pending.result)
            except TaskStoreError as exc:
                self._retry(pending, exc, now)
            else:
                if run is not None:
                    runs.append(run)
        return runs

    def _retry(self, pending: _Pending, exc: TaskStoreError, now: float) -> None:
        """Schedule the next write of ``pending`` after a failed one: the outcome up to
        ``settle_attempts`` times, then the task's failure naming the fault as many times;
        past that the write is dropped (a lease fails the task once the store is back)."""
        settings = self.settings
        attempts = pending.attempts + 1
        result, failing = pending.result, pending.failing
        if attempts >= settings.settle_attempts:
            if failing:
                return
            detail = str(exc)
            result = JsonRpcError.internal(
                f"The task's outcome could not be saved: {detail[:1].lower()}{detail[1:]}"
            )
            attempts, failing = 0, True
        delay = settings.settle_backoff * 2 ** min(max(attempts - 1, 0), _MAX_DOUBLINGS)
        self._pending.append(_Pending(pending.task_id, result, attempts, now + delay, failing))

    # --- internals --------------------------------------------------------------------------

    def _observe(self, task: Task, request_id: Any = None) -> None:
        """Tell the observer ``task`` is now in its status (created by ``request_id``, or
        moved)."""
        assert self._observer is not None
        self._observer.observe(
            TaskStatusChanged(
                task.updated_at,
                self._obs_key,
                task.task_id,
                task.status.value,
                task.round,
                request_id,
                task.trace,
            )
        )

    def _lease(self, now: float) -> float | None:
        return lease_until(self.settings, now)

    def _swap(self, task_id: str, change: Callable[[Task], Task]) -> Task | None:
        """Read, change and compare-and-swap ``task_id``; the stored record after it (the
        unchanged one when ``change`` changed nothing), or None when the task is gone."""
        store = self.store
        for _ in range(_CAS_ATTEMPTS):
            task = store.get(task_id)
            if task is None:
                return None
            new = change(task)
            if new is task:
                return task
            new = stamped(new, self._clock(), task.revision + 1)
            if store.replace(new, task.revision):
                if self._observer is not None and new.status is not task.status:
                    self._observe(new)
                return new
        raise LocalProtocolError(f"task {task_id!r}: the store kept changing under the update")
