"""Our HTTP client against a ``fastmcp-tasks`` 4.1.4 server (PyPI), a real process in its own
venv (``.venv-fastmcp``, made by ``fastmcp_peer/install.sh``: fastmcp-tasks excludes the redis
version our venv pins): a tool completes as a task, a tool asks for input as a task and is
answered through ``tasks/update``, a task is cancelled. And fastmcp's own client against our
server: it sends ``tasks/*`` without ``Mcp-Name``, which a client MUST send, and we refuse it
with -32020 (docs/tasks.md).

Without that venv these tests skip, unless ``MRTR_INTEROP_REQUIRED=1`` (CI) makes it a failure.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from servers import HTTP_SERVER, free_port, http_server

import mrtr_sansio as m
from helpers import require_peer
from mrtr_sansio.adapters import CallFailedError
from mrtr_sansio.adapters.http import HttpClient
from mrtr_sansio.tasks import EXTENSION, TaskStarted

HERE = Path(__file__).resolve().parent / "fastmcp_peer"
VENV = Path(__file__).resolve().parents[2] / ".venv-fastmcp"
PYTHON = Path(os.environ.get("MRTR_FASTMCP_PYTHON", VENV / "bin" / "python"))

require_peer(
    PYTHON.is_file(),
    "the fastmcp-tasks venv is missing (bash tests/interop/fastmcp_peer/install.sh)",
)

pytestmark = pytest.mark.anyio

#: fastmcp suggests polls 5 s apart; the client's bound keeps the test short.
TASKS = m.ClientConfig(capabilities={"extensions": {EXTENSION: {}}}, max_task_poll_interval=0.2)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def fastmcp_url() -> Iterator[str]:
    script = HERE / "fastmcp_server.py"
    port = free_port()
    proc = subprocess.Popen(
        [str(PYTHON), str(script), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _wait_for(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            assert proc.poll() is None, "the fastmcp-tasks server exited"
            assert time.monotonic() < deadline, "the fastmcp-tasks server did not start"
            time.sleep(0.1)


def texts(result: Mapping[str, Any]) -> list[str]:
    return [block["text"] for block in result["content"]]


async def test_our_client_gets_a_fastmcp_task_to_its_result(fastmcp_url: str) -> None:
    started: list[TaskStarted] = []
    async with HttpClient.connect(fastmcp_url, TASKS, on_task=started.append) as client:
        result = await client.call_tool("slow", {"seconds": 0.2, "label": "f"})
    assert texts(result) == ["Slept f 0.2s."]
    assert result["resultType"] == "complete"
    assert [event.call.params["name"] for event in started] == ["slow"]


async def test_our_client_answers_a_fastmcp_task_through_tasks_update(fastmcp_url: str) -> None:
    asked: list[m.InputNeeded] = []
    sent: list[str] = []

    async def confirm(event: m.InputNeeded) -> Mapping[str, Any]:
        asked.append(event)
        return {"action": "accept", "content": {"confirm": True}}

    def trace(direction: str, data: bytes) -> None:
        message = json.loads(data)
        if direction == "send" and "method" in message:
            sent.append(message["method"])

    async with HttpClient.connect(fastmcp_url, TASKS, elicitation=confirm, trace=trace) as client:
        result = await client.call_tool("confirm", {"filename": "f.txt"})
    assert texts(result) == ["Deleted f.txt."]
    assert [event.method for event in asked] == ["elicitation/create"]
    assert asked[0].params["message"] == "Delete f.txt?"
    assert "tasks/update" in sent
    assert sent[0] == "tools/call"


async def test_our_client_cancels_a_fastmcp_task(fastmcp_url: str) -> None:
    started: list[TaskStarted] = []
    got_id = anyio.Event()

    def on_task(event: TaskStarted) -> None:
        started.append(event)
        got_id.set()

    async with HttpClient.connect(fastmcp_url, TASKS, on_task=on_task) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "slow", {"seconds": 60})
            with anyio.fail_after(10):
                await got_id.wait()
            tg.cancel_scope.cancel()  # giving the call up sends tasks/cancel
        with anyio.fail_after(20), pytest.raises(CallFailedError) as failed:
            await client.resume_task(started[0].task_id)
    assert failed.value.error.message == "The task was cancelled"


def test_fastmcp_client_without_mcp_name_is_refused_32020() -> None:
    with http_server(HTTP_SERVER, "--log-level", "error") as (url, _):
        done = subprocess.run(
            [str(PYTHON), str(HERE / "fastmcp_client.py"), url],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(out["task_id"]) == 32  # the call became a task: Mcp-Name was sent on tools/call
    assert "status" not in out
    assert out["error"]["message"] == "Missing required header Mcp-Name"
    assert out["error"]["code"] == -32020
