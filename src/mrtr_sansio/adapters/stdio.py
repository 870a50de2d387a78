"""Serve MCP over stdin/stdout, blocking, with no async library.

Newline-delimited JSON, one message per line; nothing else is ever written to stdout (while
serving, ``sys.stdout`` is redirected to stderr, where logs go too). Handlers are plain
functions, run one at a time in arrival order::

    def handler(request: RequestReceived, ctx: BlockingRequestContext) -> HandlerResult: ...

    serve(handler, ServerConfig(server_info={"name": "demo", "version": "1"}))

While waiting for input the loop keeps the connection's deadlines (legacy shim legs the client
leaves unanswered time out). ``ctx.sleep`` keeps listening too: input that arrives meanwhile is
queued, and if the client cancels the sleeping handler's request (or the input ends),
:class:`HandlerCancelled` is raised inside the handler and nothing is answered. End of input
ends the loop; requests not yet started are dropped, as the client is gone.

Waiting with a timeout uses ``select`` (POSIX). Elsewhere reads simply block, so deadlines are
only checked between messages and ``ctx.sleep`` is a plain sleep.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import time
from typing import BinaryIO

from mrtr_sansio import RequestReceived, ServerConfig, ServerConnection

from ._common import (
    READ_SIZE,
    BlockingHandler,
    BlockingRequestContext,
    StreamServer,
    call_blocking_handler,
)

__all__ = ["HandlerCancelled", "serve"]

_CAN_SELECT = os.name == "posix"


class HandlerCancelled(BaseException):
    """Raised in a handler by ``ctx.sleep`` when its request was cancelled or input ended.

    A ``BaseException``, like ``asyncio.CancelledError``, so ``except Exception`` lets it pass;
    a handler that catches it must re-raise it.
    """


def serve(
    handler: BlockingHandler,
    config: ServerConfig | None = None,
    *,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    principal: str | None = None,
) -> None:
    """Serve until the input ends (or the output breaks).

    ``stdin``/``stdout`` default to this process's; both must have real file descriptors
    (pipes, sockets, terminals or files), which are read and written directly, unbuffered.
    ``principal`` is the authenticated caller, bound into sealed request state.
    """
    conn = ServerConnection(config, principal=principal)
    fd_in = (stdin if stdin is not None else sys.stdin.buffer).fileno()
    if stdout is not None:
        stdout.flush()
        _Server(handler, conn, fd_in, stdout.fileno()).run()
        return
    sys.stdout.flush()
    fd_out = sys.stdout.fileno()
    with contextlib.redirect_stdout(sys.stderr):
        _Server(handler, conn, fd_in, fd_out).run()


def _readable(fd: int, timeout: float | None) -> bool:
    """Wait up to ``timeout`` seconds (None: forever) for ``fd`` to have input."""
    if not _CAN_SELECT:
        return True
    return bool(select.select([fd], [], [], timeout)[0])


class _Server:
    """The loop: read, run the queued handlers one by one, write, keep time."""

    def __init__(
        self, handler: BlockingHandler, conn: ServerConnection, fd_in: int, fd_out: int
    ) -> None:
        self._handler = handler
        self._conn = conn
        self._fd = fd_in
        self._fd_out = fd_out
        self._driver = StreamServer(conn, self._start, self._cancel)
        self._pending: dict[str | int, RequestReceived] = {}  # arrival order
        self._current: str | int | None = None  # id of the request whose handler runs
        self._current_cancelled = False
        self._broken = False  # the output failed: the client is gone

    def run(self) -> None:
        driver = self._driver
        while True:
            self._run_pending()
            if driver.closed or self._broken:
                return
            self._wait(None)

    # --- requests ---------------------------------------------------------------------------

    def _start(self, request: RequestReceived) -> None:
        self._pending[request.request_id] = request

    def _cancel(self, request_id: str | int) -> None:
        if request_id == self._current:
            self._current_cancelled = True
        else:
            self._pending.pop(request_id, None)

    def _run_pending(self) -> None:
        pending = self._pending
        driver = self._driver
        while pending and not (driver.closed or self._broken):
            request = pending.pop(next(iter(pending)))
            self._current = request.request_id
            self._current_cancelled = False
            ctx = BlockingRequestContext(self._conn, request, self._flush, self._sleep)
            try:
                result = call_blocking_handler(self._handler, ctx)
            except HandlerCancelled:
                continue
            finally:
                self._current = None
            driver.answer(request, result)
            self._flush()

    def _sleep(self, seconds: float) -> None:
        """``ctx.sleep``: wait, still reading input and keeping time; raise if cancelled."""
        end = time.monotonic() + seconds
        while True:
            if self._current_cancelled or self._driver.closed or self._broken:
                raise HandlerCancelled
            left = end - time.monotonic()
            if left <= 0:
                return
            if not _CAN_SELECT:
                time.sleep(left)
                return
            self._wait(left)

    # --- input, output and time -------------------------------------------------------------

    def _wait(self, timeout: float | None) -> None:
        """Wait for input (at most ``timeout`` seconds; None: no limit) and take it in,
        firing the connection's timer whenever it falls due meanwhile."""
        driver = self._driver
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            driver.refresh_timer()
            due = driver.timer_delay()
            left = None if end is None else max(0.0, end - time.monotonic())
            limit = due if left is None else (left if due is None else min(due, left))
            if _readable(self._fd, limit):
                try:
                    data = os.read(self._fd, READ_SIZE)
                except OSError:
                    data = b""
                driver.receive(data)
                self._flush()
                return
            assert limit is not None  # select only times out with a timeout
            if due is not None and due <= limit:
                driver.fire_timer()
                self._flush()
            if left is not None and left <= limit:
                return

    def _flush(self) -> None:
        data = self._conn.data_to_send()
        if data and not self._broken:
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(self._fd_out, view) :]
            except OSError:  # broken pipe: the client is gone
                self._broken = True
