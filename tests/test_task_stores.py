"""Task stores: the :class:`TaskStore` contract for every store we ship (in memory, SQLite,
and Redis on a real redis-server), stores shared by two connections, and tasks that outlive
the server process that created them (a real ``examples/http/server.py`` killed mid-task and
started again on the same SQLite file).
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from attrs import evolve as attrs_evolve
from scale import cluster

import mrtr_sansio as m
from mrtr_sansio.adapters.stores import RedisTaskStore, SqliteTaskStore
from mrtr_sansio.tasks import (
    EXTENSION,
    InMemoryTaskStore,
    RunAsTask,
    Task,
    TaskSettings,
    TaskStatus,
    TaskStore,
)


def tid(name: str) -> str:
    """A task id of the form the server issues (32 hex digits), named for the test."""
    return name.encode().hex().ljust(32, "0")[:32]


T = tid("t")


def record(task_id: str = T, owner: str | None = "alice", revision: int = 0) -> Task:
    return Task(
        task_id=task_id if len(task_id) == 32 else tid(task_id),
        owner=owner,
        status=TaskStatus.WORKING,
        created_at=1.0,
        updated_at=1.0,
        ttl_ms=1000,
        poll_interval_ms=None,
        params={"name": "x", "arguments": {"é": [1, None]}},
        state={"k": "v"},
        revision=revision,
    )


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server of our own on loopback for the whole run (skipped where Debian's
    redis-server is not installed; .ci/run installs it before the tests)."""
    if cluster.find_redis() is None:
        pytest.skip(cluster.REDIS_MISSING)
    url, proc = cluster.start_redis(tmp_path_factory.mktemp("redis"))
    yield url
    cluster.stop(proc)


_prefixes = itertools.count()


def redis_store(url: str) -> RedisTaskStore:
    """A store under a prefix no other test uses."""
    return RedisTaskStore.from_url(url, prefix=f"test{next(_prefixes)}:{os.getpid()}:")


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TaskStore]:
    if request.param == "memory":
        yield InMemoryTaskStore()
        return
    if request.param == "redis":
        redis = redis_store(request.getfixturevalue("redis_url"))
        yield redis
        redis.close()
        return
    sqlite = SqliteTaskStore(tmp_path / "tasks.db")
    yield sqlite
    sqlite.close()


def test_a_store_is_a_task_store(store: TaskStore) -> None:
    assert isinstance(store, TaskStore)


def test_create_get_and_refuse_a_duplicate(store: TaskStore) -> None:
    assert store.get(T) is None
    assert store.create(record())
    assert not store.create(record())
    assert store.get(T) == record()


def test_replace_is_compare_and_swap_on_revision(store: TaskStore) -> None:
    store.create(record())
    newer = record(revision=1)
    assert not store.replace(newer, 7)
    assert store.get(T) == record()
    assert store.replace(newer, 0)
    assert store.get(T) == newer
    assert not store.replace(record(revision=2), 0)  # a writer that read revision 0 loses


def test_delete_and_count_by_owner(store: TaskStore) -> None:
    store.create(record("a", "alice"))
    store.create(record("b", "alice"))
    store.create(record("c", None))
    assert [store.count("alice", 0.0), store.count(None, 0.0), store.count("bob", 0.0)] == [2, 1, 0]
    store.delete(tid("a"))
    store.delete(tid("a"))
    assert store.get(tid("a")) is None
    assert store.count("alice", 0.0) == 1
    assert not store.replace(record("a", revision=1), 0)


def test_two_sqlite_connections_share_records(tmp_path: Path) -> None:
    one = SqliteTaskStore(tmp_path / "tasks.db")
    two = SqliteTaskStore(tmp_path / "tasks.db")
    try:
        assert one.create(record())
        assert two.get(T) == record()
        assert two.replace(record(revision=1), 0)
        assert not one.replace(record(revision=1), 0)  # one's view was stale: refused
        assert one.get(T) == record(revision=1)
    finally:
        one.close()
        two.close()


def test_two_redis_clients_share_records(redis_url: str) -> None:
    one = redis_store(redis_url)
    two = RedisTaskStore.from_url(redis_url, prefix=one._prefix)
    try:
        assert one.create(record())
        assert two.get(T) == record()
        assert two.replace(record(revision=1), 0)
        assert not one.replace(record(revision=1), 0)
    finally:
        one.close()
        two.close()


def test_redis_records_expire_a_minute_after_their_ttl(redis_url: str) -> None:
    store = redis_store(redis_url)
    try:
        store.create(record())  # ttl_ms=1000
        store.create(attrs_evolve(record("forever"), ttl_ms=None))
        left = store._redis.pttl(store._prefix + T)
        assert 60_000 < left <= 61_000
        assert store._redis.pttl(store._prefix + tid("forever")) == -1  # no expiry
        assert store.count("alice", 0.0) == 2
        assert store.count("alice", 2.0) == 1  # t expired at 1.0 + 1 s: no longer counted
        assert store.sweep(2.0, 10) == 1
        assert store._redis.exists(store._prefix + T) == 0
        assert store._redis.zcard(store._owners + "alice") == 1
    finally:
        store.close()


def test_two_server_configs_over_one_sqlite_file_see_one_task(tmp_path: Path) -> None:
    # Two servers (two processes, in effect) over one file: one creates, the other reads.
    def config() -> m.ServerConfig:
        store = SqliteTaskStore(tmp_path / "tasks.db")
        return m.ServerConfig(tasks=TaskSettings(store=store, tools={"work": "optional"}))

    first, second = config(), config()
    conn = m.ServerConnection(first)
    conn.receive_message(_call(1))
    assert isinstance(conn.next_event(), m.RequestReceived)
    conn.respond(1, RunAsTask())
    task_id = conn.outgoing()[0].message["result"]["taskId"]
    other = m.ServerConnection(second)
    other.receive_message(_get(2, task_id))
    assert other.outgoing()[0].message["result"]["status"] == "working"


TASK_CAPS: dict[str, Any] = {"elicitation": {}, "extensions": {EXTENSION: {}}}


def _meta() -> dict[str, Any]:
    return {
        m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28",
        m.protocol.CLIENT_CAPABILITIES: TASK_CAPS,
    }


def _call(rid: int, name: str = "work", **arguments: Any) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments, "_meta": _meta()}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def _get(rid: int, task_id: str, method: str = "tasks/get", **extra: Any) -> dict[str, Any]:
    params = {"taskId": task_id, **extra, "_meta": _meta()}
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


# --- a real server process, restarted mid-task -------------------------------------------------


def _post(url: str, message: dict[str, Any]) -> dict[str, Any]:
    params = message["params"]
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": message["method"],
        "mcp-name": params.get("name", params.get("taskId")),
    }
    response = httpx.post(url, json=message, headers=headers, timeout=10.0)
    out: dict[str, Any] = response.json()
    return out


def _start(tmp_path: Path, name: str, *extra: str) -> cluster.Server:
    db = tmp_path / "tasks.db"
    return cluster.start_server(
        tmp_path, name, keys_file=None, ttl=60.0, extra=["--tasks-db", str(db), *extra]
    )


def _kill(proc: cluster.Server) -> None:
    proc.proc.send_signal(signal.SIGKILL)
    proc.proc.wait(10)


def test_a_task_survives_a_restart_of_the_server_process(tmp_path: Path) -> None:
    first = _start(tmp_path, "first")
    try:
        url = f"http://{first.address}/mcp"
        created = _post(url, _call(1, "confirm_delete", filename="a.txt"))["result"]
        task_id = created["taskId"]
        deadline = time.monotonic() + 10
        while _post(url, _get(2, task_id))["result"]["status"] != "input_required":
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        _kill(first)  # no clean shutdown: the record is all that is left
    second = _start(tmp_path, "second")
    try:
        url = f"http://{second.address}/mcp"
        waiting = _post(url, _get(3, task_id))["result"]
        assert waiting["status"] == "input_required"
        assert list(waiting["inputRequests"]) == ["confirm"]
        answers = {"confirm": {"action": "accept", "content": {"confirm": True}}}
        ack = _post(url, _get(4, task_id, "tasks/update", inputResponses=answers))
        assert ack["result"] == {"resultType": "complete", "_meta": ack["result"]["_meta"]}
        deadline = time.monotonic() + 10
        while (final := _post(url, _get(5, task_id))["result"])["status"] != "completed":
            assert time.monotonic() < deadline, final
            time.sleep(0.02)
        assert final["result"]["content"][0]["text"] == "Deleted a.txt."
    finally:
        cluster.stop(second.proc)


def test_a_task_whose_process_died_mid_run_fails_when_its_lease_runs_out(tmp_path: Path) -> None:
    first = _start(tmp_path, "first", "--task-lease", "1")
    try:
        url = f"http://{first.address}/mcp"
        created = _post(url, _call(1, "slow_compute", seconds=60))["result"]
        task_id = created["taskId"]
        time.sleep(0.7)  # renewed at least once meanwhile (every lease / 3)
        assert _post(url, _get(2, task_id))["result"]["status"] == "working"
    finally:
        _kill(first)
    second = _start(tmp_path, "second", "--task-lease", "1")
    try:
        url = f"http://{second.address}/mcp"
        deadline = time.monotonic() + 10
        while (task := _post(url, _get(3, task_id))["result"])["status"] == "working":
            assert time.monotonic() < deadline, task
            time.sleep(0.05)
        assert task["status"] == "failed"
        assert task["statusMessage"] == "The worker running this task stopped before it finished"
        assert task["error"]["code"] == -32603
    finally:
        cluster.stop(second.proc)
