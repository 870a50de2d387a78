"""Serve MCP over asyncio streams: newline-delimited JSON on stdio pipes or TCP.

Each request runs its handler in its own task, so a slow handler never holds up another; a
``notifications/cancelled`` cancels that task and nothing is answered. The connection's
deadlines (legacy shim legs awaiting the client) are kept with the loop's timers. Whatever the
connection queues is written at once; backpressure is ``await writer.drain()`` before more
input is read and in ``ctx.sleep``. When the input ends (or the output breaks) every handler
task is cancelled and awaited before :func:`serve` returns: no task is left behind.

::

    from mrtr_sansio.adapters.asyncio import serve_stdio
    asyncio.run(serve_stdio(handler, ServerConfig(server_info={"name": "demo", "version": "1"})))

The client side is :class:`Client`: it launches a stdio server (or connects over TCP or given
streams), runs the input callbacks the application registered in their own tasks, and drives
the MRTR rounds (modern) and the server's requests (legacy) for each awaiting call::

    async with Client.connect_stdio(["python", "server.py"], elicitation=ask_user) as client:
        result = await client.call_tool("book_trip", {"destination": "Lisbon"})
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # typing.Unpack is 3.11+; annotations are not evaluated at run time
    from typing_extensions import Unpack


from mrtr_sansio import (
    ClientConfig,
    InputNeeded,
    RequestReceived,
    ServerConfig,
    ServerConnection,
)

from ._client_common import SHUTDOWN_TIMEOUT, ClientOptions, InputCallback
from ._common import (
    READ_SIZE,
    Handler,
    RequestContext,
    StreamServer,
    TimedDriver,
    call_handler,
)
from ._stream_client import AsyncStreamClient

__all__ = ["Client", "serve", "serve_stdio", "serve_tcp"]


async def serve(
    handler: Handler,
    config: ServerConfig | None,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    principal: str | None = None,
) -> None:
    """Serve one connection until its input ends; the caller keeps ``reader``/``writer``.

    ``principal`` is the authenticated caller, bound into sealed request state.
    """
    conn = ServerConnection(config, principal=principal)
    await _Server(handler, conn, writer).run(reader)


async def serve_stdio(handler: Handler, config: ServerConfig | None = None) -> None:
    """Serve this process's stdin/stdout (POSIX pipes, sockets or terminals) until stdin ends.

    The loop works on duplicates of the two descriptors and puts their blocking mode back at
    the end. While serving, ``sys.stdout`` is redirected to stderr so that a stray ``print``
    cannot corrupt the protocol stream.
    """
    loop = asyncio.get_running_loop()
    sys.stdout.flush()
    fds = (sys.stdin.fileno(), sys.stdout.fileno())
    blocking = [os.get_blocking(fd) for fd in fds]
    transports: list[asyncio.BaseTransport] = []
    try:
        reader = asyncio.StreamReader(limit=READ_SIZE)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), _dup(fds[0], "rb")
        )
        transports.append(read_transport)
        write_transport, write_protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, _dup(fds[1], "wb")
        )
        transports.append(write_transport)
        writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
        with contextlib.redirect_stdout(sys.stderr):
            await serve(handler, config, reader, writer)
        # Everything answered goes out before we return: the client may still be reading.
        # (Closing stdin is how a client asks a stdio server to exit; it escalates to signals
        # if we do not, so waiting for the pipe to drain cannot hang a well-behaved client.)
        write_transport.set_write_buffer_limits(0)
        with contextlib.suppress(OSError):
            await writer.drain()
    finally:
        for transport in transports:
            transport.close()
        for fd, was_blocking in zip(fds, blocking, strict=True):
            os.set_blocking(fd, was_blocking)


def _dup(fd: int, mode: str) -> IO[bytes]:
    """An unbuffered file on a duplicate of ``fd`` (closing it leaves ``fd`` open)."""
    dup = os.dup(fd)
    try:
        return os.fdopen(dup, mode, buffering=0)
    except BaseException:
        os.close(dup)
        raise


async def serve_tcp(
    handler: Handler,
    config: ServerConfig | None,
    host: str,
    port: int,
    *,
    started: Callable[[asyncio.Server], object] | None = None,
) -> None:
    """Listen on ``host:port`` until cancelled; then close every connection and its handlers.

    ``started`` is called with the listening server (e.g. to learn the port when ``port`` is 0).
    """
    clients: set[asyncio.Task[None]] = set()

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        clients.add(task)
        try:
            await serve(handler, config, reader, writer)
        finally:
            clients.discard(task)
            writer.close()

    server = await asyncio.start_server(client, host, port, limit=READ_SIZE)
    try:
        if started is not None:
            started(server)
        await server.serve_forever()
    finally:
        server.close()
        for task in clients:
            task.cancel()
        await asyncio.gather(*clients, return_exceptions=True)


class _Server:
    """One connection's loop: read bytes, start and cancel handler tasks, write, keep time."""

    def __init__(
        self, handler: Handler, conn: ServerConnection, writer: asyncio.StreamWriter
    ) -> None:
        self._handler = handler
        self._conn = conn
        self._writer = writer
        self._loop = asyncio.get_running_loop()
        self._driver = StreamServer(conn, self._start, self._cancel)
        self._tasks: dict[str | int, asyncio.Task[None]] = {}  # request id -> its handler
        self._all: set[asyncio.Task[None]] = set()  # every live handler task
        self._drain_lock = asyncio.Lock()  # Python 3.10 allows one drain() waiter only
        self._timer = _LoopTimer(self._driver, self._flush)
        self._reading: asyncio.Task[None] | None = None

    async def run(self, reader: asyncio.StreamReader) -> None:
        reading = self._reading = self._loop.create_task(self._read_loop(reader))
        try:
            await asyncio.wait((reading,))
        finally:
            reading.cancel()
            self._timer.cancel()
            for task in self._all:
                task.cancel()
            await asyncio.gather(reading, *self._all, return_exceptions=True)
        if not reading.cancelled():
            reading.result()  # a failure of the loop itself is a bug: surface it

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        await _read_loop(reader, self._driver, self._flush, self._drain)

    # --- handler tasks ----------------------------------------------------------------------

    def _start(self, request: RequestReceived) -> None:
        task = self._loop.create_task(self._run_handler(request))
        self._tasks[request.request_id] = task
        self._all.add(task)
        task.add_done_callback(self._all.discard)

    def _cancel(self, request_id: str | int) -> None:
        task = self._tasks.pop(request_id, None)
        if task is not None:
            task.cancel()

    async def _run_handler(self, request: RequestReceived) -> None:
        try:
            ctx = RequestContext(self._conn, request, self._flush, self._sleep)
            result = await call_handler(self._handler, ctx)
            self._driver.answer(request, result)
            self._flush()
        finally:
            tasks = self._tasks
            if tasks.get(request.request_id) is asyncio.current_task():
                del tasks[request.request_id]

    async def _sleep(self, seconds: float) -> None:
        await self._drain()
        await asyncio.sleep(seconds)

    # --- output and time --------------------------------------------------------------------

    def _flush(self) -> None:
        """Write what the connection queued, and re-arm the timer if its deadline moved."""
        data = self._conn.data_to_send()
        if data:
            if self._writer.is_closing():
                self._broken()
            else:
                self._writer.write(data)
        self._timer.refresh()

    async def _drain(self) -> None:
        try:
            async with self._drain_lock:
                await self._writer.drain()
        except OSError:  # ConnectionResetError, BrokenPipeError: the peer is gone
            self._broken()

    def _broken(self) -> None:
        if self._reading is not None:
            self._reading.cancel()


async def _read_loop(
    reader: asyncio.StreamReader,
    driver: TimedDriver[Any],
    flush: Callable[[], None],
    drain: Callable[[], Awaitable[None]],
) -> None:
    """Feed what ``reader`` gives to ``driver`` until the input ends, writing what each read
    queued (``flush``) and taking no more input until it is taken (``drain``)."""
    while True:
        try:
            data = await reader.read(READ_SIZE)
        except OSError:  # the connection broke: as good as the end of input
            data = b""
        driver.receive(data)
        flush()
        if driver.closed:
            return
        await drain()


class _LoopTimer:
    """A driver's deadline kept with the loop's timers: when it comes, ``fire_timer`` and
    ``flush``. Call :meth:`refresh` after anything that may move it."""

    __slots__ = ("_driver", "_flush", "_handle", "_loop")

    def __init__(self, driver: TimedDriver[Any], flush: Callable[[], None]) -> None:
        self._loop = asyncio.get_running_loop()
        self._driver = driver
        self._flush = flush
        self._handle: asyncio.TimerHandle | None = None

    def refresh(self) -> None:
        """Re-arm if the driver's deadline moved."""
        if self._driver.refresh_timer():
            self._arm()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _arm(self) -> None:
        self.cancel()
        delay = self._driver.timer_delay()
        if delay is not None:
            self._handle = self._loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._driver.fire_timer()
        self._flush()
        self._arm()  # fired a little early (the loop's clock resolution): again


# --- the client -------------------------------------------------------------------------------


class Client(AsyncStreamClient):
    """An MCP client over asyncio streams; open it with :meth:`connect_stdio`,
    :meth:`connect_tcp` or :meth:`connect` (async context managers).

    Calls may be made from many tasks at once. Input callbacks run in their own tasks; one the
    server withdraws, or whose call ends, is cancelled. Cancelling a task awaiting a call sends
    ``notifications/cancelled`` for the request in flight and stops the call's flow.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        config: ClientConfig | None = None,
        **options: Unpack[ClientOptions],
    ) -> None:
        super().__init__(config, options, asyncio.Event)
        self._reader = reader
        self._writer = writer
        self._loop = asyncio.get_running_loop()
        #: The server process, when :meth:`connect_stdio` launched it.
        self.process: asyncio.subprocess.Process | None = None
        self._inputs: dict[int, asyncio.Task[None]] = {}  # id(InputNeeded) -> its callback
        self._drain_lock = asyncio.Lock()  # Python 3.10 allows one drain() waiter only
        self._timer = _LoopTimer(self._driver, self._flush)
        self._reading: asyncio.Task[None] | None = None  # started by _open

    # --- opening and closing ----------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def connect(
        cls,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        config: ClientConfig | None = None,
        *,
        shutdown_timeout: float = SHUTDOWN_TIMEOUT,
        **options: Unpack[ClientOptions],
    ) -> AsyncIterator[Client]:
        """A client over given streams, once the handshake (``era`` legacy or auto) is done.

        On exit it ends its output, waits up to ``shutdown_timeout`` for the server to end its
        own, and stops; calls still open raise :class:`ConnectionClosedError`. The caller keeps
        (and closes) the streams. A failed handshake raises :class:`HandshakeFailedError`.
        """
        client = cls(reader, writer, config, **options)
        try:
            await client._open()
            yield client
        finally:
            await client._close(shutdown_timeout)

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
        proc = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            cwd=cwd,
            env=env,
            limit=READ_SIZE,
        )
        assert proc.stdin is not None
        assert proc.stdout is not None
        try:
            async with cls.connect(
                proc.stdout, proc.stdin, config, shutdown_timeout=shutdown_timeout, **options
            ) as client:
                client.process = proc
                yield client
        finally:
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
        reader, writer = await asyncio.open_connection(host, port, limit=READ_SIZE)
        try:
            async with cls.connect(
                reader, writer, config, shutdown_timeout=shutdown_timeout, **options
            ) as client:
                yield client
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _open(self) -> None:
        self._reading = self._loop.create_task(self._read_loop())
        await super()._open()

    async def _close(self, timeout: float) -> None:
        """End our output, give the server ``timeout`` s to end its own, then stop."""
        writer = self._writer
        if not writer.is_closing():
            with contextlib.suppress(OSError):
                if writer.can_write_eof():
                    writer.write_eof()
                else:
                    writer.close()
        reading = self._reading
        assert reading is not None
        await asyncio.wait((reading,), timeout=timeout)
        self._timer.cancel()
        tasks = [reading, *self._inputs.values()]
        self._driver.close()  # whatever is still open fails (ConnectionClosedError)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- input callbacks --------------------------------------------------------------------

    def _start_input(self, event: InputNeeded, callback: InputCallback) -> None:
        key = id(event)
        task = self._loop.create_task(self._answer(event, callback))
        self._inputs[key] = task
        task.add_done_callback(lambda done: self._forget_input(key, done))

    def _forget_input(self, key: int, task: asyncio.Task[None]) -> None:
        if self._inputs.get(key) is task:
            del self._inputs[key]

    def _stop_input(self, event: InputNeeded) -> None:
        self._inputs.pop(id(event)).cancel()

    # --- input, output and time -------------------------------------------------------------

    async def _read_loop(self) -> None:
        await _read_loop(self._reader, self._driver, self._flush, self._drain)

    def _flush(self) -> None:
        """Write what the connection queued, and re-arm the timer if its deadline moved."""
        data = self._driver.data_to_send()
        if data and not self._writer.is_closing():
            self._writer.write(data)
        self._timer.refresh()

    async def _drain(self) -> None:
        with contextlib.suppress(OSError):  # the server is gone: the reader sees the end
            async with self._drain_lock:
                await self._writer.drain()


async def _end_process(proc: asyncio.subprocess.Process, timeout: float) -> None:
    """The spec's shutdown: stdin closed, then a wait, then SIGTERM, then SIGKILL."""
    assert proc.stdin is not None
    proc.stdin.close()
    for escalate in (proc.terminate, proc.kill):
        try:
            await asyncio.wait_for(proc.wait(), timeout)
            return
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                escalate()
    await proc.wait()
