"""The :class:`TaskStore` protocol and the in-memory store.

A store keeps task records (:class:`Task`) by id. Writes are compare-and-swap on
``revision`` so that several processes sharing one store (SQLite on one machine, Redis across
machines; see ``mrtr_sansio.adapters.stores``) never overwrite each other's update: the task
machine reads, computes the next record and retries when another writer got there first.
A store does not interpret records; expiry, ownership and the status table are the machine's.
A store may keep a record's params apart (:class:`~mrtr_sansio.tasks.StoredParams`): only a
run of the handler reads them, through the record, so the protocol has no method for them.

A store may also say how many bytes it holds (:class:`MeteredTaskStore`), so that the machine
bounds them per principal and server-wide, and may declare ``durable = True`` (a class
attribute: records outlive the process), which turns task leases on by default
(``TaskSettings.lease_seconds``).

Two more optional abilities serve ``subscriptions/listen`` streams: reading many records in
one call (:class:`BatchTaskStore`) and telling subscribers that a record was written
(:class:`WatchableTaskStore`), so that a stream re-reads only the task that changed instead
of every watched task on a timer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar, runtime_checkable

from ._values import Task

__all__ = [
    "BatchTaskStore",
    "GuardedStore",
    "InMemoryTaskStore",
    "MeteredTaskStore",
    "TaskChanged",
    "TaskStore",
    "TaskStoreError",
    "WatchableTaskStore",
]

_T = TypeVar("_T")


class TaskStoreError(Exception):
    """A store could not do what was asked: locked, unreachable, or a corrupt record. The
    server answers the request that needed it with -32603 and this message, and serves
    everything else; the message says what failed, never a secret."""


@runtime_checkable
class TaskStore(Protocol):
    """Where task records live. Every method is synchronous and must be atomic."""

    def create(self, task: Task) -> bool:
        """Add a new record; False when its id exists already. When this returns, a
        :meth:`get` for the id anywhere must see it (the spec's "durably created")."""

    def get(self, task_id: str) -> Task | None:
        """The record for ``task_id``, or None (its params may be this store's
        :class:`~mrtr_sansio.tasks.StoredParams`, read only when a run asks)."""

    def replace(self, task: Task, revision: int) -> bool:
        """Write ``task`` if the stored record still has ``revision``; False otherwise (or
        when the record is gone). Params that are this store's ``StoredParams`` are
        unchanged since the read: the store need not write them again."""

    def delete(self, task_id: str) -> None:
        """Forget a record (an expired task); no error when it is absent."""

    def count(self, owner: str | None, now: float) -> int:
        """How many records of ``owner`` are live at ``now`` (not expired: what
        ``TaskSettings.max_tasks`` bounds)."""

    def sweep(self, now: float, limit: int) -> int:
        """Delete at most ``limit`` records expired at ``now``; how many were deleted."""


@runtime_checkable
class MeteredTaskStore(TaskStore, Protocol):
    """A :class:`TaskStore` that knows the bytes it holds: with it the machine enforces
    ``TaskSettings.max_task_bytes_per_principal`` and ``max_task_bytes_total`` (without it,
    a principal's bytes are bounded by ``max_tasks`` times ``max_task_bytes``)."""

    def usage(self, owner: str | None) -> tuple[int, int]:
        """The summed :attr:`Task.size` of ``owner``'s records and of all records held now
        (expired records count until they are swept or deleted)."""


@runtime_checkable
class BatchTaskStore(TaskStore, Protocol):
    """A :class:`TaskStore` that reads many records in one call (one round trip or query)."""

    def get_many(self, task_ids: Sequence[str]) -> list[Task | None]:
        """The record for each of ``task_ids``, in order (None for an absent one, and for one
        it cannot read, so that one bad record fails only its own task: :meth:`get` of that
        id raises)."""


#: What a watcher is called with: the id of a task whose record was written (created,
#: replaced or deleted), or None for "any record may have changed" (notifications were
#: missed, e.g. while a connection to the store was being re-established).
TaskChanged = Callable[[str | None], None]


@runtime_checkable
class WatchableTaskStore(TaskStore, Protocol):
    """A :class:`TaskStore` that tells subscribers when a record is written, by this process
    or (for a shared store) by another one sharing it."""

    def watch(self, changed: TaskChanged) -> Callable[[], None]:
        """Call ``changed`` after each record write from now on, from any thread (it must
        be quick and must not call the store); returns the function that stops it."""


class _Watchers:
    """The subscribers of a store that notifies in-process (a store's private part)."""

    __slots__ = ("_callbacks", "_next")

    def __init__(self) -> None:
        self._callbacks: dict[int, TaskChanged] = {}
        self._next = 0

    def add(self, changed: TaskChanged) -> Callable[[], None]:
        key = self._next
        self._next += 1
        self._callbacks[key] = changed

        def stop() -> None:
            self._callbacks.pop(key, None)

        return stop

    def tell(self, task_id: str | None) -> None:
        for changed in list(self._callbacks.values()):
            changed(task_id)


class InMemoryTaskStore:
    """A :class:`TaskStore` in a dict: one process, gone with it (the default, and for tests).
    It is a :class:`MeteredTaskStore` (it keeps the bytes of each owner's records as it goes),
    a :class:`BatchTaskStore` and a :class:`WatchableTaskStore` (subscribers are called on
    each write, in the writer's thread)."""

    durable = False

    def __init__(self) -> None:
        self._tasks: dict[str, Task] = {}
        self._watchers = _Watchers()
        self._owner_bytes: dict[str | None, int] = {}
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._tasks)

    def _account(self, task: Task, sign: int) -> None:
        owner = task.owner
        held = self._owner_bytes.get(owner, 0) + sign * task.size
        if held:
            self._owner_bytes[owner] = held
        else:
            self._owner_bytes.pop(owner, None)
        self._bytes += sign * task.size

    def usage(self, owner: str | None) -> tuple[int, int]:
        """The bytes of ``owner``'s records, and of all records."""
        return self._owner_bytes.get(owner, 0), self._bytes

    def create(self, task: Task) -> bool:
        """Add ``task`` to the dict unless its id is there."""
        if task.task_id in self._tasks:
            return False
        self._tasks[task.task_id] = task
        self._account(task, 1)
        self._watchers.tell(task.task_id)
        return True

    def watch(self, changed: TaskChanged) -> Callable[[], None]:
        """Call ``changed(task_id)`` after each write; returns the function that stops it."""
        return self._watchers.add(changed)

    def get_many(self, task_ids: Sequence[str]) -> list[Task | None]:
        """The records under ``task_ids``, in order."""
        tasks = self._tasks
        return [tasks.get(task_id) for task_id in task_ids]

    def get(self, task_id: str) -> Task | None:
        """The record under ``task_id``, or None."""
        return self._tasks.get(task_id)

    def replace(self, task: Task, revision: int) -> bool:
        """Swap in ``task`` if the stored revision is ``revision``."""
        current = self._tasks.get(task.task_id)
        if current is None or current.revision != revision:
            return False
        self._tasks[task.task_id] = task
        self._account(current, -1)
        self._account(task, 1)
        self._watchers.tell(task.task_id)
        return True

    def delete(self, task_id: str) -> None:
        """Drop the record, if any."""
        task = self._tasks.pop(task_id, None)
        if task is not None:
            self._account(task, -1)
            self._watchers.tell(task_id)

    def count(self, owner: str | None, now: float) -> int:
        """Live records whose owner is ``owner`` (a scan of this process's dict)."""
        return sum(1 for t in self._tasks.values() if t.owner == owner and not t.expired(now))

    def sweep(self, now: float, limit: int) -> int:
        """Drop up to ``limit`` expired records."""
        gone = [t.task_id for t in self._tasks.values() if t.expired(now)][:limit]
        for task_id in gone:
            self._account(self._tasks.pop(task_id), -1)
            self._watchers.tell(task_id)
        return len(gone)


class GuardedStore:
    """A store as the task machine uses it: every fault it raises is a
    :class:`TaskStoreError` naming the operation (an unexpected exception by its type only:
    its text may hold a secret). ``metered``: the store is a :class:`MeteredTaskStore`."""

    __slots__ = ("_store", "metered")

    def __init__(self, store: TaskStore) -> None:
        self._store = store
        self.metered = isinstance(store, MeteredTaskStore)

    def _call(self, what: str, call: Callable[[], _T]) -> _T:
        try:
            return call()
        except TaskStoreError as exc:
            raise TaskStoreError(f"The task store could not {what}: {exc}") from exc
        except Exception as exc:
            raise TaskStoreError(f"The task store could not {what} ({type(exc).__name__})") from exc

    def create(self, task: Task) -> bool:
        return self._call("create the task", lambda: self._store.create(task))

    def get(self, task_id: str) -> Task | None:
        return self._call("read the task", lambda: self._store.get(task_id))

    def get_many(self, task_ids: Sequence[str]) -> list[Task | None]:
        """One call for a :class:`BatchTaskStore`, one :meth:`get` per id otherwise."""
        store = self._store
        if isinstance(store, BatchTaskStore):
            found = self._call("read the tasks", lambda: store.get_many(task_ids))
            if len(found) != len(task_ids):
                raise TaskStoreError("The task store could not read the tasks (wrong count)")
            return found
        return [self.get(task_id) for task_id in task_ids]

    def replace(self, task: Task, revision: int) -> bool:
        return self._call("update the task", lambda: self._store.replace(task, revision))

    def delete(self, task_id: str) -> None:
        self._call("delete the task", lambda: self._store.delete(task_id))

    def count(self, owner: str | None, now: float) -> int:
        return self._call("count tasks", lambda: self._store.count(owner, now))

    def sweep(self, now: float, limit: int) -> int:
        return self._call("sweep expired tasks", lambda: self._store.sweep(now, limit))

    def usage(self, owner: str | None) -> tuple[int, int]:
        store = self._store
        assert isinstance(store, MeteredTaskStore)
        return self._call("measure stored tasks", lambda: store.usage(owner))
