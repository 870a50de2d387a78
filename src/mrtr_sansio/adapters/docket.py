"""Task rounds as Docket jobs: HTTP fronts apart from worker processes (``tasks-docket`` extra).

`Docket <https://pypi.org/project/pydocket/>`_ is a Redis-backed task queue. With
:class:`DocketRunner` as the front's :class:`~mrtr_sansio.tasks.RoundRunner`
(``McpHttpApp(task_runner=DocketRunner(...))``), each round of a task is one Docket job,
keyed by the task's id and round; the task's record (status, questions, answers, result,
owner, TTL) stays in the app's task store, a :class:`~mrtr_sansio.adapters.stores.RedisTaskStore`
that the fronts and the workers share, on the same Redis or another. Worker processes
(:class:`RoundWorker`, the ``mrtr-worker`` command) run the same handler on each job and write
the outcome to the store; any front answers ``tasks/get``, ``tasks/update``,
``tasks/cancel`` and ``subscriptions/listen`` for any task from the store.

* A round that asks ends its job with the task ``input_required``; the ``tasks/update`` that
  answers the last question enqueues the next round; a state-only round enqueues the next
  one from the worker.
* A worker that dies mid-round leaves its job unacknowledged: Docket redelivers it to another
  worker after ``redelivery_timeout``, and the round runs again from the record. A job whose
  round the store no longer runs (settled before the worker died, cancelled) does nothing,
  so a task's outcome is written once. Running a round again is safe only for a replay-safe
  handler (``mrtr_sansio.testing.check_replay`` proves it): both sides refuse a handler
  unless ``replay_safe=True`` says so or ``replay_check`` runs the checker at start-up
  (``functools.partial(check_replay, handler, operations)``).
* ``tasks/cancel`` cancels the round's job through Docket (removed if queued, the running
  round cancelled on whichever worker holds it); a worker also stops a round whose lease
  renewal finds the task no longer running (with ``TaskSettings.lease_seconds``, which must
  then exceed the redelivery timeout, or a dead worker's task fails before redelivery).
* A round past ``deadline`` seconds is cancelled by Docket's ``Timeout`` and the task fails
  with :data:`DEADLINE_PASSED`. A store fault while saving the outcome is retried by Docket's
  ``Retry`` (``attempts``), the round running again.

Docket runs on asyncio: serve the front with uvicorn (asyncio), not trio; under trio the
runner refuses at start-up (:data:`ASYNCIO_ONLY`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from mrtr_sansio._extras import raise_missing_extra

try:
    import anyio
    import anyio.to_thread
    from docket import Docket, Retry, Timeout, Worker
except ModuleNotFoundError as exc:
    raise_missing_extra(exc, __name__, "tasks-docket")

from mrtr_sansio import JsonRpcError, RequestReceived, ServerConfig, ServerConnection
from mrtr_sansio.tasks import TaskMachine, TaskSettings, TaskStatus

from ._common import Handler, RequestContext, call_handler
from ._docket_cli import encrypt_records, resolve, worker_parser
from ._loop import answer

__all__ = [
    "ASYNCIO_ONLY",
    "DEADLINE_PASSED",
    "REDELIVERY_TIMEOUT",
    "ROUND_TASK",
    "DocketRunner",
    "NotReplaySafeError",
    "RoundWorker",
    "round_key",
]

log = logging.getLogger("mrtr_sansio.adapters.docket")

#: The name of the Docket task every round job runs (registered by fronts and workers alike).
ROUND_TASK = "mrtr_round"
#: The statusMessage of a task whose round ran past its deadline (``{seconds}`` filled in).
DEADLINE_PASSED = "The task's round ran past its deadline of {seconds:g} s and was cancelled"
#: The CLI's and :class:`RoundWorker`'s default seconds before a dead worker's round is
#: redelivered (below the default lease, which must exceed it).
REDELIVERY_TIMEOUT = 10.0
#: Why a handler is refused (see :func:`refuse_unless_replay_safe`).
NOT_PROVEN = (
    "The Docket runner runs a round again when its worker dies, which is safe only for a "
    "replay-safe handler: prove it with replay_check (mrtr_sansio.testing.check_replay at "
    "start-up; mrtr-worker --replay-check) or say replay_safe=True (--replay-safe)"
)


#: Why a front refuses to run on another event loop than asyncio's (trio, say).
ASYNCIO_ONLY = (
    "The Docket runner runs on asyncio only: Docket, its Redis client and its worker are "
    "asyncio code. Serve the front with an asyncio server (uvicorn, hypercorn's asyncio "
    "worker), not under trio"
)


def _require_asyncio() -> None:
    """Raise ``RuntimeError(ASYNCIO_ONLY)`` unless called on a running asyncio loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError(ASYNCIO_ONLY) from None


class NotReplaySafeError(ValueError):
    """A handler the Docket runner will not run: not proven replay-safe (see
    :data:`NOT_PROVEN`), or the replay checker found a problem (chained)."""


def round_key(task_id: str, round_: int) -> str:
    """The Docket key of round ``round_`` of task ``task_id``: one job per round, so that the
    next round is never mistaken for the one still being acknowledged."""
    return f"mrtr-round:{task_id}:{round_}"


def refuse_unless_replay_safe(replay_safe: bool, replay_check: Callable[[], Any] | None) -> None:
    """Raise :class:`NotReplaySafeError` unless ``replay_safe`` or ``replay_check`` (run now)
    passes: a callable that raises when the handler is not replay-safe, typically
    ``functools.partial(mrtr_sansio.testing.check_replay, handler, operations)``."""
    if replay_safe:
        return
    if replay_check is None:
        raise NotReplaySafeError(NOT_PROVEN)
    try:
        replay_check()
    except Exception as exc:  # ReplayViolationError, or whatever the app's check raises
        raise NotReplaySafeError(f"The handler is not replay-safe: {exc}") from exc


def _settings(config: ServerConfig) -> TaskSettings:
    if config.tasks is None:
        raise ValueError("the Docket runner needs the tasks extension (ServerConfig.tasks)")
    return config.tasks


def _machine(config: ServerConfig) -> TaskMachine:
    """A task machine over ``config``'s store, for reading records and building runs."""
    return TaskMachine(
        _settings(config), config.clock, config.token_hex, config.limits.max_input_requests
    )


def _round_function(
    run: Callable[[str, int, Timeout], Any] | None, deadline: float, attempts: int
) -> Callable[..., Any]:
    """The Docket task of a round: Docket's ``Timeout`` bounds it, its ``Retry`` runs it again
    after a fault. A front registers it with ``run`` None (it only enqueues)."""
    limit = Timeout(timedelta(seconds=deadline))
    again = Retry(attempts=attempts, delay=timedelta(milliseconds=200))

    async def mrtr_round(
        task_id: str, round_: int, timeout: Timeout = limit, retry: Retry = again
    ) -> None:
        if run is None:
            raise RuntimeError("a front cannot run rounds: start mrtr-worker")
        await run(task_id, round_, timeout)

    mrtr_round.__name__ = mrtr_round.__qualname__ = ROUND_TASK
    return mrtr_round


class DocketRunner:
    """The front's :class:`~mrtr_sansio.tasks.RoundRunner`: each round becomes a Docket job
    for the workers (see the module docstring). ``config`` is the app's (its task store
    shared with the workers); ``url`` the Docket's Redis, ``name`` the Docket's (the
    workers' ``--docket``). ``deadline`` and ``attempts`` must match the workers' (the
    function a front registers only names the job)."""

    def __init__(
        self,
        config: ServerConfig,
        url: str,
        *,
        name: str = "mrtr",
        replay_safe: bool = False,
        replay_check: Callable[[], Any] | None = None,
        deadline: float = 300.0,
        attempts: int = 3,
    ) -> None:
        _settings(config)
        refuse_unless_replay_safe(replay_safe, replay_check)
        self.url = url
        self.name = name
        self._config = config
        self._function = _round_function(None, deadline, attempts)
        self._docket: Docket | None = None
        self._opening: anyio.Lock | None = None
        self._group: Any = None
        self._cancels: list[str] = []
        #: Rounds enqueued by this front (a job already queued under its key counts too).
        self.enqueued = 0

    def admit(self, result: Any, principal: str | None = None) -> Any:
        """Every new task is taken: Docket queues what the workers cannot run yet."""
        return result

    def attach(self, group: Any) -> None:
        """Take the lifespan's task group; refused (``RuntimeError``, :data:`ASYNCIO_ONLY`)
        off asyncio, at start-up rather than at the first task."""
        if group is not None:
            _require_asyncio()
        self._group = group

    def start(self, run: RequestReceived) -> None:
        assert self._group is not None, "DocketRunner.start needs a group (attach)"
        self._group.start_soon(self._enqueue, run)

    async def run_all(self, runs: list[RequestReceived]) -> None:
        await self._drain_cancels()
        while runs:
            await self._enqueue(runs.pop(0))

    def cancel(self, task_id: str) -> None:
        self._cancels.append(task_id)
        if self._group is not None:
            self._group.start_soon(self._drain_cancels)

    async def stop(self) -> None:
        """Close the front's connection to Docket (the rounds go on on the workers)."""
        self._group = None
        docket, self._docket = self._docket, None
        if docket is not None:
            await docket.__aexit__(None, None, None)

    async def _open(self) -> Docket:
        if self._docket is not None:
            return self._docket
        _require_asyncio()  # a front without a lifespan comes here first
        if self._opening is None:
            self._opening = anyio.Lock()
        async with self._opening:
            if self._docket is None:
                docket = Docket(name=self.name, url=self.url)
                await docket.__aenter__()
                docket.register(self._function)
                self._docket = docket
        return self._docket

    async def _enqueue(self, run: RequestReceived) -> None:
        task_id, round_ = run.task_id, run.round
        assert task_id is not None
        assert round_ is not None
        docket = await self._open()
        await docket.add(ROUND_TASK, key=round_key(task_id, round_))(task_id, round_)
        self.enqueued += 1

    async def _drain_cancels(self) -> None:
        """Cancel the current round's job of each task cancelled (its round read from the
        record, which a cancel leaves in place)."""
        if not self._cancels:
            return
        cancels, self._cancels = self._cancels, []
        store = _machine(self._config).store
        docket = await self._open()
        for task_id in cancels:
            try:
                task = await anyio.to_thread.run_sync(store.get, task_id)
            except Exception as exc:  # the workers' lease renewal stops the round then
                log.warning("task %s: its round's job not cancelled: %s", task_id, exc)
                continue
            if task is not None:
                await docket.cancel(round_key(task_id, task.round))


class RoundWorker:
    """A worker process's side: runs the handler on each round job of the Docket ``name`` at
    ``url`` (at most ``concurrency`` at once), writing outcomes to ``config``'s task store.
    Build it in the process that runs it; :meth:`run` serves until cancelled."""

    def __init__(
        self,
        handler: Handler,
        config: ServerConfig,
        url: str,
        *,
        name: str = "mrtr",
        replay_safe: bool = False,
        replay_check: Callable[[], Any] | None = None,
        concurrency: int = 10,
        redelivery_timeout: float = REDELIVERY_TIMEOUT,
        deadline: float = 300.0,
        attempts: int = 3,
    ) -> None:
        settings = _settings(config)
        lease = settings.lease_seconds
        if lease is not None and lease <= redelivery_timeout:
            raise ValueError(
                f"lease_seconds ({lease:g}) must exceed the redelivery timeout "
                f"({redelivery_timeout:g}): a dead worker's task would fail before its "
                "round is redelivered"
            )
        refuse_unless_replay_safe(replay_safe, replay_check)
        self._handler = handler
        self._config = config
        self.url = url
        self.name = name
        self.concurrency = concurrency
        self.redelivery_timeout = redelivery_timeout
        self.deadline = deadline
        self._function = _round_function(self._run_round, deadline, attempts)
        self._machine = _machine(config)
        self._docket: Docket | None = None
        self._renew_every = None if lease is None else lease / 3

    async def run(self, *, until_finished: bool = False) -> None:
        """Run round jobs until cancelled (``until_finished``: until none is left)."""
        async with Docket(name=self.name, url=self.url) as docket:
            docket.register(self._function)
            self._docket = docket
            async with Worker(
                docket,
                concurrency=self.concurrency,
                redelivery_timeout=timedelta(seconds=self.redelivery_timeout),
                minimum_check_interval=timedelta(milliseconds=50),
                scheduling_resolution=timedelta(milliseconds=50),
            ) as worker:
                log.info("%s: running the rounds of docket %s", worker.name, self.name)
                if until_finished:
                    await worker.run_until_finished()
                else:
                    await worker.run_forever()

    async def _store(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args)

    async def _run_round(self, task_id: str, round_: int, timeout: Timeout) -> None:
        """Run round ``round_`` of ``task_id`` when the store still runs it, and save what
        the handler returned."""
        task = await self._store(self._machine.store.get, task_id)
        if task is None or task.status is not TaskStatus.WORKING or task.round != round_:
            log.info("task %s round %d: not running any more, nothing to do", task_id, round_)
            return
        event = self._machine.run_request(task)
        conn = ServerConnection(self._config)  # the round's own
        result: Any = None
        try:
            with anyio.CancelScope() as stopped:  # by the lease renewal (task not running)
                async with anyio.create_task_group() as tg:
                    if self._renew_every is not None:
                        tg.start_soon(self._keep_lease, conn, task_id, stopped)
                    ctx = RequestContext(conn, event, _nothing, anyio.sleep)
                    result = await call_handler(self._handler, ctx)
                    tg.cancel_scope.cancel()
        except BaseException:
            if timeout.expired():  # Docket's Timeout cancelled the round: the task fails
                failure = JsonRpcError.internal(DEADLINE_PASSED.format(seconds=self.deadline))
                with anyio.CancelScope(shield=True):
                    await self._store(answer, conn, event, failure)
            raise
        if stopped.cancelled_caught:
            return
        await self._store(answer, conn, event, result)
        if conn.unsaved_task_outcomes:  # Docket's Retry runs the round again
            raise RuntimeError(f"task {task_id}: the store refused the round's outcome")
        for again in conn.events():
            if type(again) is RequestReceived and again.task_id and again.round:
                assert self._docket is not None
                key = round_key(again.task_id, again.round)
                await self._docket.add(ROUND_TASK, key=key)(again.task_id, again.round)

    async def _keep_lease(self, conn: ServerConnection, task_id: str, scope: Any) -> None:
        assert self._renew_every is not None
        while True:
            await anyio.sleep(self._renew_every)
            try:
                alive = await self._store(conn.renew_task, task_id)
            except Exception as exc:
                log.warning("task %s: lease not renewed: %s", task_id, exc)
                continue
            if not alive:
                scope.cancel()
                return


def _nothing() -> None:
    """A round's flush: nothing of a round goes to a client."""


def main(argv: Sequence[str] | None = None) -> int:
    """``mrtr-worker module:handler --redis URL``: run a worker process until SIGINT/SIGTERM
    (``--help`` lists the options)."""
    import asyncio
    import functools
    import signal

    parser = worker_parser(REDELIVERY_TIMEOUT)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        handler = resolve(args.handler)
        if args.config:
            config = resolve(args.config)
        else:
            from .stores import RedisTaskStore

            store = RedisTaskStore.from_url(args.redis)
            config = ServerConfig(tasks=TaskSettings(store=store))
        check = resolve(args.replay_check) if args.replay_check else None
        if args.state_keys_file and not encrypt_records(config, args.state_keys_file):
            raise ValueError(f"cannot use the key ring in {args.state_keys_file}")
        worker = RoundWorker(
            handler,
            config,
            args.redis,
            name=args.docket,
            replay_safe=args.replay_safe,
            replay_check=check,
            concurrency=args.concurrency,
            redelivery_timeout=args.redelivery_timeout,
            deadline=args.deadline,
            attempts=args.attempts,
        )
    except (ValueError, ImportError, AttributeError) as exc:  # NotReplaySafeError included
        parser.exit(2, f"mrtr-worker: {exc}\n")

    async def serve() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, task.cancel)
        if args.state_keys_file:
            reload = functools.partial(encrypt_records, config, args.state_keys_file)
            loop.add_signal_handler(signal.SIGHUP, reload)
        try:
            await worker.run()
        except asyncio.CancelledError:
            log.info("mrtr-worker: stopping")

    asyncio.run(serve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
