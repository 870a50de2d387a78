"""The durable stores under faults and at scale, on a real SQLite file and a real redis-server:
owner-only files, startup errors naming the path, a lock held by another connection and a
paused Redis raising :class:`TaskStoreError` within the timeout, an indexed live count and
sweep over 1,000 tasks (and the migration of a file without the index), Redis keys no task id
can reach, and the replay guards shared by two clients.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import time
from pathlib import Path

import pytest
from attrs import evolve

from helpers import task_record, tid
from mrtr_sansio.adapters.stores import (
    RedisReplayGuard,
    RedisTaskStore,
    SqliteReplayGuard,
    SqliteTaskStore,
)
from mrtr_sansio.tasks import Task, TaskStoreError


def record(n: int, owner: str | None = "alice", created: float = 0.0, ttl_ms: int = 1000) -> Task:
    return task_record(
        n, {"name": "x", "arguments": {}}, owner=owner, created=created, ttl_ms=ttl_ms
    )


# --- SQLite -------------------------------------------------------------------------------------


def test_sqlite_files_are_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store = SqliteTaskStore(path)
    try:
        assert store.create(record(1))
        names = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
        assert [stat.S_IMODE(os.stat(p).st_mode) for p in names] == [0o600] * 3
    finally:
        store.close()


def test_a_missing_directory_or_a_non_database_file_is_one_line_naming_the_path(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "nowhere" / "tasks.db"
    with pytest.raises(FileNotFoundError) as gone:
        SqliteTaskStore(missing)
    assert str(missing) in str(gone.value)
    assert "\n" not in str(gone.value)
    text = tmp_path / "notes.txt"
    text.write_bytes(b"this is not a database, just some text long enough to have a header" * 9)
    with pytest.raises(ValueError, match="not an SQLite database") as bad:
        SqliteTaskStore(text)
    message = str(bad.value)
    assert str(text) in message
    assert "not an SQLite database" in message
    assert "\n" not in message
    with pytest.raises(OSError, match=f"replay guard: cannot open {tmp_path}: Is a directory"):
        SqliteReplayGuard(tmp_path)


def test_a_write_lock_held_by_another_connection_raises_task_store_error(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store = SqliteTaskStore(path, timeout=0.2)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        assert store.create(record(1))
        other.execute("BEGIN IMMEDIATE")  # holds the write lock, as another process would
        start = time.monotonic()
        with pytest.raises(TaskStoreError, match=r"locked by another writer \(waited 0.2 s\)"):
            store.create(record(2))
        assert time.monotonic() - start < 2.0
        assert store.get(tid(1)) == record(1)  # WAL: readers go on meanwhile
        other.execute("ROLLBACK")
        assert store.create(record(2))
    finally:
        other.close()
        store.close()


def test_a_corrupt_row_fails_that_task_only(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store = SqliteTaskStore(path)
    try:
        store.create(record(1))
        store.create(record(2))
        with sqlite3.connect(path) as db:
            db.execute("UPDATE mrtr_tasks SET record = '{nope' WHERE task_id = ?", (tid(1),))
        with pytest.raises(TaskStoreError, match="corrupt") as caught:
            store.get(tid(1))
        assert str(path) not in str(caught.value)
        assert store.get(tid(2)) == record(2)
    finally:
        store.close()


def test_live_count_and_sweep_are_indexed_over_a_thousand_tasks(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    try:
        for n in range(1000):  # half expire at 1.0, half at 11.0
            store.create(record(n, "alice" if n % 4 else "bob", ttl_ms=1000 if n % 2 else 11000))
        assert store.count("alice", 0.5) == 750
        assert store.count("bob", 0.5) == 250
        assert store.count("alice", 5.0) == 250
        db = store._file.db
        for sql, args in [
            (
                "SELECT COUNT(*) FROM mrtr_tasks WHERE owner IS ? AND "
                "(expires_at IS NULL OR expires_at > ?)",
                ("alice", 5.0),
            ),
            ("SELECT task_id FROM mrtr_tasks WHERE expires_at IS NOT NULL AND expires_at <= ?",
             (5.0,)),
        ]:  # fmt: skip
            plan = " ".join(str(row) for row in db.execute("EXPLAIN QUERY PLAN " + sql, args))
            assert "INDEX mrtr_tasks_" in plan, plan
        start = time.perf_counter()
        for _ in range(100):
            store.count("alice", 5.0)
        assert (time.perf_counter() - start) / 100 < 0.01
        assert store.sweep(5.0, 100) == 100  # at the limit
        assert store.sweep(5.0, 1000) == 400  # the rest of the 500, not one more
        assert store.sweep(5.0, 1000) == 0
        assert store.count("alice", 5.0) == 250
    finally:
        store.close()


def test_a_file_written_before_the_expiry_column_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE mrtr_tasks (task_id TEXT PRIMARY KEY, owner TEXT, "
            "revision INTEGER NOT NULL, record TEXT NOT NULL)"
        )
        for n, ttl in [(1, 1000), (2, 5000)]:
            task = record(n, ttl_ms=ttl)
            db.execute(
                "INSERT INTO mrtr_tasks VALUES (?, ?, 0, ?)",
                (task.task_id, task.owner, json.dumps(task.to_record())),
            )
    store = SqliteTaskStore(path)
    try:
        assert store.count("alice", 2.0) == 1
        assert store.sweep(2.0, 10) == 1
        assert store.get(tid(2)) == record(2, ttl_ms=5000)
    finally:
        store.close()


def test_the_sqlite_replay_guard_is_shared_by_two_connections(tmp_path: Path) -> None:
    path = tmp_path / "redeemed.db"
    one, two = SqliteReplayGuard(path), SqliteReplayGuard(path)
    try:
        assert one.consume(b"token-1", 10.0, 0.0)
        assert not two.consume(b"token-1", 10.0, 1.0)  # another process: refused
        assert two.consume(b"token-2", 10.0, 1.0)
        assert one.consume(b"token-1", 30.0, 11.0)  # forgotten once expired (swept)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    finally:
        one.close()
        two.close()


# --- Redis --------------------------------------------------------------------------------------


def test_redis_ids_that_the_server_never_issues_reach_no_redis(tmp_path: Path) -> None:
    # Port 9 (discard) refuses connections: any round trip would raise TaskStoreError.
    store = RedisTaskStore.from_url("redis://127.0.0.1:9/0", timeout=0.2)
    try:
        for probe in ["owner:alice", "-owner:alice", "x" * 32, "A" * 32, tid(1) + "0", "", "a\nb"]:
            assert store.get(probe) is None
            store.delete(probe)
        with pytest.raises(TaskStoreError, match=r"unreachable or too slow"):
            store.get(tid(1))
        with pytest.raises(ValueError, match="32 lowercase hex digits"):
            store.create(evolve(record(1), task_id="owner:alice"))
    finally:
        store.close()


def test_redis_owner_sets_are_in_their_own_namespace(redis_server: tuple[str, object]) -> None:
    url, _ = redis_server
    store = RedisTaskStore.from_url(url, prefix="p:task:")
    try:
        store.create(record(1, "alice"))
        keys = sorted(k.decode() for k in store._redis.keys("*"))
        assert keys == [
            "p:task-bytes",  # bytes per owner, in all, and per record: beside, not below
            "p:task-bytes-total",
            "p:task-expiry",
            "p:task-meta",
            "p:task-owner:alice",
            "p:task:" + tid(1),
        ]
        assert store.get("owner:alice") is None
    finally:
        store.close()


def test_redis_count_and_sweep_over_a_thousand_tasks(redis_server: tuple[str, object]) -> None:
    url, _ = redis_server
    store = RedisTaskStore.from_url(url)
    try:
        pipe_start = time.perf_counter()
        for n in range(1000):
            store.create(record(n, "alice" if n % 4 else "bob", ttl_ms=1000 if n % 2 else 11000))
        assert time.perf_counter() - pipe_start < 30
        assert store.count("alice", 0.5) == 750
        assert store.count("bob", 0.5) == 250
        assert store.count("alice", 5.0) == 250
        assert store.sweep(5.0, 100) == 100
        assert store.sweep(5.0, 1000) == 400
        assert store.sweep(5.0, 1000) == 0
        assert store.count("alice", 5.0) == 250
        assert store._redis.zcard(store._owners + "alice") == 250
        assert store.get(tid(1)) is None
        assert store.get(tid(2)) is not None
    finally:
        store.close()


def test_a_paused_redis_raises_task_store_error_within_the_timeout(
    redis_server: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, proc = redis_server
    store = RedisTaskStore.from_url(url, timeout=0.3)
    guard = RedisReplayGuard.from_url(url, timeout=0.3)
    try:
        assert store.create(record(1))
        proc.send_signal(signal.SIGSTOP)
        start = time.monotonic()
        with pytest.raises(TaskStoreError, match="task store \\(Redis\\) is unreachable"):
            store.get(tid(1))
        with pytest.raises(TaskStoreError, match="replay guard \\(Redis\\)"):
            guard.consume(b"t", 10.0, 0.0)
        assert time.monotonic() - start < 3.0
        proc.send_signal(signal.SIGCONT)
        assert store.get(tid(1)) == record(1)  # the client reconnects
    finally:
        proc.send_signal(signal.SIGCONT)
        store.close()
        guard.close()


def test_the_redis_replay_guard_is_shared_by_two_clients(redis_server: tuple[str, object]) -> None:
    url, _ = redis_server
    one, two = RedisReplayGuard.from_url(url), RedisReplayGuard.from_url(url)
    try:
        now = time.time()
        assert one.consume(b"token-1", now + 5, now)
        assert not two.consume(b"token-1", now + 5, now)
        assert two.consume(b"token-2", now + 5, now)
        ttl = one._redis.pttl(b"mrtr:redeemed:token-1")
        assert 0 < ttl <= 5000  # remembered until the token expires, no longer
    finally:
        one.close()
        two.close()
