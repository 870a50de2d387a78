"""Task runs under real uvicorn: with the lifespan on, they go on in the app's own pool and hold
no concurrency slot of the server, so slow tasks at ``limit_concurrency`` do not make another
principal's ``tools/call`` or the owner's ``tasks/cancel`` a 503; with the lifespan off, they go
on in the POST that created them (the fallback) and do hold the slots. A shutdown stops the runs
and fails their tasks, and returns (every wait here is bounded: a hang fails the test).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any, Literal

import httpx
from fixtures import Everything, server_config
from test_tasks_http import body

from mrtr_sansio.adapters._tasks import (
    POOL_FULL,
    SERVER_STOPPED,
    SHARE_FULL,
    TaskRunner,
    TaskRunOptions,
)
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.adapters.serve import ServeOptions, http_server

LIMIT = 6  # uvicorn's limit_concurrency
WAIT = 10.0  # the most any single wait may take


def user(scope: MutableMapping[str, Any]) -> str | None:
    return next((v.decode() for k, v in scope["headers"] if k == b"x-user"), None)


@contextmanager
def served(app: McpHttpApp, lifespan: Literal["on", "off"]) -> Iterator[str]:
    """``app`` under uvicorn (``limit_concurrency=LIMIT``) in a thread; yields its URL. Leaving
    stops it, and fails the test if the shutdown does not end in time."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    options = ServeOptions(limit_concurrency=LIMIT, graceful_shutdown_timeout=1.0)
    server = http_server(app, options=options, log_level="error", lifespan=lifespan)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT
    while not server.started:
        assert thread.is_alive(), "uvicorn did not start"
        assert time.monotonic() < deadline, "uvicorn did not start in time"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        server.should_exit = True
        thread.join(WAIT)
        sock.close()
    assert not thread.is_alive(), "the server's shutdown hung"


def post(url: str, who: str, message: dict[str, Any]) -> httpx.Response:
    """POST ``message`` as ``who`` on a connection of its own (closed after the response)."""
    params = message["params"]
    headers = {
        "x-user": who,
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": message["method"],
        "mcp-name": str(params.get("name", params.get("taskId"))),
    }
    with httpx.Client(timeout=WAIT) as client:
        return client.post(url, json=message, headers=headers)


def create_slow_tasks(url: str, count: int, seconds: float = 60, who: str = "alice") -> list[str]:
    ids = []
    for rid in range(count):
        reply = post(url, who, body(rid, "tools/call", slow(seconds)))
        assert reply.status_code == 200, reply.text
        ids.append(reply.json()["result"]["taskId"])
    return ids


def slow(seconds: float) -> dict[str, Any]:
    return {"name": "slow_compute", "arguments": {"seconds": seconds}}


def greet() -> dict[str, Any]:
    return body(100, "tools/call", {"name": "greet", "arguments": {"name": "Bob"}})


def test_slow_tasks_at_the_concurrency_limit_leave_others_served() -> None:
    app = McpHttpApp(Everything().handle, server_config(), principal=user)
    with served(app, "on") as url:
        ids = create_slow_tasks(url, LIMIT)  # as many as uvicorn serves requests at once
        for _ in range(LIMIT):  # and more requests than that after them
            reply = post(url, "bob", greet())
            assert reply.status_code == 200, reply.text
            assert reply.json()["result"]["content"][0]["text"] == "Hello, Bob!"
        cancelled = post(url, "alice", body(101, "tasks/cancel", {"taskId": ids[0]}))
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["result"]["resultType"] == "complete"
        got = post(url, "alice", body(102, "tasks/get", {"taskId": ids[1]}))
        assert got.json()["result"]["status"] == "working"
        began = time.monotonic()
    # The shutdown stopped the runs going on (60 s each) at once and failed their tasks.
    assert time.monotonic() - began < WAIT
    with served(app, "on") as url:
        for task_id in ids[1:]:
            task = post(url, "alice", body(103, "tasks/get", {"taskId": task_id})).json()
            assert task["result"]["status"] == "failed", task
            assert SERVER_STOPPED in str(task["result"]), task
        first = post(url, "alice", body(104, "tasks/get", {"taskId": ids[0]})).json()
        assert first["result"]["status"] == "cancelled"


def test_without_a_lifespan_runs_stay_in_their_post_and_hold_its_slot() -> None:
    app = McpHttpApp(Everything().handle, server_config(), principal=user)
    with served(app, "off") as url:
        began = time.monotonic()
        ids = create_slow_tasks(url, LIMIT, seconds=2)
        assert post(url, "bob", greet()).status_code == 503  # what the lifespan's pool avoids
        cancel = body(101, "tasks/cancel", {"taskId": ids[0]})
        assert post(url, "alice", cancel).status_code == 503
        while post(url, "bob", greet()).status_code == 503:  # until the runs end
            assert time.monotonic() - began < WAIT
            time.sleep(0.05)
        assert time.monotonic() - began > 2


def test_the_pool_bound_refuses_a_new_task_and_lets_tasks_get_through() -> None:
    runs = TaskRunOptions(max_running=2, max_running_per_principal=2)
    app = McpHttpApp(Everything().handle, server_config(), principal=user, task_runs=runs)
    with served(app, "on") as url:
        ids = create_slow_tasks(url, 2)
        refused = post(url, "alice", body(7, "tools/call", slow(60))).json()
        assert refused["error"] == {"code": -32603, "message": POOL_FULL}
        got = post(url, "alice", body(8, "tasks/get", {"taskId": ids[0]})).json()
        assert got["result"]["status"] == "working"
        cancelled = post(url, "alice", body(9, "tasks/cancel", {"taskId": ids[0]})).json()
        assert cancelled["result"]["resultType"] == "complete"
        deadline = time.monotonic() + WAIT
        while "error" in (again := post(url, "alice", body(10, "tools/call", slow(60))).json()):
            assert time.monotonic() < deadline, again  # the cancelled run's slot frees
            time.sleep(0.05)


def test_one_principal_filling_its_share_leaves_the_pool_to_the_others() -> None:
    runs = TaskRunOptions(max_running=4, max_running_per_principal=2)
    app = McpHttpApp(Everything().handle, server_config(), principal=user, task_runs=runs)
    with served(app, "on") as url:
        ids = create_slow_tasks(url, 2, who="mallory")  # at the share: both made
        refused = post(url, "mallory", body(7, "tools/call", slow(60))).json()
        assert refused["error"] == {"code": -32603, "message": SHARE_FULL}  # past it
        got = post(url, "mallory", body(8, "tasks/get", {"taskId": ids[0]})).json()
        assert got["result"]["status"] == "working"  # her own tasks still answer
        create_slow_tasks(url, 2, who="alice")  # another principal gets in, to the pool's end
        full = post(url, "bob", body(9, "tools/call", slow(60))).json()
        assert full["error"] == {"code": -32603, "message": POOL_FULL}
        cancelled = post(url, "mallory", body(10, "tasks/cancel", {"taskId": ids[0]})).json()
        assert cancelled["result"]["resultType"] == "complete"
        deadline = time.monotonic() + WAIT
        while "error" in (again := post(url, "mallory", body(11, "tools/call", slow(60))).json()):
            assert time.monotonic() < deadline, again  # her cancelled run's slot frees
            time.sleep(0.05)


def test_the_default_share_is_a_quarter_of_the_pool() -> None:
    assert TaskRunOptions().max_running_per_principal is None
    app = McpHttpApp(Everything().handle, server_config(), principal=user)
    assert isinstance(app._runner, TaskRunner)
    assert app._runner.share == 16  # a quarter of the default 64
    runs = TaskRunOptions(max_running=3)
    small = McpHttpApp(Everything().handle, server_config(), task_runs=runs)._runner
    assert isinstance(small, TaskRunner)
    assert small.share == 1
