"""The anyio server's task runs and store calls: a SQLite file whose write lock another
connection holds stalls neither the event loop nor another stream (the store calls run in a
worker thread), and the stream whose task meets the lock gets -32603 saying so; a stream's
runs go on in a bounded pool, and ``tasks/cancel`` on the stream stops its run."""

from __future__ import annotations

import functools
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from fixtures import Everything, server_config
from task_stream_server import config, cooperative
from test_tasks_durable_http import STALL, Ticker
from test_tasks_http import body

import mrtr_sansio as m
from mrtr_sansio.adapters import HandlerResult, RequestContext
from mrtr_sansio.adapters._tasks import POOL_FULL, TaskRunOptions
from mrtr_sansio.adapters.anyio import serve_tcp

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


class Lines:
    """JSON lines over one TCP stream."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def send(self, message: dict[str, Any]) -> None:
        await self.stream.send(json.dumps(message).encode() + b"\n")

    async def recv(self) -> dict[str, Any]:
        with anyio.fail_after(10):
            while b"\n" not in self.buffer:
                self.buffer += await self.stream.receive()
        line, self.buffer = self.buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message


async def test_a_locked_sqlite_file_stalls_no_other_stream(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    cfg = config(str(path), 30.0)
    other = sqlite3.connect(path, isolation_level=None)
    ticker = Ticker()
    try:
        other.execute("BEGIN IMMEDIATE")  # another process's long write
        async with anyio.create_task_group() as tg:
            listener = await tg.start(serve_tcp, cooperative, cfg, "127.0.0.1", 0)
            port = listener.extra(anyio.abc.SocketAttribute.local_port)
            tg.start_soon(ticker.run)
            a = Lines(await anyio.connect_tcp("127.0.0.1", port))
            b = Lines(await anyio.connect_tcp("127.0.0.1", port))
            nap = {"name": "nap", "arguments": {"seconds": 5}}
            await a.send(body(1, "tools/call", nap))  # making the task meets the lock
            await anyio.sleep(0.1)
            latencies = []
            for rid in range(2, 7):
                began = time.monotonic()
                await b.send(body(rid, "tools/list", {}))
                assert (await b.recv())["result"]["tools"][0]["name"] == "nap"
                latencies.append(time.monotonic() - began)
            refused = await a.recv()
            await a.stream.aclose()
            await b.stream.aclose()
            tg.cancel_scope.cancel()
    finally:
        other.close()
    assert refused["id"] == 1
    assert refused["error"]["code"] == -32603, refused
    assert "task store is locked by another writer" in refused["error"]["message"]
    assert ticker.longest < STALL, ticker.longest
    assert max(latencies) < STALL, latencies


async def test_tasks_cancel_on_the_same_stream_stops_the_run_and_the_pool_is_bounded() -> None:
    handler = Recorder()
    runs = TaskRunOptions(max_running=1)
    async with anyio.create_task_group() as tg:
        listener = await tg.start(
            functools.partial(serve_tcp, task_runs=runs), handler.handle, server_config(), None, 0
        )
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        a = Lines(await anyio.connect_tcp("127.0.0.1", port))
        slow = {"name": "slow_compute", "arguments": {"seconds": 60}}
        await a.send(body(1, "tools/call", slow))
        task_id = (await a.recv())["result"]["taskId"]
        await a.send(body(2, "tools/call", slow))  # one run at most: refused
        assert (await a.recv())["error"] == {"code": -32603, "message": POOL_FULL}
        with anyio.fail_after(5):
            await handler.running.wait()
        await a.send(body(3, "tasks/cancel", {"taskId": task_id}))
        assert (await a.recv())["result"]["resultType"] == "complete"
        with anyio.fail_after(5):
            await handler.stopped.wait()  # the run was cancelled, not left for a minute
        await a.send(body(4, "tasks/get", {"taskId": task_id}))
        assert (await a.recv())["result"]["status"] == "cancelled"
        await a.stream.aclose()
        tg.cancel_scope.cancel()


class Recorder:
    """The fixtures' handler, telling when a task's run starts and when it is cancelled."""

    def __init__(self) -> None:
        self.inner = Everything()
        self.running = anyio.Event()
        self.stopped = anyio.Event()

    async def handle(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        if request.task_id is None:
            return await self.inner.handle(request, ctx)
        self.running.set()
        try:
            return await self.inner.handle(request, ctx)
        except anyio.get_cancelled_exc_class():
            self.stopped.set()
            raise
