"""Durable :class:`~mrtr_sansio.tasks.TaskStore` implementations (they do IO, so they live
here and not in the core).

:class:`SqliteTaskStore` keeps task records in one SQLite file through the standard library:
tasks survive a restart of the server, and several processes on one machine may share the
file (each write is one statement, so it is atomic; the compare-and-swap on ``revision`` keeps
concurrent writers from losing updates).

:class:`RedisTaskStore` keeps them in Redis (the ``tasks-redis`` extra), for server processes
on several machines behind a load balancer: any of them answers for any task. Each write is
one Lua script, so it is atomic; records expire in Redis a minute after their TTL.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from typing import Any

from mrtr_sansio._extras import raise_missing_extra
from mrtr_sansio.tasks import Task

__all__ = ["RedisTaskStore", "SqliteTaskStore"]

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

    #: Records outlive the process: task leases are on by default (``TaskSettings``).
    durable = True

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
        """Insert the record; False when the id is taken (``INSERT OR IGNORE``)."""
        with self._lock:
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO mrtr_tasks (task_id, owner, revision, record) "
                "VALUES (?, ?, ?, ?)",
                (task.task_id, task.owner, task.revision, _dumps(task)),
            )
        return cursor.rowcount == 1

    def get(self, task_id: str) -> Task | None:
        """The record under ``task_id``, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT record FROM mrtr_tasks WHERE task_id = ?", (task_id,)
            ).fetchone()
        return None if row is None else Task.from_record(json.loads(row[0]))

    def replace(self, task: Task, revision: int) -> bool:
        """Update the record if its stored revision is ``revision`` (one ``UPDATE``)."""
        with self._lock:
            cursor = self._db.execute(
                "UPDATE mrtr_tasks SET revision = ?, record = ? WHERE task_id = ? AND revision = ?",
                (task.revision, _dumps(task), task.task_id, revision),
            )
        return cursor.rowcount == 1

    def delete(self, task_id: str) -> None:
        """Delete the record, if any."""
        with self._lock:
            self._db.execute("DELETE FROM mrtr_tasks WHERE task_id = ?", (task_id,))

    def count(self, owner: str | None, now: float) -> int:
        """Live records whose owner is ``owner`` (the owner's rows, read and checked)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT record FROM mrtr_tasks WHERE owner IS ?", (owner,)
            ).fetchall()
        return sum(1 for (raw,) in rows if not Task.from_record(json.loads(raw)).expired(now))

    def sweep(self, now: float, limit: int) -> int:
        """Delete up to ``limit`` expired records."""
        with self._lock:
            rows = self._db.execute("SELECT task_id, record FROM mrtr_tasks").fetchall()
            gone = [tid for tid, raw in rows if Task.from_record(json.loads(raw)).expired(now)]
            for task_id in gone[:limit]:
                self._db.execute("DELETE FROM mrtr_tasks WHERE task_id = ?", (task_id,))
        return len(gone[:limit])


def _dumps(task: Task) -> str:
    return json.dumps(task.to_record(), separators=(",", ":"), ensure_ascii=False)


# --- Redis ------------------------------------------------------------------------------------

# KEYS[1] the task, KEYS[2] its owner's set; ARGV: id, revision, record, owner, expiry ms.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'rev', ARGV[2], 'rec', ARGV[3], 'own', ARGV[4])
if ARGV[5] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
redis.call('SADD', KEYS[2], ARGV[1])
return 1
"""
# KEYS[1] the task; ARGV: expected revision, new revision, record.
_REPLACE = """
if redis.call('HGET', KEYS[1], 'rev') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'rev', ARGV[2], 'rec', ARGV[3])
return 1
"""
# KEYS[1] the task, KEYS[2] the owner-set prefix; ARGV: id.
_DELETE = """
local owner = redis.call('HGET', KEYS[1], 'own')
redis.call('DEL', KEYS[1])
if owner then redis.call('SREM', KEYS[2] .. owner, ARGV[1]) end
return 1
"""
# KEYS[1] the owner's set; ARGV: the task key prefix. Ids whose record expired are dropped.
_COUNT = """
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('EXISTS', ARGV[1] .. id) == 0 then redis.call('SREM', KEYS[1], id) end
end
return redis.call('SCARD', KEYS[1])
"""
#: Milliseconds a record outlives its TTL in Redis (the machine deletes it when read expired).
_GRACE_MS = 60_000
_NO_OWNER = "\x00"  # the owner-set name of tasks whose principal is None


class RedisTaskStore:
    """Task records in Redis, under ``prefix``: a hash per task (``rev``, ``rec``, ``own``)
    and a set of task ids per owner.

    ``client`` is a synchronous ``redis.Redis`` (``redis.Redis.from_url(url)``); its calls
    block the event loop for one round trip each, which is short on a nearby server.
    """

    #: Records outlive the process: task leases are on by default (``TaskSettings``).
    durable = True

    def __init__(self, client: Any, *, prefix: str = "mrtr:task:") -> None:
        self._redis = client
        self._prefix = prefix
        self._owners = prefix + "owner:"
        self._create = client.register_script(_CREATE)
        self._replace = client.register_script(_REPLACE)
        self._delete = client.register_script(_DELETE)
        self._count = client.register_script(_COUNT)

    @classmethod
    def from_url(cls, url: str, *, prefix: str = "mrtr:task:") -> RedisTaskStore:
        """A store on the Redis at ``url`` (``redis://host:port/db``)."""
        try:
            import redis
        except ModuleNotFoundError as exc:
            raise_missing_extra(exc, "RedisTaskStore", "tasks-redis")
        return cls(redis.Redis.from_url(url), prefix=prefix)

    def close(self) -> None:
        """Close the client's connections."""
        self._redis.close()

    def create(self, task: Task) -> bool:
        """Add the record and its id to the owner's set unless the id exists (one script)."""
        owner = _NO_OWNER if task.owner is None else task.owner
        expiry = "" if task.ttl_ms is None else str(task.ttl_ms + _GRACE_MS)
        keys = [self._prefix + task.task_id, self._owners + owner]
        args = [task.task_id, task.revision, _dumps(task), owner, expiry]
        return int(self._create(keys=keys, args=args)) == 1

    def get(self, task_id: str) -> Task | None:
        """The record under ``task_id``, or None."""
        raw = self._redis.hget(self._prefix + task_id, "rec")
        return None if raw is None else Task.from_record(json.loads(raw))

    def replace(self, task: Task, revision: int) -> bool:
        """Write the record if its stored revision is ``revision`` (one script)."""
        keys = [self._prefix + task.task_id]
        args = [revision, task.revision, _dumps(task)]
        return int(self._replace(keys=keys, args=args)) == 1

    def delete(self, task_id: str) -> None:
        """Delete the record and its id from its owner's set (one script)."""
        self._delete(keys=[self._prefix + task_id, self._owners], args=[task_id])

    def count(self, owner: str | None, now: float) -> int:
        """Live ids in the owner's set (dropping those whose record Redis expired)."""
        name = self._owners + (_NO_OWNER if owner is None else owner)
        self._count(keys=[name], args=[self._prefix])
        live = 0
        for member in self._redis.smembers(name):
            task = self.get(member.decode() if isinstance(member, bytes) else member)
            live += task is not None and not task.expired(now)
        return live

    def sweep(self, now: float, limit: int) -> int:
        """Nothing to do: Redis expires records itself (``PEXPIRE`` at create)."""
        return 0
