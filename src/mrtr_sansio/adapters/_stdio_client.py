"""The blocking stdio client (:class:`mrtr_sansio.adapters.stdio.Client`, imported from
there): one call at a time, each blocking until it ends, the server's input requests answered
by plain-function callbacks as they come."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # typing.Unpack is 3.11+; annotations are not evaluated at run time
    from typing_extensions import Unpack

from mrtr_sansio import Call, ClientConfig, InputNeeded

from ._client_common import (
    SHUTDOWN_TIMEOUT,
    BlockingClientOptions,
    BlockingInputCallback,
    ClientDriver,
    ClientRequests,
)
from ._common import PIPE
from ._stdio_io import wait_input, write_all

__all__ = ["Client"]


class Client(ClientRequests[Mapping[str, Any]]):
    """A blocking MCP client over a server's pipes; open it with :meth:`connect_stdio` or
    :meth:`connect` (context managers).

    One call at a time, from one thread: each call blocks until it ends, reading the server's
    messages and running the input callbacks in turn as their requests arrive. The requests
    (``call_tool``, ``get_prompt``, ``read_resource``, the ``list_*`` calls) are those of the
    async clients, each with ``timeout=`` (all its rounds; when it expires the request in
    flight is cancelled on the wire and ``TimeoutError`` is raised); an interrupt
    (``KeyboardInterrupt``) cancels a call the same way before propagating.
    """

    def __init__(
        self,
        reader: IO[bytes],
        writer: IO[bytes],
        config: ClientConfig | None = None,
        **options: Unpack[BlockingClientOptions],
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._fd_in = reader.fileno()
        self._fd_out = writer.fileno()
        #: The server process, when :meth:`connect_stdio` launched it.
        self.process: subprocess.Popen[bytes] | None = None
        self._driver = ClientDriver.create(
            config,
            options,
            start_input=self._start_input,
            stop_input=self._stop_input,
            settled=_nothing,
            ready=_nothing,
        )
        self._driver.conn.transport = PIPE
        self._inputs: dict[int, tuple[InputNeeded, BlockingInputCallback]] = {}
        self._broken = False  # the output failed: the server is gone

    # --- opening and closing ----------------------------------------------------------------

    @classmethod
    @contextmanager
    def connect(
        cls,
        reader: IO[bytes],
        writer: IO[bytes],
        config: ClientConfig | None = None,
        *,
        shutdown_timeout: float = SHUTDOWN_TIMEOUT,
        **options: Unpack[BlockingClientOptions],
    ) -> Iterator[Client]:
        """A client reading the server's output from ``reader`` and writing its input to
        ``writer`` (both with real file descriptors), once the handshake is done.

        On exit ``writer`` is closed (the server's end of input) and the server's output read
        to its end for up to ``shutdown_timeout`` seconds. A failed handshake raises
        :class:`HandshakeFailedError`.
        """
        client = cls(reader, writer, config, **options)
        try:
            client._open()
            yield client
        finally:
            client._close(shutdown_timeout)

    @classmethod
    @contextmanager
    def connect_stdio(
        cls,
        command: Sequence[str],
        config: ClientConfig | None = None,
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        stderr: int | IO[Any] | None = None,
        shutdown_timeout: float = SHUTDOWN_TIMEOUT,
        **options: Unpack[BlockingClientOptions],
    ) -> Iterator[Client]:
        """Launch ``command`` as a stdio server and talk to it; its logs go to ``stderr``
        (inherited by default). How it is stopped: :data:`SHUTDOWN_TIMEOUT`."""
        proc = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=cwd,
            env=env,
            bufsize=0,
        )
        assert proc.stdin is not None
        assert proc.stdout is not None
        try:
            with cls.connect(
                proc.stdout, proc.stdin, config, shutdown_timeout=shutdown_timeout, **options
            ) as client:
                client.process = proc
                yield client
        finally:
            _end_process(proc, shutdown_timeout)

    def _open(self) -> None:
        self._flush()
        driver = self._driver
        self._wait_until(lambda: driver.ready, None)
        if driver.handshake_error is not None:
            raise driver.handshake_error

    def _close(self, timeout: float) -> None:
        """End the server's input, read its output to the end (at most ``timeout`` s)."""
        with contextlib.suppress(OSError):
            self._writer.close()
        self._broken = True
        driver = self._driver
        self._wait_until(lambda: driver.closed, timeout)
        driver.close()

    # --- calls ------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> Mapping[str, Any]:
        """Send any request and block until it ends (MRTR rounds and legacy server requests
        are handled on the way); returns the result, raises :class:`ClientError`."""
        return self._await(self._driver.call(method, params), method, timeout)

    def resume_task(self, task_id: str, *, timeout: float | None = None) -> Mapping[str, Any]:
        """Follow the task ``task_id`` (from the ``on_task`` hook, say of a client before a
        restart) to its end, answering its input through the callbacks; returns the tool's
        result. Needs the tasks extension declared and the modern wire."""
        return self._await(self._driver.resume_task(task_id), "the task", timeout)

    def _await(self, call: Call, what: str, timeout: float | None) -> Mapping[str, Any]:
        """Block until ``call`` ends (at most ``timeout`` s); its result, or its error."""
        driver = self._driver
        outcomes = driver.outcomes
        try:
            self._flush()
            done = self._wait_until(lambda: call in outcomes, timeout)
        except BaseException:
            driver.cancel(call)
            self._flush()
            raise
        if not done:
            driver.cancel(call, "Timed out")
            self._flush()
            raise TimeoutError(f"{what} did not end within {timeout} s")
        return driver.take(call)

    def _send(
        self, method: str, params: Mapping[str, Any] | None, timeout: float | None
    ) -> Mapping[str, Any]:
        return self.request(method, params, timeout=timeout)

    # --- the loop ---------------------------------------------------------------------------

    def _start_input(self, event: InputNeeded, callback: BlockingInputCallback) -> None:
        self._inputs[id(event)] = (event, callback)

    def _stop_input(self, event: InputNeeded) -> None:
        self._inputs.pop(id(event), None)

    def _run_inputs(self) -> None:
        """Run the callbacks of the inputs asked for, in arrival order."""
        inputs = self._inputs
        driver = self._driver
        while inputs:
            event, callback = inputs.pop(next(iter(inputs)))
            try:
                result = callback(event)
            except Exception as exc:
                driver.fail(event, exc)
            else:
                driver.answer(event, result)
            self._flush()

    def _wait_until(self, done: Callable[[], bool], timeout: float | None) -> bool:
        """Read, answer and keep time until ``done()`` or the input ends; False when
        ``timeout`` seconds passed first."""
        end = None if timeout is None else time.monotonic() + timeout
        driver = self._driver
        while True:
            self._run_inputs()
            if done() or driver.closed:
                return done()
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                return False
            wait_input(self._fd_in, driver, self._flush, left)

    def _flush(self) -> None:
        data = self._driver.data_to_send()
        if data and not self._broken and not write_all(self._fd_out, data):
            self._broken = True  # broken pipe: the server is gone, the reader sees the end


def _nothing(*_args: object) -> None:
    """A hook the blocking client does not need (it polls the driver instead)."""


def _end_process(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """The spec's shutdown: stdin closed, then a wait, then SIGTERM, then SIGKILL."""
    assert proc.stdin is not None
    with contextlib.suppress(OSError):
        proc.stdin.close()
    for escalate in (proc.terminate, proc.kill):
        try:
            proc.wait(timeout)
            break
        except subprocess.TimeoutExpired:
            escalate()
    else:
        proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
