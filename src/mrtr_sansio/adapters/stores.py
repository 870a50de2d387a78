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

Both task stores are :class:`~mrtr_sansio.tasks.BatchTaskStore` (one query or round trip for
many ids) and :class:`~mrtr_sansio.tasks.WatchableTaskStore`: a ``subscriptions/listen`` stream
learns of a write by any process sharing the store (SQLite: a change feed read every
``watch_interval`` seconds by one thread; Redis: a pub/sub channel the write scripts publish on).

Every call of these classes blocks (disk or network): the server adapters run them in worker
threads, never on the event loop (they say so with ``blocking = True``). A fault (a lock held
too long, Redis unreachable or too slow, a corrupt record) raises
:class:`~mrtr_sansio.tasks.TaskStoreError` with a message that names no path and no secret.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterator, Sequence

from mrtr_sansio.sealing import RecordEncryption
from mrtr_sansio.tasks import StoredParams, Task, TaskChanged, TaskStoreError

from ._records import (
    changed_params,
    dumps,
    expires_at,
    loads,
    loads_in_batch,
    params_in,
    params_out,
)
from ._redis_stores import RedisReplayGuard, RedisTaskStore
from ._store_watch import ChangeFeed, Follower

__all__ = ["RedisReplayGuard", "RedisTaskStore", "SqliteReplayGuard", "SqliteTaskStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS mrtr_tasks (
    task_id TEXT PRIMARY KEY,
    owner TEXT,
    revision INTEGER NOT NULL,
    record TEXT NOT NULL,
    expires_at REAL,
    size INTEGER NOT NULL DEFAULT 0,
    seq INTEGER,
    params TEXT
)
"""
_INDEXES = (
    "CREATE INDEX IF NOT EXISTS mrtr_tasks_owner_expiry ON mrtr_tasks(owner, expires_at)",
    "CREATE INDEX IF NOT EXISTS mrtr_tasks_expiry ON mrtr_tasks(expires_at) "
    "WHERE expires_at IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS mrtr_tasks_owner_size ON mrtr_tasks(owner, size)",
    "CREATE INDEX IF NOT EXISTS mrtr_tasks_seq ON mrtr_tasks(seq)",
)
#: The change feed's stamp: one more than the latest, on each row written (indexed).
_NEXT_SEQ = "(SELECT COALESCE(MAX(seq), 0) + 1 FROM mrtr_tasks)"
#: Ids a batched read asks SQLite for at once (below every build's variable limit).
_BATCH = 500
_GUARD_SCHEMA = """
CREATE TABLE IF NOT EXISTS mrtr_redeemed (token_id BLOB PRIMARY KEY, expires REAL NOT NULL)
"""


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
    before it raises :class:`TaskStoreError` (the request that needed it gets -32603). A missing
    directory or a file that is not a database raises at once, naming the path. The live count
    and the sweep use an index on each record's expiry, the change feed one on a sequence number
    stamped on each write. A task's params have a column of their own, read only when a run
    needs them (:class:`~mrtr_sansio.tasks.StoredParams`), so that a read of the record costs
    the same whatever the creating request carried. Files written by an earlier version gain the
    columns when opened; a record that still holds its params is read as it is and loses them to
    the column at its next write. While anything watches it (:meth:`watch`), one thread reads
    the feed every ``watch_interval`` seconds. :meth:`close` it when done.

    With ``encryption`` (a :class:`~mrtr_sansio.sealing.RecordEncryption`) the ``record`` and
    ``params`` columns hold ciphertexts; the id, owner, revision, expiry, size and change
    stamp, which the queries use, stay in clear. Records written in clear before are read as
    they are and encrypted at their next write (params: when the task ends). Assign
    another to :attr:`encryption` to rotate keys while the store is in use.
    """

    #: Every call does disk IO: adapters run them in worker threads.
    blocking = True
    #: Records outlive the process: task leases are on by default (``TaskSettings``).
    durable = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 1.0,
        watch_interval: float = 0.1,
        encryption: RecordEncryption | None = None,
    ) -> None:
        if encryption is not None and not isinstance(encryption, RecordEncryption):
            raise TypeError("encryption must be a RecordEncryption (mrtr_sansio.sealing) or None")
        self.encryption = encryption
        self._file = _SqliteFile(path, timeout, "task store")
        self.path = self._file.path
        self._watch_interval = watch_interval
        self._feed = ChangeFeed("SqliteTaskStore changes", self._follower)
        try:
            with self._file.guarded() as db:
                db.execute(_SCHEMA)
                _migrate(db, self._kept, encryption)
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
                "(task_id, owner, revision, record, expires_at, size, params, seq) "
                f"VALUES (?, ?, ?, ?, ?, ?, ?, {_NEXT_SEQ})",
                (
                    task.task_id,
                    task.owner,
                    task.revision,
                    dumps(task, self.encryption),
                    expires_at(task),
                    task.size,
                    params_out(task.task_id, task.params_json, self.encryption),
                ),
            )
        return cursor.rowcount == 1

    def get(self, task_id: str) -> Task | None:
        """The record under ``task_id``, or None (its params unread)."""
        with self._file.guarded() as db:
            row = db.execute(
                "SELECT record FROM mrtr_tasks WHERE task_id = ?", (task_id,)
            ).fetchone()
        return None if row is None else loads(task_id, row[0], self._kept(task_id), self.encryption)

    def _kept(self, task_id: str) -> Callable[[int], StoredParams]:
        return lambda size: StoredParams(size, lambda: self._params(task_id), self)

    def _params(self, task_id: str) -> str:
        """The params column of ``task_id`` (what its :class:`StoredParams` loads)."""
        with self._file.guarded() as db:
            row = db.execute(
                "SELECT params FROM mrtr_tasks WHERE task_id = ?", (task_id,)
            ).fetchone()
        if row is None or row[0] is None:
            raise TaskStoreError("The task's params are gone (the task was deleted)")
        return params_in(task_id, row[0], self.encryption)

    def get_many(self, task_ids: Sequence[str]) -> list[Task | None]:
        """The records under ``task_ids``, in order (one ``SELECT ... IN`` per 500 ids); a
        corrupt one is None, logged, so that it fails only its own task."""
        found: dict[str, str | bytes] = {}
        for start in range(0, len(task_ids), _BATCH):
            chunk = list(task_ids[start : start + _BATCH])
            marks = ",".join("?" * len(chunk))
            with self._file.guarded() as db:
                rows = db.execute(
                    f"SELECT task_id, record FROM mrtr_tasks WHERE task_id IN ({marks})", chunk
                ).fetchall()
            found.update(rows)
        return [loads_in_batch(i, found.get(i), self._kept(i), self.encryption) for i in task_ids]

    def watch(self, changed: TaskChanged) -> Callable[[], None]:
        """Call ``changed(task_id)`` (in the feed's thread) after each write by any process on
        the file, within ``watch_interval`` seconds; deletions only for this process's (an
        expired task another process deletes is seen at the listener's next resync)."""
        return self._feed.watch(changed)

    def _follower(self) -> Follower:
        return _SqliteFollower(self._file, self._watch_interval)

    def replace(self, task: Task, revision: int) -> bool:
        """Update the record if its stored revision is ``revision`` (one ``UPDATE``; the
        params column only when they changed: dropped, or moved out of an older record)."""
        params = changed_params(task, self)
        values = (task.revision, dumps(task, self.encryption), expires_at(task), task.size)
        where = (task.task_id, revision)
        with self._file.guarded() as db:
            if params is None:
                cursor = db.execute(
                    "UPDATE mrtr_tasks SET revision = ?, record = ?, expires_at = ?, size = ?, "
                    f"seq = {_NEXT_SEQ} WHERE task_id = ? AND revision = ?",
                    (*values, *where),
                )
            else:
                cursor = db.execute(
                    "UPDATE mrtr_tasks SET revision = ?, record = ?, expires_at = ?, size = ?, "
                    f"params = ?, seq = {_NEXT_SEQ} WHERE task_id = ? AND revision = ?",
                    (*values, params_out(task.task_id, params, self.encryption), *where),
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


def _migrate(
    db: sqlite3.Connection,
    kept: Callable[[str], Callable[[int], StoredParams]],
    encryption: RecordEncryption | None,
) -> None:
    """Add the columns a file written by an earlier version lacks: ``seq`` (the change feed's
    stamp, empty for rows not written since), ``params`` (empty for records that still hold
    theirs), ``expires_at`` and ``size`` (filled from each record)."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(mrtr_tasks)")}
    for column in ("seq INTEGER", "params TEXT"):
        if column.split()[0] not in columns:
            db.execute(f"ALTER TABLE mrtr_tasks ADD COLUMN {column}")
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
                task = loads(task_id, raw, kept(task_id), encryption)
                db.execute(
                    "UPDATE mrtr_tasks SET expires_at = ?, size = ? WHERE task_id = ?",
                    (expires_at(task), task.size, task_id),
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
