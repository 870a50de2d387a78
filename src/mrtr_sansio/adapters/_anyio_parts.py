"""The anyio pieces under the async adapter (:mod:`mrtr_sansio.adapters.anyio`): a byte stream on
any pair of file descriptors, the one task that writes a stream, a driver's timer, and the
runner that starts handlers without a task each."""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import types
from collections import deque
from collections.abc import Callable, Coroutine, Generator
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel

from ._common import READ_SIZE
from ._loop import TimedDriver

__all__ = ["GONE", "Job", "Runner", "StdioStream", "Timer", "Writer", "receive"]

#: What ends a stream's input or output for us: the peer closed, reset or went away.
GONE = (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError)


class StdioStream(anyio.abc.ByteStream):
    """A byte stream on two file descriptors, whatever they are: pipes, sockets, terminals,
    regular files or ``/dev/null``.

    Each read and write is tried at once; only when the descriptor says it would block (a pipe,
    socket or terminal, which are put in non-blocking mode meanwhile) does the stream wait for
    it with the event loop. A regular file or ``/dev/null`` never does, so it is read and
    written directly (a disk read holds the loop as long as it takes). Closing the stream puts
    the descriptors' blocking mode back and leaves them open: they belong to the caller.
    POSIX only (waiting on a descriptor needs a selector-based event loop).
    """

    def __init__(self, fd_in: int, fd_out: int) -> None:
        self._fds = (fd_in, fd_out)
        self._blocking = [os.get_blocking(fd) for fd in self._fds]  # both before either is set
        for fd in self._fds:
            os.set_blocking(fd, False)
        self._closed = False
        self._eof_sent = False

    async def receive(self, max_bytes: int = READ_SIZE) -> bytes:
        """The next bytes read (at most ``max_bytes``); ``EndOfStream`` at the end of input."""
        fd = self._fds[0]
        while True:
            self._check_open()
            try:
                data = os.read(fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(fd)
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            await anyio.lowlevel.checkpoint()
            if not data:
                raise anyio.EndOfStream
            return data

    async def send(self, item: bytes) -> None:
        """Write all of ``item``; ``BrokenResourceError`` when the reader is gone."""
        view = memoryview(item)
        while view:
            written = self.send_nowait(view)
            if written:
                view = view[written:]
            else:
                await anyio.wait_writable(self._fds[1])
        await anyio.lowlevel.checkpoint()

    def send_nowait(self, item: bytes | memoryview) -> int:
        """Write what the descriptor takes of ``item`` now, without waiting: the number of bytes
        written (0 when it would block); raises as :meth:`send` does."""
        self._check_open()
        if self._eof_sent:
            raise anyio.ClosedResourceError
        try:
            return os.write(self._fds[1], item)
        except BlockingIOError:
            return 0
        except OSError as exc:
            raise anyio.BrokenResourceError from exc

    async def send_eof(self) -> None:
        """No more output: later sends fail (the descriptor itself stays open)."""
        self._eof_sent = True
        await anyio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        """Put the descriptors' blocking mode back; they stay open."""
        if not self._closed:
            self._closed = True
            for fd, was_blocking in zip(self._fds, self._blocking, strict=True):
                with contextlib.suppress(OSError):
                    os.set_blocking(fd, was_blocking)
        await anyio.lowlevel.checkpoint()

    def _check_open(self) -> None:
        if self._closed:
            raise anyio.ClosedResourceError


class Writer:
    """The one task that owns a stream's sending side (:meth:`run`): it sends what ``pending()``
    gives, and waits for :meth:`wake` when there is nothing. :meth:`sent` waits for the send in
    progress, which is how readers apply backpressure.

    On a stream that can write without waiting (:meth:`StdioStream.send_nowait`), the first
    :meth:`wake` since the task last ran writes what is pending at once (no send in progress):
    a lone answer leaves when it is made, not when the writer task next runs. Answers made
    after it, before the task runs (a batch of handlers that answered at once), go out together
    in the task's next send, one write for them all; so does what the descriptor did not take
    (and a failure, which the task raises).

    With a ``limit``, what a send in progress holds up is taken from ``pending()`` at each
    :meth:`wake` and counted (:attr:`waiting`): the first wake that takes it past ``limit``
    bytes calls ``overflow()`` (the reader is too slow), once until it is back under.
    """

    __slots__ = (
        "_busy",
        "_held",
        "_idle",
        "_limit",
        "_overflow",
        "_pending",
        "_queued",
        "_send_now",
        "_sending",
        "_stream",
        "_wakeup",
        "_woken",
        "closing",
    )

    def __init__(
        self,
        stream: anyio.abc.ByteSendStream,
        pending: Callable[[], bytes],
        *,
        limit: float = math.inf,
        overflow: Callable[[], object] | None = None,
    ) -> None:
        self._stream = stream
        self._pending = pending
        self._send_now: Callable[[bytes], int] | None = getattr(stream, "send_nowait", None)
        # Taken from pending() and not written yet (the task's), and their bytes.
        self._queued: list[bytes] = []
        self._held = 0
        self._sending = 0  # bytes of the send in progress
        self._limit = limit
        self._overflow = overflow
        self._woken = False  # woken since the task last looked at what is pending
        self._wakeup = anyio.Event()
        self._busy = False  # a send is in progress
        self._idle: anyio.Event | None = None  # made by the first waiter of that send
        #: Once set, :meth:`run` returns when it has sent everything.
        self.closing = False

    @property
    def waiting(self) -> int:
        """Bytes taken to send and not known to be written: the send in progress, and what
        waits behind it."""
        return self._sending + self._held

    def wake(self) -> None:
        """There may be something to send."""
        send_now = self._send_now
        if send_now is not None and not (self._woken or self._busy or self._queued):
            data = self._pending()
            if data:
                try:
                    written = send_now(data)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    written = 0  # the task's send raises it where a failure belongs
                self._hold(data[written:])
        elif self._busy and self._limit < math.inf:
            self._hold(self._pending())
        if not self._woken:  # else the task has yet to look at what is pending: it will
            self._woken = True  # until the task runs: what comes next waits for it
            self._wakeup.set()

    def _hold(self, data: bytes) -> None:
        if not data:
            return
        before = self.waiting
        self._queued.append(data)
        self._held += len(data)
        if before <= self._limit < before + len(data) and self._overflow is not None:
            self._overflow()

    def close(self) -> None:
        """Send what is pending, then end :meth:`run`."""
        self.closing = True
        self._wakeup.set()

    async def sent(self) -> None:
        """Wait until the send in progress, if any, is done."""
        if self._busy:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()

    async def run(self) -> None:
        """Send until closed and drained; a broken stream raises out of here."""
        while True:
            self._woken = False
            queued = self._queued
            if queued:
                queued.append(self._pending())
                data = queued[0] if len(queued) == 2 and not queued[1] else b"".join(queued)
                self._queued, self._held = [], 0
            else:
                data = self._pending()
            if not data:
                if self.closing:
                    return
                await self._wakeup.wait()
                self._wakeup = anyio.Event()
                continue
            self._busy = True
            self._sending = len(data)
            try:
                await self._stream.send(data)
            finally:
                self._busy = False
                self._sending = 0
                idle, self._idle = self._idle, None
                if idle is not None:
                    idle.set()


class Timer:
    """A driver's deadline kept by a task sleeping in a cancel scope (:meth:`run`): when it
    comes, ``fire_timer`` and ``flush``. Call :meth:`refresh` after anything that may move it."""

    __slots__ = ("_driver", "_flush", "_scope")

    def __init__(self, driver: TimedDriver[Any], flush: Callable[[], None]) -> None:
        self._driver = driver
        self._flush = flush
        self._scope: anyio.CancelScope | None = None

    def refresh(self) -> None:
        """Re-arm if the driver's deadline moved."""
        if self._driver.refresh_timer():
            self._arm()

    def _arm(self) -> None:
        scope = self._scope
        if scope is not None:
            delay = self._driver.timer_delay()
            scope.deadline = math.inf if delay is None else anyio.current_time() + delay

    async def run(self) -> None:
        while True:
            with anyio.CancelScope() as scope:
                self._scope = scope
                self._arm()
                await anyio.sleep_forever()
            self._scope = None
            self._driver.fire_timer()
            self._flush()


async def receive(stream: anyio.abc.ByteReceiveStream) -> bytes:
    """The next bytes from ``stream``; ``b""`` when its input ended or broke."""
    try:
        return await stream.receive(READ_SIZE)
    except GONE:
        return b""


class Job:
    """A coroutine started with :meth:`Runner.start`, to be cancelled: :meth:`cancel` marks it
    (the coroutine asks :attr:`cancelled` before it starts its work) and, once it waits,
    cancels the scope of the task it waits in."""

    __slots__ = ("_scope", "cancelled")

    def __init__(self) -> None:
        #: Whether :meth:`cancel` was called.
        self.cancelled = False
        self._scope: anyio.CancelScope | None = None  # the runner task's, once it waits there

    def cancel(self) -> None:
        """Cancel the coroutine: its next wait raises the library's cancellation."""
        self.cancelled = True
        if self._scope is not None:
            self._scope.cancel()


class Runner:
    """Runs coroutines in a task group without a task for each one that never waits.

    :meth:`start` queues a coroutine function and its arguments; one runner task at a time takes
    them in order and runs each in a copy of the context it was queued in, as a task of its own
    would. A coroutine that finishes without waiting (a handler that answers at once) costs no
    task; one that waits keeps the runner task to itself until it ends, and a new runner task
    takes over the queue. So a slow handler never holds up another, and each waiting handler
    still runs in a task of the group (cancel scopes, ``anyio.current_task``), at the cost of
    a task start only for handlers that wait.

    Each runner task runs in one cancel scope, entered before its first coroutine starts (so
    the scopes a coroutine enters nest in it): it becomes the scope of the coroutine that waits
    there, which its :class:`Job` cancels. A coroutine that never waits cannot be cancelled
    while it runs, so it needs no scope of its own, and a batch of them costs one.
    """

    __slots__ = ("_group", "_queue", "_running")

    def __init__(self, group: anyio.abc.TaskGroup) -> None:
        self._group = group
        self._queue: deque[
            tuple[
                contextvars.Context,
                Job,
                Callable[..., Coroutine[Any, Any, object]],
                tuple[Any, ...],
            ]
        ] = deque()
        self._running = False  # a runner task is started and has not handed the queue over

    def start(
        self, func: Callable[..., Coroutine[Any, Any, object]], *args: Any, job: Job | None = None
    ) -> Job:
        """Run ``func(*args)`` soon (in the order started); the :class:`Job` (``job``, or a new
        one) cancels it."""
        if job is None:
            job = Job()
        self._queue.append((contextvars.copy_context(), job, func, args))
        if not self._running:
            self._running = True
            self._group.start_soon(self._run)
        return job

    async def _run(self) -> None:
        queue = self._queue
        with anyio.CancelScope() as scope:
            while queue:
                context, job, func, args = queue.popleft()
                coro: Coroutine[Any, Any, object] = context.run(func, *args)
                try:
                    step = context.run(coro.send, None)
                except StopIteration:
                    continue
                except BaseException:
                    self._hand_over()
                    raise
                self._hand_over()  # this one waits: the others go on in another task
                job._scope = scope
                if job.cancelled:  # during its first step
                    scope.cancel()
                await _resume(context, coro, step)
                return
            self._running = False

    def _hand_over(self) -> None:
        if self._queue:
            self._group.start_soon(self._run)
        else:
            self._running = False


@types.coroutine
def _resume(
    context: contextvars.Context, coro: Coroutine[Any, Any, object], step: Any
) -> Generator[Any, Any, None]:
    """Go on with ``coro`` from its first wait (``step``, what it yielded to the event loop) in
    the calling task, each step in ``context``: what ``await coro`` would have done."""
    while True:
        try:
            sent = yield step
        except BaseException as exc:  # thrown into the task (a cancellation): pass it on
            try:
                step = context.run(coro.throw, exc)
            except StopIteration:
                return
        else:
            try:
                step = context.run(coro.send, sent)
            except StopIteration:
                return
