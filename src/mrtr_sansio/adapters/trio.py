"""Serve MCP over trio streams (``trio`` extra): newline-delimited JSON on stdio or TCP.

The trio twin of :mod:`mrtr_sansio.adapters.asyncio`: each request's handler runs in its own
cancel scope inside a nursery, so a slow handler never holds up another and a
``notifications/cancelled`` cancels exactly that handler (nothing is answered). The
connection's deadlines are kept by a timer task. One writer task owns the stream's sending
side (trio allows one sender at a time); the reader waits for a send in progress before
taking more input, which is the backpressure. When the input ends every handler is cancelled,
what was already answered is written, and :func:`serve` returns with its nursery closed.

::

    from mrtr_sansio.adapters.trio import serve_stdio
    trio.run(serve_stdio, handler, ServerConfig(server_info={"name": "demo", "version": "1"}))
"""

from __future__ import annotations

import contextlib
import math
import os
import sys

import trio

from mrtr_sansio import RequestReceived, ServerConfig, ServerConnection

from ._common import READ_SIZE, Handler, RequestContext, StreamServer, call_handler

__all__ = ["serve", "serve_stdio", "serve_tcp"]


async def serve(
    handler: Handler,
    config: ServerConfig | None,
    stream: trio.abc.Stream,
    *,
    principal: str | None = None,
) -> None:
    """Serve one stream until its input ends; the caller keeps (and closes) ``stream``.

    ``principal`` is the authenticated caller, bound into sealed request state.
    """
    conn = ServerConnection(config, principal=principal)
    await _Server(handler, conn, stream).run()


async def serve_stdio(handler: Handler, config: ServerConfig | None = None) -> None:
    """Serve this process's stdin/stdout until stdin ends (POSIX: pipes, sockets, terminals).

    trio works on duplicates of the two descriptors and puts their blocking mode back at the
    end. While serving, ``sys.stdout`` is redirected to stderr so that a stray ``print``
    cannot corrupt the protocol stream.
    """
    sys.stdout.flush()
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    stdout = trio.lowlevel.FdStream(os.dup(sys.stdout.fileno()))
    async with trio.StapledStream(stdout, stdin) as stream:
        with contextlib.redirect_stdout(sys.stderr):
            await serve(handler, config, stream)


async def serve_tcp(
    handler: Handler,
    config: ServerConfig | None,
    host: str | None,
    port: int,
    *,
    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on ``host:port`` until cancelled, serving each connection on its own.

    Use ``await nursery.start(serve_tcp, handler, config, host, 0)`` to learn the listeners.
    """

    async def client(stream: trio.SocketStream) -> None:
        async with stream:
            await serve(handler, config, stream)

    await trio.serve_tcp(client, port, host=host, task_status=task_status)


class _Server:
    """One stream's tasks: the reader (which starts handlers), the writer, and the timer."""

    def __init__(self, handler: Handler, conn: ServerConnection, stream: trio.abc.Stream) -> None:
        self._handler = handler
        self._conn = conn
        self._stream = stream
        self._driver = StreamServer(conn, self._start, self._cancel)
        self._handlers: trio.Nursery | None = None
        self._scopes: dict[str | int, trio.CancelScope] = {}  # request id -> its handler's scope
        self._wakeup = trio.lowlevel.ParkingLot()  # the writer waits here for output
        self._sending: trio.Event | None = None  # set when the send in progress is done
        self._closing = False
        self._timer_scope: trio.CancelScope | None = None

    async def run(self) -> None:
        async with trio.open_nursery() as services:
            services.start_soon(self._timer_loop)
            services.start_soon(self._serve_requests)
            await self._write_loop()
            services.cancel_scope.cancel()

    async def _serve_requests(self) -> None:
        async with trio.open_nursery() as handlers:
            self._handlers = handlers
            await self._read_loop()
            handlers.cancel_scope.cancel()
        # Let the writer finish what was answered, then stop.
        self._closing = True
        self._wakeup.unpark_all()

    async def _read_loop(self) -> None:
        driver = self._driver
        receive_some = self._stream.receive_some
        while True:
            try:
                data = await receive_some(READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            driver.receive(bytes(data))
            self._flush()
            if driver.closed:
                return
            sending = self._sending
            if sending is not None:
                await sending.wait()

    async def _write_loop(self) -> None:
        """Send what the connection queues; return once closing and everything is sent, or
        when the stream breaks (which ends the whole server)."""
        conn = self._conn
        send_all = self._stream.send_all
        while True:
            data = conn.data_to_send()
            if not data:
                if self._closing:
                    return
                await self._wakeup.park()
                continue
            sending = self._sending = trio.Event()
            try:
                await send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            finally:
                self._sending = None
                sending.set()

    # --- handlers ---------------------------------------------------------------------------

    def _start(self, request: RequestReceived) -> None:
        assert self._handlers is not None
        scope = trio.CancelScope()
        self._scopes[request.request_id] = scope
        self._handlers.start_soon(self._run_handler, request, scope)

    def _cancel(self, request_id: str | int) -> None:
        scope = self._scopes.pop(request_id, None)
        if scope is not None:
            scope.cancel()

    async def _run_handler(self, request: RequestReceived, scope: trio.CancelScope) -> None:
        if scope.cancel_called:  # cancelled before it could start: never run it
            return
        try:
            with scope:
                ctx = RequestContext(self._conn, request, self._flush, self._sleep)
                result = await call_handler(self._handler, ctx)
                self._driver.answer(request, result)
                self._flush()
        finally:
            scopes = self._scopes
            if scopes.get(request.request_id) is scope:
                del scopes[request.request_id]

    async def _sleep(self, seconds: float) -> None:
        sending = self._sending
        if sending is not None:
            await sending.wait()
        await trio.sleep(seconds)

    # --- output and time --------------------------------------------------------------------

    def _flush(self) -> None:
        """Wake the writer, and re-arm the timer if the connection's deadline moved."""
        self._wakeup.unpark_all()
        if self._driver.refresh_timer():
            self._arm_timer()

    def _arm_timer(self) -> None:
        scope = self._timer_scope
        if scope is not None:
            delay = self._driver.timer_delay()
            scope.deadline = math.inf if delay is None else trio.current_time() + delay

    async def _timer_loop(self) -> None:
        while True:
            with trio.CancelScope() as scope:
                self._timer_scope = scope
                self._arm_timer()
                await trio.sleep_forever()
            self._timer_scope = None
            self._driver.fire_timer()
            self._flush()
