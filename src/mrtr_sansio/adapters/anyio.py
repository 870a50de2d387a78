"""Serve MCP, or talk to a server, over anyio byte streams: one implementation for asyncio and
trio (``anyio`` extra). Newline-delimited JSON on stdio or TCP.

Each request's handler runs in its own cancel scope inside a task group, so a slow handler never
holds up another and a ``notifications/cancelled`` cancels exactly that handler (nothing is
answered). The connection's deadlines (legacy shim legs awaiting the client) are kept by a timer
task. One writer task owns the stream's sending side; the reader waits for a send in progress
before taking more input, which is the backpressure. When the input ends every handler is
cancelled, what was already answered is written, and :func:`serve` returns with its task group
closed: no task is left behind. A broken output ends it too.

A reader that falls behind is bounded as over HTTP (``stream_queue_bytes``, 1 MiB by default
as for ``McpHttpApp``): once more than that waits to be written,
each ``subscriptions/listen`` stream on the stream (the output no request bounds) is ended,
logged, and answered -32603 after what is queued; other requests go on.

With the tasks extension, task runs go on in a bounded pool per stream (``task_runs``), each
on a connection of its own renewing its lease; at the end of input they stop and their tasks
fail. When a store blocks (SQLite, Redis), feeding and answering run in a worker thread.

::

    from mrtr_sansio.adapters.anyio import serve_stdio
    anyio.run(serve_stdio, handler, ServerConfig(server_info={"name": "demo", "version": "1"}))
    # or backend="trio"; or asyncio.run(serve_stdio(handler, config)), or trio.run(...)

:func:`serve_stdio` serves whatever this process's stdin and stdout are: pipes, sockets,
terminals, regular files (``python server.py < requests.jsonl > answers.jsonl``) or
``/dev/null``. The client side is :class:`Client`: it launches a stdio server (or connects over
TCP or a given stream), runs the input callbacks the application registered in their own cancel
scopes, and drives the MRTR rounds (modern) and the server's requests (legacy) for each
awaiting call::

    async with Client.connect_stdio(["python", "server.py"], elicitation=ask_user) as client:
        result = await client.call_tool("book_trip", {"destination": "Lisbon"})
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import IO, TYPE_CHECKING, Any

from mrtr_sansio._extras import raise_missing_extra

try:
    import anyio
    import anyio.abc
    from anyio.streams.stapled import MultiListener, StapledByteStream
except ModuleNotFoundError as exc:
    raise_missing_extra(exc, __name__, "anyio")

if TYPE_CHECKING:  # typing.Unpack is 3.11+; annotations are not evaluated at run time
    from typing_extensions import Unpack

from mrtr_sansio import (
    Call,
    ClientConfig,
    InputNeeded,
    JsonRpcError,
    RequestReceived,
    ServerConfig,
    ServerConnection,
)
from mrtr_sansio._mcp.subscriptions import LISTEN

from ._anyio_parts import GONE, Runner, StdioStream, Timer, Writer, receive
from ._client_common import SHUTDOWN_TIMEOUT, AsyncClientBase, ClientOptions, InputCallback
from ._common import Handler, HandlerResult, RequestContext, call_handler, log
from ._loop import ClientDriver, StreamServer, answer
from ._slow_reader import STREAM_QUEUE_BYTES, log_dropped, queue_bytes, too_slow
from ._tasks import StoreCalls, TaskRunner, TaskRunOptions

__all__ = ["Client", "StdioStream", "TaskRunOptions", "serve", "serve_stdio", "serve_tcp"]


async def serve(
    handler: Handler,
    config: ServerConfig | None,
    stream: anyio.abc.ByteStream,
    *,
    principal: str | None = None,
    task_runs: TaskRunOptions | None = None,
    stream_queue_bytes: int = STREAM_QUEUE_BYTES,
) -> None:
    """Serve one stream until its input ends; the caller keeps (and closes) ``stream``.

    ``principal`` is the authenticated caller, bound into sealed request state; ``task_runs``
    bounds the task runs of this stream, ``stream_queue_bytes`` what its reader may leave
    unread (see the module docstring).
    """
    conn = ServerConnection(config, principal=principal)
    await _Server(handler, conn, stream, task_runs, queue_bytes(stream_queue_bytes)).run()


async def serve_stdio(
    handler: Handler,
    config: ServerConfig | None = None,
    *,
    task_runs: TaskRunOptions | None = None,
    stream_queue_bytes: int = STREAM_QUEUE_BYTES,
) -> None:
    """Serve this process's stdin/stdout until stdin ends (see :class:`StdioStream` for what
    they may be). While serving, ``sys.stdout`` is redirected to stderr so that a stray
    ``print`` cannot corrupt the protocol stream."""
    sys.stdout.flush()
    async with StdioStream(sys.stdin.fileno(), sys.stdout.fileno()) as stream:
        with contextlib.redirect_stdout(sys.stderr):
            await serve(
                handler, config, stream, task_runs=task_runs, stream_queue_bytes=stream_queue_bytes
            )


async def serve_tcp(
    handler: Handler,
    config: ServerConfig | None,
    host: str | None,
    port: int,
    *,
    task_status: anyio.abc.TaskStatus[MultiListener[anyio.abc.SocketStream]] = (
        anyio.TASK_STATUS_IGNORED
    ),
    task_runs: TaskRunOptions | None = None,
    stream_queue_bytes: int = STREAM_QUEUE_BYTES,
) -> None:
    """Listen on ``host:port`` until cancelled, serving each connection on its own; cancelling
    closes every connection and its handlers.

    ``listener = await task_group.start(serve_tcp, handler, config, host, 0)`` gives the
    listener, whose ``extra(anyio.abc.SocketAttribute.local_port)`` is the port bound.
    """

    async def client(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            await serve(
                handler, config, stream, task_runs=task_runs, stream_queue_bytes=stream_queue_bytes
            )

    listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    async with listener:
        task_status.started(listener)
        await listener.serve(client)


# --- the server -------------------------------------------------------------------------------


class _Server:
    """One stream's tasks: the reader (which starts handlers), the writer, and the timer."""

    def __init__(
        self,
        handler: Handler,
        conn: ServerConnection,
        stream: anyio.abc.ByteStream,
        task_runs: TaskRunOptions | None = None,
        queue_limit: int = STREAM_QUEUE_BYTES,
    ) -> None:
        self._handler = handler
        self._conn = conn
        # Task runs and store calls: only with the tasks extension (else nothing changes).
        self._runner: TaskRunner | None = None
        self._calls: StoreCalls | None = None
        config = conn.config
        if config.tasks is not None:
            runs = task_runs if task_runs is not None else TaskRunOptions()
            calls = StoreCalls(config, runs.store_threads)
            self._runner = TaskRunner(handler, config, runs, calls)
            if calls.blocking:
                self._calls = calls.serialized()
        self._stream = stream
        self._driver = StreamServer(conn, self._start, self._cancel)
        self._handlers: Runner | None = None
        self._scopes: dict[str | int, anyio.CancelScope] = {}  # request id -> its handler's
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
        if request.task_id is not None and self._runner is not None:
            self._runner.start(request)  # a task's run: in the pool, on its own connection
            return
        scope = self._scopes[request.request_id] = anyio.CancelScope()
        if request.method == LISTEN:
            self._listens.add(request.request_id)
        self._handlers.start(self._run_handler, request, scope)

    def _cancel(self, request_id: str | int) -> None:
        scope = self._scopes.pop(request_id, None)
        if scope is not None:
            scope.cancel()
        elif self._runner is not None and type(request_id) is str:
            self._runner.cancel(request_id)  # a task's run (tasks/cancel)

    async def _run_handler(self, request: RequestReceived, scope: anyio.CancelScope) -> None:
        rid = request.request_id
        try:
            if not scope.cancel_called:  # else cancelled before it could start: never run it
                with scope:
                    ctx = RequestContext(self._conn, request, self._flush, self._sleep)
                    result = await call_handler(self._handler, ctx)
                    if self._runner is None:
                        self._driver.answer(request, result)
                    else:
                        await self._answer(request, self._runner.admit(result))
                    self._flush()
            if rid in self._dropped:  # its stream's reader was too slow (_too_slow)
                await self._answer(request, JsonRpcError.internal(too_slow(self._queue_limit)))
                self._flush()
        finally:
            self._dropped.discard(rid)
            self._listens.discard(rid)
            if self._scopes.get(rid) is scope:
                del self._scopes[rid]

    def _too_slow(self) -> None:
        """The reader left more than the queue limit unread: end its listen streams (the
        output no request of its own bounds), each answered -32603 after what is queued."""
        for rid in self._listens - self._dropped:
            scope = self._scopes.get(rid)
            if scope is not None:
                log_dropped(log, LISTEN, rid, self._queue_limit)
                self._dropped.add(rid)
                scope.cancel()

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


# --- the client -------------------------------------------------------------------------------


class Client(AsyncClientBase):
    """An MCP client over an anyio byte stream; open it with :meth:`connect_stdio`,
    :meth:`connect_tcp` or :meth:`connect` (async context managers).

    Calls may be made from many tasks at once. Input callbacks run in the client's task group,
    each in its own cancel scope, cancelled when the server withdraws the request or the call
    ends. Cancelling a task (or scope) awaiting a call sends ``notifications/cancelled`` for the
    request in flight and stops the call's flow. One writer task owns the stream's sending side.
    """

    def __init__(
        self,
        stream: anyio.abc.ByteStream,
        config: ClientConfig | None = None,
        **options: Unpack[ClientOptions],
    ) -> None:
        self._stream = stream
        self._waiters: dict[Call, anyio.Event] = {}
        self._handshake = anyio.Event()
        self._driver = ClientDriver.create(
            config,
            options,
            start_input=self._start_input,
            stop_input=self._stop_input,
            settled=self._settled,
            ready=self._handshake.set,
        )
        #: The server process, when :meth:`connect_stdio` launched it.
        self.process: anyio.abc.Process | None = None
        self._tasks: anyio.abc.TaskGroup | None = None
        self._inputs: dict[int, anyio.CancelScope] = {}  # id(InputNeeded) -> its callback's
        self._read_done = anyio.Event()
        self._writer = Writer(stream, self._driver.data_to_send)
        self._timer = Timer(self._driver, self._flush)

    # --- opening and closing ----------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def connect(
        cls,
        stream: anyio.abc.ByteStream,
        config: ClientConfig | None = None,
        *,
        shutdown_timeout: float = SHUTDOWN_TIMEOUT,
        **options: Unpack[ClientOptions],
    ) -> AsyncIterator[Client]:
        """A client over ``stream``, once the handshake (``era`` legacy or auto) is done.

        On exit it ends its output (``send_eof``), waits up to ``shutdown_timeout`` for the
        server to end its own, and stops; calls still open raise
        :class:`~mrtr_sansio.adapters.ConnectionClosedError`. The caller keeps (and closes)
        ``stream``. A failed handshake raises :class:`~mrtr_sansio.adapters.HandshakeFailedError`.
        """
        async with cls._session(cls(stream, config, **options), shutdown_timeout) as client:
            yield client

    @classmethod
    @asynccontextmanager
    async def connect_stdio(
        cls,
        command: Sequence[str],
        config: ClientConfig | None = None,
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        stderr: int | IO[Any] | None = None,
        shutdown_timeout: float = SHUTDOWN_TIMEOUT,
        **options: Unpack[ClientOptions],
    ) -> AsyncIterator[Client]:
        """Launch ``command`` as a stdio server and talk to it; its logs go to ``stderr``
        (inherited by default). How it is stopped: :data:`SHUTDOWN_TIMEOUT`."""
        proc = await anyio.open_process(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=cwd,
            env=env,
        )
        assert proc.stdin is not None
        assert proc.stdout is not None
        try:
            client = cls(StapledByteStream(proc.stdin, proc.stdout), config, **options)
            client.process = proc
            async with cls._session(client, shutdown_timeout):
                yield client
        finally:
            with anyio.CancelScope(shield=True):
                await _end_process(proc, shutdown_timeout)

    @classmethod
    @asynccontextmanager
    async def connect_tcp(
        cls,
        host: str,
        port: int,
        config: ClientConfig | None = None,
        *,
        shutdown_timeout: float = SHUTDOWN_TIMEOUT,
        **options: Unpack[ClientOptions],
    ) -> AsyncIterator[Client]:
        """Talk to a server listening on ``host:port`` (newline-delimited JSON)."""
        async with await anyio.connect_tcp(host, port) as stream:
            client = cls(stream, config, **options)
            async with cls._session(client, shutdown_timeout):
                yield client

    @staticmethod
    @asynccontextmanager
    async def _session(client: Client, shutdown_timeout: float) -> AsyncIterator[Client]:
        """Run ``client``'s reader, writer and timer around the application's use of it."""
        failure: Exception | None = None
        async with anyio.create_task_group() as tasks:
            client._tasks = tasks
            tasks.start_soon(client._read_loop)
            tasks.start_soon(client._write_loop)
            tasks.start_soon(client._timer.run)
            try:
                await client._open()
                yield client
            except Exception as exc:  # raised bare below, not in the task group's group
                failure = exc
            finally:
                await client._close(shutdown_timeout)
        if failure is not None:
            raise failure

    async def _open(self) -> None:
        """Send what the handshake needs and wait for it."""
        self._flush()
        if not self._driver.ready:
            await self._handshake.wait()
        if self._driver.handshake_error is not None:
            raise self._driver.handshake_error

    async def _close(self, timeout: float) -> None:
        """End our output, give the server ``timeout`` s to end its own, then stop."""
        self._writer.close()
        with anyio.move_on_after(timeout, shield=True):
            await self._read_done.wait()
        assert self._tasks is not None
        self._tasks.cancel_scope.cancel()
        self._driver.close()  # whatever is still open fails: ConnectionClosedError

    # --- calls ------------------------------------------------------------------------------

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None
    ) -> Mapping[str, Any]:
        """Send any request and await its end (MRTR rounds and legacy server requests are
        handled on the way); returns the result, raises
        :class:`~mrtr_sansio.adapters.ClientError`."""
        return await self._await(self._driver.call(method, params))

    async def resume_task(self, task_id: str) -> Mapping[str, Any]:
        """Follow the task ``task_id`` to its end (see
        :meth:`~mrtr_sansio.adapters.AsyncClientBase.resume_task`)."""
        return await self._await(self._driver.resume_task(task_id))

    async def _await(self, call: Call) -> Mapping[str, Any]:
        """Wait for ``call`` to end; its result, or its :class:`ClientError` raised."""
        driver = self._driver
        done = self._waiters[call] = anyio.Event()
        try:
            self._flush()
            await done.wait()
        except BaseException:  # cancelled (or interrupted): give the call up on the wire
            driver.cancel(call)
            self._flush()
            raise
        finally:
            del self._waiters[call]
        return driver.take(call)

    def _settled(self, call: Call) -> None:
        waiter = self._waiters.get(call)
        if waiter is not None:
            waiter.set()
        else:  # started on the connection directly: nobody takes its outcome
            self._driver.outcomes.pop(call, None)

    # --- input callbacks --------------------------------------------------------------------

    def _start_input(self, event: InputNeeded, callback: InputCallback) -> None:
        assert self._tasks is not None
        scope = self._inputs[id(event)] = anyio.CancelScope()
        self._tasks.start_soon(self._run_input, event, callback, scope, name=event.method)

    def _stop_input(self, event: InputNeeded) -> None:
        self._inputs.pop(id(event)).cancel()

    async def _run_input(
        self, event: InputNeeded, callback: InputCallback, scope: anyio.CancelScope
    ) -> None:
        with scope:
            try:
                result = await callback(event)
            except Exception as exc:
                self._driver.fail(event, exc)
            else:
                self._driver.answer(event, result)
            self._flush()
        if self._inputs.get(id(event)) is scope:
            del self._inputs[id(event)]

    # --- input, output and time -------------------------------------------------------------

    async def _read_loop(self) -> None:
        driver = self._driver
        while not driver.closed:
            driver.receive(await receive(self._stream))
            self._flush()
        self._read_done.set()

    async def _write_loop(self) -> None:
        """Send what the connection queues; once closing and everything is sent, end the
        output. A broken stream ends the loop (the reader sees the end of input)."""
        with contextlib.suppress(*GONE):
            await self._writer.run()
            await self._stream.send_eof()

    def _flush(self) -> None:
        """Wake the writer, and re-arm the timer if the connection's deadline moved."""
        self._writer.wake()
        self._timer.refresh()


async def _end_process(proc: anyio.abc.Process, timeout: float) -> None:
    """The spec's shutdown: stdin closed, then a wait, then SIGTERM, then SIGKILL."""
    assert proc.stdin is not None
    with contextlib.suppress(*GONE):
        await proc.stdin.aclose()
    for escalate in (proc.terminate, proc.kill):
        with anyio.move_on_after(timeout):
            await proc.wait()
            break
        with contextlib.suppress(ProcessLookupError):
            escalate()
    else:
        await proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            await pipe.aclose()
