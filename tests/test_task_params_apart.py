"""The durable stores keep a task's params apart from the rest of its record, on a real SQLite
file and a real redis-server: a read of the record (``tasks/get``, a listen stream's
``get_many``) fetches and decodes none of them, a write that does not change them does not
send them, a run after a round of input still gets them, a terminal task drops them (and their
bytes), and a record written before they were kept apart is read and migrated at its next
write.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

import mrtr_sansio as m
from helpers import task_record, tid
from mrtr_sansio.adapters import _records
from mrtr_sansio.adapters.stores import RedisTaskStore, SqliteTaskStore
from mrtr_sansio.tasks import StoredParams, Task, TaskStatus, TaskStoreError
from mrtr_sansio.tasks._bounds import sized
from test_tasks import Server, accept, as_task, ask_name, call, get, task_request

MB = 1_000_000
PARAMS = {"name": "work", "arguments": {"pad": "x" * MB}}
COMPACT = json.dumps(PARAMS, separators=(",", ":"))


def record(n: int, params: Any = PARAMS) -> Task:
    return task_record(n, params)


Durable = SqliteTaskStore | RedisTaskStore


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Durable]:
    durable: Durable
    if request.param == "redis":
        url, _ = request.getfixturevalue("redis_server")
        durable = RedisTaskStore.from_url(url)
    else:
        durable = SqliteTaskStore(tmp_path / "tasks.db")
    yield durable
    durable.close()


class CountingJson:
    """``json`` as the stores' record codec sees it, counting the characters it decodes."""

    def __init__(self) -> None:
        self.decoded = 0

    def loads(self, raw: str | bytes) -> Any:
        self.decoded += len(raw)
        return json.loads(raw)

    dumps = staticmethod(json.dumps)


def redis_stat(store: RedisTaskStore, name: str) -> int:
    return int(store._redis.info("stats")[name])


def stored_params(store: Durable, task_id: str) -> str | None:
    """The params as the store holds them apart, read around the store's own methods."""
    if isinstance(store, RedisTaskStore):
        raw = store._redis.hget(store._prefix + task_id, "par")
        return None if raw is None else str(raw.decode())
    with sqlite3.connect(store.path) as db:
        row = db.execute("SELECT params FROM mrtr_tasks WHERE task_id = ?", (task_id,)).fetchone()
    return None if row is None else row[0]


def stored_record(store: Durable, task_id: str) -> dict[str, Any]:
    if isinstance(store, RedisTaskStore):
        raw = store._redis.hget(store._prefix + task_id, "rec")
    else:
        with sqlite3.connect(store.path) as db:
            (raw,) = db.execute(
                "SELECT record FROM mrtr_tasks WHERE task_id = ?", (task_id,)
            ).fetchone()
    loaded: dict[str, Any] = json.loads(raw)
    return loaded


def test_a_get_fetches_and_decodes_none_of_a_megabyte_of_params(
    store: Durable, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert store.create(record(1))
    assert store.create(record(2, {"name": "work"}))
    spy = CountingJson()
    monkeypatch.setattr(_records, "json", spy)
    sent = redis_stat(store, "total_net_output_bytes") if isinstance(store, RedisTaskStore) else 0
    task = store.get(tid(1))
    (again, small) = store.get_many([tid(1), tid(2)])
    if isinstance(store, RedisTaskStore):  # what Redis sent: two records and two INFO replies
        assert redis_stat(store, "total_net_output_bytes") - sent < 20_000
    assert spy.decoded < 3 * 1000  # three records of a few hundred bytes each
    assert task is not None
    assert again is not None
    assert small is not None
    assert isinstance(task.params_source, StoredParams)
    assert (task.params_size, small.params_size) == (len(COMPACT), len('{"name":"work"}'))
    assert task.size == record(1).size
    assert task.params == PARAMS  # read now, when asked
    assert again.params == PARAMS
    assert small.params == {"name": "work"}


def test_a_write_that_keeps_the_params_does_not_send_them(store: Durable) -> None:
    assert store.create(record(1))
    task = store.get(tid(1))
    assert task is not None
    changed = sized(attrs.evolve(task, state={"step": 2}, revision=1))
    if isinstance(store, RedisTaskStore):
        received = redis_stat(store, "total_net_input_bytes")
        assert store.replace(changed, 0)
        assert redis_stat(store, "total_net_input_bytes") - received < 10_000
    else:
        statements: list[str] = []
        store._file.db.set_trace_callback(statements.append)  # SQL with its values bound
        assert store.replace(changed, 0)
        store._file.db.set_trace_callback(None)
        assert statements
        assert sum(map(len, statements)) < 10_000
    assert stored_params(store, tid(1)) == COMPACT
    assert store.get(tid(1)) == changed
    assert changed.size == record(1).size + len('{"step":2}') - len("null")


def test_a_run_after_a_round_of_input_gets_its_params_and_the_end_drops_them(
    store: Durable,
) -> None:
    seen: list[Any] = []

    def handler(request: m.RequestReceived) -> Any:
        seen.append(request.params["arguments"])
        return ask_name(request)

    ids = iter(range(1, 100))
    server = Server(as_task(handler), store=store, ids=lambda n: f"{next(ids):0{2 * n}x}")  # type: ignore[arg-type]
    big = call(1, arguments={"pad": "y" * MB})
    task_id = server.send(big)["result"]["taskId"]
    assert get(server, task_id)["result"]["status"] == "input_required"
    stored = store.get(task_id)
    assert stored is not None
    assert isinstance(stored.params_source, StoredParams)
    assert "params" not in stored_record(store, task_id)
    assert store.usage(None) == (stored.size, stored.size)
    assert stored.size > MB
    server.send(task_request(2, "tasks/update", task_id, inputResponses={"name": accept("Ada")}))
    assert get(server, task_id)["result"]["status"] == "completed"
    assert seen == [{"pad": "y" * MB}] * 2  # the task's first run, and the one after input
    assert stored_params(store, task_id) == "{}"
    done = store.get(task_id)
    assert done is not None
    assert done.params == {}
    assert store.usage(None) == (done.size, done.size)
    assert done.size < 1000


def test_a_record_written_with_its_params_inside_is_read_and_migrated(store: Durable) -> None:
    assert store.create(record(1))
    old = json.dumps(record(1).to_record())  # the format before params were kept apart
    if isinstance(store, RedisTaskStore):
        store._redis.hset(store._prefix + tid(1), "rec", old)
        store._redis.hdel(store._prefix + tid(1), "par")
    else:
        with sqlite3.connect(store.path) as db:
            db.execute(
                "UPDATE mrtr_tasks SET record = ?, params = NULL WHERE task_id = ?", (old, tid(1))
            )
    task = store.get(tid(1))
    assert task is not None
    assert isinstance(task.params_source, str)
    assert task == record(1)
    assert store.replace(attrs.evolve(task, revision=1), 0)
    assert "params" not in stored_record(store, tid(1))
    assert stored_params(store, tid(1)) == task.params_json
    moved = store.get(tid(1))
    assert moved is not None
    assert isinstance(moved.params_source, StoredParams)
    assert moved.params == PARAMS
    assert moved.size == task.size


def test_an_sqlite_file_without_the_params_column_gains_it(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE mrtr_tasks (task_id TEXT PRIMARY KEY, owner TEXT, "
            "revision INTEGER NOT NULL, record TEXT NOT NULL, expires_at REAL, "
            "size INTEGER NOT NULL DEFAULT 0, seq INTEGER)"
        )
        old = record(1)
        db.execute(
            "INSERT INTO mrtr_tasks VALUES (?, ?, 0, ?, NULL, ?, 1)",
            (old.task_id, old.owner, json.dumps(old.to_record()), old.size),
        )
    store = SqliteTaskStore(path)
    try:
        assert store.get(tid(1)) == old
        assert store.create(record(2))
        assert stored_params(store, tid(2)) == old.params_json
    finally:
        store.close()


def test_a_record_read_from_another_store_writes_its_params(store: Durable, tmp_path: Path) -> None:
    other = SqliteTaskStore(tmp_path / "other.db")
    try:
        assert other.create(record(1))
        copied = other.get(tid(1))
        assert copied is not None
        assert isinstance(copied.params_source, StoredParams)
        assert store.create(attrs.evolve(copied, params="{}"))
        assert store.replace(attrs.evolve(copied, revision=1), 0)  # params: the other store's
        assert stored_params(store, tid(1)) == copied.params_json
    finally:
        other.close()


def test_params_gone_with_their_task_are_a_store_error(store: Durable) -> None:
    assert store.create(record(1))
    task = store.get(tid(1))
    assert task is not None
    store.delete(tid(1))
    with pytest.raises(TaskStoreError, match="params are gone"):
        task.params  # noqa: B018


def test_params_that_cannot_be_read_leave_the_task_as_it_was(store: Durable) -> None:
    ids = iter(range(1, 100))
    server = Server(as_task(ask_name), store=store, ids=lambda n: f"{next(ids):0{2 * n}x}")  # type: ignore[arg-type]
    task_id = server.send(call(1))["result"]["taskId"]
    before = store.get(task_id)
    assert before is not None
    if isinstance(store, RedisTaskStore):  # the params lost, as a broken disk or Redis would
        store._redis.hdel(store._prefix + task_id, "par")
    else:
        with sqlite3.connect(store.path) as db:
            db.execute("UPDATE mrtr_tasks SET params = NULL WHERE task_id = ?", (task_id,))
    update = task_request(2, "tasks/update", task_id, inputResponses={"name": accept("Ada")})
    answer = server.send(update)
    assert answer["error"]["code"] == -32603
    assert "params are gone" in answer["error"]["message"]
    after = store.get(task_id)
    assert after is not None
    assert (after.status, after.revision) == (TaskStatus.INPUT_REQUIRED, before.revision)
