"""Leases of task runs on the stream servers (the blocking stdio server, and the anyio server on
asyncio and trio), each a real server process on pipes with its tasks in a SQLite file: a run
longer than its lease completes (the server renews the lease while the run goes on), and the
tasks of a server killed with SIGKILL fail within the lease, as another server on the same file
reports them.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
from task_stream_server import config
from test_tasks_http import body

from mrtr_sansio import RequestReceived
from mrtr_sansio.adapters._lease import LeaseThread
from mrtr_sansio.adapters._tasks import SERVER_STOPPED

SERVER = Path(__file__).with_name("task_stream_server.py")
ADAPTERS = ["stdio", "asyncio", "trio"]
LEASE = 2.0
WAIT = 15.0


class Peer:
    """Writes JSON lines to a server's stdin and reads its stdout's, waiting at most WAIT."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None
        assert proc.stdout is not None
        self._in = proc.stdin
        self._out = proc.stdout.fileno()
        self._buffer = b""

    def send(self, message: dict[str, Any]) -> None:
        self._in.write(json.dumps(message).encode() + b"\n")
        self._in.flush()

    def recv(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            assert select.select([self._out], [], [], WAIT)[0], "the server did not answer"
            data = os.read(self._out, 65536)
            assert data, "the server closed its output"
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message


@contextmanager
def server(adapter: str, db: Path) -> Iterator[tuple[Peer, subprocess.Popen[bytes]]]:
    """The task server on ``db`` in a process of its own, spoken to through its pipes."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), adapter, str(db), str(LEASE)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    peer = Peer(proc)
    try:
        yield peer, proc
    finally:
        proc.stdin.close()
        try:
            proc.wait(WAIT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()


def nap(rid: int, seconds: float, **more: Any) -> dict[str, Any]:
    return body(rid, "tools/call", {"name": "nap", "arguments": {"seconds": seconds, **more}})


def get(peer: Peer, rid: int, task_id: str) -> dict[str, Any]:
    peer.send(body(rid, "tasks/get", {"taskId": task_id}))
    reply = peer.recv()
    assert reply["id"] == rid, reply
    result: dict[str, Any] = reply["result"]
    return result


def until_done(peer: Peer, task_id: str) -> tuple[dict[str, Any], float]:
    """Poll ``task_id`` until it leaves ``working``: the task, and when that was seen."""
    deadline = time.monotonic() + WAIT
    rid = 100
    while True:
        rid += 1
        task = get(peer, rid, task_id)
        if task["status"] != "working":
            return task, time.monotonic()
        assert time.monotonic() < deadline, task
        time.sleep(0.1)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_run_longer_than_its_lease_completes(adapter: str, tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    # The observer reads the task while the worker runs it (the blocking worker's run is deaf).
    with server(adapter, db) as (worker, _), server(adapter, db) as (observer, _):
        worker.send(nap(1, 1.5 * LEASE))
        created = worker.recv()["result"]
        assert created["status"] == "working", created
        task, _ = until_done(observer, created["taskId"])
    assert task["status"] == "completed", task
    assert task["result"]["content"][0]["text"] == f"slept {1.5 * LEASE}"


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_killed_servers_task_fails_within_its_lease(adapter: str, tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    with server(adapter, db) as (worker, proc), server(adapter, db) as (observer, _):
        worker.send(nap(1, 60))
        task_id = worker.recv()["result"]["taskId"]
        time.sleep(1.5 * LEASE)  # renewed meanwhile: still working
        assert get(observer, 2, task_id)["status"] == "working"
        os.kill(proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        proc.wait(WAIT)
        task, seen = until_done(observer, task_id)
    assert task["status"] == "failed", task
    assert "stopped" in task["statusMessage"], task
    assert seen - killed < LEASE + 1.5, seen - killed


def test_a_task_cancelled_through_another_server_stops_the_blocking_run(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    with server("stdio", db) as (worker, _), server("stdio", db) as (observer, _):
        worker.send(nap(1, 60, cooperative=True))
        task_id = worker.recv()["result"]["taskId"]
        observer.send(body(2, "tasks/cancel", {"taskId": task_id}))
        assert observer.recv()["result"]["resultType"] == "complete"
        began = time.monotonic()
        # The blocking server runs one handler at a time: tools/list is answered once the
        # run stopped, at its next lease renewal (not after its 60 s).
        worker.send(body(3, "tools/list", {}))
        assert worker.recv()["result"]["tools"][0]["name"] == "nap"
        assert time.monotonic() - began < LEASE
        assert get(worker, 4, task_id)["status"] == "cancelled"


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_the_end_of_input_fails_the_tasks_running_at_once(adapter: str, tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    with server(adapter, db) as (observer, _):
        with server(adapter, db) as (worker, _):
            worker.send(nap(1, 60, cooperative=True))
            task_id = worker.recv()["result"]["taskId"]
        ended = time.monotonic()  # the worker's input ended and it exited
        task = get(observer, 2, task_id)
    assert task["status"] == "failed", task
    assert time.monotonic() - ended < LEASE
    assert task["error"]["message"] == SERVER_STOPPED, task


def test_without_leases_nothing_renews(tmp_path: Path) -> None:
    cfg = config(str(tmp_path / "tasks.db"), 1.0)
    assert cfg.tasks is not None
    settings = attrs.evolve(cfg.tasks, lease_seconds=None)
    request = RequestReceived("t1", "tools/call", {}, task_id="t1")  # a task's run
    lease = LeaseThread.of(attrs.evolve(cfg, tasks=settings), request, pytest.fail)
    assert lease is not None
    assert lease.every is None
    before = threading.active_count()
    with lease.running():
        assert threading.active_count() == before  # no renewal thread
