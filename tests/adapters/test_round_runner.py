"""The round-runner protocol with the in-process runner: the ASGI app hands every round it
decides must run (a new task, a ``tasks/update`` that answers the last question) and every
cancellation to the runner it was given, and the in-process pool given explicitly behaves as
the default one (the task completes, asks, resumes, is cancelled)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from fixtures import Everything, server_config
from http_harness import Client
from test_tasks_http import answer, body, call, until

import mrtr_sansio as m
from mrtr_sansio import RequestReceived
from mrtr_sansio.adapters._tasks import TaskRunner
from mrtr_sansio.adapters.anyio import serve
from mrtr_sansio.adapters.asgi import McpHttpApp, TaskRunOptions
from mrtr_sansio.tasks import RoundRunner

pytestmark = pytest.mark.anyio


class Recording:
    """A runner that records what it is handed and passes it on to the in-process pool."""

    def __init__(self, inner: TaskRunner) -> None:
        self.inner = inner
        self.rounds: list[tuple[str | None, int | None]] = []
        self.cancelled: list[str] = []
        self.admitted: list[Any] = []

    def admit(self, result: Any, principal: str | None = None) -> Any:
        self.admitted.append(type(result).__name__)
        return self.inner.admit(result, principal)

    def start(self, run: RequestReceived) -> None:
        self.rounds.append((run.task_id, run.round))
        self.inner.start(run)

    async def run_all(self, runs: list[RequestReceived]) -> None:
        self.rounds.extend((run.task_id, run.round) for run in runs)
        await self.inner.run_all(runs)

    def cancel(self, task_id: str) -> None:
        self.cancelled.append(task_id)
        self.inner.cancel(task_id)

    def attach(self, group: Any) -> None:
        self.inner.attach(group)

    async def stop(self) -> None:
        await self.inner.stop()


def config() -> m.ServerConfig:
    return server_config(request_state=m.sealing.RequestStateSecurity.ephemeral())


@pytest.fixture
async def recorded() -> AsyncIterator[tuple[Client, Recording]]:
    cfg = config()
    handler = Everything().handle
    runner = Recording(TaskRunner(handler, cfg))
    app = McpHttpApp(handler, cfg, task_runner=runner)
    async with anyio.create_task_group() as tg:
        runner.attach(tg)
        yield Client(app, tg), runner
        tg.cancel_scope.cancel()


def test_both_runners_are_round_runners() -> None:
    cfg = config()
    assert isinstance(TaskRunner(Everything().handle, cfg), RoundRunner)
    assert isinstance(Recording(TaskRunner(Everything().handle, cfg)), RoundRunner)
    app = McpHttpApp(Everything().handle, cfg)
    assert isinstance(app._runner, TaskRunner)  # the default: the in-process pool


async def test_every_round_of_a_task_goes_to_the_runner(
    recorded: tuple[Client, Recording],
) -> None:
    client, runner = recorded
    created = (await call(client, 1, "confirm_delete", {"filename": "a.txt"}))["result"]
    task_id = created["taskId"]
    await until(client, task_id, "input_required")
    assert runner.rounds == [(task_id, 1)]
    update = {
        "taskId": task_id,
        "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}},
    }
    await answer(client, body(2, "tasks/update", update))
    final = await until(client, task_id, "completed")
    assert final["result"]["content"][0]["text"] == "Deleted a.txt."
    assert runner.rounds == [(task_id, 1), (task_id, 2)]
    assert "RunAsTask" in runner.admitted
    assert runner.cancelled == []


async def test_a_cancel_goes_to_the_runner_and_stops_the_round(
    recorded: tuple[Client, Recording],
) -> None:
    client, runner = recorded
    created = (await call(client, 1, "slow_compute", {"seconds": 60}))["result"]
    task_id = created["taskId"]
    await until(client, task_id, "working")
    await answer(client, body(2, "tasks/cancel", {"taskId": task_id}))
    assert runner.cancelled == [task_id]
    with anyio.fail_after(5):
        while runner.inner.active:  # the run was stopped, not left sleeping for a minute
            await anyio.sleep(0.01)
    assert (await until(client, task_id, "cancelled"))["status"] == "cancelled"


async def test_a_full_runner_refuses_a_new_task_through_admit() -> None:
    cfg = config()
    handler = Everything().handle
    runner = TaskRunner(handler, cfg, TaskRunOptions(max_running=1))
    app = McpHttpApp(handler, cfg, task_runner=runner)
    async with anyio.create_task_group() as tg:
        runner.attach(tg)
        client = Client(app, tg)
        first = (await call(client, 1, "slow_compute", {"seconds": 60}))["result"]
        assert first["resultType"] == "task"
        refused = await call(client, 2, "slow_compute", {"seconds": 60})
        assert refused["error"]["code"] == -32603
        await answer(client, body(3, "tasks/cancel", {"taskId": first["taskId"]}))
        tg.cancel_scope.cancel()


async def test_the_anyio_stream_server_hands_its_rounds_to_the_runner_given() -> None:
    """``anyio.serve(task_runner=...)``: a stream's task rounds go to that runner."""
    cfg = config()
    handler = Everything().handle
    runner = Recording(TaskRunner(handler, cfg))
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)

    async def one(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            await serve(handler, cfg, stream, task_runner=runner)

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, one)
        async with await anyio.connect_tcp("127.0.0.1", port) as client:
            lines = BufferedByteReceiveStream(client)

            async def ask(message: dict[str, Any]) -> dict[str, Any]:
                await client.send(json.dumps(message).encode() + b"\n")
                with anyio.fail_after(5):
                    reply: dict[str, Any] = json.loads(await lines.receive_until(b"\n", 1 << 20))
                return reply

            params = {"name": "slow_compute", "arguments": {"seconds": 0.05, "label": "x"}}
            created = (await ask(body(1, "tools/call", params)))["result"]
            task_id = created["taskId"]
            with anyio.fail_after(5):
                while True:
                    task = (await ask(body(2, "tasks/get", {"taskId": task_id})))["result"]
                    if task["status"] == "completed":
                        break
                    await anyio.sleep(0.02)
        tg.cancel_scope.cancel()
    assert runner.rounds == [(task_id, 1)]
    assert task["result"]["content"][0]["text"] == "Computed x in 0.05s."
