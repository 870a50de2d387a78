"""``subscriptions/listen`` streams: :class:`SubscriptionHub`, bounded and told of task changes.

Every bound has a default and is a parameter of the hub:

* open streams: at most ``max_streams`` in all and ``max_streams_per_principal`` per
  authenticated principal (callers without a principal share the total only); one more is
  answered -32603 naming the limit;
* the filter's fields must have the schema's types (booleans, arrays; strings in
  ``resourceSubscriptions``), else -32602;
* ``taskIds``: duplicates are dropped and ids no server issues (not 1 to 64 printable ASCII
  characters) are ignored before the store is asked; more distinct ids than
  ``TaskSettings.max_listen_task_ids`` is -32602 naming the limit;
* a stream that sent nothing for ``idle_timeout`` seconds, or that has been open for
  ``max_lifetime`` seconds, ends gracefully: its request is answered with the spec's
  ``SubscriptionsListenResult`` (``resultType`` and the subscription id), which ends the
  stream; the client listens again if it still wants to.

Watched tasks are not read on a timer. A store that can notify
(:class:`~mrtr_sansio.tasks.WatchableTaskStore`: the in-memory, SQLite and Redis stores)
tells the hub which task changed, from whichever process wrote it, and only that task is read
again, by the streams watching it. Every watched task is still read again every
``resync_interval`` seconds (a lease that ran out or a TTL changes a task without a write),
and every ``fallback_poll`` seconds for a store that cannot notify. Reads are batched
(:class:`~mrtr_sansio.tasks.BatchTaskStore`) and go through :class:`StoreCalls`, so a blocking
store is read in a worker thread, never on the event loop. A store fault during a stream is
logged and the stream goes on (the next read tries again); at the start it is -32603.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.lowlevel

from mrtr_sansio import JsonRpcError, ServerConfig, ServerConnection
from mrtr_sansio._mcp.subscriptions import allowed_on_stream
from mrtr_sansio.tasks import TASK, TaskStore, TaskStoreError, WatchableTaskStore

from ._common import HandlerResult, RequestContext
from ._tasks import StoreCalls

__all__ = ["SubscriptionHub"]

log = logging.getLogger("mrtr_sansio.adapters.listen")

#: The wire statuses a task ends in (the task table's terminal states).
_TERMINAL = frozenset(status.value for status in TASK.terminal)
#: The longest task id looked up: a server issues 32 hex digits (``token_hex(16)``).
MAX_TASK_ID_CHARS = 64


#: The SubscriptionFilter fields (schema 2026-07-28, tasks extension) and the JSON type each
#: must have: a filter of another type is refused rather than acknowledged back as honored.
_FLAGS = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")
_LISTS = ("resourceSubscriptions", "taskIds")


def filter_error(wanted: Any) -> str | None:
    """Why the client's ``notifications`` filter breaks the schema's types, or None."""
    if type(wanted) is not dict:
        return "subscriptions/listen: notifications must be an object"
    for key in _FLAGS:
        if key in wanted and type(wanted[key]) is not bool:
            return f"subscriptions/listen: notifications.{key} must be a boolean"
    for key in _LISTS:
        if key in wanted and type(wanted[key]) is not list:
            return f"subscriptions/listen: notifications.{key} must be an array of strings"
    # taskIds items that are not strings are ids no server issues: ignored (below).
    if any(type(uri) is not str for uri in wanted.get("resourceSubscriptions", ())):
        return (
            "subscriptions/listen: notifications.resourceSubscriptions must be an array of strings"
        )
    return None


def _plausible(task_id: Any) -> bool:
    """Whether ``task_id`` could be an id a server issued (checked before any store access)."""
    return (
        type(task_id) is str
        and 0 < len(task_id) <= MAX_TASK_ID_CHARS
        and task_id.isascii()
        and task_id.isprintable()
    )


def _positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"SubscriptionHub: {name} must be a positive number, got {value!r}")


class _Stream:
    """One open listen stream: its context, the tasks it watches and what it last sent."""

    __slots__ = ("acknowledged", "active", "ctx", "dirty", "resync", "resync_at", "wake", "watched")

    def __init__(self, ctx: RequestContext, now: float) -> None:
        self.ctx = ctx
        #: Watched task id -> the detailed task last sent (None: nothing sent yet).
        self.watched: dict[str, dict[str, Any] | None] = {}
        #: Watched ids the store said changed since the last read.
        self.dirty: set[str] = set()
        #: Read every watched task at the next wake (the store missed notifications).
        self.resync = False
        self.resync_at = now
        self.active = now  # when a notification last went out on the stream
        self.acknowledged = False
        self.wake = anyio.Event()


class _Waker:
    """The store's change callbacks, from any thread, handed to the event loop in batches."""

    def __init__(self, dispatch: Callable[[set[str | None]], None]) -> None:
        self._dispatch = dispatch
        native: Any = anyio.lowlevel.current_token().native_token
        # asyncio's loop or trio's token: both run a callable on the loop, from any thread.
        self._schedule = getattr(native, "call_soon_threadsafe", None) or native.run_sync_soon
        self._lock = threading.Lock()
        self._pending: set[str | None] = set()

    def changed(self, task_id: str | None) -> None:
        with self._lock:
            first = not self._pending
            self._pending.add(task_id)
        if first:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody listens
                self._schedule(self._run)

    def _run(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, set()
        self._dispatch(pending)


class SubscriptionHub:
    """Open ``subscriptions/listen`` streams, and fan-out of change notifications to them.

    Use :meth:`listen` as the whole handler of ``subscriptions/listen``; call :meth:`publish`
    from anywhere (another request's handler, say) to send a notification to every open stream.
    The connection of each stream drops what its client did not opt in to and tags the rest
    with the subscription id, so publishing is always safe.

    Bounds (defaults in the signature; the tasks guide's Limits table): ``max_streams`` open
    streams in all and ``max_streams_per_principal`` per authenticated principal (one more is
    -32603 naming the limit); a stream that sent nothing for ``idle_timeout`` seconds or has
    been open ``max_lifetime`` seconds ends with a ``SubscriptionsListenResult``. Watched
    tasks are read again when the store says they changed, and all of them every
    ``resync_interval`` seconds (``fallback_poll`` for a store that cannot say), in at most
    ``store_threads`` worker threads when the store blocks.
    """

    def __init__(
        self,
        *,
        max_streams: int = 1024,
        max_streams_per_principal: int = 16,
        idle_timeout: float = 600.0,
        max_lifetime: float = 3600.0,
        resync_interval: float = 30.0,
        fallback_poll: float = 5.0,
        store_threads: int = 4,
    ) -> None:
        for name, value in (
            ("max_streams", max_streams),
            ("max_streams_per_principal", max_streams_per_principal),
            ("idle_timeout", idle_timeout),
            ("max_lifetime", max_lifetime),
            ("resync_interval", resync_interval),
            ("fallback_poll", fallback_poll),
            ("store_threads", store_threads),
        ):
            _positive(name, value)
        self.max_streams = max_streams
        self.max_streams_per_principal = max_streams_per_principal
        self.idle_timeout = idle_timeout
        self.max_lifetime = max_lifetime
        self.resync_interval = resync_interval
        self.fallback_poll = fallback_poll
        self._threads = store_threads
        self._streams: dict[int, _Stream] = {}
        self._per_principal: dict[str, int] = {}
        self._by_task: dict[str, set[_Stream]] = {}
        self._calls: dict[int, tuple[ServerConfig, StoreCalls]] = {}
        # Store watches: id(store) -> (the function that stops it, streams using it).
        self._watches: dict[int, tuple[Callable[[], None], set[_Stream]]] = {}
        self._waker: _Waker | None = None
        self._subscribing: anyio.Lock | None = None

    def __len__(self) -> int:
        return len(self._streams)

    def streams_of(self, principal: str) -> int:
        """Open streams of ``principal``."""
        return self._per_principal.get(principal, 0)

    # --- one stream -------------------------------------------------------------------------

    async def listen(
        self, ctx: RequestContext, honored: Mapping[str, Any] | None = None
    ) -> HandlerResult:
        """Acknowledge the subscription and keep the stream open until the client cancels it,
        it idles out or it reaches its lifetime (then it ends with a ``SubscriptionsListenResult``).

        ``honored`` is the part of the client's filter the server agrees to (default: all).
        ``taskIds`` in it (tasks extension): only the caller's own tasks are honored (the
        acknowledgement lists them); each is sent as ``notifications/tasks`` with the task as
        ``tasks/get`` shows it, then at every change, until the task is terminal.
        """
        request = ctx.request
        principal = request.principal
        malformed = filter_error(request.params.get("notifications"))
        if malformed is not None:
            return JsonRpcError.invalid_params(malformed)
        refused = self._admit(principal)
        if refused is not None:
            return refused
        conn = ctx.connection
        now = time.monotonic()
        stream = _Stream(ctx, now)
        key = id(stream)
        self._streams[key] = stream
        if principal is not None:
            self._per_principal[principal] = self._per_principal.get(principal, 0) + 1
        try:
            wanted = dict(request.params["notifications"] if honored is None else honored)
            ids = wanted.get("taskIds")
            settings = conn.config.tasks
            first: list[dict[str, Any] | None] = []
            if isinstance(ids, list) and settings is not None:
                distinct = list(dict.fromkeys(i for i in ids if _plausible(i)))
                limit = settings.max_listen_task_ids
                if len(distinct) > limit:
                    return JsonRpcError.invalid_params(
                        f"subscriptions/listen: taskIds names {len(distinct)} distinct tasks; "
                        f"at most {limit} are allowed on one stream"
                    )
                # Watch first, read then: a change in between is seen at the first wake.
                stream.watched = dict.fromkeys(distinct)
                try:
                    await self._watch(stream, conn, settings.store)
                    found = await self._read(conn, distinct, principal) if distinct else []
                except Exception as exc:
                    log.warning("subscriptions/listen: the first read failed: %s", exc)
                    return JsonRpcError.internal(_fault(exc))
                own = [(i, d) for i, d in zip(distinct, found, strict=True) if d is not None]
                for task_id, detail in zip(distinct, found, strict=True):
                    if detail is None:  # unknown, or another principal's: never watched
                        del stream.watched[task_id]
                        self._unindex(stream, task_id)
                wanted["taskIds"] = [i for i, _ in own]
                honored = wanted
                first = [d for _, d in own]
            conn.acknowledge(request.request_id, honored)
            stream.acknowledged = True
            ctx.flush()
            self._apply(stream, list(stream.watched), first, now)
            return await self._run(stream)
        finally:
            self._close(stream)

    async def _run(self, stream: _Stream) -> HandlerResult:
        """Wait for changes, resyncs and the stream's end; the graceful end is ``{}`` (the
        connection makes it a ``SubscriptionsListenResult``)."""
        ctx = stream.ctx
        opened = time.monotonic()
        interval = self._interval(ctx.connection)
        stream.resync_at = opened + interval
        while True:
            now = time.monotonic()
            ends = min(opened + self.max_lifetime, stream.active + self.idle_timeout)
            if now >= ends:
                reason = "lifetime" if ends == opened + self.max_lifetime else "idle timeout"
                log.info("subscriptions/listen %r ended: %s", ctx.request.request_id, reason)
                return {}
            wait = ends - now
            if stream.watched:
                wait = min(wait, stream.resync_at - now)
            with anyio.move_on_after(max(0.0, wait)):
                await stream.wake.wait()
            stream.wake = anyio.Event()  # before reading: a change from now on wakes it again
            if not stream.watched:
                continue
            now = time.monotonic()
            if stream.resync or now >= stream.resync_at:
                ids = list(stream.watched)
                stream.resync = False
                stream.resync_at = now + interval
            else:
                ids = [i for i in stream.dirty if i in stream.watched]
            stream.dirty.clear()
            if ids:
                await self._refresh(stream, ids)

    async def _refresh(self, stream: _Stream, ids: list[str]) -> None:
        """Read ``ids`` again and send what changed; a store fault is logged, the stream goes
        on (the next change or resync reads again)."""
        ctx = stream.ctx
        try:
            found = await self._read(ctx.connection, ids, ctx.request.principal)
        except Exception as exc:
            log.warning(
                "subscriptions/listen %r: reading tasks failed: %s", ctx.request.request_id, exc
            )
            return
        self._apply(stream, ids, found, time.monotonic())

    def _apply(
        self, stream: _Stream, ids: list[str], found: list[dict[str, Any] | None], now: float
    ) -> None:
        """Send ``notifications/tasks`` for each task that changed since last sent; stop
        watching tasks that ended or can no longer be read."""
        watched = stream.watched
        for task_id, detail in zip(ids, found, strict=True):
            if task_id not in watched:
                continue  # stopped watching it while this read was going on
            if detail is not None and detail != watched[task_id]:
                watched[task_id] = detail
                stream.ctx.notify("notifications/tasks", detail)
                stream.active = now
            if detail is None or detail["status"] in _TERMINAL:
                del watched[task_id]
                self._unindex(stream, task_id)

    async def _read(
        self, conn: ServerConnection, ids: list[str], principal: str | None
    ) -> list[dict[str, Any] | None]:
        """The detailed tasks of ``ids`` (one batched store call, off the loop if it blocks)."""
        return await self._calls_of(conn.config)(conn.detailed_tasks, ids, principal)

    def _calls_of(self, config: ServerConfig) -> StoreCalls:
        held = self._calls.get(id(config))
        if held is None:
            held = self._calls[id(config)] = (config, StoreCalls(config, self._threads))
        return held[1]

    def _interval(self, conn: ServerConnection) -> float:
        settings = conn.config.tasks
        if settings is not None and isinstance(settings.store, WatchableTaskStore):
            return self.resync_interval
        return self.fallback_poll

    # --- admission and bookkeeping ----------------------------------------------------------

    def _admit(self, principal: str | None) -> JsonRpcError | None:
        if len(self._streams) >= self.max_streams:
            log.warning("subscriptions/listen refused: %d streams open", len(self._streams))
            return JsonRpcError.internal(
                f"Too many subscriptions/listen streams are open on this server (the limit is "
                f"{self.max_streams}); try again later"
            )
        if principal is not None and (
            self._per_principal.get(principal, 0) >= self.max_streams_per_principal
        ):
            return JsonRpcError.internal(
                f"Too many subscriptions/listen streams are open for this caller (the limit "
                f"is {self.max_streams_per_principal}); close one first"
            )
        return None

    async def _watch(self, stream: _Stream, conn: ServerConnection, store: TaskStore) -> None:
        """Index the stream's tasks, and subscribe to the store's changes if it can tell
        (off the loop: subscribing may do IO)."""
        for task_id in stream.watched:
            self._by_task.setdefault(task_id, set()).add(stream)
        if not stream.watched or not isinstance(store, WatchableTaskStore):
            return
        if self._subscribing is None:
            self._subscribing = anyio.Lock()
        async with self._subscribing:  # one subscription per store, however many streams
            held = self._watches.get(id(store))
            if held is None:
                if self._waker is None:
                    self._waker = _Waker(self._dispatch)
                stop = await self._calls_of(conn.config)(store.watch, self._waker.changed)
                held = self._watches[id(store)] = (stop, set())
            held[1].add(stream)

    def _dispatch(self, changed: set[str | None]) -> None:
        """On the loop: wake the streams watching the tasks that changed (all for None)."""
        if None in changed:
            for stream in self._streams.values():
                if stream.watched:
                    stream.resync = True
                    stream.wake.set()
            return
        for task_id in changed:
            assert task_id is not None
            for stream in self._by_task.get(task_id, ()):
                stream.dirty.add(task_id)
                stream.wake.set()

    def _unindex(self, stream: _Stream, task_id: str) -> None:
        streams = self._by_task.get(task_id)
        if streams is not None:
            streams.discard(stream)
            if not streams:
                del self._by_task[task_id]

    def _close(self, stream: _Stream) -> None:
        del self._streams[id(stream)]
        principal = stream.ctx.request.principal
        if principal is not None:
            left = self._per_principal[principal] - 1
            if left:
                self._per_principal[principal] = left
            else:
                del self._per_principal[principal]
        for task_id in list(stream.watched):
            self._unindex(stream, task_id)
        stream.watched.clear()
        for store_id, (stop, users) in list(self._watches.items()):
            users.discard(stream)
            if not users:  # nobody watches this store's tasks any more
                del self._watches[store_id]
                stop()
        if not self._watches:
            self._waker = None  # the next watch binds to whichever loop runs then

    # --- fan-out ----------------------------------------------------------------------------

    def publish(self, method: str, params: Mapping[str, Any] | None = None) -> int:
        """Notify every open stream; returns how many streams were offered the notification."""
        streams = list(self._streams.values())
        now = time.monotonic()
        for stream in streams:
            ctx = stream.ctx
            if not stream.acknowledged:
                continue  # its first read is going on
            ctx.notify(method, params)
            if allowed_on_stream(ctx.request.params["notifications"], method, params):
                stream.active = now
        return len(streams)


def _fault(exc: Exception) -> str:
    """What a client is told of a store fault (its message names no secret; others stay
    private)."""
    return str(exc) if isinstance(exc, TaskStoreError) else "The task store failed"
