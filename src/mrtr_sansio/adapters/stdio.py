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

The client side is :class:`Client`: it launches a stdio server and blocks in each call until
the call ends, answering the server's input requests with plain-function callbacks as they
come (MRTR rounds on the modern wire, the server's requests on the legacy one)::

    with Client.connect_stdio(["python", "server.py"], elicitation=ask_user) as client:
        result = client.call_tool("book_trip", {"destination": "Lisbon"}, timeout=60)

Waiting with a timeout uses ``select`` (POSIX). Elsewhere reads simply block, so deadlines are
only checked between messages and ``ctx.sleep`` is a plain sleep.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from typing import BinaryIO

from mrtr_sansio import JsonRpcError, RequestReceived, ServerConfig, ServerConnection

from ._common import PIPE, BlockingHandler, BlockingRequestContext, call_blocking_handler
from ._lease import SERVER_STOPPED, LeaseThread
from ._loop import ServerDriver
from ._stdio_client import Client
from ._stdio_io import can_select, wait_input, write_all

__all__ = ["Client", "HandlerCancelled", "serve"]


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
    conn.transport = PIPE
    fd_in = (stdin if stdin is not None else sys.stdin.buffer).fileno()
    if stdout is not None:
        stdout.flush()
        _Server(handler, conn, fd_in, stdout.fileno()).run()
        return
    sys.stdout.flush()
    fd_out = sys.stdout.fileno()
    with contextlib.redirect_stdout(sys.stderr):
        _Server(handler, conn, fd_in, fd_out).run()


class _Server:
    """The loop: read, run the queued handlers one by one, write, keep time."""

    def __init__(
        self, handler: BlockingHandler, conn: ServerConnection, fd_in: int, fd_out: int
    ) -> None:
        self._handler = handler
        self._conn = conn
        self._fd = fd_in
        self._fd_out = fd_out
        self._driver = ServerDriver(conn, self._start, self._cancel)
        self._pending: dict[str | int, RequestReceived] = {}  # arrival order
        self._current: str | int | None = None  # id of the request whose handler runs
        self._current_cancelled = False
        self._recheck = math.inf  # ctx.sleep's longest wait (a task's run: its lease's renewal)
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
            lease = LeaseThread.of(self._conn.config, request, self._stop_current)
            self._recheck = lease.every if lease and lease.every else math.inf
            try:
                with lease.running() if lease else contextlib.nullcontext():
                    result = call_blocking_handler(self._handler, ctx)
            except HandlerCancelled:
                if lease and not self._current_cancelled:  # input ended: the task fails
                    driver.answer(request, JsonRpcError.internal(SERVER_STOPPED))
                continue
            finally:
                self._current = None
            driver.answer(request, result)
            self._flush()

    def _stop_current(self) -> None:
        """The running task is no longer running (its lease said so): ``ctx.sleep`` raises."""
        self._current_cancelled = True

    def _sleep(self, seconds: float) -> None:
        """``ctx.sleep``: wait, still reading input and keeping time; raise if cancelled."""
        end = time.monotonic() + seconds
        while True:
            if self._current_cancelled or self._driver.closed or self._broken:
                raise HandlerCancelled
            left = end - time.monotonic()
            if left <= 0:
                return
            if not can_select():
                time.sleep(left)
                return
            self._wait(min(left, self._recheck))

    # --- input, output and time -------------------------------------------------------------

    def _wait(self, timeout: float | None) -> None:
        wait_input(self._fd, self._driver, self._flush, timeout)

    def _flush(self) -> None:
        data = self._conn.data_to_send()
        if data and not self._broken and not write_all(self._fd_out, data):
            self._broken = True  # broken pipe: the client is gone
