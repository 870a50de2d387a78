"""The anyio stream server (:func:`mrtr_sansio.adapters.anyio.serve`): one stream's reader,
writer and timer tasks, its handlers each cancelled through its :class:`Job`, its task runs,
and the end of its listen streams when the reader is too slow (see that module's
docstring)."""

from __future__ import annotations

import contextlib

import anyio
import anyio.abc

from mrtr_sansio import RequestReceived, ServerConnection
from mrtr_sansio._mcp.subscriptions import CANCELLED, LISTEN
from mrtr_sansio.tasks import RoundRunner

from ._anyio_parts import GONE, Job, Runner, Timer, Writer, receive
from ._common import Handler, HandlerResult, RequestContext, call_handler, log
from ._loop import ServerDriver, answer
from ._slow_reader import STREAM_QUEUE_BYTES, log_dropped, too_slow
from ._tasks import StoreCalls, TaskRunner, TaskRunOptions

__all__ = ["Server"]


class Server:
    """One stream's tasks: the reader (which starts handlers), the writer, and the timer."""

    def __init__(
        self,
        handler: Handler,
        conn: ServerConnection,
        stream: anyio.abc.ByteStream,
        task_runs: TaskRunOptions | None = None,
        queue_limit: int = STREAM_QUEUE_BYTES,
        task_runner: RoundRunner | None = None,
    ) -> None:
        self._handler = handler
        self._conn = conn
        # Task runs and store calls: only with the tasks extension (else nothing changes).
        self._runner: RoundRunner | None = None
        self._calls: StoreCalls | None = None
        config = conn.config
        if config.tasks is not None:
            runs = task_runs if task_runs is not None else TaskRunOptions()
            calls = StoreCalls(config, runs.store_threads)
            self._runner = (
                task_runner if task_runner is not None else TaskRunner(handler, config, runs, calls)
            )
            if calls.blocking:
                self._calls = calls.serialized()
        self._stream = stream
        runner = self._runner  # a task's run goes to the pool, on its own connection
        self._driver = ServerDriver(
            conn,
            self._start,
            self._cancel,
            run_task=None if runner is None else runner.start,
            cancel_task=None if runner is None else runner.cancel,
        )
        self._handlers: Runner | None = None
        self._jobs: dict[str | int, Job] = {}  # request id -> its handler's
        self._listens: set[str | int] = set()  # ids of the subscriptions/listen handlers running
        self._dropped: set[str | int] = set()  # of those, the ones to answer "too slow"
        self._queue_limit = queue_limit
        self._writer = Writer(stream, conn.data_to_send, limit=queue_limit, overflow=self._too_slow)
        self._timer = Timer(self._driver, self._flush)

    async def run(self) -> None:
        async with anyio.create_task_group() as services:
            services.start_soon(self._timer.run)
            services.start_soon(self._serve_requests)
            with contextlib.suppress(*GONE):  # the output broke: the client is gone
                await self._writer.run()
            services.cancel_scope.cancel()

    async def _serve_requests(self) -> None:
        runner = self._runner
        async with anyio.create_task_group() as handlers:
            self._handlers = Runner(handlers)
            if runner is not None:
                runner.attach(handlers)
            if self._calls is None:
                await self._read_loop()
            else:
                await self._read_loop_off_loop(self._calls)
            if runner is not None:
                await runner.stop()  # the input ended: the runs' tasks fail, now
            handlers.cancel_scope.cancel()
        self._writer.close()  # let the writer finish what was answered, then stop

    async def _read_loop(self) -> None:
        driver = self._driver
        while True:
            driver.receive(await receive(self._stream))
            self._flush()
            if driver.closed:
                return
            await self._writer.sent()

    async def _read_loop_off_loop(self, calls: StoreCalls) -> None:
        """:meth:`_read_loop`, feeding each message in a worker thread (a store blocks)."""
        driver = self._driver
        conn = self._conn
        while True:
            data = await receive(self._stream)
            await calls.one_at_a_time(conn.receive_data, data)
            driver.route()  # on the loop: it starts handlers
            self._flush()
            if driver.closed:
                return
            await self._writer.sent()

    # --- handlers ---------------------------------------------------------------------------

    def _start(self, request: RequestReceived) -> None:
        assert self._handlers is not None
        job = self._jobs[request.request_id] = Job()
        if request.method == LISTEN:
            self._listens.add(request.request_id)
        self._handlers.start(self._run_handler, request, job, job=job)

    def _cancel(self, request_id: str | int) -> None:
        job = self._jobs.pop(request_id, None)
        if job is not None:
            job.cancel()

    async def _run_handler(self, request: RequestReceived, job: Job) -> None:
        rid = request.request_id
        try:
            if not job.cancelled:  # else cancelled before it could start: never run it
                ctx = RequestContext(self._conn, request, self._flush, self._sleep)
                result = await call_handler(self._handler, ctx)
                if self._runner is None:
                    self._driver.answer(request, result)
                else:
                    await self._answer(request, self._runner.admit(result))
                self._flush()
        finally:  # a cancellation goes on to the runner's scope, which ends it
            if rid in self._listens:  # ids in flight are unique: this is the listen itself
                if rid in self._dropped:  # its stream's reader was too slow (_too_slow)
                    self._tear_down(rid)
                    self._dropped.discard(rid)
                self._listens.discard(rid)
            if self._jobs.get(rid) is job:
                del self._jobs[rid]

    def _tear_down(self, rid: str | int) -> None:
        """End listen stream ``rid`` as the spec has a server tear one down on stdio: with
        ``notifications/cancelled`` naming it (after what is queued), and no answer."""
        self._conn.notify(CANCELLED, {"requestId": rid, "reason": too_slow(self._queue_limit)})
        self._conn.cancel(rid)
        self._flush()

    def _too_slow(self) -> None:
        """The reader left more than the queue limit unread: tear down its listen streams
        (the output no request of its own bounds)."""
        for rid in self._listens - self._dropped:
            job = self._jobs.get(rid)
            if job is not None:
                log_dropped(log, LISTEN, rid, self._queue_limit)
                self._dropped.add(rid)
                job.cancel()

    async def _answer(self, request: RequestReceived, result: HandlerResult) -> None:
        """Answer ``request`` (a new task refused while the pool is full), in a worker thread
        when a store blocks."""
        calls = self._calls
        if calls is None:
            self._driver.answer(request, result)
            return
        await calls.one_at_a_time(answer, self._conn, request, result)
        self._driver.route()

    async def _sleep(self, seconds: float) -> None:
        await self._writer.sent()
        await anyio.sleep(seconds)

    def _flush(self) -> None:
        """Wake the writer, and re-arm the timer if the connection's deadline moved."""
        self._writer.wake()
        self._timer.refresh()
