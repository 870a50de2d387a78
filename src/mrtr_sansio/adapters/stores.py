"""Durable :class:`~mrtr_sansio.tasks.TaskStore` implementations (they do IO, so they live
here and not in the core).

:class:`SqliteTaskStore` keeps task records in one SQLite file through the standard library:
tasks survive a restart of the server, and several processes on one machine may share the
file (each write is one statement, so it is atomic; the compare-and-swap on ``revision`` keeps
concurrent writers from losing updates).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading

from mrtr_sansio.tasks import Task

__all__ = ["SqliteTaskStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS mrtr_tasks (
    task_id TEXT PRIMARY KEY,
    owner TEXT,
    revision INTEGER NOT NULL,
    record TEXT NOT NULL
)
"""


class SqliteTaskStore:
    """Task records in the SQLite database at ``path`` (created when absent).

    ``timeout`` is how long a write waits for another process's write to finish, in seconds.
    The connection is shared by the threads of this process under a lock; :meth:`close` it
    when done.
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 5.0) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            self.path, timeout=timeout, isolation_level=None, check_same_thread=False
        )
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(_SCHEMA)
            self._db.execute("CREATE INDEX IF NOT EXISTS mrtr_tasks_owner ON mrtr_tasks(owner)")

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()

    def create(self, task: Task) -> bool:
        with self._lock:
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO mrtr_tasks (task_id, owner, revision, record) "
                "VALUES (?, ?, ?, ?)",
                (task.task_id, task.owner, task.revision, _dumps(task)),
            )
        return cursor.rowcount == 1

    def get(self, task_id: str) -> Task | None:
        with self._lock:
            row = self._db.execute(
                "SELECT record FROM mrtr_tasks WHERE task_id = ?", (task_id,)
            ).fetchone()
        return None if row is None else Task.from_record(json.loads(row[0]))

    def replace(self, task: Task, revision: int) -> bool:
        with self._lock:
            cursor = self._db.execute(
                "UPDATE mrtr_tasks SET revision = ?, record = ? WHERE task_id = ? AND revision = ?",
                (task.revision, _dumps(task), task.task_id, revision),
            )
        return cursor.rowcount == 1

    def delete(self, task_id: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM mrtr_tasks WHERE task_id = ?", (task_id,))

    def count(self, owner: str | None) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT COUNT(*) FROM mrtr_tasks WHERE owner IS ?", (owner,)
            ).fetchone()
        return int(row[0])


def _dumps(task: Task) -> str:
    return json.dumps(task.to_record(), separators=(",", ":"), ensure_ascii=False)
