"""The byte quotas on the durable stores: a real SQLite file and a real redis-server meter the
bytes their records hold, so ``TaskSettings.max_task_bytes_per_principal`` and
``max_task_bytes_total`` hold on them as on the in-memory store (at the limit accepted, past it
refused -32603, bytes freed by a cancel, an expiry, and on Redis by Redis's own expiry of the
record), and every process sharing the store sees the same figures.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from attrs import evolve

from helpers import Clock
from mrtr_sansio.adapters.stores import RedisTaskStore, SqliteTaskStore
from mrtr_sansio.tasks import MeteredTaskStore, Task, TaskStatus
from test_task_bounds import big_call, refused
from test_tasks import Server, as_task, done, get, task_request

Opener = Callable[[], Any]


@pytest.fixture(params=["sqlite", "redis"])
def opener(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[], SqliteTaskStore | RedisTaskStore]]:
    """Opens one more store on the same file or Redis (another process's view of it)."""
    opened: list[SqliteTaskStore | RedisTaskStore] = []
    if request.param == "sqlite":
        path = tmp_path / "tasks.db"

        def open_one() -> SqliteTaskStore | RedisTaskStore:
            opened.append(SqliteTaskStore(path))
            return opened[-1]
    else:
        url, _proc = request.getfixturevalue("redis_server")

        def open_one() -> SqliteTaskStore | RedisTaskStore:
            opened.append(RedisTaskStore.from_url(url))
            return opened[-1]

    yield open_one
    for store in opened:
        store.close()


def hex_ids() -> Callable[[int], str]:
    counter = itertools.count(1)
    return lambda n: f"{next(counter):0{2 * n}x}"


def serve(store: Any, clock: Clock | None = None, **settings: Any) -> Server:
    return Server(as_task(done), store=store, clock=clock, ids=hex_ids(), **settings)


def create_big(server: Server, rid: Any, principal: str | None = None) -> str:
    result = server.send(big_call(rid), run=False, principal=principal)["result"]
    assert result["resultType"] == "task", result
    task_id: str = result["taskId"]
    return task_id


def one_size(opener: Opener) -> int:
    """The size of ``big_call``'s record, measured on a store of its own kind."""
    store = opener()
    server = serve(store)
    task = store.get(create_big(server, 1))
    assert task is not None
    store.delete(task.task_id)
    assert store.usage(None) == (0, 0)
    size: int = task.size
    return size


def test_the_durable_stores_are_metered(opener: Opener) -> None:
    assert isinstance(opener(), MeteredTaskStore)


def test_bytes_per_principal_at_the_limit_and_past_it(opener: Opener) -> None:
    size = one_size(opener)
    store = opener()
    server = serve(store, max_task_bytes_per_principal=2 * size)
    create_big(server, 1, "alice")
    create_big(server, 2, "alice")  # exactly at the limit
    assert store.usage("alice") == (2 * size, 2 * size)
    response = server.send(big_call(3), principal="alice")
    refused(response, "max_task_bytes_per_principal")
    assert response["error"]["message"] == (
        f"This caller's tasks would store more than {2 * size} bytes "
        "(TaskSettings.max_task_bytes_per_principal)"
    )
    create_big(server, 4, "bob")  # another principal has its own allowance
    assert store.usage("bob") == (size, 3 * size)


def test_bytes_in_all_at_the_limit_and_past_it_seen_by_every_process(opener: Opener) -> None:
    size = one_size(opener)
    first, second = opener(), opener()
    create_big(serve(first, max_task_bytes_total=2 * size), 1, "alice")
    # Another process on the same store: the bytes the first one stored count.
    other = serve(second, max_task_bytes_total=2 * size)
    create_big(other, 2, "bob")  # exactly at the limit
    response = other.send(big_call(3), principal="carol")
    refused(response, "max_task_bytes_total")
    assert response["error"] == {
        "code": -32603,
        "message": f"The server's tasks would store more than {2 * size} bytes "
        "(TaskSettings.max_task_bytes_total)",
    }
    assert first.usage("carol") == second.usage("carol") == (0, 2 * size)


def test_a_cancel_frees_what_only_a_run_needs(opener: Opener) -> None:
    size = one_size(opener)
    store = opener()
    server = serve(store, max_task_bytes_per_principal=size)
    task_id = create_big(server, 1)
    refused(server.send(big_call(2)), "max_task_bytes_per_principal")
    server.send(task_request(3, "tasks/cancel", task_id))
    assert get(server, task_id)["result"]["status"] == "cancelled"
    cancelled = store.get(task_id)
    assert cancelled is not None
    assert store.usage(None) == (cancelled.size, cancelled.size)
    assert cancelled.size < 50
    # The cancelled record's few bytes remain: a new task one size smaller fits.
    server = serve(store, max_task_bytes_per_principal=size + cancelled.size)
    create_big(server, 4)
    store.delete(task_id)
    assert store.usage(None) == (size, size)


def test_expired_tasks_give_their_bytes_back(opener: Opener) -> None:
    size = one_size(opener)
    store = opener()
    clock = Clock(1_785_000_000.0)
    clock.now = time.time()  # Redis scores and our clock agree on what expired
    server = serve(store, clock, max_task_bytes_per_principal=size, ttl_ms=1000)
    create_big(server, 1)
    refused(server.send(big_call(2)), "max_task_bytes_per_principal")
    clock.now += 1
    create_big(server, 3)  # the expired record was swept to make room
    assert store.usage(None) == (size, size)


def test_redis_own_expiry_of_a_record_keeps_its_bytes_until_the_sweep(
    redis_server: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, _proc = redis_server
    store = RedisTaskStore.from_url(url)
    admin = redis.Redis.from_url(url)
    try:
        task = _record(1, "alice", size=700)
        assert store.create(task)
        assert store.usage("alice") == (700, 700)
        # Redis expires the record's key itself (as it does a minute after its TTL): no
        # script runs, and the bytes stay counted until a sweep releases them.
        admin.pexpire("mrtr:task:" + task.task_id, 1)
        deadline = time.monotonic() + 5
        while admin.exists("mrtr:task:" + task.task_id) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.get(task.task_id) is None
        assert store.usage("alice") == (700, 700)
        assert not store.create(task)  # the id is held until then
        assert store.sweep(now=2.0, limit=10) == 1
        assert store.usage("alice") == (0, 0)
        assert admin.keys("mrtr:task-*") == []  # no counter, size or owner set left
    finally:
        admin.close()
        store.close()


def test_replace_and_delete_keep_the_counters_exact(opener: Opener) -> None:
    store = opener()
    task = _record(1, "alice", size=100)
    assert store.create(task)
    assert store.create(_record(2, None, size=40))
    assert store.replace(evolve(task, revision=1, size=30), 0)
    assert not store.replace(evolve(task, revision=2, size=999), 0)  # stale: nothing changes
    assert store.usage("alice") == (30, 70)
    assert store.usage(None) == (40, 70)
    store.delete(task.task_id)
    store.delete(task.task_id)  # twice: no double release
    assert store.usage("alice") == (0, 40)
    assert store.sweep(now=10.0, limit=10) == 1
    assert store.usage(None) == (0, 0)


def test_an_sqlite_file_without_the_size_column_gains_it_filled(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    task = _record(1, "alice", size=123)
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE mrtr_tasks (task_id TEXT PRIMARY KEY, owner TEXT, "
            "revision INTEGER NOT NULL, record TEXT NOT NULL, expires_at REAL)"
        )
        db.execute(
            "INSERT INTO mrtr_tasks VALUES (?, ?, 0, ?, 1.0)",
            (task.task_id, "alice", json.dumps(task.to_record())),
        )
    db.close()
    store = SqliteTaskStore(path)
    try:
        assert store.usage("alice") == (123, 123)
        with sqlite3.connect(path) as db:
            plan = db.execute(
                "EXPLAIN QUERY PLAN SELECT TOTAL(size) FROM mrtr_tasks WHERE owner IS 'alice'"
            ).fetchall()
        db.close()
        assert "COVERING INDEX mrtr_tasks_owner_size" in str(plan)
    finally:
        store.close()


def _record(n: int, owner: str | None, *, size: int) -> Task:
    return Task(
        task_id=f"{n:032x}",
        owner=owner,
        status=TaskStatus.WORKING,
        created_at=0.0,
        updated_at=0.0,
        ttl_ms=1000,
        poll_interval_ms=None,
        params={"name": "x", "arguments": {}},
        size=size,
    )
