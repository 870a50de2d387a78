"""The client side of tasks with real server processes: the adapter clients (HTTP, anyio over
stdio, blocking stdio) tell the application a call's task id through ``on_task`` when the call
becomes a task, and ``resume_task(task_id)`` follows a task to the tool's result, answering its
input through the same callbacks: on a new client, after the server restarted on the same
SQLite file, and for a task whose creating client vanished before answering its question.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from servers import HTTP_SERVER, STDIO_SERVER, http_server

import mrtr_sansio as m
from mrtr_sansio.adapters import stdio
from mrtr_sansio.adapters.anyio import Client
from mrtr_sansio.adapters.http import HttpClient
from mrtr_sansio.tasks import EXTENSION, TaskStarted

pytestmark = pytest.mark.anyio

TASKS = m.ClientConfig(capabilities={"extensions": {EXTENSION: {}}})


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def texts(result: Mapping[str, Any]) -> list[str]:
    return [block["text"] for block in result["content"]]


async def confirm(event: m.InputNeeded) -> Mapping[str, Any]:
    assert event.key == "confirm"
    return {"action": "accept", "content": {"confirm": True}}


async def test_http_client_tells_the_task_id_and_resumes_it_after_a_server_restart(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "tasks.db")
    started: list[TaskStarted] = []
    with http_server(HTTP_SERVER, "--tasks-db", db, "--log-level", "error") as (url, _):
        async with HttpClient.connect(url, TASKS, on_task=started.append) as client:
            result = await client.call_tool("slow_compute", {"seconds": 0.2, "label": "r"})
        assert texts(result) == ["Computed r in 0.2s."]
        (event,) = started
        assert event.call.method == "tools/call"
        assert event.call.params["name"] == "slow_compute"
        assert len(event.task_id) == 32
    # Another process on the same SQLite file, another client: the task is read by its id.
    with http_server(HTTP_SERVER, "--tasks-db", db, "--log-level", "error") as (url, _):
        async with HttpClient.connect(url, TASKS) as client:
            again = await client.resume_task(event.task_id)
    assert again == result


async def test_http_client_resumes_a_task_whose_creator_vanished_before_answering() -> None:
    with http_server(HTTP_SERVER, "--log-level", "error") as (url, _):
        # A client that sent the call, got the task id, and was gone (no tasks/update sent).
        meta = {
            m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28",
            m.protocol.CLIENT_CAPABILITIES: {"elicitation": {}, "extensions": {EXTENSION: {}}},
        }
        call = {"name": "confirm_delete", "arguments": {"filename": "v.txt"}, "_meta": meta}
        headers = {
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/call",
            "mcp-name": "confirm_delete",
        }
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
        async with httpx.AsyncClient() as http:
            created = (await http.post(url, json=message, headers=headers)).json()["result"]
        assert created["resultType"] == "task"
        asked: list[m.InputNeeded] = []

        async def answer(event: m.InputNeeded) -> Mapping[str, Any]:
            asked.append(event)
            return await confirm(event)

        async with HttpClient.connect(url, TASKS, elicitation=answer) as client:
            result = await client.resume_task(created["taskId"])
    assert texts(result) == ["Deleted v.txt."]
    assert [event.key for event in asked] == ["confirm"]


async def test_http_client_resume_of_an_unknown_task_is_a_call_failed_error() -> None:
    with http_server(HTTP_SERVER, "--log-level", "error") as (url, _):
        async with HttpClient.connect(url, TASKS) as client:
            with pytest.raises(m.adapters.CallFailedError) as failed:
                await client.resume_task("0" * 32)
    assert failed.value.code == -32602


async def test_resume_task_needs_the_extension_declared() -> None:
    with http_server(HTTP_SERVER, "--log-level", "error") as (url, _):
        async with HttpClient.connect(url) as client:
            with pytest.raises(m.LocalProtocolError, match="tasks extension"):
                await client.resume_task("0" * 32)


async def test_anyio_client_over_stdio_resumes_a_task_while_its_call_runs() -> None:
    started: list[TaskStarted] = []
    got_id = anyio.Event()

    def on_task(event: TaskStarted) -> None:
        started.append(event)
        got_id.set()

    results: list[Mapping[str, Any]] = []
    command = [sys.executable, str(STDIO_SERVER)]
    async with Client.connect_stdio(command, TASKS, on_task=on_task, elicitation=confirm) as client:

        async def first() -> None:
            results.append(await client.call_tool("confirm_delete", {"filename": "s.txt"}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            with anyio.fail_after(10):
                await got_id.wait()
            resumed = await client.resume_task(started[0].task_id)
        # Started on the connection directly (no waiter): its end no longer raises KeyError.
        client.connection.resume_task(started[0].task_id)
        client._flush()
        later = await client.call_tool("slow_compute", {"seconds": 0, "label": "after"})
    assert texts(resumed) == texts(results[0]) == ["Deleted s.txt."]
    assert texts(later) == ["Computed after in 0s."]
    assert not client._driver.outcomes


def test_blocking_stdio_client_tells_the_task_id_and_resumes_it() -> None:
    started: list[TaskStarted] = []
    command = [sys.executable, str(STDIO_SERVER)]

    def accept(event: m.InputNeeded) -> Mapping[str, Any]:
        return {"action": "accept", "content": {"confirm": True}}

    with stdio.Client.connect_stdio(
        command, TASKS, on_task=started.append, elicitation=accept
    ) as client:
        result = client.call_tool("confirm_delete", {"filename": "b.txt"}, timeout=20)
        (event,) = started
        again = client.resume_task(event.task_id, timeout=20)
        with pytest.raises(m.adapters.CallFailedError) as failed:
            client.resume_task("f" * 32, timeout=20)
    assert texts(result) == texts(again) == ["Deleted b.txt."]
    assert failed.value.code == -32602
