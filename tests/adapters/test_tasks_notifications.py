"""``notifications/tasks`` (ext-tasks ``tasks.md``, "Task Status Notifications") through the ASGI
app on the example fixtures: one test per rule of that section, named by it. The official
suite skips its ``tasks-status-notifications`` scenario, so these are the checks.

Every message read off a stream or a response is validated against the 2026-07-28 schema and
the extension's schema first (``helpers.check_task_message``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from fixtures import Everything, server_config
from http_harness import Client, Request
from test_tasks_http import body

import mrtr_sansio as m
from helpers import check_task_message
from mrtr_sansio.adapters.asgi import McpHttpApp

pytestmark = pytest.mark.anyio

CONFIRM = {"confirm": {"action": "accept", "content": {"confirm": True}}}


def _principal(scope: Any) -> str | None:
    for name, value in scope["headers"]:
        if name == b"x-test-principal":
            return str(value.decode())
    return None


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    config = server_config(request_state=m.sealing.RequestStateSecurity.ephemeral())
    app = McpHttpApp(Everything().handle, config, principal=_principal)
    async with anyio.create_task_group() as tg:
        yield Client(app, tg)
        tg.cancel_scope.cancel()


async def answer(client: Client, message: dict[str, Any], **headers: str) -> Any:
    """The validated response to ``message`` (``headers`` added to the mirror headers)."""
    params = message["params"]
    mirror = {"mcp-protocol-version": "2026-07-28", "mcp-method": message["method"]}
    target = params.get("name", params.get("taskId"))
    if target is not None:
        mirror["mcp-name"] = target
    request = client.start(message, {**mirror, **headers})
    with anyio.fail_after(10):
        await request.response.done.wait()
    (reply,) = request.response.messages()
    check_task_message(reply, method=message["method"])
    return reply


async def create(client: Client, rid: int, tool: str, arguments: Any, **headers: str) -> str:
    params = {"name": tool, "arguments": arguments}
    result = (await answer(client, body(rid, "tools/call", params), **headers))["result"]
    assert result["resultType"] == "task", result
    task_id: str = result["taskId"]
    return task_id


async def listen(client: Client, rid: int, task_ids: list[str], **headers: str) -> Request:
    message = body(rid, "subscriptions/listen", {"notifications": {"taskIds": task_ids}})
    mirror = {"mcp-protocol-version": "2026-07-28", "mcp-method": message["method"]}
    return client.start(message, {**mirror, **headers})


async def next_note(stream: Request) -> dict[str, Any]:
    """The next message on ``stream``, validated."""
    with anyio.fail_after(5):
        note = await stream.response.next_message()
    assert note is not None, "the stream ended"
    check_task_message(note)
    return note


async def notes_until(stream: Request, status: str) -> list[dict[str, Any]]:
    """The ``notifications/tasks`` params read until one shows ``status``."""
    seen: list[dict[str, Any]] = []
    while not seen or seen[-1]["status"] != status:
        note = await next_note(stream)
        assert note["method"] == "notifications/tasks", note
        seen.append(note["params"])
    return seen


def _task_fields(value: dict[str, Any]) -> dict[str, Any]:
    """A notification's params or a ``tasks/get`` result without what only one of them has."""
    return {k: v for k, v in value.items() if k not in ("_meta", "resultType")}


async def test_must_return_32021_when_task_notifications_are_requested_without_the_extension(
    client: Client,
) -> None:
    task_id = await create(client, 1, "slow_compute", {"seconds": 0.01})
    message = body(2, "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}, caps={})
    reply = await answer(client, message)
    assert reply["error"]["code"] == -32021
    assert reply["error"]["data"]["requiredCapabilities"] == {"extensions": {m.tasks.EXTENSION: {}}}


async def test_the_acknowledgement_lists_the_task_ids_the_server_agreed_to(
    client: Client,
) -> None:
    mine = await create(client, 1, "confirm_delete", {"filename": "a"}, **{"x-test-principal": "a"})
    theirs = await create(
        client, 2, "confirm_delete", {"filename": "b"}, **{"x-test-principal": "b"}
    )
    stream = await listen(client, 3, [mine, theirs, "no-such-task"], **{"x-test-principal": "a"})
    ack = await next_note(stream)
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    # Another principal's task and an unknown id are left out alike (nothing to probe).
    assert ack["params"]["notifications"] == {"taskIds": [mine]}
    stream.disconnect()


async def test_each_notification_carries_the_detailed_task_tasks_get_would_return(
    client: Client,
) -> None:
    task_id = await create(client, 1, "confirm_delete", {"filename": "n.txt"})
    stream = await listen(client, 2, [task_id])
    await next_note(stream)  # the acknowledgement
    waiting = (await notes_until(stream, "input_required"))[-1]
    shown = (await answer(client, body(3, "tasks/get", {"taskId": task_id})))["result"]
    assert _task_fields(waiting) == _task_fields(shown)
    assert list(waiting["inputRequests"]) == ["confirm"]
    update = {"taskId": task_id, "inputResponses": CONFIRM}
    await answer(client, body(4, "tasks/update", update))
    done = (await notes_until(stream, "completed"))[-1]
    shown = (await answer(client, body(5, "tasks/get", {"taskId": task_id})))["result"]
    assert _task_fields(done) == _task_fields(shown)
    # The final result inline, as the original request's result type (resultType included).
    assert done["result"]["resultType"] == "complete"
    assert done["result"]["content"][0]["text"] == "Deleted n.txt."
    stream.disconnect()


async def test_every_notification_on_the_stream_carries_its_subscription_id(
    client: Client,
) -> None:
    task_id = await create(client, 1, "slow_compute", {"seconds": 0.05})
    stream = await listen(client, 7, [task_id])
    await next_note(stream)
    seen = await notes_until(stream, "completed")
    assert all(params["_meta"][m.protocol.SUBSCRIPTION_ID] == 7 for params in seen)
    stream.disconnect()


async def test_a_failed_task_is_notified_with_its_json_rpc_error(client: Client) -> None:
    task_id = await create(client, 1, "protocol_error_job", {})
    stream = await listen(client, 2, [task_id])
    await next_note(stream)
    failed = (await notes_until(stream, "failed"))[-1]
    assert failed["error"]["code"] == -32603
    assert "result" not in failed
    stream.disconnect()


async def test_a_cancelled_task_is_notified_as_cancelled(client: Client) -> None:
    task_id = await create(client, 1, "slow_compute", {"seconds": 60})
    stream = await listen(client, 2, [task_id])
    await next_note(stream)
    await answer(client, body(3, "tasks/cancel", {"taskId": task_id}))
    cancelled = (await notes_until(stream, "cancelled"))[-1]
    assert not {"result", "error", "inputRequests"} & set(cancelled)
    stream.disconnect()


async def test_only_the_listed_tasks_are_notified_on_a_stream(client: Client) -> None:
    watched = await create(client, 1, "slow_compute", {"seconds": 0.2})
    other = await create(client, 2, "slow_compute", {"seconds": 0.01})
    stream = await listen(client, 3, [watched])
    await next_note(stream)
    seen = await notes_until(stream, "completed")
    assert {params["taskId"] for params in seen} == {watched}
    assert other != watched
    stream.disconnect()
