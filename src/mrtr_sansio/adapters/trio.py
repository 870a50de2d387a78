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

The client side is :class:`Client`, the twin of the asyncio one: input callbacks run in their
own cancel scopes, and cancelling the scope of a task awaiting a call cancels the request on
the wire::

    async with Client.connect_stdio(["python", "server.py"], elicitation=ask_user) as client:
        result = await client.call_tool("book_trip", {"destination": "Lisbon"})
"""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # typing.Unpack is 3.11+; annotations are not evaluated at run time
    from typing_extensions import Unpack

from mrtr_sansio._extras import raise_missing_extra

try:
    import trio
except ModuleNotFoundError as exc:
    raise_missing_extra(exc, __name__, "trio")

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
        self._timer = _ScopeTimer(self._driver, self._flush)

    async def run(self) -> None:
        async with trio.open_nursery() as services:
            services.start_soon(self._timer.run)
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
        self._timer.refresh()


class _ScopeTimer:
    """A driver's deadline kept by a task sleeping in a cancel scope (:meth:`run`): when it
    comes, ``fire_timer`` and ``flush``. Call :meth:`refresh` after anything that may move it."""

    __slots__ = ("_driver", "_flush", "_scope")

    def __init__(self, driver: TimedDriver[Any], flush: Callable[[], None]) -> None:
        self._driver = driver
        self._flush = flush
        self._scope: trio.CancelScope | None = None

    def refresh(self) -> None:
        """Re-arm if the driver's deadline moved."""
        if self._driver.refresh_timer():
            self._arm()

    def _arm(self) -> None:
        scope = self._scope
        if scope is not None:
            delay = self._driver.timer_delay()
            scope.deadline = math.inf if delay is None else trio.current_time() + delay

    async def run(self) -> None:
        while True:
            with trio.CancelScope() as scope:
                self._scope = scope
                self._arm()
                await trio.sleep_forever()
            self._scope = None
            self._driver.fire_timer()
            self._flush()


# --- the client -------------------------------------------------------------------------------


class Client(AsyncStreamClient):
    """An MCP client over a trio stream; open it with :meth:`connect_stdio`,
    :meth:`connect_tcp` or :meth:`connect` (async context managers).

    Calls may be made from many tasks at once. Input callbacks run in the client's nursery,
    each in its own cancel scope, cancelled when the server withdraws the request or the call
    ends. Cancelling a call's scope sends ``notifications/cancelled`` for the request in flight
    and stops the call's flow. One writer task owns the stream's sending side.
    """

    def __init__(
        self,
        stream: trio.abc.Stream,
        config: ClientConfig | None = None,
        **options: Unpack[ClientOptions],
    ) -> None:
        super().__init__(config, options, trio.Event)
        self._stream = stream
        #: The server process, when :meth:`connect_stdio` launched it.
        self.process: trio.Process | None = None
        self._nursery: trio.Nursery | None = None
        self._inputs: dict[int, trio.CancelScope] = {}  # id(InputNeeded) -> its callback's
        self._read_done = trio.Event()
        self._wakeup = trio.lowlevel.ParkingLot()  # the writer waits here for output
        self._closing = False  # the writer ends the output once it has sent everything
        self._timer = _ScopeTimer(self._driver, self._flush)

    # --- opening and closing ----------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def connect(
        cls,
        stream: trio.abc.Stream,
        config: ClientConfig | None = None,
        *,
        shutdown_timeout: float = SHUTDOWN_TIMEOUT,
        **options: Unpack[ClientOptions],
    ) -> AsyncIterator[Client]:
        """A client over ``stream``, once the handshake (``era`` legacy or auto) is done.

        On exit it ends its output (``send_eof``, or closing a stream that cannot half-close),
        waits up to ``shutdown_timeout`` for the server to end its own, and stops; calls still
        open raise :class:`ConnectionClosedError`. The caller keeps (and closes) ``stream``.
        A failed handshake raises :class:`HandshakeFailedError`.
        """
        client = cls(stream, config, **options)
        failure: Exception | None = None
        async with trio.open_nursery() as nursery:
            client._nursery = nursery
            nursery.start_soon(client._read_loop)
            nursery.start_soon(client._write_loop)
            nursery.start_soon(client._timer.run)
            try:
                await client._open()
                yield client
            except Exception as exc:  # raised bare below, not in the nursery's group
                failure = exc
            finally:
                await client._close(shutdown_timeout)
        if failure is not None:
            raise failure

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
        proc = await trio.lowlevel.open_process(
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
            stream = trio.StapledStream(proc.stdin, proc.stdout)
            async with cls.connect(
                stream, config, shutdown_timeout=shutdown_timeout, **options
            ) as client:
                client.process = proc
                yield client
        finally:
            with trio.CancelScope(shield=True):
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
        async with (
            await trio.open_tcp_stream(host, port) as stream,
            cls.connect(stream, config, shutdown_timeout=shutdown_timeout, **options) as client,
        ):
            yield client

    async def _close(self, timeout: float) -> None:
        """End our output, give the server ``timeout`` s to end its own, then stop."""
        self._closing = True
        self._wakeup.unpark_all()
        with trio.move_on_after(timeout) as scope:
            scope.shield = True
            await self._read_done.wait()
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()
        self._driver.close()  # whatever is still open fails: ConnectionClosedError

    # --- input callbacks --------------------------------------------------------------------

    def _start_input(self, event: InputNeeded, callback: InputCallback) -> None:
        assert self._nursery is not None
        scope = self._inputs[id(event)] = trio.CancelScope()
        self._nursery.start_soon(self._run_input, event, callback, scope)

    def _stop_input(self, event: InputNeeded) -> None:
        self._inputs.pop(id(event)).cancel()

    async def _run_input(
        self, event: InputNeeded, callback: InputCallback, scope: trio.CancelScope
    ) -> None:
        with scope:
            await self._answer(event, callback)
        if self._inputs.get(id(event)) is scope:
            del self._inputs[id(event)]

    # --- input, output and time -------------------------------------------------------------

    async def _read_loop(self) -> None:
        driver = self._driver
        receive_some = self._stream.receive_some
        while not driver.closed:
            try:
                data = bytes(await receive_some(READ_SIZE))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            driver.receive(data)
            self._flush()
        self._read_done.set()

    async def _write_loop(self) -> None:
        """Send what the connection queues; once closing and everything is sent, end the
        output. A broken stream ends the loop (the reader sees the end of input)."""
        driver = self._driver
        stream = self._stream
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while True:
                data = driver.data_to_send()
                if data:
                    await stream.send_all(data)
                elif self._closing:
                    break
                else:
                    await self._wakeup.park()
            if isinstance(stream, trio.abc.HalfCloseableStream):
                await stream.send_eof()
            else:
                await stream.aclose()

    def _flush(self) -> None:
        """Wake the writer, and re-arm the timer if the connection's deadline moved."""
        self._wakeup.unpark_all()
        self._timer.refresh()


async def _end_process(proc: trio.Process, timeout: float) -> None:
    """The spec's shutdown: stdin closed, then a wait, then SIGTERM, then SIGKILL."""
    assert proc.stdin is not None
    with contextlib.suppress(trio.BrokenResourceError):
        await proc.stdin.aclose()
    for escalate in (proc.terminate, proc.kill):
        with trio.move_on_after(timeout):
            await proc.wait()
            break
        escalate()
    else:
        await proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            await pipe.aclose()
