"""The anyio stream client (:class:`mrtr_sansio.adapters.anyio.Client`, imported from there):
it launches a stdio server or connects over TCP or a given stream, and drives each call's
rounds with the application's input callbacks in cancel scopes of their own."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import IO, TYPE_CHECKING, Any

import anyio
import anyio.abc
from anyio.streams.stapled import StapledByteStream

if TYPE_CHECKING:  # typing.Unpack is 3.11+; annotations are not evaluated at run time
    from typing_extensions import Unpack

from mrtr_sansio import Call, ClientConfig, InputNeeded

from ._anyio_parts import GONE, Timer, Writer, receive
from ._client_common import SHUTDOWN_TIMEOUT, AsyncClientBase, ClientOptions, InputCallback
from ._client_driver import ClientDriver

__all__ = ["Client"]


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
