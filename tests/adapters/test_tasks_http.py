"""The tasks extension through the ASGI app, on the example fixtures: a POST that creates or
resumes a task is answered first, then the task runs in the background of that POST; any
later POST (a fresh connection over the same store) reads, answers or cancels it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from fixtures import Everything, server_config
from http_harness import (
    Client,
    Request,
)

import mrtr_sansio as m
from helpers import check_task_message
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.tasks import EXTENSION, InMemoryTaskStore

pytestmark = pytest.mark.anyio

TASK_CAPS: dict[str, Any] = {"elicitation": {}, "extensions": {EXTENSION: {}}}
TASK_METHODS = ("tasks/get", "tasks/update", "tasks/cancel")


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    config = server_config(request_state=m.sealing.RequestStateSecurity.ephemeral())
    app = McpHttpApp(Everything().handle, config)
    async with anyio.create_task_group() as tg:
        yield Client(app, tg)
        tg.cancel_scope.cancel()


def body(rid: int, method: str, params: dict[str, Any], caps: Any = None) -> dict[str, Any]:
    meta = {
        m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28",
        m.protocol.CLIENT_CAPABILITIES: TASK_CAPS if caps is None else caps,
    }
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": meta}}


def start(client: Client, message: dict[str, Any], name: str | None = None) -> Request:
    """POST ``message`` with its mirror headers (``name`` overrides ``Mcp-Name``)."""
    params = message["params"]
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": message["method"]}
    target = name if name is not None else params.get("name", params.get("taskId"))
    if target is not None:
        headers["mcp-name"] = target
    return client.start(message, headers)


async def answer(client: Client, message: dict[str, Any], name: str | None = None) -> Any:
    """The JSON-RPC response to ``message``, as soon as it is sent (task runs go on after)."""
    request = start(client, message, name)
    with anyio.fail_after(10):
        await request.response.done.wait()
    (reply,) = request.response.messages()
    check_task_message(reply, method=message["method"])
    return reply


async def call(client: Client, rid: int, name: str, arguments: Any, **kw: Any) -> Any:
    return await answer(
        client, body(rid, "tools/call", {"name": name, "arguments": arguments}, **kw)
    )


async def get(client: Client, task_id: str) -> dict[str, Any]:
    reply = await answer(client, body(90, "tasks/get", {"taskId": task_id}))
    result: dict[str, Any] = reply["result"]
    return result


async def until(client: Client, task_id: str, *statuses: str) -> dict[str, Any]:
    """Poll ``tasks/get`` until the task shows one of ``statuses`` (at most 5 s)."""
    with anyio.fail_after(5):
        while True:
            task = await get(client, task_id)
            if task["status"] in statuses:
                return task
            await anyio.sleep(0.01)


async def test_a_task_is_created_answered_then_run_in_the_background(client: Client) -> None:
    created = (await call(client, 1, "slow_compute", {"seconds": 0.05, "label": "x"}))["result"]
    assert created["resultType"] == "task"
    assert created["statusMessage"] == "Computing"
    final = await until(client, created["taskId"], "completed")
    assert final["result"]["content"][0]["text"] == "Computed x in 0.05s."


async def test_a_running_task_is_stopped_by_tasks_cancel(client: Client) -> None:
    worker = start(
        client, body(1, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}})
    )
    with anyio.fail_after(5):
        await worker.response.done.wait()
    task_id = worker.response.messages()[0]["result"]["taskId"]
    assert not worker.finished.is_set()  # the run goes on after the response
    ack = await answer(client, body(2, "tasks/cancel", {"taskId": task_id}))
    assert ack["result"]["resultType"] == "complete"
    with anyio.fail_after(5):
        await worker.finished.wait()  # the run was stopped, not left sleeping for a minute
    assert (await get(client, task_id))["status"] == "cancelled"


async def test_a_task_asks_through_tasks_get_and_resumes_on_tasks_update(client: Client) -> None:
    created = (await call(client, 1, "confirm_delete", {"filename": "a.txt"}))["result"]
    waiting = await until(client, created["taskId"], "input_required")
    assert list(waiting["inputRequests"]) == ["confirm"]
    update = {
        "taskId": created["taskId"],
        "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}},
    }
    ack = await answer(client, body(2, "tasks/update", update))
    assert ack["result"]["resultType"] == "complete"
    final = await until(client, created["taskId"], "completed")
    assert final["result"]["content"][0]["text"] == "Deleted a.txt."


async def test_the_same_tool_without_the_extension_is_an_mrtr_round(client: Client) -> None:
    reply = await call(client, 1, "confirm_delete", {"filename": "a.txt"}, caps={"elicitation": {}})
    assert reply["result"]["resultType"] == "input_required"
    assert list(reply["result"]["inputRequests"]) == ["confirm"]


async def test_mrtr_then_task_composition(client: Client) -> None:
    round1 = (await call(client, 1, "test_tool_with_task", {}))["result"]
    assert round1["resultType"] == "input_required"
    assert "taskId" not in round1
    params = {
        "name": "test_tool_with_task",
        "arguments": {},
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}},
    }
    round2 = (await answer(client, body(2, "tools/call", params)))["result"]
    assert round2["resultType"] == "task"
    assert "requestState" not in round2
    final = await until(client, round2["taskId"], "completed")
    assert "Alice" in final["result"]["content"][0]["text"]


async def test_tool_errors_complete_and_protocol_errors_fail(client: Client) -> None:
    tool_error = (await call(client, 1, "failing_job", {}))["result"]
    protocol_error = (await call(client, 2, "protocol_error_job", {}))["result"]
    completed = await until(client, tool_error["taskId"], "completed", "failed")
    failed = await until(client, protocol_error["taskId"], "completed", "failed")
    assert completed["status"] == "completed"
    assert completed["result"]["isError"] is True
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == -32603


async def test_a_task_required_tool_refuses_a_client_without_the_extension(client: Client) -> None:
    reply = await call(client, 1, "failing_job", {}, caps={})
    assert reply["error"]["code"] == -32021


@pytest.mark.parametrize("method", TASK_METHODS)
async def test_a_mismatched_mcp_name_is_400_32020(client: Client, method: str) -> None:
    created = (await call(client, 1, "slow_compute", {"seconds": 0.01}))["result"]
    message = body(2, method, {"taskId": created["taskId"], "inputResponses": {}})
    request = start(client, message, name="someone-elses-task")
    with anyio.fail_after(5):
        await request.response.done.wait()
    assert request.response.status == 400
    assert request.response.json()["error"]["code"] == -32020


async def test_a_cancel_through_another_process_stops_the_run_at_its_next_lease_renewal() -> None:
    # Two apps over one store stand for two processes; the run goes on in the first.
    store = InMemoryTaskStore()
    apps = [
        McpHttpApp(Everything().handle, server_config(task_store=store, task_lease=0.3))
        for _ in range(2)
    ]
    async with anyio.create_task_group() as tg:
        first, second = Client(apps[0], tg), Client(apps[1], tg)
        call = {"name": "slow_compute", "arguments": {"seconds": 60}}
        worker = start(first, body(1, "tools/call", call))
        with anyio.fail_after(5):
            await worker.response.done.wait()
        task_id = worker.response.messages()[0]["result"]["taskId"]
        await anyio.sleep(0.35)  # past one lease: renewed, so still working
        assert (await get(second, task_id))["status"] == "working"
        ack = await answer(second, body(2, "tasks/cancel", {"taskId": task_id}))
        assert ack["result"]["resultType"] == "complete"
        with anyio.fail_after(2):
            await worker.finished.wait()  # stopped by its renewal, not after a minute
        assert (await get(first, task_id))["status"] == "cancelled"
        tg.cancel_scope.cancel()


async def test_a_listen_stream_gets_notifications_tasks_for_its_own_tasks(client: Client) -> None:
    created = (await call(client, 1, "confirm_delete", {"filename": "n.txt"}))["result"]
    task_id = created["taskId"]
    listen = body(2, "subscriptions/listen", {"notifications": {"taskIds": [task_id, "other"]}})
    stream = start(client, listen)
    with anyio.fail_after(5):
        ack = await stream.response.next_message()
        assert ack is not None
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"] == {"taskIds": [task_id]}  # not "other"
        seen: list[dict[str, Any]] = []
        while not seen or seen[-1]["status"] != "input_required":
            note = await stream.response.next_message()
            assert note is not None
            assert note["method"] == "notifications/tasks"
            assert note["params"]["_meta"][m.protocol.SUBSCRIPTION_ID] == 2
            seen.append(note["params"])
        update = {"taskId": task_id, "inputResponses": {"confirm": {"action": "accept",
                  "content": {"confirm": True}}}}  # fmt: skip
        await answer(client, body(3, "tasks/update", update))
        while seen[-1]["status"] != "completed":
            note = await stream.response.next_message()
            assert note is not None
            seen.append(note["params"])
    assert seen[-1]["result"]["content"][0]["text"] == "Deleted n.txt."
    assert all(params["taskId"] == task_id for params in seen)
    stream.disconnect()


NOT_JSON = pytest.param({"content": [{"bad": {1, 2}}]}, id="not-json")


@pytest.mark.parametrize("outcome", [pytest.param(["no", "answer"], id="a-list"), NOT_JSON])
async def test_a_task_run_returning_no_answer_fails_the_task_with_32603(
    outcome: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """What a task's run returns goes through the one answer path: a value that is no answer
    (a list) or not JSON (a set inside) fails the task with -32603 and is logged, where the
    same value for a plain request would be a -32603 response."""
    fixture = Everything()

    async def handle(request: m.RequestReceived, ctx: Any) -> Any:
        if request.task_id is not None:
            return outcome
        return await fixture.handle(request, ctx)

    app = McpHttpApp(
        handle, server_config(request_state=m.sealing.RequestStateSecurity.ephemeral())
    )
    async with anyio.create_task_group() as tg:
        client = Client(app, tg)
        created = (await call(client, 1, "slow_compute", {"seconds": 0.05}))["result"]
        assert created["resultType"] == "task"
        failed = await until(client, created["taskId"], "completed", "failed")
        tg.cancel_scope.cancel()
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == -32603
    assert "returned an invalid outcome" in caplog.text
