"""Durable :class:`~mrtr_sansio.tasks.TaskStore` and
:class:`~mrtr_sansio.sealing.ReplayGuard` implementations (they do IO, so they live here and
not in the core).

:class:`SqliteTaskStore` keeps task records in one SQLite file through the standard library:
tasks survive a restart of the server, and several processes on one machine may share the
file (each write is one statement, so it is atomic; the compare-and-swap on ``revision`` keeps
concurrent writers from losing updates).

:class:`RedisTaskStore` keeps them in Redis (the ``tasks-redis`` extra), for server processes
on several machines behind a load balancer: any of them answers for any task. Each write is
one Lua script, so it is atomic; records expire in Redis a minute after their TTL.

:class:`SqliteReplayGuard` and :class:`RedisReplayGuard` make a sealed ``requestState``
single-use across every process sharing the file or the Redis.

Every call of these classes blocks (disk or network): the server adapters run them in worker
threads, never on the event loop (they say so with ``blocking = True``). A fault (a lock held
too long, Redis unreachable or too slow, a corrupt record) raises
:class:`~mrtr_sansio.tasks.TaskStoreError` with a message that names no path and no secret.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sqlite3
import stat
import threading
from collections.abc import Iterator
from typing import Any

from mrtr_sansio._extras import raise_missing_extra
from mrtr_sansio.tasks import Task, TaskStoreError

__all__ = ["RedisReplayGuard", "RedisTaskStore", "SqliteReplayGuard", "SqliteTaskStore"]

#: The task ids a server issues (``ServerConfig.token_hex(16)``: 128 random bits in hex).
TASK_ID = re.compile(r"[0-9a-f]{32}")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS mrtr_tasks (
    task_id TEXT PRIMARY KEY,
    owner TEXT,
    revision INTEGER NOT NULL,
    record TEXT NOT NULL,
    expires_at REAL,
    size INTEGER NOT NULL DEFAULT 0
)
"""
_INDEXES = (
    "CREATE INDEX IF NOT EXISTS mrtr_tasks_owner_expiry ON mrtr_tasks(owner, expires_at)",
    "CREATE INDEX IF NOT EXISTS mrtr_tasks_expiry ON mrtr_tasks(expires_at) "
    "WHERE expires_at IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS mrtr_tasks_owner_size ON mrtr_tasks(owner, size)",
)
_GUARD_SCHEMA = """
CREATE TABLE IF NOT EXISTS mrtr_redeemed (token_id BLOB PRIMARY KEY, expires REAL NOT NULL)
"""


def _expires_at(task: Task) -> float | None:
    """When ``task`` expires on its clock (None: never): the indexed column."""
    return None if task.ttl_ms is None else task.created_at + task.ttl_ms / 1000


class _SqliteFile:
    """One SQLite connection to a file this process created ``0600`` (or found), shared by
    threads under a lock; opening errors name the path, faults later raise
    :class:`TaskStoreError`."""

    def __init__(self, path: str | os.PathLike[str], timeout: float, what: str) -> None:
        self.path = os.fspath(path)
        self._what = what
        self._timeout = timeout
        self.lock = threading.Lock()
        directory = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"{what}: the directory of {self.path} does not exist")
        try:  # created owner-only; SQLite gives -wal and -shm the database file's mode
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        except OSError as exc:
            raise OSError(f"{what}: cannot open {self.path}: {exc.strerror}") from None
        if not stat.S_ISREG(os.stat(self.path).st_mode):
            raise ValueError(f"{what}: {self.path} is not a regular file")
        try:
            self.db = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            self.db.execute("PRAGMA journal_mode=WAL")
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"{what}: {self.path} is not an SQLite database ({exc})") from None

    @contextlib.contextmanager
    def guarded(self) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock; SQLite errors become :class:`TaskStoreError`."""
        with self.lock:
            try:
                yield self.db
            except sqlite3.OperationalError as exc:
                text = str(exc)
                if "locked" in text or "busy" in text:
                    raise TaskStoreError(
                        f"The {self._what} is locked by another writer "
                        f"(waited {self._timeout:g} s); try again"
                    ) from None
                raise TaskStoreError(f"The {self._what} failed: {text}") from None
            except sqlite3.Error as exc:
                raise TaskStoreError(f"The {self._what} failed: {exc}") from None

    def close(self) -> None:
        with self.lock:
            self.db.close()


class SqliteTaskStore:
    """Task records in the SQLite database at ``path``, created (``0600``, owner-only) when
    absent, with its ``-wal`` and ``-shm`` files.

    ``timeout`` is how long a call waits for another process's write to finish, in seconds,
    before it raises :class:`TaskStoreError` (the request that needed it gets -32603). A
    missing directory or a file that is not a database raises at once, naming the path. The
    live count and the sweep use an index on each record's expiry (files written by an
    earlier version gain the column when opened). :meth:`close` it when done.
    """

    #: Every call does disk IO: adapters run them in worker threads.
    blocking = True
    #: Records outlive the process: task leases are on by default (``TaskSettings``).
    durable = True

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 1.0) -> None:
        self._file = _SqliteFile(path, timeout, "task store")
        self.path = self._file.path
        try:
            with self._file.guarded() as db:
                db.execute(_SCHEMA)
                _migrate(db)
                for index in _INDEXES:
                    db.execute(index)
        except TaskStoreError as exc:
            raise ValueError(f"task store: cannot set up {self.path}: {exc}") from None

    def close(self) -> None:
        """Close the database connection."""
        self._file.close()

    def create(self, task: Task) -> bool:
        """Insert the record; False when the id is taken (``INSERT OR IGNORE``)."""
        with self._file.guarded() as db:
            cursor = db.execute(
                "INSERT OR IGNORE INTO mrtr_tasks "
                "(task_id, owner, revision, record, expires_at, size) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    task.task_id,
                    task.owner,
                    task.revision,
                    _dumps(task),
                    _expires_at(task),
                    task.size,
                ),
            )
        return cursor.rowcount == 1

    def get(self, task_id: str) -> Task | None:
        """The record under ``task_id``, or None."""
        with self._file.guarded() as db:
            row = db.execute(
                "SELECT record FROM mrtr_tasks WHERE task_id = ?", (task_id,)
            ).fetchone()
        return None if row is None else _loads(row[0])

    def replace(self, task: Task, revision: int) -> bool:
        """Update the record if its stored revision is ``revision`` (one ``UPDATE``)."""
        with self._file.guarded() as db:
            cursor = db.execute(
                "UPDATE mrtr_tasks SET revision = ?, record = ?, expires_at = ?, size = ? "
                "WHERE task_id = ? AND revision = ?",
                (task.revision, _dumps(task), _expires_at(task), task.size, task.task_id, revision),
            )
        return cursor.rowcount == 1

    def delete(self, task_id: str) -> None:
        """Delete the record, if any."""
        with self._file.guarded() as db:
            db.execute("DELETE FROM mrtr_tasks WHERE task_id = ?", (task_id,))

    def count(self, owner: str | None, now: float) -> int:
        """Live records whose owner is ``owner`` (one indexed ``COUNT``)."""
        with self._file.guarded() as db:
            (live,) = db.execute(
                "SELECT COUNT(*) FROM mrtr_tasks WHERE owner IS ? "
                "AND (expires_at IS NULL OR expires_at > ?)",
                (owner, now),
            ).fetchone()
        return int(live)

    def usage(self, owner: str | None) -> tuple[int, int]:
        """The summed sizes of ``owner``'s records and of all records in the file (one
        ``SELECT`` of two sums over the owner-and-size index: every process's writes count).
        Expired records count until they are swept or deleted, as in every store."""
        with self._file.guarded() as db:
            mine, total = db.execute(
                "SELECT (SELECT TOTAL(size) FROM mrtr_tasks WHERE owner IS ?), "
                "(SELECT TOTAL(size) FROM mrtr_tasks)",
                (owner,),
            ).fetchone()
        return int(mine), int(total)

    def sweep(self, now: float, limit: int) -> int:
        """Delete up to ``limit`` expired records (one indexed ``DELETE``)."""
        with self._file.guarded() as db:
            cursor = db.execute(
                "DELETE FROM mrtr_tasks WHERE task_id IN (SELECT task_id FROM mrtr_tasks "
                "WHERE expires_at IS NOT NULL AND expires_at <= ? LIMIT ?)",
                (now, limit),
            )
        return cursor.rowcount


def _migrate(db: sqlite3.Connection) -> None:
    """Add and fill ``expires_at`` and ``size`` in a file written before the columns existed."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(mrtr_tasks)")}
    missing = [
        c
        for c in ("expires_at REAL", "size INTEGER NOT NULL DEFAULT 0")
        if c.split()[0] not in columns
    ]
    if not missing:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        for column in missing:
            db.execute(f"ALTER TABLE mrtr_tasks ADD COLUMN {column}")
        for task_id, raw in db.execute("SELECT task_id, record FROM mrtr_tasks").fetchall():
            with contextlib.suppress(TaskStoreError):  # a corrupt row stays unexpiring, size 0
                task = _loads(raw)
                db.execute(
                    "UPDATE mrtr_tasks SET expires_at = ?, size = ? WHERE task_id = ?",
                    (_expires_at(task), task.size, task_id),
                )
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


class SqliteReplayGuard:
    """A :class:`~mrtr_sansio.sealing.ReplayGuard` in the SQLite file at ``path`` (``0600``):
    a sealed ``requestState`` is accepted once by all the processes sharing the file.

    Each redemption is one ``INSERT``; expired ids are deleted as new ones arrive (at most
    ``sweep`` per call). A fault (a lock held over ``timeout`` seconds) raises
    :class:`TaskStoreError`: the request is refused, never accepted twice.
    """

    blocking = True

    def __init__(
        self, path: str | os.PathLike[str], *, timeout: float = 1.0, sweep: int = 100
    ) -> None:
        self._file = _SqliteFile(path, timeout, "replay guard")
        self.path = self._file.path
        self._sweep = sweep
        with self._file.guarded() as db:
            db.execute(_GUARD_SCHEMA)
            db.execute("CREATE INDEX IF NOT EXISTS mrtr_redeemed_expiry ON mrtr_redeemed(expires)")

    def close(self) -> None:
        """Close the database connection."""
        self._file.close()

    def consume(self, token_id: bytes, expires: float, now: float) -> bool:
        """True the first time ``token_id`` is seen by any process on the file."""
        with self._file.guarded() as db:
            db.execute(
                "DELETE FROM mrtr_redeemed WHERE token_id IN (SELECT token_id FROM "
                "mrtr_redeemed WHERE expires <= ? LIMIT ?)",
                (now, self._sweep),
            )
            cursor = db.execute(
                "INSERT OR IGNORE INTO mrtr_redeemed (token_id, expires) VALUES (?, ?)",
                (bytes(token_id), expires),
            )
        return cursor.rowcount == 1


def _dumps(task: Task) -> str:
    return json.dumps(task.to_record(), separators=(",", ":"), ensure_ascii=False)


def _loads(raw: str | bytes) -> Task:
    try:
        return Task.from_record(json.loads(raw))
    except (ValueError, TypeError, KeyError) as exc:
        raise TaskStoreError(f"A task record is corrupt ({type(exc).__name__})") from None


# --- Redis ------------------------------------------------------------------------------------

# Bytes: a hash ``meta`` of id -> "size:owner" that never expires (a record's own key does,
# a minute after its TTL, without running any script), a hash of bytes per owner and a total.
# Every write, delete and sweep updates the three in the script that writes the record, and
# the sweep releases the bytes of a record Redis already expired: ``meta`` still names them.
_RELEASE = """
local function release(meta, bytes, total, id)
  local m = redis.call('HGET', meta, id)
  if not m then return nil end
  local at = string.find(m, ':', 1, true)
  local size, owner = tonumber(string.sub(m, 1, at - 1)), string.sub(m, at + 1)
  redis.call('HDEL', meta, id)
  -- 0 - size, not -size: Lua writes -0 as "-0", which Redis does not take for an integer
  if redis.call('HINCRBY', bytes, owner, 0 - size) <= 0 then redis.call('HDEL', bytes, owner) end
  if redis.call('DECRBY', total, size) <= 0 then redis.call('DEL', total) end
  return owner
end
"""
# KEYS: the task, its owner's set, the expiry index, meta, bytes, total; ARGV: id, revision,
# record, owner, Redis expiry ms ('' for none), expiry score ('inf' for none), size.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('HEXISTS', KEYS[4], ARGV[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'rev', ARGV[2], 'rec', ARGV[3], 'own', ARGV[4])
if ARGV[5] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1])
redis.call('HSET', KEYS[4], ARGV[1], ARGV[7] .. ':' .. ARGV[4])
redis.call('HINCRBY', KEYS[5], ARGV[4], ARGV[7])
redis.call('INCRBY', KEYS[6], ARGV[7])
return 1
"""
# KEYS: the task, meta, bytes, total; ARGV: expected revision, new revision, record, id, size.
_REPLACE = (
    _RELEASE
    + """
if redis.call('HGET', KEYS[1], 'rev') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'rev', ARGV[2], 'rec', ARGV[3])
local owner = release(KEYS[2], KEYS[3], KEYS[4], ARGV[4])
if owner then
  redis.call('HSET', KEYS[2], ARGV[4], ARGV[5] .. ':' .. owner)
  redis.call('HINCRBY', KEYS[3], owner, ARGV[5])
  redis.call('INCRBY', KEYS[4], ARGV[5])
end
return 1
"""
)
# KEYS: the task, the expiry index, meta, bytes, total; ARGV: id, owner-set prefix.
_DELETE = (
    _RELEASE
    + """
local owner = release(KEYS[3], KEYS[4], KEYS[5], ARGV[1]) or redis.call('HGET', KEYS[1], 'own')
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if owner then redis.call('ZREM', ARGV[2] .. owner, ARGV[1]) end
return 1
"""
)
# KEYS: the expiry index, meta, bytes, total; ARGV: now, limit, task prefix, owner-set
# prefix. Deletes up to limit ids expired at now (their records, their entries in their
# owners' sets, their bytes).
_SWEEP = (
    _RELEASE
    + """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, id in ipairs(ids) do
  local owner = release(KEYS[2], KEYS[3], KEYS[4], id) or redis.call('HGET', ARGV[3] .. id, 'own')
  redis.call('DEL', ARGV[3] .. id)
  if owner then redis.call('ZREM', ARGV[4] .. owner, id) end
  redis.call('ZREM', KEYS[1], id)
end
return #ids
"""
)
#: Milliseconds a record outlives its TTL in Redis (the machine deletes it when read expired).
_GRACE_MS = 60_000
_NO_OWNER = "\x00"  # the owner-set name of tasks whose principal is None


def _redis_errors() -> tuple[type[BaseException], ...]:
    import redis

    return (redis.RedisError, OSError)


class RedisTaskStore:
    """Task records in Redis: a hash per task under ``prefix`` (``rev``, ``rec``, ``own``), a
    sorted set of task ids by expiry per owner under ``prefix`` + ``"owners:"``'s own
    namespace, one sorted set of every id by expiry (the sweep's index), and the bytes held
    (a size per id that outlives the record's own expiry, a sum per owner and a total, kept
    by the same scripts that write and delete records: :meth:`usage` reads two counters).

    ``client`` is a synchronous ``redis.Redis``; build it with :meth:`from_url`, which sets
    short timeouts. Only ids of the form the server issues (32 hex digits) reach Redis: any
    other is unknown without a round trip. A Redis that is down or slower than its timeouts
    raises :class:`TaskStoreError`.
    """

    #: Every call is a network round trip: adapters run them in worker threads.
    blocking = True
    #: Records outlive the process: task leases are on by default (``TaskSettings``).
    durable = True

    def __init__(self, client: Any, *, prefix: str = "mrtr:task:") -> None:
        self._redis = client
        self._prefix = prefix
        # Not below the task prefix: no task id (hex digits) can name an owner set.
        self._owners = prefix.rstrip(":") + "-owner:"
        self._expiry = prefix.rstrip(":") + "-expiry"
        self._meta = prefix.rstrip(":") + "-meta"
        self._bytes = prefix.rstrip(":") + "-bytes"
        self._total = prefix.rstrip(":") + "-bytes-total"
        self._errors = _redis_errors()
        self._create = client.register_script(_CREATE)
        self._replace = client.register_script(_REPLACE)
        self._delete = client.register_script(_DELETE)
        self._sweep = client.register_script(_SWEEP)

    @classmethod
    def from_url(
        cls, url: str, *, prefix: str = "mrtr:task:", timeout: float = 1.0
    ) -> RedisTaskStore:
        """A store on the Redis at ``url`` (``redis://host:port/db``); ``timeout`` bounds
        connecting and each reply, in seconds."""
        return cls(_redis_client(url, timeout, "RedisTaskStore"), prefix=prefix)

    def close(self) -> None:
        """Close the client's connections."""
        self._redis.close()

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[None]:
        try:
            yield
        except self._errors as exc:
            raise TaskStoreError(
                f"The task store (Redis) is unreachable or too slow ({type(exc).__name__})"
            ) from None

    def create(self, task: Task) -> bool:
        """Add the record, its id to the owner's set and to the expiry index unless the id
        exists (one script). Raises ValueError for an id the server would not issue."""
        if not TASK_ID.fullmatch(task.task_id):
            raise ValueError("RedisTaskStore: task ids must be 32 lowercase hex digits")
        owner = _NO_OWNER if task.owner is None else task.owner
        expiry = "" if task.ttl_ms is None else str(task.ttl_ms + _GRACE_MS)
        expires = _expires_at(task)
        score = "inf" if expires is None else repr(expires)
        keys = [self._prefix + task.task_id, self._owners + owner, self._expiry, *self._metering]
        args = [task.task_id, task.revision, _dumps(task), owner, expiry, score, task.size]
        with self._guarded():
            return int(self._create(keys=keys, args=args)) == 1

    def get(self, task_id: str) -> Task | None:
        """The record under ``task_id``, or None (at once for a malformed id)."""
        if not TASK_ID.fullmatch(task_id):
            return None
        with self._guarded():
            raw = self._redis.hget(self._prefix + task_id, "rec")
        return None if raw is None else _loads(raw)

    def replace(self, task: Task, revision: int) -> bool:
        """Write the record if its stored revision is ``revision`` (one script)."""
        if not TASK_ID.fullmatch(task.task_id):
            return False
        keys = [self._prefix + task.task_id, *self._metering]
        args = [revision, task.revision, _dumps(task), task.task_id, task.size]
        with self._guarded():
            return int(self._replace(keys=keys, args=args)) == 1

    def delete(self, task_id: str) -> None:
        """Delete the record and its id from its owner's set and the index (one script)."""
        if not TASK_ID.fullmatch(task_id):
            return
        with self._guarded():
            self._delete(
                keys=[self._prefix + task_id, self._expiry, *self._metering],
                args=[task_id, self._owners],
            )

    def count(self, owner: str | None, now: float) -> int:
        """Live ids in the owner's set: those expiring after ``now`` (one ``ZCOUNT``)."""
        name = self._owners + (_NO_OWNER if owner is None else owner)
        with self._guarded():
            return int(self._redis.zcount(name, f"({now!r}", "+inf"))

    @property
    def _metering(self) -> list[str]:
        return [self._meta, self._bytes, self._total]

    def usage(self, owner: str | None) -> tuple[int, int]:
        """The bytes of ``owner``'s records and of all records, from the counters every
        write keeps (one round trip). A record Redis expired counts until it is swept."""
        name = _NO_OWNER if owner is None else owner
        with self._guarded():
            mine, total = (
                self._redis.pipeline(transaction=False)
                .hget(self._bytes, name)
                .get(self._total)
                .execute()
            )
        return int(mine or 0), int(total or 0)

    def sweep(self, now: float, limit: int) -> int:
        """Delete up to ``limit`` records expired at ``now`` (one script over the index)."""
        with self._guarded():
            return int(
                self._sweep(
                    keys=[self._expiry, *self._metering],
                    args=[repr(now), limit, self._prefix, self._owners],
                )
            )


class RedisReplayGuard:
    """A :class:`~mrtr_sansio.sealing.ReplayGuard` in Redis: each redemption is one
    ``SET NX PX`` under ``prefix``, expiring with the token, so a sealed ``requestState`` is
    accepted once by all the processes sharing the Redis. A fault raises
    :class:`TaskStoreError`: the request is refused, never accepted twice."""

    blocking = True

    def __init__(self, client: Any, *, prefix: str = "mrtr:redeemed:") -> None:
        self._redis = client
        self._prefix = prefix.encode()
        self._errors = _redis_errors()

    @classmethod
    def from_url(
        cls, url: str, *, prefix: str = "mrtr:redeemed:", timeout: float = 1.0
    ) -> RedisReplayGuard:
        """A guard on the Redis at ``url``; ``timeout`` bounds connecting and each reply."""
        return cls(_redis_client(url, timeout, "RedisReplayGuard"), prefix=prefix)

    def close(self) -> None:
        """Close the client's connections."""
        self._redis.close()

    def consume(self, token_id: bytes, expires: float, now: float) -> bool:
        """True the first time ``token_id`` is seen by any process on this Redis."""
        ttl_ms = max(1, math.ceil((expires - now) * 1000))
        try:
            done = self._redis.set(self._prefix + bytes(token_id), b"1", nx=True, px=ttl_ms)
        except self._errors as exc:
            raise TaskStoreError(
                f"The replay guard (Redis) is unreachable or too slow ({type(exc).__name__})"
            ) from None
        return bool(done)


def _redis_client(url: str, timeout: float, what: str) -> Any:
    try:
        import redis
    except ModuleNotFoundError as exc:
        raise_missing_extra(exc, what, "tasks-redis")
    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
