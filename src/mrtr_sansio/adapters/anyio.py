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
each ``subscriptions/listen`` stream on the stream (the output no request bounds) is torn
down, logged, with ``notifications/cancelled`` naming it after what is queued and no answer (as
the spec has a server end a listen stream on stdio); other requests go on.

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
import sys

from mrtr_sansio._extras import raise_missing_extra

try:
    import anyio
    import anyio.abc
    from anyio.streams.stapled import MultiListener
except ModuleNotFoundError as exc:
    raise_missing_extra(exc, __name__, "anyio")

from mrtr_sansio import ServerConfig, ServerConnection
from mrtr_sansio.tasks import RoundRunner

from ._anyio_client import Client
from ._anyio_parts import StdioStream
from ._anyio_server import Server
from ._common import Handler
from ._slow_reader import STREAM_QUEUE_BYTES, queue_bytes
from ._tasks import TaskRunOptions

__all__ = ["Client", "StdioStream", "TaskRunOptions", "serve", "serve_stdio", "serve_tcp"]


async def serve(
    handler: Handler,
    config: ServerConfig | None,
    stream: anyio.abc.ByteStream,
    *,
    principal: str | None = None,
    task_runs: TaskRunOptions | None = None,
    stream_queue_bytes: int = STREAM_QUEUE_BYTES,
    task_runner: RoundRunner | None = None,
) -> None:
    """Serve one stream until its input ends; the caller keeps (and closes) ``stream``.

    ``principal`` is the authenticated caller, bound into sealed request state; ``task_runs``
    bounds the task runs of this stream, ``stream_queue_bytes`` what its reader may leave
    unread (see the module docstring). ``task_runner`` runs the tasks' rounds elsewhere
    (a :class:`~mrtr_sansio.tasks.RoundRunner`, such as the Docket runner; ``task_runs``
    then bounds only the store threads); None: the stream's own pool.
    """
    conn = ServerConnection(config, principal=principal)
    limit = queue_bytes(stream_queue_bytes)
    await Server(handler, conn, stream, task_runs, limit, task_runner).run()


async def serve_stdio(
    handler: Handler,
    config: ServerConfig | None = None,
    *,
    task_runs: TaskRunOptions | None = None,
    stream_queue_bytes: int = STREAM_QUEUE_BYTES,
    task_runner: RoundRunner | None = None,
) -> None:
    """Serve this process's stdin/stdout until stdin ends (see :class:`StdioStream` for what
    they may be; the options as for :func:`serve`). While serving, ``sys.stdout`` is
    redirected to stderr so that a stray ``print`` cannot corrupt the protocol stream."""
    sys.stdout.flush()
    async with StdioStream(sys.stdin.fileno(), sys.stdout.fileno()) as stream:
        with contextlib.redirect_stdout(sys.stderr):
            await serve(
                handler,
                config,
                stream,
                task_runs=task_runs,
                stream_queue_bytes=stream_queue_bytes,
                task_runner=task_runner,
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
