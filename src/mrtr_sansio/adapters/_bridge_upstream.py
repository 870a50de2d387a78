"""The era bridge's upstream side: which server (:class:`Upstream`) and the connections to it
(:class:`UpstreamPool`), each owned by one principal, bounded, and closed when idle."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager, nullcontext
from typing import Any, Literal

import anyio
import anyio.abc
import attrs

from mrtr_sansio import ClientConfig, InputNeeded, RequestReceived
from mrtr_sansio.bridge import (
    RELAYED_CAPABILITIES,
    UPSTREAMS_EXHAUSTED,
    BridgeLimits,
    BridgeRefusedError,
    UpstreamKey,
    UpstreamUse,
    idle_upstreams,
    input_lane,
    notification_target,
    one_input_call_each,
    relay_error,
    upstream_capabilities,
    upstream_key,
    upstream_to_close,
)
from mrtr_sansio.protocol import ResultType

from ._client_common import AsyncClientBase, ClientOptions
from ._client_errors import ClientError
from ._common import RequestContext

__all__ = [
    "BRIDGE_INFO",
    "UPSTREAMS_EXHAUSTED",
    "Upstream",
    "UpstreamConn",
    "UpstreamPool",
    "tool_listing",
]
# UPSTREAMS_EXHAUSTED: where it was before mrtr_sansio.bridge stated it (adapters.bridge too)

Era = Literal["modern", "legacy", "auto"]
#: The bridge's name to upstream servers.
BRIDGE_INFO = {"name": "mrtr-bridge", "version": "1"}
#: Pages of the upstream's tools/list read at start (as the HTTP client bounds its own).
TOOL_PAGES = 100

log = logging.getLogger("mrtr_sansio.adapters.bridge")


def _str_tuple(value: Sequence[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen
class Upstream:
    """The upstream server: ``url`` (Streamable HTTP) or ``command`` (a stdio server the bridge
    launches, one process per upstream connection), and its era (``auto`` probes)."""

    url: str | None = None
    command: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    era: Era = "auto"

    def __attrs_post_init__(self) -> None:
        if (self.url is None) == (not self.command):
            raise ValueError("Upstream: give exactly one of url and command")

    def connect(
        self, config: ClientConfig, **options: Any
    ) -> AbstractAsyncContextManager[AsyncClientBase]:
        """A client of this upstream (an async context manager)."""
        opts: ClientOptions = options  # type: ignore[assignment]
        if self.url is not None:
            from .http import HttpClient

            return HttpClient.connect(self.url, config, **opts)
        from .anyio import Client

        return Client.connect_stdio(self.command, config, **opts)


class UpstreamConn:
    """One upstream connection and its lifetime."""

    def __init__(self, key: UpstreamKey) -> None:
        self.key = key
        self.client: AsyncClientBase | None = None
        self.closing = anyio.Event()
        self.ready = anyio.Event()  # set once opened (or failed to open)
        self.in_use = 0
        self.last_used = 0.0
        #: The downstream requests waiting on this connection now, for its notifications.
        self.active: list[RequestContext] = []
        #: Held by each input call while it is in flight, when the upstream takes one at a time
        #: (:func:`~mrtr_sansio.bridge.one_input_call_each`); ``asking`` counts the input calls
        #: given this connection (:func:`~mrtr_sansio.bridge.input_lane` reads it).
        self.one_call = anyio.Lock()
        self.asking = 0

    @contextmanager
    def listening(self, ctx: RequestContext) -> Iterator[None]:
        """While the block runs, the upstream's notifications may go to ``ctx``'s request."""
        self.active.append(ctx)
        try:
            yield
        finally:
            self.active.remove(ctx)

    def notified(self, method: str, params: Mapping[str, Any] | None) -> None:
        """Relay an upstream notification to the downstream request it is about
        (:func:`~mrtr_sansio.bridge.notification_target`)."""
        at = notification_target(method, params, [c.request.meta for c in self.active])
        if at is not None:
            self.active[at].notify(method, params)


class UpstreamPool:
    """The open upstream connections, by :class:`UpstreamKey`; the only owner of them.

    ``ask`` is the upstream clients' input callback (the bridge's ``ask_downstream``).
    """

    def __init__(
        self,
        upstream: Upstream,
        tasks: anyio.abc.TaskGroup,
        limits: BridgeLimits,
        clock: Any,
        ask: Callable[[InputNeeded], Awaitable[Mapping[str, Any]]],
    ) -> None:
        self.upstream = upstream
        self.limits = limits
        self._tg = tasks
        self._clock = clock
        self._ask = ask
        self._conns: dict[UpstreamKey, UpstreamConn] = {}
        #: The era the first (facts) connection found; later connections speak it, so an
        #: ``auto`` upstream is probed once, not on every connection.
        self.era: str | None = None

    def __len__(self) -> int:
        return len(self._conns)

    @property
    def one_call_each(self) -> bool:
        """Whether each connection takes one input call at a time (a stdio legacy upstream)."""
        return one_input_call_each(bool(self.upstream.command), self.era)

    async def connection(self, request: RequestReceived, *, asks: bool = False) -> UpstreamConn:
        """The upstream connection for ``request``, counted in use until :meth:`done_with`
        (from before it is opened, so that it is never taken for idle meanwhile); for a call
        that ``asks`` for input, the lane :func:`~mrtr_sansio.bridge.input_lane` names when
        the upstream takes one such call at a time."""
        session: Hashable | None = request.session
        key = upstream_key(request, session)
        if asks and self.one_call_each:
            asking = {k: c.asking for k, c in self._conns.items() if not c.closing.is_set()}
            key = input_lane(key, asking, self.limits)
        conn = self._conns.get(key)
        if conn is not None and not conn.closing.is_set():
            conn.in_use += 1
            conn.asking += asks
            try:
                await conn.ready.wait()  # opened by another request a moment ago
            except BaseException:
                self.done_with(conn, asks=asks)
                raise
            if conn.client is None:  # that opening failed
                self.done_with(conn, asks=asks)
                raise BridgeRefusedError(relay_error(-32603, "opening failed", None, local=True))
        else:
            self._make_room(key)
            conn = self._conns[key] = UpstreamConn(key)
            conn.in_use += 1
            conn.asking += asks
            caps = upstream_capabilities(request.client_capabilities)
            try:
                await self._tg.start(self._run_connection, conn, caps)
            except BaseException:
                self._conns.pop(key, None)
                conn.ready.set()
                self.done_with(conn, asks=asks)
                raise
        conn.last_used = self._clock()
        return conn

    def done_with(self, conn: UpstreamConn, *, asks: bool = False) -> None:
        """One use of ``conn`` ended (``asks``: that of an input call)."""
        conn.in_use -= 1
        conn.asking -= asks
        conn.last_used = self._clock()

    def turn(self, conn: UpstreamConn) -> AbstractAsyncContextManager[object]:
        """Held around an input call's upstream request: ``conn``'s one call at a time when
        the upstream takes one at a time (:attr:`one_call_each`), else nothing."""
        return conn.one_call if self.one_call_each else nullcontext()

    def close_idle(self, now: float) -> None:
        """Close the connections unused for ``upstream_idle_timeout``."""
        for key in idle_upstreams(self._uses(), now, self.limits):
            self._conns.pop(key).closing.set()

    def close_all(self) -> None:
        """Ask every connection to close (each leaves the pool as its client closes)."""
        for conn in self._conns.values():
            conn.closing.set()

    def _make_room(self, key: UpstreamKey) -> None:
        """Close the connection :func:`~mrtr_sansio.bridge.upstream_to_close` names, if any
        (it raises :class:`BridgeRefusedError` when none can go)."""
        victim = upstream_to_close(key, self._uses(), self.limits)
        if victim is not None:
            self._conns.pop(victim).closing.set()

    def _uses(self) -> list[UpstreamUse]:
        return [(c.key, c.in_use, c.last_used) for c in self._conns.values()]

    async def _run_connection(
        self,
        conn: UpstreamConn,
        caps: dict[str, Any],
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        # a task the upstream creates ends the call as it is: passed on, followed downstream
        config = ClientConfig(
            client_info=BRIDGE_INFO,
            capabilities=caps,
            era=self.era or self.upstream.era,
            extra_result_types={ResultType.TASK.value},
        )
        callbacks: dict[str, Any] = {k: self._ask for k in caps if k in RELAYED_CAPABILITIES}
        try:
            async with self.upstream.connect(
                config, on_notification=conn.notified, **callbacks
            ) as client:
                conn.client = client
                conn.ready.set()
                task_status.started()
                await conn.closing.wait()
        finally:
            if self._conns.get(conn.key) is conn:
                del self._conns[conn.key]


async def tool_listing(client: AsyncClientBase) -> list[Mapping[str, Any]]:
    """Every page of the upstream's ``tools/list`` (at most ``TOOL_PAGES``); none when the
    upstream fails it (its calls' headers are then not checked by the bridge)."""
    tools: list[Mapping[str, Any]] = []
    cursor = None
    for _ in range(TOOL_PAGES):
        try:
            page = await client.list_tools(cursor)
        except ClientError as exc:
            log.warning("mrtr-bridge: the upstream's tools/list failed: %s", exc)
            return []
        tools.extend(t for t in page.get("tools") or () if isinstance(t, Mapping))
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str):
            break
    return tools
