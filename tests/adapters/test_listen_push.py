"""``subscriptions/listen`` across processes, pushed by the durable stores: a real SQLite file
and a real redis-server, each shared by two app instances with stores of their own (as two
server processes would be). A change made through one instance reaches a stream on the other
well under a second after it, though the stream's resyncs are an hour apart: only the
store's change notification (SQLite's change feed, Redis pub/sub) can bring it. Also the
stores' batched reads and watches themselves, and principal isolation on a shared store.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fixtures import Everything, server_config
from http_harness import Client
from test_tasks_http import body
from test_tasks_notifications import CONFIRM, answer, create, listen, next_note, notes_until

import mrtr_sansio as m
from helpers import tid
from mrtr_sansio.adapters import SubscriptionHub
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.adapters.stores import RedisTaskStore, SqliteTaskStore
from mrtr_sansio.tasks import TaskStatus, TaskStoreError
from test_task_stores_durable import record

pytestmark = pytest.mark.anyio

KEYS = m.sealing.RequestStateSecurity.ephemeral()


def _principal(asgi_scope: Any) -> str | None:
    for name, value in asgi_scope["headers"]:
        if name == b"x-test-principal":
            return str(value.decode())
    return None


@pytest.fixture(params=["sqlite", "redis"])
def two_stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """Two store instances on one SQLite file or one redis-server."""
    if request.param == "sqlite":
        path = tmp_path / "tasks.db"
        pair: tuple[Any, Any] = (SqliteTaskStore(path), SqliteTaskStore(path))
    else:
        url, _ = request.getfixturevalue("redis_server")
        pair = (RedisTaskStore.from_url(url), RedisTaskStore.from_url(url))
    yield pair
    for store in pair:
        store.close()


def app_on(store: Any, hub: SubscriptionHub | None = None) -> tuple[McpHttpApp, Everything]:
    everything = Everything()
    if hub is not None:
        everything.hub = hub
    config = server_config(task_store=store, request_state=KEYS)
    return McpHttpApp(everything.handle, config, principal=_principal), everything


@pytest.fixture
async def tg() -> AsyncIterator[anyio.abc.TaskGroup]:
    async with anyio.create_task_group() as group:
        yield group
        group.cancel_scope.cancel()


async def test_a_change_through_another_instance_is_pushed_to_a_stream(
    two_stores: tuple[Any, Any], tg: Any
) -> None:
    writer, _ = app_on(two_stores[0])
    quiet = SubscriptionHub(resync_interval=3600, fallback_poll=3600)
    reader, _ = app_on(two_stores[1], quiet)
    first, second = Client(writer, tg), Client(reader, tg)
    task_id = await create(first, 1, "confirm_delete", {"filename": "far.txt"})
    stream = await listen(second, 2, [task_id])
    ack = await next_note(stream)
    assert ack["params"]["notifications"] == {"taskIds": [task_id]}
    await notes_until(stream, "input_required")  # pushed, if the run was not there yet
    began = time.monotonic()
    update = {"taskId": task_id, "inputResponses": CONFIRM}
    await answer(first, body(3, "tasks/update", update))
    done = (await notes_until(stream, "completed"))[-1]
    took = time.monotonic() - began
    assert took < 0.8, f"the change took {took:.2f} s to arrive"
    assert done["result"]["content"][0]["text"] == "Deleted far.txt."
    stream.disconnect()


async def test_another_principals_task_on_a_shared_store_is_never_honored(
    two_stores: tuple[Any, Any], tg: Any
) -> None:
    writer, _ = app_on(two_stores[0])
    reader, _ = app_on(two_stores[1])
    first, second = Client(writer, tg), Client(reader, tg)
    a = {"x-test-principal": "a"}
    theirs = await create(first, 1, "confirm_delete", {"filename": "t"}, **a)
    stream = await listen(second, 2, [theirs], **{"x-test-principal": "b"})
    ack = await next_note(stream)
    assert ack["params"]["notifications"] == {"taskIds": []}
    await answer(first, body(3, "tasks/update", {"taskId": theirs, "inputResponses": CONFIRM}), **a)
    with anyio.move_on_after(0.5):
        note = await stream.response.next_message()
        pytest.fail(f"b was told of a's task: {note!r}")
    stream.disconnect()


# --- the stores themselves ------------------------------------------------------------------


def _collect() -> tuple[list[str | None], threading.Event, Callable[[str | None], None]]:
    seen: list[str | None] = []
    arrived = threading.Event()

    def changed(task_id: str | None) -> None:
        seen.append(task_id)
        arrived.set()

    return seen, arrived, changed


def test_each_write_by_one_store_is_told_to_the_other_stores_watchers(
    two_stores: tuple[Any, Any],
) -> None:
    one, other = two_stores
    seen, arrived, changed = _collect()
    stop = other.watch(changed)  # subscribed when it returns: no write after it is missed
    try:
        task = record(1)
        assert one.create(task)
        assert arrived.wait(2)
        arrived.clear()
        new = m.tasks.Task.from_record({**task.to_record(), "status": "completed", "revision": 1})
        assert one.replace(new, 0)
        assert arrived.wait(2)
        assert seen[:2] == [tid(1), tid(1)]
    finally:
        stop()
    seen.clear()
    assert one.create(record(2))
    time.sleep(0.6)
    assert seen == []  # stopped: nothing more is told


def test_a_batched_read_keeps_the_order_and_answers_none_for_absent_or_malformed_ids(
    two_stores: tuple[Any, Any],
) -> None:
    one, other = two_stores
    for n in range(1, 4):
        assert one.create(record(n))
    ids = [tid(3), tid(9), "not-an-id", tid(1), tid(3)]
    found = other.get_many(ids)
    assert [t.task_id if t is not None else None for t in found] == [
        tid(3),
        None,
        None,
        tid(1),
        tid(3),
    ]
    assert found[0] == record(3)
    assert other.get_many([]) == []


def test_a_batched_sqlite_read_spans_several_queries(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "many.db")
    try:
        for n in range(1200):
            assert store.create(record(n))
        found = store.get_many([tid(n) for n in range(1200)])
        assert [t.task_id for t in found if t is not None] == [tid(n) for n in range(1200)]
    finally:
        store.close()


def test_the_sqlite_change_feed_reads_and_stamps_through_its_index(tmp_path: Path) -> None:
    import sqlite3

    SqliteTaskStore(tmp_path / "i.db").close()
    with sqlite3.connect(tmp_path / "i.db") as db:
        stamp = db.execute("EXPLAIN QUERY PLAN SELECT COALESCE(MAX(seq), 0) FROM mrtr_tasks")
        feed = db.execute(
            "EXPLAIN QUERY PLAN SELECT task_id, seq FROM mrtr_tasks WHERE seq > 0 ORDER BY seq"
        )
        plans = [row[3] for row in [*stamp.fetchall(), *feed.fetchall()]]
    assert all("mrtr_tasks_seq" in plan for plan in plans), plans


def test_closing_a_store_stops_its_feed(two_stores: tuple[Any, Any]) -> None:
    one, other = two_stores
    seen, _, changed = _collect()
    other.watch(changed)
    feeds = [t for t in threading.enumerate() if t.name.endswith("TaskStore changes")]
    assert feeds
    other.close()
    assert one.create(record(4))
    time.sleep(0.7)
    assert seen == []
    assert not any(t.is_alive() for t in feeds)


def test_a_sqlite_delete_is_told_to_this_processs_watchers(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "d.db")
    seen, arrived, changed = _collect()
    stop = store.watch(changed)
    try:
        assert store.create(record(5))
        assert arrived.wait(2)
        arrived.clear()
        store.delete(tid(5))
        assert arrived.wait(2)
        assert seen == [tid(5), tid(5)]
    finally:
        stop()
        store.close()


def test_the_in_memory_store_tells_each_write_in_the_writers_thread() -> None:
    store = m.tasks.InMemoryTaskStore()
    seen, _, changed = _collect()
    stop = store.watch(changed)
    task = record(1, ttl_ms=10)
    store.create(task)
    store.replace(m.tasks.Task.from_record({**task.to_record(), "revision": 1}), 0)
    assert store.sweep(100.0, 10) == 1
    store.create(record(2))
    store.delete(tid(2))
    stop()
    store.create(record(3))
    assert seen == [tid(1), tid(1), tid(1), tid(2), tid(2)]
    assert TaskStatus.WORKING is record(1).status


def test_a_redis_watch_resyncs_after_losing_its_subscription(
    redis_server: tuple[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    import redis

    url, _ = redis_server
    store = RedisTaskStore.from_url(url)
    admin = redis.Redis.from_url(url)
    seen, arrived, changed = _collect()
    stop = store.watch(changed)
    try:
        assert admin.client_kill_filter(_type="pubsub") == 1  # the subscription is cut
        deadline = time.monotonic() + 5
        while None not in seen and time.monotonic() < deadline:
            time.sleep(0.05)
        assert None in seen  # "anything may have changed": listeners read everything again
        assert any("following changes failed" in r.getMessage() for r in caplog.records)
        arrived.clear()
        assert store.create(record(7))  # and the new subscription is told of writes
        assert arrived.wait(3)
        assert tid(7) in seen
    finally:
        stop()
        store.close()
        admin.close()


# --- a corrupt record -----------------------------------------------------------------------


def corrupt(store: Any, task_id: str) -> None:
    """Overwrite the stored record of ``task_id`` with text that is not JSON, behind the
    store's back (no change is told): in the SQLite file itself, or in redis-server."""
    if isinstance(store, SqliteTaskStore):
        with sqlite3.connect(store.path) as db:
            db.execute("UPDATE mrtr_tasks SET record = '{nope' WHERE task_id = ?", (task_id,))
    else:
        store._redis.hset(store._prefix + task_id, "rec", "{nope")


def test_a_corrupt_record_is_none_in_a_batch_and_the_others_are_read(
    two_stores: tuple[Any, Any], caplog: pytest.LogCaptureFixture
) -> None:
    one, other = two_stores
    assert one.create(record(1))
    assert one.create(record(2))
    corrupt(one, tid(1))
    caplog.set_level(logging.WARNING, "mrtr_sansio.adapters.stores")
    assert other.get_many([tid(1), tid(2)]) == [None, record(2)]
    assert any(tid(1) in r.getMessage() and "unreadable" in r.getMessage() for r in caplog.records)
    with pytest.raises(TaskStoreError, match="corrupt"):
        other.get(tid(1))  # read alone, it is the fault it is


async def test_a_corrupt_task_fails_alone_and_a_stream_on_both_goes_on(
    two_stores: tuple[Any, Any], tg: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """One corrupt row: its ``tasks/get`` is -32603, the other task reads, and a stream
    watching both, read again in one batch every resync, still gets the other's changes."""
    app, _ = app_on(two_stores[0], SubscriptionHub(resync_interval=0.05))
    client = Client(app, tg)
    bad = await create(client, 1, "confirm_delete", {"filename": "bad.txt"})
    good = await create(client, 2, "confirm_delete", {"filename": "good.txt"})
    early = await listen(client, 3, [bad, good])  # opened before the corruption
    await next_note(early)
    seen = {(await next_note(early))["params"]["taskId"] for _ in "ab"}
    assert seen == {bad, good}
    for task_id in (bad, good):  # both runs got as far as their question
        while (await answer(client, body(4, "tasks/get", {"taskId": task_id})))["result"][
            "status"
        ] != "input_required":
            await anyio.sleep(0.01)
    corrupt(two_stores[0], bad)
    caplog.set_level(logging.WARNING, "mrtr_sansio.adapters")
    failed = await answer(client, body(5, "tasks/get", {"taskId": bad}))
    assert failed["error"]["code"] == -32603
    assert "corrupt" in failed["error"]["message"]
    fine = await answer(client, body(6, "tasks/get", {"taskId": good}))
    assert fine["result"]["status"] == "input_required"
    late = await listen(client, 7, [bad, good])  # its first read is one batch of both
    ack = await next_note(late)
    assert ack["params"]["notifications"] == {"taskIds": [good]}
    assert (await next_note(late))["params"]["taskId"] == good
    await anyio.sleep(0.3)  # several resyncs of the early stream read both
    await answer(client, body(8, "tasks/update", {"taskId": good, "inputResponses": CONFIRM}))
    for stream in (early, late):
        done = (await notes_until(stream, "completed"))[-1]
        assert done["taskId"] == good
        stream.disconnect()
    assert not any("reading tasks failed" in r.getMessage() for r in caplog.records)
    assert any("unreadable" in r.getMessage() for r in caplog.records)
