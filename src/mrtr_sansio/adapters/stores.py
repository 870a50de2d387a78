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

Both are :class:`~mrtr_sansio.tasks.BatchTaskStore` (one query or round trip for many ids) and
:class:`~mrtr_sansio.tasks.WatchableTaskStore`: a ``subscriptions/listen`` stream learns of a
write by any process sharing the store (SQLite: a change feed read every ``watch_interval``
seconds by one thread; Redis: a pub/sub channel the write scripts publish on).

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
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from mrtr_sansio._extras import raise_missing_extra
from mrtr_sansio.tasks import Task, TaskChanged, TaskStoreError

from ._store_watch import ChangeFeed, Follower

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
    seq INTEGER
)
"""
_INDEXES = (
    "CREATE INDEX IF NOT EXISTS mrtr_tasks_owner_expiry ON mrtr_tasks(owner, expires_at)",
    "CREATE INDEX IF NOT EXISTS mrtr_tasks_expiry ON mrtr_tasks(expires_at) "
    "WHERE expires_at IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS mrtr_tasks_seq ON mrtr_tasks(seq)",
)
#: The change feed's stamp: one more than the latest, on each row written (indexed).
_NEXT_SEQ = "(SELECT COALESCE(MAX(seq), 0) + 1 FROM mrtr_tasks)"
#: Ids a batched read asks SQLite for at once (below every build's variable limit).
_BATCH = 500
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
    live count and the sweep use an index on each record's expiry, the change feed one on a
    sequence number stamped on each write (files written by an earlier version gain the
    columns when opened). While anything watches it (:meth:`watch`), one thread reads the feed every
    ``watch_interval`` seconds. :meth:`close` it when done.
    """

    #: Every call does disk IO: adapters run them in worker threads.
    blocking = True
    #: Records outlive the process: task leases are on by default (``TaskSettings``).
    durable = True

    def __init__(
        self, path: str | os.PathLike[str], *, timeout: float = 1.0, watch_interval: float = 0.1
    ) -> None:
        self._file = _SqliteFile(path, timeout, "task store")
        self.path = self._file.path
        self._watch_interval = watch_interval
        self._feed = ChangeFeed("SqliteTaskStore changes", self._follower)
        try:
            with self._file.guarded() as db:
                db.execute(_SCHEMA)
                _migrate(db)
                for index in _INDEXES:
                    db.execute(index)
        except TaskStoreError as exc:
            raise ValueError(f"task store: cannot set up {self.path}: {exc}") from None

    def close(self) -> None:
        """Stop the change feed and close the database connection."""
        self._feed.close()
        self._file.close()

    def create(self, task: Task) -> bool:
        """Insert the record; False when the id is taken (``INSERT OR IGNORE``)."""
        with self._file.guarded() as db:
            cursor = db.execute(
                "INSERT OR IGNORE INTO mrtr_tasks "
                "(task_id, owner, revision, record, expires_at, seq) "
                f"VALUES (?, ?, ?, ?, ?, {_NEXT_SEQ})",
                (task.task_id, task.owner, task.revision, _dumps(task), _expires_at(task)),
            )
        return cursor.rowcount == 1

    def get(self, task_id: str) -> Task | None:
        """The record under ``task_id``, or None."""
        with self._file.guarded() as db:
            row = db.execute(
                "SELECT record FROM mrtr_tasks WHERE task_id = ?", (task_id,)
            ).fetchone()
        return None if row is None else _loads(row[0])

    def get_many(self, task_ids: Sequence[str]) -> list[Task | None]:
        """The records under ``task_ids``, in order (one ``SELECT ... IN`` per 500 ids)."""
        found: dict[str, str] = {}
        for start in range(0, len(task_ids), _BATCH):
            chunk = list(task_ids[start : start + _BATCH])
            marks = ",".join("?" * len(chunk))
            with self._file.guarded() as db:
                rows = db.execute(
                    f"SELECT task_id, record FROM mrtr_tasks WHERE task_id IN ({marks})", chunk
                ).fetchall()
            found.update(rows)
        return [None if (raw := found.get(i)) is None else _loads(raw) for i in task_ids]

    def watch(self, changed: TaskChanged) -> Callable[[], None]:
        """Call ``changed(task_id)`` (in the feed's thread) after each write by any process on
        the file, within ``watch_interval`` seconds; deletions only for this process's (an
        expired task another process deletes is seen at the listener's next resync)."""
        return self._feed.watch(changed)

    def _follower(self) -> Follower:
        return _SqliteFollower(self._file, self._watch_interval)

    def replace(self, task: Task, revision: int) -> bool:
        """Update the record if its stored revision is ``revision`` (one ``UPDATE``)."""
        with self._file.guarded() as db:
            cursor = db.execute(
                "UPDATE mrtr_tasks SET revision = ?, record = ?, expires_at = ?, "
                f"seq = {_NEXT_SEQ} WHERE task_id = ? AND revision = ?",
                (task.revision, _dumps(task), _expires_at(task), task.task_id, revision),
            )
        return cursor.rowcount == 1

    def delete(self, task_id: str) -> None:
        """Delete the record, if any."""
        with self._file.guarded() as db:
            cursor = db.execute("DELETE FROM mrtr_tasks WHERE task_id = ?", (task_id,))
        if cursor.rowcount:
            self._feed.tell(task_id)

    def count(self, owner: str | None, now: float) -> int:
        """Live records whose owner is ``owner`` (one indexed ``COUNT``)."""
        with self._file.guarded() as db:
            (live,) = db.execute(
                "SELECT COUNT(*) FROM mrtr_tasks WHERE owner IS ? "
                "AND (expires_at IS NULL OR expires_at > ?)",
                (owner, now),
            ).fetchone()
        return int(live)

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
    """Add the columns a file written by an earlier version lacks: ``seq`` (the change feed's
    stamp, empty for rows not written since) and ``expires_at`` (filled from each record)."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(mrtr_tasks)")}
    if "seq" not in columns:
        db.execute("ALTER TABLE mrtr_tasks ADD COLUMN seq INTEGER")
    if "expires_at" in columns:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("ALTER TABLE mrtr_tasks ADD COLUMN expires_at REAL")
        for task_id, raw in db.execute("SELECT task_id, record FROM mrtr_tasks").fetchall():
            with contextlib.suppress(TaskStoreError):  # a corrupt row stays unexpiring
                expires = _expires_at(_loads(raw))
                db.execute(
                    "UPDATE mrtr_tasks SET expires_at = ? WHERE task_id = ?", (expires, task_id)
                )
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


class _SqliteFollower(Follower):
    """The SQLite change feed from now on: rows stamped after the latest stamp seen."""

    def __init__(self, file: _SqliteFile, interval: float) -> None:
        self._file = file
        self._interval = interval
        self._wait = threading.Event()  # never set: a sleep that is not time.sleep's
        with file.guarded() as db:
            (self._last,) = db.execute("SELECT COALESCE(MAX(seq), 0) FROM mrtr_tasks").fetchone()

    def poll(self) -> list[str]:
        self._wait.wait(self._interval)
        with self._file.guarded() as db:
            rows = db.execute(
                "SELECT task_id, seq FROM mrtr_tasks WHERE seq > ? ORDER BY seq LIMIT 1000",
                (self._last,),
            ).fetchall()
        if rows:
            self._last = rows[-1][1]
        return [task_id for task_id, _ in rows]

    def close(self) -> None:
        """Nothing to let go of: the feed reads through the store's connection."""


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

# KEYS: the task, its owner's set, the expiry index; ARGV: id, revision, record, owner,
# Redis expiry ms ('' for none), expiry score ('inf' for none), change channel.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'rev', ARGV[2], 'rec', ARGV[3], 'own', ARGV[4])
if ARGV[5] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1])
redis.call('PUBLISH', ARGV[7], ARGV[1])
return 1
"""
# KEYS[1] the task; ARGV: expected revision, new revision, record, change channel, id.
_REPLACE = """
if redis.call('HGET', KEYS[1], 'rev') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'rev', ARGV[2], 'rec', ARGV[3])
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
"""
# KEYS: the task, the expiry index; ARGV: id, owner-set prefix, change channel.
_DELETE = """
local owner = redis.call('HGET', KEYS[1], 'own')
if redis.call('DEL', KEYS[1]) == 1 then redis.call('PUBLISH', ARGV[3], ARGV[1]) end
redis.call('ZREM', KEYS[2], ARGV[1])
if owner then redis.call('ZREM', ARGV[2] .. owner, ARGV[1]) end
return 1
"""
# KEYS[1] the expiry index; ARGV: now, limit, task prefix, owner-set prefix, change channel.
# Deletes up to limit ids expired at now (their records, and their entries in their owners'
# sets). Every write script publishes the task's id on the change channel.
_SWEEP = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, id in ipairs(ids) do
  local owner = redis.call('HGET', ARGV[3] .. id, 'own')
  redis.call('DEL', ARGV[3] .. id)
  if owner then redis.call('ZREM', ARGV[4] .. owner, id) end
  redis.call('ZREM', KEYS[1], id)
  redis.call('PUBLISH', ARGV[5], id)
end
return #ids
"""
#: Milliseconds a record outlives its TTL in Redis (the machine deletes it when read expired).
_GRACE_MS = 60_000
_NO_OWNER = "\x00"  # the owner-set name of tasks whose principal is None


def _redis_errors() -> tuple[type[BaseException], ...]:
    import redis

    return (redis.RedisError, OSError)


class RedisTaskStore:
    """Task records in Redis: a hash per task under ``prefix`` (``rev``, ``rec``, ``own``), a
    sorted set of task ids by expiry per owner under ``prefix`` + ``"owners:"``'s own
    namespace, and one sorted set of every id by expiry (the sweep's index). Every write
    publishes the task's id on the channel ``prefix`` + ``"-changed"`` (colon stripped), which
    :meth:`watch` subscribes to: listeners in every process learn of it at once.

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
        #: The pub/sub channel each write publishes its task id on.
        self.channel = prefix.rstrip(":") + "-changed"
        self._errors = _redis_errors()
        self._feed = ChangeFeed(
            "RedisTaskStore changes", lambda: _RedisFollower(client, self.channel, self._errors)
        )
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
        """Stop the change subscription and close the client's connections."""
        self._feed.close()
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
        keys = [self._prefix + task.task_id, self._owners + owner, self._expiry]
        args = [task.task_id, task.revision, _dumps(task), owner, expiry, score, self.channel]
        with self._guarded():
            return int(self._create(keys=keys, args=args)) == 1

    def get(self, task_id: str) -> Task | None:
        """The record under ``task_id``, or None (at once for a malformed id)."""
        if not TASK_ID.fullmatch(task_id):
            return None
        with self._guarded():
            raw = self._redis.hget(self._prefix + task_id, "rec")
        return None if raw is None else _loads(raw)

    def get_many(self, task_ids: Sequence[str]) -> list[Task | None]:
        """The records under ``task_ids``, in order: one pipelined round trip for all the
        well-formed ids (a malformed one is None without asking)."""
        asked = [i for i in dict.fromkeys(task_ids) if TASK_ID.fullmatch(i)]
        found: dict[str, Any] = {}
        if asked:
            pipe = self._redis.pipeline(transaction=False)
            for task_id in asked:
                pipe.hget(self._prefix + task_id, "rec")
            with self._guarded():
                found = dict(zip(asked, pipe.execute(), strict=True))
        return [None if (raw := found.get(i)) is None else _loads(raw) for i in task_ids]

    def watch(self, changed: TaskChanged) -> Callable[[], None]:
        """Call ``changed(task_id)`` (in the subscriber's thread) for each write any process
        makes, as Redis delivers it; ``changed(None)`` after the subscription was lost and
        made again (writes meanwhile were missed)."""
        return self._feed.watch(changed)

    def replace(self, task: Task, revision: int) -> bool:
        """Write the record if its stored revision is ``revision`` (one script)."""
        if not TASK_ID.fullmatch(task.task_id):
            return False
        keys = [self._prefix + task.task_id]
        args = [revision, task.revision, _dumps(task), self.channel, task.task_id]
        with self._guarded():
            return int(self._replace(keys=keys, args=args)) == 1

    def delete(self, task_id: str) -> None:
        """Delete the record and its id from its owner's set and the index (one script)."""
        if not TASK_ID.fullmatch(task_id):
            return
        with self._guarded():
            self._delete(
                keys=[self._prefix + task_id, self._expiry],
                args=[task_id, self._owners, self.channel],
            )

    def count(self, owner: str | None, now: float) -> int:
        """Live ids in the owner's set: those expiring after ``now`` (one ``ZCOUNT``)."""
        name = self._owners + (_NO_OWNER if owner is None else owner)
        with self._guarded():
            return int(self._redis.zcount(name, f"({now!r}", "+inf"))

    def sweep(self, now: float, limit: int) -> int:
        """Delete up to ``limit`` records expired at ``now`` (one script over the index)."""
        with self._guarded():
            return int(
                self._sweep(
                    keys=[self._expiry],
                    args=[repr(now), limit, self._prefix, self._owners, self.channel],
                )
            )


class _RedisFollower(Follower):
    """A subscription to the change channel, confirmed before this returns (so no write
    after it is missed); :meth:`poll` waits up to half a second for published ids."""

    def __init__(self, client: Any, channel: str, errors: tuple[type[BaseException], ...]) -> None:
        self._errors = errors
        self._pubsub = client.pubsub()
        try:
            self._pubsub.subscribe(channel)
            confirmed = self._pubsub.get_message(timeout=2.0)
        except BaseException:
            self.close()
            raise
        if confirmed is None or confirmed.get("type") != "subscribe":
            self.close()
            raise TaskStoreError("The task store (Redis) did not confirm the subscription")

    def poll(self) -> list[str]:
        ids: list[str] = []
        message = self._pubsub.get_message(timeout=0.5)
        while message is not None and len(ids) < 1000:  # what arrived meanwhile, at once
            if message.get("type") == "message":
                data = message["data"]
                ids.append(data.decode() if isinstance(data, bytes) else str(data))
            message = self._pubsub.get_message(timeout=0.0)
        return ids

    def close(self) -> None:
        with contextlib.suppress(*self._errors):
            self._pubsub.close()


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
