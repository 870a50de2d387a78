"""The Redis task store and replay guard (the ``tasks-redis`` extra); see
:mod:`mrtr_sansio.adapters.stores`, which is where to import them from."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from mrtr_sansio._extras import raise_missing_extra
from mrtr_sansio.sealing import RecordEncryption
from mrtr_sansio.tasks import StoredParams, Task, TaskChanged, TaskStoreError

from ._records import (
    TASK_ID,
    changed_params,
    dumps,
    expires_at,
    loads,
    loads_in_batch,
    params_in,
    params_out,
)
from ._store_watch import ChangeFeed, Follower

__all__ = ["RedisReplayGuard", "RedisTaskStore"]


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
# record, owner, Redis expiry ms ('' for none), expiry score ('inf' for none), size, change
# channel, params. Every write script publishes the task's id on the change channel.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('HEXISTS', KEYS[4], ARGV[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'rev', ARGV[2], 'rec', ARGV[3], 'own', ARGV[4], 'par', ARGV[9])
if ARGV[5] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1])
redis.call('HSET', KEYS[4], ARGV[1], ARGV[7] .. ':' .. ARGV[4])
redis.call('HINCRBY', KEYS[5], ARGV[4], ARGV[7])
redis.call('INCRBY', KEYS[6], ARGV[7])
redis.call('PUBLISH', ARGV[8], ARGV[1])
return 1
"""
# KEYS: the task, meta, bytes, total; ARGV: expected revision, new revision, record, id, size,
# change channel, and the params when they changed (absent: left as they are).
_REPLACE = (
    _RELEASE
    + """
if redis.call('HGET', KEYS[1], 'rev') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'rev', ARGV[2], 'rec', ARGV[3])
if ARGV[7] then redis.call('HSET', KEYS[1], 'par', ARGV[7]) end
local owner = release(KEYS[2], KEYS[3], KEYS[4], ARGV[4])
if owner then
  redis.call('HSET', KEYS[2], ARGV[4], ARGV[5] .. ':' .. owner)
  redis.call('HINCRBY', KEYS[3], owner, ARGV[5])
  redis.call('INCRBY', KEYS[4], ARGV[5])
end
redis.call('PUBLISH', ARGV[6], ARGV[4])
return 1
"""
)
# KEYS: the task, the expiry index, meta, bytes, total; ARGV: id, owner-set prefix, change
# channel.
_DELETE = (
    _RELEASE
    + """
local owner = release(KEYS[3], KEYS[4], KEYS[5], ARGV[1]) or redis.call('HGET', KEYS[1], 'own')
if redis.call('DEL', KEYS[1]) == 1 then redis.call('PUBLISH', ARGV[3], ARGV[1]) end
redis.call('ZREM', KEYS[2], ARGV[1])
if owner then redis.call('ZREM', ARGV[2] .. owner, ARGV[1]) end
return 1
"""
)
# KEYS: the expiry index, meta, bytes, total; ARGV: now, limit, task prefix, owner-set
# prefix, change channel. Deletes up to limit ids expired at now (their records, their
# entries in their owners' sets, their bytes).
_SWEEP = (
    _RELEASE
    + """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, id in ipairs(ids) do
  local owner = release(KEYS[2], KEYS[3], KEYS[4], id) or redis.call('HGET', ARGV[3] .. id, 'own')
  redis.call('DEL', ARGV[3] .. id)
  if owner then redis.call('ZREM', ARGV[4] .. owner, id) end
  redis.call('ZREM', KEYS[1], id)
  redis.call('PUBLISH', ARGV[5], id)
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
    """Task records in Redis: a hash per task under ``prefix`` (``rev``, ``rec``, ``own``, and
    ``par``, the params, which only a run reads: :class:`~mrtr_sansio.tasks.StoredParams`), a
    sorted set of task ids by expiry per owner under ``prefix`` + ``"owners:"``'s own
    namespace, one sorted set of every id by expiry (the sweep's index), and the bytes held
    (a size per id that outlives the record's own expiry, a sum per owner and a total, kept
    by the same scripts that write and delete records: :meth:`usage` reads two counters).
    Every write publishes the task's id on the channel ``prefix`` + ``"-changed"`` (colon
    stripped), which :meth:`watch` subscribes to: listeners in every process learn of it at
    once.

    ``client`` is a synchronous ``redis.Redis``; build it with :meth:`from_url`, which sets
    short timeouts. Only ids of the form the server issues (32 hex digits) reach Redis: any
    other is unknown without a round trip. A Redis that is down or slower than its timeouts
    raises :class:`TaskStoreError`.

    With ``encryption`` (a :class:`~mrtr_sansio.sealing.RecordEncryption`) ``rec`` and ``par``
    hold ciphertexts; the keys (task ids), ``rev``, ``own``, the owner and expiry sets and the
    byte counters, which the scripts use, stay in clear. Records written in clear before are
    read as they are and encrypted at their next write (params: when the task ends). Assign
    another to :attr:`encryption` to rotate keys while the store is in use.
    """

    #: Every call is a network round trip: adapters run them in worker threads.
    blocking = True
    #: Records outlive the process: task leases are on by default (``TaskSettings``).
    durable = True

    def __init__(
        self,
        client: Any,
        *,
        prefix: str = "mrtr:task:",
        encryption: RecordEncryption | None = None,
    ) -> None:
        if encryption is not None and not isinstance(encryption, RecordEncryption):
            raise TypeError("encryption must be a RecordEncryption (mrtr_sansio.sealing) or None")
        self.encryption = encryption
        self._redis = client
        self._prefix = prefix
        # Not below the task prefix: no task id (hex digits) can name an owner set.
        self._owners = prefix.rstrip(":") + "-owner:"
        self._expiry = prefix.rstrip(":") + "-expiry"
        self._meta = prefix.rstrip(":") + "-meta"
        self._bytes = prefix.rstrip(":") + "-bytes"
        self._total = prefix.rstrip(":") + "-bytes-total"
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
        cls,
        url: str,
        *,
        prefix: str = "mrtr:task:",
        timeout: float = 1.0,
        encryption: RecordEncryption | None = None,
    ) -> RedisTaskStore:
        """A store on the Redis at ``url`` (``redis://host:port/db``); ``timeout`` bounds
        connecting and each reply, in seconds."""
        client = _redis_client(url, timeout, "RedisTaskStore")
        return cls(client, prefix=prefix, encryption=encryption)

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
        expires = expires_at(task)
        score = "inf" if expires is None else repr(expires)
        keys = [self._prefix + task.task_id, self._owners + owner, self._expiry, *self._metering]
        args = [
            *(task.task_id, task.revision, dumps(task, self.encryption), owner, expiry, score),
            *(task.size, self.channel, params_out(task.task_id, task.params_json, self.encryption)),
        ]
        with self._guarded():
            return int(self._create(keys=keys, args=args)) == 1

    def get(self, task_id: str) -> Task | None:
        """The record under ``task_id``, or None (at once for a malformed id); its params
        unread. A record written before params were kept apart holds them: it is read as it
        is and loses them to ``par`` at its next write."""
        if not TASK_ID.fullmatch(task_id):
            return None
        with self._guarded():
            raw = self._redis.hget(self._prefix + task_id, "rec")
        return None if raw is None else loads(task_id, raw, self._kept(task_id), self.encryption)

    def _kept(self, task_id: str) -> Callable[[int], StoredParams]:
        return lambda size: StoredParams(size, lambda: self._params(task_id), self)

    def _params(self, task_id: str) -> str:
        """The ``par`` field of ``task_id`` (what its :class:`StoredParams` loads)."""
        with self._guarded():
            raw = self._redis.hget(self._prefix + task_id, "par")
        if raw is None:
            raise TaskStoreError("The task's params are gone (the task was deleted)")
        return params_in(task_id, raw, self.encryption)

    def get_many(self, task_ids: Sequence[str]) -> list[Task | None]:
        """The records under ``task_ids``, in order: one pipelined round trip for all the
        well-formed ids (a malformed one is None without asking; a corrupt record is None,
        logged, so that it fails only its own task)."""
        asked = [i for i in dict.fromkeys(task_ids) if TASK_ID.fullmatch(i)]
        found: dict[str, Any] = {}
        if asked:
            pipe = self._redis.pipeline(transaction=False)
            for task_id in asked:
                pipe.hget(self._prefix + task_id, "rec")
            with self._guarded():
                found = dict(zip(asked, pipe.execute(), strict=True))
        return [loads_in_batch(i, found.get(i), self._kept(i), self.encryption) for i in task_ids]

    def watch(self, changed: TaskChanged) -> Callable[[], None]:
        """Call ``changed(task_id)`` (in the subscriber's thread) for each write any process
        makes, as Redis delivers it; ``changed(None)`` after the subscription was lost and
        made again (writes meanwhile were missed)."""
        return self._feed.watch(changed)

    def replace(self, task: Task, revision: int) -> bool:
        """Write the record if its stored revision is ``revision`` (one script; the params
        only when they changed: dropped, or moved out of an older record)."""
        if not TASK_ID.fullmatch(task.task_id):
            return False
        keys = [self._prefix + task.task_id, *self._metering]
        record = dumps(task, self.encryption)
        args = [revision, task.revision, record, task.task_id, task.size, self.channel]
        params = changed_params(task, self)
        if params is not None:
            args.append(params_out(task.task_id, params, self.encryption))
        with self._guarded():
            return int(self._replace(keys=keys, args=args)) == 1

    def delete(self, task_id: str) -> None:
        """Delete the record and its id from its owner's set and the index (one script)."""
        if not TASK_ID.fullmatch(task_id):
            return
        with self._guarded():
            self._delete(
                keys=[self._prefix + task_id, self._expiry, *self._metering],
                args=[task_id, self._owners, self.channel],
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
