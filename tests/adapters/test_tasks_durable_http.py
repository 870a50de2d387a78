"""The ASGI app over durable stores that misbehave, and its task pool: a real SQLite file whose
write lock another connection holds and a real redis-server paused with SIGSTOP stall no other
client (an unrelated ``tools/call`` is served meanwhile, the event loop never stops for long)
and the task request gets -32603 saying what failed; task runs go on in the app's own pool
(bounded, documented) and hold no HTTP request open, so ``tasks/get`` and ``tasks/cancel`` get
through when it is full.
"""

from __future__ import annotations

import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from fixtures import Everything, server_config
from http_harness import Client
from test_tasks_http import answer, body, call, get, until

from mrtr_sansio.adapters._tasks import SERVER_STOPPED, TaskRunOptions
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.adapters.stores import RedisTaskStore, SqliteTaskStore

pytestmark = pytest.mark.anyio

#: The longest the event loop may go without running a 5 ms ticker, on a loaded machine. A
#: store call on the loop would stall it for the store's whole timeout (1 s here).
STALL = 0.3


class Ticker:
    """Measures the event loop's longest stall: a task that wakes every 5 ms."""

    def __init__(self) -> None:
        self.longest = 0.0

    async def run(self) -> None:
        last = time.monotonic()
        while True:
            await anyio.sleep(0.005)
            now = time.monotonic()
            self.longest = max(self.longest, now - last)
            last = now


async def unrelated_calls(client: Client, seconds: float) -> list[float]:
    """Latencies of plain ``tools/call`` requests made one after another for ``seconds``."""
    latencies = []
    end = time.monotonic() + seconds
    rid = 1000
    while time.monotonic() < end:
        rid += 1
        began = time.monotonic()
        reply = await call(client, rid, "test_simple_text", {})
        latencies.append(time.monotonic() - began)
        assert reply["result"]["content"][0]["type"] == "text"
        await anyio.sleep(0.02)
    return latencies


async def _served_meanwhile(
    app: McpHttpApp, fault_request: dict[str, Any]
) -> tuple[Any, Ticker, list[float]]:
    """Send ``fault_request`` (which meets the store's fault) while unrelated calls go on;
    its reply, the loop's ticker and the unrelated calls' latencies."""
    ticker = Ticker()
    latencies: list[float] = []
    async with anyio.create_task_group() as tg:
        client = Client(app, tg)
        tg.start_soon(ticker.run)

        async def others() -> None:
            latencies.extend(await unrelated_calls(client, 1.5))

        tg.start_soon(others)
        await anyio.sleep(0.1)
        reply = await answer(client, fault_request)
        with anyio.fail_after(10):
            while not latencies:
                await anyio.sleep(0.05)
        tg.cancel_scope.cancel()
    return reply, ticker, latencies


async def test_a_sqlite_write_lock_held_elsewhere_stalls_no_other_client(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store = SqliteTaskStore(path, timeout=1.0)
    app = McpHttpApp(Everything().handle, server_config(task_store=store))
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process's long write
        task_call = body(1, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 5}})
        reply, ticker, latencies = await _served_meanwhile(app, task_call)
    finally:
        other.close()
        store.close()
    assert reply["error"]["code"] == -32603
    assert "task store is locked by another writer" in reply["error"]["message"]
    assert ticker.longest < STALL, ticker.longest
    assert len(latencies) >= 5
    assert max(latencies) < STALL * 2, latencies


async def test_a_paused_redis_stalls_no_other_client(redis_server: tuple[str, Any]) -> None:
    url, proc = redis_server
    store = RedisTaskStore.from_url(url, timeout=1.0)
    app = McpHttpApp(Everything().handle, server_config(task_store=store))
    try:
        async with anyio.create_task_group() as tg:
            created = (await call(Client(app, tg), 1, "slow_compute", {"seconds": 0.01}))["result"]
            tg.cancel_scope.cancel()
        proc.send_signal(signal.SIGSTOP)
        get_task = body(2, "tasks/get", {"taskId": created["taskId"]})
        reply, ticker, latencies = await _served_meanwhile(app, get_task)
    finally:
        proc.send_signal(signal.SIGCONT)
        store.close()
    assert reply["id"] == 2
    assert reply["error"]["code"] == -32603
    assert "task store (Redis) is unreachable or too slow" in reply["error"]["message"]
    assert ticker.longest < STALL, ticker.longest
    assert len(latencies) >= 5
    assert max(latencies) < STALL * 2, latencies


def test_task_run_options_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="max_running: must be a positive integer"):
        TaskRunOptions(max_running=0)
    with pytest.raises(ValueError, match="store_threads"):
        TaskRunOptions(store_threads=1.5)  # type: ignore[arg-type]


async def test_a_lifespan_cancelled_without_shutdown_leaves_runs_to_their_posts() -> None:
    """However the lifespan ends, a later run never goes to its closed task group (which would
    fail, or hang the test waiting for it): it goes on in its POST, as with no lifespan."""
    app = McpHttpApp(Everything().handle, server_config())
    started = anyio.Event()

    async def receive() -> dict[str, Any]:
        if not started.is_set():
            return {"type": "lifespan.startup"}
        await anyio.sleep_forever()  # the server never says shutdown
        raise AssertionError  # pragma: no cover

    async def send(message: Any) -> None:
        assert message["type"] == "lifespan.startup.complete"
        started.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(app, {"type": "lifespan"}, receive, send)
            await started.wait()
            tg.cancel_scope.cancel()  # the lifespan ends without a shutdown
        async with anyio.create_task_group() as tg:
            client = Client(app, tg)
            created = (await call(client, 1, "slow_compute", {"seconds": 0.05}))["result"]
            final = await until(client, created["taskId"], "completed")
            tg.cancel_scope.cancel()
    assert final["result"]["content"][0]["text"] == "Computed  in 0.05s."


async def test_a_lifespan_shutdown_fails_the_runs_going_on(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    app = McpHttpApp(Everything().handle, server_config(task_store=store, task_lease=30))
    messages: anyio.Event = anyio.Event()
    sent: list[str] = []

    async def receive() -> dict[str, Any]:
        if not sent:
            return {"type": "lifespan.startup"}
        await messages.wait()
        return {"type": "lifespan.shutdown"}

    async def send(message: Any) -> None:
        sent.append(message["type"])

    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(app, {"type": "lifespan"}, receive, send)
                while not sent:
                    await anyio.sleep(0.01)
                client = Client(app, tg)
                created = (await call(client, 1, "slow_compute", {"seconds": 60}))["result"]
                assert (await get(client, created["taskId"]))["status"] == "working"
                messages.set()  # shut down: the minute-long run stops now
                while len(sent) < 2:
                    await anyio.sleep(0.01)
                task = await get(client, created["taskId"])
                tg.cancel_scope.cancel()
    finally:
        store.close()
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert task["status"] == "failed"
    assert task["error"]["message"] == SERVER_STOPPED
