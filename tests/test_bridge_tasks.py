"""Tasks through the era bridge over real HTTP (``test_bridge.py``'s peers): the tasks
extension passed through modern to modern and a 2025-11-25 server's tasks legacy to legacy,
each task id bound to the principal that created it, bounded, and hostile principals refused
the answer of an unknown task."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from scale.cluster import served_here as served

import mrtr_sansio as m
from mrtr_sansio.adapters import CallFailedError
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.adapters.bridge import Bridge, Upstream
from mrtr_sansio.adapters.http import HttpClient
from mrtr_sansio.bridge import BridgeLimits
from test_bridge import bridged, name_it, post, text_of, tool_call, user

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # uvicorn serves in this loop


# --- the tasks extension, passed through (modern on both sides) -------------------------------

TASKS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def task_request(rid: int, method: str, task_id: str, **params: Any) -> dict[str, Any]:
    """A modern ``tasks/*`` request declaring the extension (``params`` added)."""
    meta = {m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28", m.protocol.CLIENT_CAPABILITIES: TASKS}
    body = {"taskId": task_id, "_meta": meta, **params}
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": body}


def task_call(rid: int, name: str, **arguments: Any) -> dict[str, Any]:
    message = tool_call(rid, name, arguments=arguments)
    message["params"]["_meta"][m.protocol.CLIENT_CAPABILITIES] = {"elicitation": {}, **TASKS}
    return message


async def until_status(url: str, who: str, task_id: str, *statuses: str) -> dict[str, Any]:
    """``tasks/get`` as ``who`` until the task is in one of ``statuses``; that result."""
    with anyio.fail_after(10):
        while True:
            got = await post(url, who, task_request(90, "tasks/get", task_id))
            if got["result"]["status"] in statuses:
                return dict(got["result"])
            await anyio.sleep(0.05)


async def test_a_task_and_its_requests_pass_through_the_relay() -> None:
    """A task-augmented tools/call comes back as the upstream's CreateTaskResult, and
    tasks/get, tasks/update and tasks/cancel reach the upstream and answer as it does: our own
    client follows the task through the bridge as it would direct."""
    async with (
        bridged() as (url, bridge, seen),
        HttpClient.connect(
            url, m.ClientConfig(era="auto", capabilities=TASKS), elicitation=name_it
        ) as client,
    ):
        assert client.server_capabilities is not None
        assert client.server_capabilities["extensions"] == TASKS["extensions"]
        done = await client.call_tool("slow_compute", {"seconds": 0.2, "label": "x"})
        assert text_of(done) == "Computed x in 0.2s."
        mrtr_then_task = await client.call_tool("test_tool_with_task")
        assert text_of(mrtr_then_task) == "Hello, Ada, from a task!"
        created = await post(url, "alice", task_call(1, "confirm_delete", filename="a.txt"))
        task = created["result"]
        assert task["resultType"] == "task"
        asked = await until_status(url, "alice", task["taskId"], "input_required")
        (key,) = asked["inputRequests"]
        update = {key: {"action": "accept", "content": {"confirm": True}}}
        acked = await post(
            url, "alice", task_request(2, "tasks/update", task["taskId"], inputResponses=update)
        )
        assert acked["result"]["resultType"] == "complete"
        finished = await until_status(url, "alice", task["taskId"], "completed")
        assert text_of(finished["result"]) == "Deleted a.txt."
        slow = await post(url, "alice", task_call(3, "slow_compute", seconds=60))
        cancelled = await post(
            url, "alice", task_request(4, "tasks/cancel", slow["result"]["taskId"])
        )
        assert cancelled["result"]["resultType"] == "complete"
        await until_status(url, "alice", slow["result"]["taskId"], "cancelled")
        assert bridge.tasks == 4
        assert bridge.held == 0
    upstream = {msg.get("method") for msg in seen}
    assert {"tasks/get", "tasks/update", "tasks/cancel"} <= upstream
    calls = [msg for msg in seen if msg.get("method") == "tools/call"]
    assert all(
        TASKS["extensions"].items()
        <= msg["params"]["_meta"][m.protocol.CLIENT_CAPABILITIES]["extensions"].items()
        for msg in calls
    )


async def test_another_principal_cannot_reach_a_task_through_the_bridge() -> None:
    """Mallory names Alice's task in every tasks/* request: each gets the answer a made-up
    id gets, none reaches the upstream, and Alice's task goes on unharmed."""
    async with bridged() as (url, bridge, seen):
        created = await post(url, "alice", task_call(1, "slow_compute", seconds=0.3))
        task_id = created["result"]["taskId"]
        before = len(seen)
        for rid, (method, extra) in enumerate(
            [
                ("tasks/get", {}),
                ("tasks/update", {"inputResponses": {"k": {"action": "accept"}}}),
                ("tasks/cancel", {}),
            ]
        ):
            stolen = await post(url, "mallory", task_request(10 + rid, method, task_id, **extra))
            made_up = await post(url, "mallory", task_request(20 + rid, method, "f" * 32, **extra))
            assert stolen["error"] == made_up["error"]
            assert stolen["error"]["code"] == -32602
        assert len(seen) == before  # nothing of Mallory's went upstream
        direct = await post(url, "alice", task_request(30, "tasks/get", "f" * 32))
        assert direct["error"] == made_up["error"]  # the same for the owner of no such task
        finished = await until_status(url, "alice", task_id, "completed")
        assert text_of(finished["result"]) == "Computed  in 0.3s."
        assert bridge.tasks == 1


async def test_task_requests_without_the_extension_are_refused_32021() -> None:
    async with bridged() as (url, _, seen):
        created = await post(url, "alice", task_call(1, "slow_compute", seconds=0.3))
        message = task_request(2, "tasks/get", created["result"]["taskId"])
        message["params"]["_meta"][m.protocol.CLIENT_CAPABILITIES] = {}
        before = len(seen)
        refused = await post(url, "alice", message)
        assert refused["error"]["code"] == -32021
        assert len(seen) == before


async def test_task_ids_are_bounded_per_principal_at_and_past_the_limit() -> None:
    """At the bound each principal keeps its newest task ids; one past it, the oldest is
    forgotten (its requests get the unknown-task answer), another principal's untouched."""
    limits = BridgeLimits(max_tasks_per_principal=2)
    async with bridged(limits=limits) as (url, bridge, _):
        ids = []
        for rid in range(3):
            created = await post(url, "alice", task_call(rid, "slow_compute", seconds=0.2))
            ids.append(created["result"]["taskId"])
            if rid == 1:  # at the bound: both still reachable
                for task_id in ids:
                    got = await post(url, "alice", task_request(50, "tasks/get", task_id))
                    assert "result" in got
        bob = await post(url, "bob", task_call(9, "slow_compute", seconds=0.2))
        assert bridge.tasks == 3
        forgotten = await post(url, "alice", task_request(60, "tasks/get", ids[0]))
        assert forgotten["error"]["code"] == -32602
        for task_id in ids[1:]:
            assert "result" in await post(url, "alice", task_request(61, "tasks/get", task_id))
        assert "result" in await post(
            url, "bob", task_request(62, "tasks/get", bob["result"]["taskId"])
        )


class LegacyTasks:
    """A 2025-11-25 server with that revision's tasks, written here: no server of ours has
    them (the tasks extension replaced them), and none of another project runs in these tests.
    Every task completes at once; it lists every task it holds, as one shared upstream client
    (the bridge) is one requestor to it."""

    CAPABILITIES: Mapping[str, Any] = {
        "tools": {},
        "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
    }

    def __init__(self) -> None:
        self.tasks: dict[str, dict[str, Any]] = {}

    async def handle(self, request: m.RequestReceived, ctx: Any) -> Any:
        params = request.params
        if request.method == "tools/list":
            return {"tools": [{"name": "job", "inputSchema": {"type": "object"}}]}
        if request.method == "tools/call" and "task" in params:
            task_id = f"legacy-task-{len(self.tasks)}"
            self.tasks[task_id] = {"taskId": task_id, "status": "completed", "ttl": None}
            return {"task": self.tasks[task_id]}
        if request.method == "tasks/list":
            return {"tasks": list(self.tasks.values())}
        task = self.tasks.get(params.get("taskId", ""))
        if task is None:
            return m.JsonRpcError.invalid_params("Failed to retrieve task: Task not found")
        if request.method == "tasks/result":
            return {"content": [{"type": "text", "text": f"done {task['taskId']}"}]}
        if request.method == "tasks/cancel":
            return {**task, "status": "cancelled"}
        return task  # tasks/get


@asynccontextmanager
async def legacy_task_bridge() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """A legacy-only :class:`LegacyTasks` upstream behind the bridge; its URL, and what the
    upstream received."""
    seen: list[dict[str, Any]] = []
    config = m.ServerConfig(supported_versions=(), capabilities=LegacyTasks.CAPABILITIES)
    upstream_app = McpHttpApp(LegacyTasks().handle, config, legacy=True)

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        async def tap() -> Any:
            message = await receive()
            if message.get("body"):
                seen.append(json.loads(message["body"]))
            return message

        await upstream_app(scope, tap, send)

    async with (
        served(recording) as up_url,
        Bridge.open(Upstream(url=up_url, era="legacy")) as bridge,
    ):
        app = McpHttpApp(bridge.handle, bridge.use_config(bridge.server_config()), principal=user)
        async with served(app) as url:
            yield url, seen


async def test_legacy_tasks_pass_through_bound_to_their_creator() -> None:
    """legacy -> legacy: a task-augmented tools/call comes back as the upstream's
    CreateTaskResult; tasks/get, tasks/result and tasks/cancel relay for its creator only, and
    tasks/list shows each principal its own tasks (the upstream lists all the bridge's)."""
    config = m.ClientConfig(era="legacy")
    async with (
        legacy_task_bridge() as (url, seen),
        HttpClient.connect(url, config, headers={"x-user": "alice"}) as alice,
        HttpClient.connect(url, config, headers={"x-user": "mallory"}) as mallory,
    ):
        assert alice.server_capabilities is not None
        assert alice.server_capabilities["tasks"] == LegacyTasks.CAPABILITIES["tasks"]
        created = await alice.request("tools/call", {"name": "job", "task": {"ttl": 60000}})
        task_id = created["task"]["taskId"]
        await mallory.request("tools/call", {"name": "job", "task": {}})  # a task of its own
        got = await alice.request("tasks/get", {"taskId": task_id})
        assert got["status"] == "completed"
        payload = await alice.request("tasks/result", {"taskId": task_id})
        assert text_of(payload) == f"done {task_id}"
        listed = await alice.request("tasks/list", {})
        assert [t["taskId"] for t in listed["tasks"]] == [task_id]
        before = len(seen)
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            with pytest.raises(CallFailedError) as stolen:
                await mallory.request(method, {"taskId": task_id})
            with pytest.raises(CallFailedError) as made_up:
                await mallory.request(method, {"taskId": "legacy-task-99"})
            assert stolen.value.error == made_up.value.error
            assert stolen.value.code == -32602
        assert len(seen) == before  # none of those reached the upstream
        assert task_id not in json.dumps(await mallory.request("tasks/list", {}))
        cancelled = await alice.request("tasks/cancel", {"taskId": task_id})
        assert cancelled["status"] == "cancelled"
