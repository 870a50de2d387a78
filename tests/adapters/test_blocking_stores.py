"""Which task stores make the adapters run store calls in worker threads: a store's own
``blocking`` attribute decides first, a subclass of the in-memory store included."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import mrtr_sansio as m
from mrtr_sansio.adapters._tasks import StoreCalls, blocking_stores
from mrtr_sansio.adapters.stores import SqliteTaskStore
from mrtr_sansio.tasks import InMemoryTaskStore, TaskSettings, TaskStore


class BlockingMemory(InMemoryTaskStore):
    """An in-memory store whose calls block (e.g. it writes a journal on every change)."""

    blocking = True


class QuietMemory(InMemoryTaskStore):
    """A subclass that says nothing: it is the in-memory store, non-blocking."""


class NonBlockingSqlite(SqliteTaskStore):
    blocking = False


def _config(store: TaskStore) -> m.ServerConfig:
    return m.ServerConfig(tasks=TaskSettings(store=store, tools={"work": "optional"}))


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda path: InMemoryTaskStore(), False),
        (lambda path: QuietMemory(), False),
        (lambda path: BlockingMemory(), True),
        (lambda path: SqliteTaskStore(path / "t.db"), True),
        (lambda path: NonBlockingSqlite(path / "t.db"), False),
    ],
    ids=["memory", "memory-subclass", "memory-subclass-blocking", "sqlite", "sqlite-says-no"],
)
def test_a_store_saying_blocking_is_believed(
    make: Callable[[Path], TaskStore], expected: bool, tmp_path: Path
) -> None:
    config = _config(make(tmp_path))
    assert blocking_stores(config) is expected
    assert StoreCalls(config, 1).blocking is expected


def test_no_tasks_no_guard_never_blocks() -> None:
    assert blocking_stores(m.ServerConfig()) is False
