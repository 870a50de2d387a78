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
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable
from typing import IO

from mrtr_sansio import RequestReceived, ServerConfig, ServerConnection

from ._common import READ_SIZE, Handler, RequestContext, StreamServer, call_handler

__all__ = ["serve", "serve_stdio", "serve_tcp"]


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
        self._timer: asyncio.TimerHandle | None = None
        self._reading: asyncio.Task[None] | None = None

    async def run(self, reader: asyncio.StreamReader) -> None:
        reading = self._reading = self._loop.create_task(self._read_loop(reader))
        try:
            await asyncio.wait((reading,))
        finally:
            reading.cancel()
            if self._timer is not None:
                self._timer.cancel()
            for task in self._all:
                task.cancel()
            await asyncio.gather(reading, *self._all, return_exceptions=True)
        if not reading.cancelled():
            reading.result()  # a failure of the loop itself is a bug: surface it

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        driver = self._driver
        while True:
            try:
                data = await reader.read(READ_SIZE)
            except OSError:  # the connection broke: as good as the end of input
                data = b""
            driver.receive(data)
            self._flush()
            if driver.closed:
                return
            await self._drain()

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
        if self._driver.refresh_timer():
            self._arm_timer()

    async def _drain(self) -> None:
        try:
            async with self._drain_lock:
                await self._writer.drain()
        except OSError:  # ConnectionResetError, BrokenPipeError: the peer is gone
            self._broken()

    def _broken(self) -> None:
        if self._reading is not None:
            self._reading.cancel()

    def _arm_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        delay = self._driver.timer_delay()
        if delay is not None:
            self._timer = self._loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._driver.fire_timer()
        self._flush()
        if self._timer is None:
            self._arm_timer()
