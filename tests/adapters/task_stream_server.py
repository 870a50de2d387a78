"""A task server on stdin/stdout for the lease tests: ``python task_stream_server.py ADAPTER DB
LEASE`` serves the tool ``nap`` (a task whenever the client allows; the run sleeps
``arguments.seconds``) with its tasks in the SQLite file DB and ``lease_seconds=LEASE``.
ADAPTER is ``stdio`` (the blocking server; the run sleeps with ``time.sleep``, so nothing but
the server's own renewal keeps its lease, or with ``ctx.sleep`` when ``arguments.cooperative``),
``asyncio`` or ``trio`` (the anyio server)."""

from __future__ import annotations

import sys
import time

import mrtr_sansio as m
from mrtr_sansio.adapters import BlockingRequestContext, HandlerResult, RequestContext
from mrtr_sansio.adapters.stores import SqliteTaskStore
from mrtr_sansio.tasks import RunAsTask, TaskSettings

TOOL = {"name": "nap", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}}


def config(path: str, lease: float) -> m.ServerConfig:
    return m.ServerConfig(
        server_info={"name": "task-stream-server", "version": "1.0"},
        tasks=TaskSettings(
            store=SqliteTaskStore(path), tools={"nap": "optional"}, lease_seconds=lease
        ),
    )


def first_round(request: m.RequestReceived) -> HandlerResult | None:
    """The answer that needs no sleeping, or None: sleep, then :func:`done`."""
    if request.method == "tools/list":
        return {"tools": [TOOL]}
    if request.method != "tools/call" or request.name != "nap":
        return request.method_not_found()
    if request.can_create_task:
        return RunAsTask(status_message="Napping")
    return None


def done(request: m.RequestReceived) -> HandlerResult:
    return {"content": [{"type": "text", "text": f"slept {request.arguments['seconds']}"}]}


def blocking(request: m.RequestReceived, ctx: BlockingRequestContext) -> HandlerResult:
    answer = first_round(request)
    if answer is not None:
        return answer
    if request.arguments.get("cooperative"):
        ctx.sleep(float(request.arguments["seconds"]))  # reads input, stops when told
    else:
        time.sleep(float(request.arguments["seconds"]))  # deaf to everything meanwhile
    return done(request)


async def cooperative(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
    answer = first_round(request)
    if answer is not None:
        return answer
    await ctx.sleep(float(request.arguments["seconds"]))
    return done(request)


def main(adapter: str, path: str, lease: float) -> None:
    if adapter == "stdio":
        from mrtr_sansio.adapters import stdio

        stdio.serve(blocking, config(path, lease))
        return
    import anyio

    from mrtr_sansio.adapters.anyio import serve_stdio

    anyio.run(serve_stdio, cooperative, config(path, lease), backend=adapter)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
