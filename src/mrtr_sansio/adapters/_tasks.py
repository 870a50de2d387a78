"""The task run policy of the async server adapters, and store calls kept off the event loop.

* :class:`StoreCalls`: the connection calls that may reach a task store or a replay guard
  (feeding a message, answering, settling a task, renewing a lease) run on the event loop
  when every store is in memory, and in a worker thread (at most
  :attr:`TaskRunOptions.store_threads` at once) when one blocks (SQLite, Redis, a store of
  yours): the loop goes on serving everything else meanwhile.
* :class:`TaskRunner`: task runs go on in one pool per app (ASGI) or per served stream
  (anyio), each on a connection of its own, in the task group it is attached to (the ASGI
  lifespan's, the stream server's), or one after the other in the caller of
  :meth:`TaskRunner.run_all` when attached to none: at most
  :attr:`TaskRunOptions.max_running` at once. A ``tools/call`` whose handler answers
  ``RunAsTask`` while the pool is full (running plus waiting) is answered -32603 ("Too many
  tasks are running") and no task is made; a run that continues a task (after
  ``tasks/update``, or a state-only round) waits for a slot. With
  ``TaskSettings.lease_seconds`` set, every run (waiting ones too) renews its lease every
  third of it, and stops when the task is no longer running (cancelled, possibly by another
  process). :meth:`TaskRunner.stop` (server shutdown) ends every run and fails its task
  ("The server stopped before the task finished"), whatever the store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import attrs
from anyio.abc import TaskGroup
from anyio.lowlevel import RunVar

from mrtr_sansio import JsonRpcError, RequestReceived, ServerConfig, ServerConnection
from mrtr_sansio._validators import positive
from mrtr_sansio.tasks import InMemoryTaskStore, RunAsTask

from ._common import Handler, HandlerResult, RequestContext, call_handler
from ._lease import SERVER_STOPPED, renewal_interval
from ._loop import answer

__all__ = ["SERVER_STOPPED", "StoreCalls", "TaskRunOptions", "TaskRunner", "blocking_stores"]

log = logging.getLogger("mrtr_sansio.adapters.tasks")
T = TypeVar("T")


@attrs.frozen
class TaskRunOptions:
    """How a server adapter runs tasks and store calls (``McpHttpApp(task_runs=...)``,
    ``anyio.serve(task_runs=...)``); import it from :mod:`mrtr_sansio.adapters.asgi` or
    :mod:`mrtr_sansio.adapters.anyio`."""

    #: Task runs going on at once in one app or server, waiting ones included; a new task
    #: past it is refused with -32603 (``tasks/get`` and ``tasks/cancel`` still get through).
    max_running: int = attrs.field(default=64, validator=positive)
    #: Of those, the runs one authenticated principal may have going on at once (None: a
    #: quarter of ``max_running``, at least 1), so that one principal filling the pool does
    #: not lock the others out of creating tasks; past it that principal's new task is
    #: refused with -32603. The anonymous principal has only ``max_running``.
    max_running_per_principal: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(positive)
    )
    #: Worker threads running calls that reach a blocking store (SQLite, Redis) at once.
    store_threads: int = attrs.field(default=8, validator=positive)


#: The -32603 message of a task refused because the pool is full.
POOL_FULL = "Too many tasks are running on this server; try again later"
#: The -32603 message of a task refused because its principal's share of the pool is full.
SHARE_FULL = "Too many of your tasks are running on this server; try again later"
#: How long a shutdown waits for the stopped runs to record their failure.
STOP_TIMEOUT = 5.0


def blocking_stores(config: ServerConfig) -> bool:
    """Whether a call of ``config``'s connections may block on IO: a task store that says
    ``blocking = True``, or one that says nothing and is not the in-memory one (a subclass of
    it that sets ``blocking = True`` blocks), or a replay guard that says ``blocking = True``."""
    tasks = config.tasks
    store = None if tasks is None else tasks.store
    if store is not None:
        said = getattr(store, "blocking", None)
        if said is None:
            said = not isinstance(store, InMemoryTaskStore)
        if said:
            return True
    guard = getattr(config.request_state, "replay_guard", None)
    return bool(getattr(guard, "blocking", False))


class StoreCalls:
    """Run connection calls that may reach a store: in line, or in a worker thread when the
    stores block. One call at a time per connection is the caller's rule (a stateless POST's
    connection is its own; stream servers serialize with :meth:`serialized`)."""

    __slots__ = ("_limiter", "_lock", "_threads", "blocking")

    def __init__(self, config: ServerConfig, threads: int) -> None:
        #: True when calls go to worker threads.
        self.blocking = blocking_stores(config)
        self._threads = threads
        # One limiter per event loop: an app may be served by loops of either backend, and a
        # limiter belongs to the loop that made it.
        self._limiter: RunVar[anyio.CapacityLimiter] = RunVar(f"mrtr-store-threads-{id(self)}")
        self._lock: anyio.Lock | None = None

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``: in a worker thread when the stores block, else right here. A
        cancellation waits for the thread (the connection is never left half-updated)."""
        if not self.blocking:
            return fn(*args)
        try:
            limiter = self._limiter.get()
        except LookupError:
            limiter = anyio.CapacityLimiter(self._threads)
            self._limiter.set(limiter)
        return await anyio.to_thread.run_sync(fn, *args, limiter=limiter)

    def serialized(self) -> StoreCalls:
        """A twin sharing the thread limit whose calls run one at a time (for a connection
        that several handlers share)."""
        twin = StoreCalls.__new__(StoreCalls)
        twin.blocking = self.blocking
        twin._threads = self._threads
        twin._limiter = self._limiter
        twin._lock = anyio.Lock() if self.blocking else None
        return twin

    async def one_at_a_time(self, fn: Callable[..., T], *args: Any) -> T:
        """As :meth:`__call__`, after the calls of this twin before it have finished."""
        if self._lock is None:
            return await self(fn, *args)
        async with self._lock:
            return await self(fn, *args)


class TaskRunner:
    """The pool of one app or server's task runs (see the module docstring): the in-process
    :class:`~mrtr_sansio.tasks.RoundRunner`, the default of every async server adapter.
    ``options`` default to ``TaskRunOptions()``, ``calls`` to store calls of its own."""

    def __init__(
        self,
        handler: Handler,
        config: ServerConfig,
        options: TaskRunOptions | None = None,
        calls: StoreCalls | None = None,
    ) -> None:
        options = options if options is not None else TaskRunOptions()
        self._handler = handler
        self._config = config
        self.options = options
        self._calls = calls if calls is not None else StoreCalls(config, options.store_threads)
        self._slots: anyio.Semaphore | None = None
        self._scopes: dict[str, anyio.CancelScope] = {}
        #: Runs started and not finished (waiting for a slot included).
        self.active = 0
        #: Of those, the runs of each authenticated principal (none kept at 0).
        self.active_by_principal: dict[str, int] = {}
        share = options.max_running_per_principal
        #: The runs one authenticated principal may have going on at once.
        self.share = max(1, options.max_running // 4) if share is None else share
        self._group: TaskGroup | None = None
        self._stopping = False
        self._renew_every = renewal_interval(config)

    def attach(self, group: TaskGroup | None) -> None:
        """Run tasks in ``group`` from now on (None: in the caller of :meth:`run_all`)."""
        self._group = group
        self._stopping = False

    async def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """End every run going on (waiting ones too), failing its task, and detach: later
        runs go on in their caller. Returns once they have recorded it (at most
        ``timeout`` seconds: a run whose store does not answer by then is left to its
        lease)."""
        self._stopping = True
        self._group = None
        for scope in list(self._scopes.values()):
            scope.cancel()
        with anyio.move_on_after(timeout):
            while self.active:
                await anyio.sleep(0.01)
        self._stopping = False

    @property
    def full(self) -> bool:
        """Whether a new task would be refused."""
        return self.active >= self.options.max_running

    def admit(self, result: HandlerResult, principal: str | None = None) -> HandlerResult:
        """``result``, or -32603 when it would make a task and the pool is full, or when
        ``principal`` (the caller, authenticated) already has its share of it going on."""
        if not isinstance(result, RunAsTask):
            return result
        if self.full:
            log.warning("task refused: %d task runs going on", self.active)
            return JsonRpcError.internal(POOL_FULL)
        if principal is not None and self.active_by_principal.get(principal, 0) >= self.share:
            log.warning("task refused: principal's %d task runs going on", self.share)
            return JsonRpcError.internal(SHARE_FULL)
        return result

    def cancel(self, task_id: str) -> None:
        """Stop the run of ``task_id`` if it goes on here (``tasks/cancel``)."""
        scope = self._scopes.get(task_id)
        if scope is not None:
            scope.cancel()

    async def run_all(self, runs: list[RequestReceived]) -> None:
        """Start ``runs`` in the attached group (returns at once), or, attached to none,
        run them one after the other here."""
        while runs:
            event = runs.pop(0)
            if self._group is not None:
                self.start(event)
            else:
                self._count(event, 1)
                await self._run(event)

    def start(self, event: RequestReceived) -> None:
        """Start the run ``event`` in the attached group (there must be one)."""
        group = self._group
        assert group is not None, "TaskRunner.start needs a group (attach)"
        self._count(event, 1)
        group.start_soon(self._run, event, name=f"task {event.task_id}")

    async def _run(self, event: RequestReceived) -> None:
        try:
            await self._run_once(event)
        finally:
            self._count(event, -1)

    def _count(self, event: RequestReceived, delta: int) -> None:
        """Count a run ``event`` starting (+1) or ending (-1), in all and for its principal."""
        self.active += delta
        who = event.principal
        if who is not None:
            left = self.active_by_principal.get(who, 0) + delta
            if left > 0:
                self.active_by_principal[who] = left
            else:
                self.active_by_principal.pop(who, None)

    async def _run_once(self, event: RequestReceived) -> None:
        task_id = event.task_id
        assert task_id is not None
        conn = ServerConnection(self._config)  # the run's own: nothing else touches it
        result: Any = None
        try:
            with anyio.CancelScope() as scope:
                self._scopes[task_id] = scope
                async with anyio.create_task_group() as tg:
                    if self._renew_every is not None:
                        tg.start_soon(self._keep_lease, conn, task_id, scope)
                    if self._slots is None:
                        self._slots = anyio.Semaphore(self.options.max_running)
                    async with self._slots:
                        ctx = RequestContext(conn, event, _nothing, anyio.sleep)
                        result = await call_handler(self._handler, ctx)
                    tg.cancel_scope.cancel()
        finally:
            if self._scopes.get(task_id) is scope:
                del self._scopes[task_id]
        if scope.cancelled_caught:
            if self._stopping:  # the server's shutdown: the task fails, now
                with anyio.move_on_after(STOP_TIMEOUT, shield=True):
                    await self._settle(conn, event, JsonRpcError.internal(SERVER_STOPPED))
            return
        if not await self._settle(conn, event, result):
            return
        again = [e for e in conn.events() if type(e) is RequestReceived and e.task_id]
        await self.run_all(again)  # a state-only round: the next run

    async def _settle(self, conn: ServerConnection, event: RequestReceived, result: Any) -> bool:
        """Store the run's outcome; False (logged) when the store failed."""
        try:
            await self._calls(answer, conn, event, result)  # settles the task
        except Exception:  # the store failed: never let it end the app's task group
            log.exception("task %s: its outcome could not be stored", event.task_id)
            return False
        return True

    async def _keep_lease(
        self, conn: ServerConnection, task_id: str, run: anyio.CancelScope
    ) -> None:
        """Renew the run's lease; stop the run when the task is no longer running. A store
        fault is logged and retried at the next renewal."""
        assert self._renew_every is not None
        while True:
            await anyio.sleep(self._renew_every)
            try:
                alive = await self._calls(conn.renew_task, task_id)
            except Exception as exc:  # a store of yours may raise anything: never end the pool
                log.warning("task %s: lease not renewed: %s", task_id, exc)
                continue
            if not alive:
                run.cancel()
                return


def _nothing() -> None:
    """A task run's flush: nothing of a run goes to the client that created it."""
