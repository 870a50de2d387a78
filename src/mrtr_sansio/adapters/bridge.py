"""The era bridge with IO: a handler for any server adapter that relays every request to one
upstream MCP server through this package's own clients, on anyio (asyncio or trio).

Open it with :meth:`Bridge.open` (an async context manager: it reads the upstream's facts and
owns the upstream connections), build the downstream server with :meth:`Bridge.server_config`
and serve :meth:`Bridge.handle`::

    async with Bridge.open(Upstream(url="http://127.0.0.1:9000/mcp")) as bridge:
        app = McpHttpApp(bridge.handle, bridge.server_config())

The rules it follows are in :mod:`mrtr_sansio.bridge`; the ``mrtr-bridge`` command is
:func:`main`. A held call whose upstream asks for input is answered by the downstream's
retry (modern) or the shim's replay (legacy); see ``docs/bridge.md``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import AsyncIterator, Hashable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import Any, Literal

import anyio
import anyio.abc
import attrs

from mrtr_sansio import (
    ClientConfig,
    InputNeeded,
    InputRequiredResult,
    InputResponses,
    JsonRpcError,
    RequestReceived,
    ServerConfig,
)
from mrtr_sansio.bridge import (
    HOLD_META,
    INPUT_METHODS,
    UNKNOWN_HOLD,
    BridgeLimits,
    BridgeRefusedError,
    HeldCalls,
    UpstreamKey,
    answers_for,
    downstream_config,
    input_required_for,
    legacy_error,
    over_round_cap,
    relay_error,
    relay_params,
    upstream_capabilities,
    upstream_key,
)
from mrtr_sansio.protocol import SERVER_INFO

from ._client_common import SHUTDOWN_TIMEOUT, AsyncClientBase, ClientOptions
from ._client_errors import CallFailedError, ClientError, InputRejectedError
from ._common import HandlerResult, RequestContext

__all__ = ["Bridge", "Upstream", "main"]

log = logging.getLogger("mrtr_sansio.adapters.bridge")

Era = Literal["modern", "legacy", "auto"]
#: The bridge's name to upstream servers.
BRIDGE_INFO = {"name": "mrtr-bridge", "version": "1"}
#: Checkpoints a held call waits, after its first question of a round arrived, for the others
#: the same message carried (the client starts every callback of a message before any runs).
_ROUND_SETTLE = 3
#: Pages of the upstream's tools/list read at start (as the HTTP client bounds its own).
_TOOL_PAGES = 100
UPSTREAMS_EXHAUSTED = JsonRpcError(
    -32603,
    "The bridge has too many upstream connections in use; try again later",
    {"reason": "bridge_upstreams_exhausted"},
)


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


class _Slot:
    """One upstream question waiting for the downstream's answer."""

    __slots__ = ("answer", "done", "need")

    def __init__(self, need: InputNeeded) -> None:
        self.need = need
        self.done = anyio.Event()
        self.answer: Mapping[str, Any] | None = None


class _Held:
    """One upstream call held by the bridge: its task, the questions asked and its outcome."""

    def __init__(self, method: str, conn: _Conn) -> None:
        self.method = method
        self.conn = conn
        self.scope = anyio.CancelScope()
        self.pending: list[_Slot] = []  # questions not yet asked downstream
        self.asked: list[_Slot] = []  # asked downstream, waiting for the retry
        self.outcome: Mapping[str, Any] | JsonRpcError | None = None
        # inputResponses the first request carried without a requestState: they answer the
        # upstream's first round under the same keys (a stateless server would take them).
        self.offered: InputResponses | None = None
        self.waiting = False  # a handler is waiting on it (not expired then)
        self._changed = anyio.Event()

    def changed(self) -> None:
        self._changed.set()

    async def wait(self) -> None:
        await self._changed.wait()
        self._changed = anyio.Event()


class _Conn:
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

    @contextmanager
    def listening(self, ctx: RequestContext) -> Iterator[None]:
        """While the block runs, the upstream's notifications may go to ``ctx``'s request."""
        self.active.append(ctx)
        try:
            yield
        finally:
            self.active.remove(ctx)

    def notified(self, method: str, params: Mapping[str, Any] | None) -> None:
        """Relay an upstream notification to the downstream request it is about: progress by
        its token (the downstream's own, relayed), a log message when only one request waits
        on this connection (it is then certainly that request's); anything else is dropped."""
        target: RequestContext | None = None
        if method == "notifications/progress" and params is not None:
            token = params.get("progressToken")
            target = next(
                (c for c in self.active if c.request.meta.get("progressToken") == token), None
            )
        elif method == "notifications/message" and len(self.active) == 1:
            target = self.active[0]
        if target is not None:
            target.notify(method, params)


class Bridge:
    """The bridge's handler and its upstream connections; build it with :meth:`open`."""

    def __init__(
        self,
        upstream: Upstream,
        tasks: anyio.abc.TaskGroup,
        limits: BridgeLimits,
        clock: Any,
        token_hex: Any,
    ) -> None:
        self.upstream = upstream
        self.limits = limits
        self._tg = tasks
        self._clock = clock
        self._holds: HeldCalls[_Held] = HeldCalls(limits, clock, token_hex)
        self._by_id: dict[str, _Held] = {}
        self._conns: dict[UpstreamKey, _Conn] = {}
        self._downstream = ServerConfig()  # its round cap; see use_config
        #: The upstream's facts, read when the bridge opened.
        self.upstream_era: str | None = None
        self.server_info: Mapping[str, Any] | None = None
        self.server_capabilities: Mapping[str, Any] | None = None
        self.instructions: str | None = None
        self.tools: list[Mapping[str, Any]] = []

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        upstream: Upstream,
        limits: BridgeLimits | None = None,
        *,
        clock: Any = None,
        token_hex: Any = None,
    ) -> AsyncIterator[Bridge]:
        """Read the upstream's facts (one connection, closed), then serve until exit, which
        closes every upstream connection and cancels the held calls."""
        import secrets

        async with anyio.create_task_group() as tg:
            bridge = cls(
                upstream,
                tg,
                limits if limits is not None else BridgeLimits(),
                clock if clock is not None else anyio.current_time,
                token_hex if token_hex is not None else secrets.token_hex,
            )
            async with upstream.connect(
                ClientConfig(client_info=BRIDGE_INFO, era=upstream.era)
            ) as c:
                bridge.upstream_era = c.era.value if c.era is not None else None
                bridge._learn(c.server_info, c.server_capabilities, c.instructions)
                if bridge.upstream_era == "modern" and c.server_capabilities is None:
                    await bridge._discover(c)  # the modern era forced: nothing probed it
                if "tools" in (bridge.server_capabilities or {}):
                    bridge.tools = await _tool_listing(c)
            tg.start_soon(bridge._expire_loop)
            try:
                yield bridge
            finally:
                for conn in bridge._conns.values():
                    conn.closing.set()
                for held in bridge._by_id.values():
                    held.scope.cancel()
                # each connection closes as its client does (a launched server is asked to
                # end first); cancelled only past the clients' own shutdown bound
                with anyio.move_on_after(2 * SHUTDOWN_TIMEOUT, shield=True):
                    while bridge._conns:
                        await anyio.sleep(0.01)
                tg.cancel_scope.cancel()

    def _learn(
        self,
        info: Mapping[str, Any] | None,
        capabilities: Mapping[str, Any] | None,
        instructions: str | None,
    ) -> None:
        """Keep the upstream's facts, which ``initialize`` and ``server/discover`` answer."""
        self.server_info = info
        self.server_capabilities = capabilities
        self.instructions = instructions

    async def _discover(self, client: AsyncClientBase) -> None:
        """Ask a modern upstream its facts once (``server/discover``), when the era was forced
        and so no probe asked them; a failure leaves them unknown, as an upstream without
        the method would."""
        try:
            found = await client.request("server/discover")
        except ClientError as exc:
            log.warning("mrtr-bridge: the upstream's server/discover failed: %s", exc)
            return
        caps, meta, text = (found.get(k) for k in ("capabilities", "_meta", "instructions"))
        info = meta.get(SERVER_INFO) if isinstance(meta, Mapping) else None
        self._learn(
            info if isinstance(info, Mapping) else None,
            caps if isinstance(caps, Mapping) else None,
            text if isinstance(text, str) else None,
        )

    def server_config(self, base: ServerConfig | None = None) -> ServerConfig:
        """The downstream server's configuration: ``base`` answering ``initialize`` and
        ``server/discover`` with the upstream's facts."""
        return downstream_config(
            base if base is not None else ServerConfig(),
            self.server_info,
            self.server_capabilities,
            self.instructions,
            self.tools,
        )

    @property
    def held(self) -> int:
        """How many upstream calls are held now."""
        return len(self._holds)

    @property
    def upstream_connections(self) -> int:
        """How many upstream connections are open now."""
        return len(self._conns)

    # --- the handler ------------------------------------------------------------------------

    async def handle(self, request: RequestReceived, ctx: RequestContext) -> HandlerResult:
        """Relay ``request`` upstream; the handler of the downstream server."""
        answer: HandlerResult
        try:
            if request.method not in INPUT_METHODS:
                answer = await self._relay(request, ctx)
            elif request.request_state is None:
                answer = await self._start(request, ctx)
            else:
                answer = await self._continue(request, ctx)
        except BridgeRefusedError as exc:
            answer = exc.error
        if request.session is not None and isinstance(answer, JsonRpcError):
            return legacy_error(answer)  # a legacy downstream session
        return answer

    async def _relay(self, request: RequestReceived, ctx: RequestContext) -> HandlerResult:
        """A request that cannot ask for input: one upstream call, its answer as it is."""
        conn = await self._connection(request)
        try:
            assert conn.client is not None
            params = relay_params(request.params, log_level=_log_level(request))
            with conn.listening(ctx):
                return await conn.client.request(request.method, params)
        except CallFailedError as exc:
            return relay_error(exc.code, exc.error.message, exc.error.data, local=exc.local)
        except ClientError as exc:
            return relay_error(-32603, str(exc), None, local=True)
        finally:
            self._done_with(conn)

    async def _start(self, request: RequestReceived, ctx: RequestContext) -> HandlerResult:
        conn = await self._connection(request)
        held = _Held(request.method, conn)
        try:
            hold_id = self._holds.hold(request.principal, held)
        except BaseException:
            self._done_with(conn)
            raise
        self._by_id[hold_id] = held
        if request.input_responses and self.upstream_era == "modern":
            held.offered = request.input_responses
        params = relay_params(request.params, hold_id, _log_level(request))
        self._tg.start_soon(self._run, held, conn, request.method, params)
        return await self._next(request, ctx, hold_id, held)

    async def _continue(self, request: RequestReceived, ctx: RequestContext) -> HandlerResult:
        hold_id = request.request_state
        held = self._holds.get(hold_id, request.principal)
        assert isinstance(hold_id, str)
        if held.method != request.method:  # a state moved to another method: not its call
            raise BridgeRefusedError(UNKNOWN_HOLD)
        answers = answers_for([s.need for s in held.asked], request.input_responses)
        if answers is None:  # S13: ask again rather than fail
            return self._ask(request, hold_id, held, held.asked)
        for slot, answer in zip(held.asked, answers, strict=True):
            slot.answer = answer
            slot.done.set()
        held.asked = []
        return await self._next(request, ctx, hold_id, held)

    async def _next(
        self, request: RequestReceived, ctx: RequestContext, hold_id: str, held: _Held
    ) -> HandlerResult:
        """Wait for the held call's next round of questions, or its end."""
        held.waiting = True
        try:
            with held.conn.listening(ctx):
                while held.outcome is None and not held.pending:
                    await held.wait()
            if held.outcome is None:
                for _ in range(_ROUND_SETTLE):
                    await anyio.lowlevel.checkpoint()
        except BaseException:  # the downstream gave up (cancelled): so does the upstream call
            self._release(hold_id)
            raise
        finally:
            held.waiting = False
        if held.outcome is not None:
            self._release(hold_id)
            return held.outcome
        slots, held.pending = held.pending, []
        held.asked = slots
        return self._ask(request, hold_id, held, slots)

    def _ask(
        self, request: RequestReceived, hold_id: str, held: _Held, slots: list[_Slot]
    ) -> InputRequiredResult:
        result = input_required_for([s.need for s in slots], hold_id)
        if over_round_cap(request, self._downstream):
            self._release(hold_id)
        return result

    def use_config(self, config: ServerConfig) -> ServerConfig:
        """Tell the bridge the configuration the downstream server runs with (its round cap);
        returns ``config``."""
        self._downstream = config
        return config

    async def _run(self, held: _Held, conn: _Conn, method: str, params: dict[str, Any]) -> None:
        """The held call's task: the upstream call to its end, or until released."""
        outcome: Mapping[str, Any] | JsonRpcError
        try:
            with held.scope:
                assert conn.client is not None
                try:
                    outcome = await conn.client.request(method, params)
                except CallFailedError as exc:
                    outcome = relay_error(
                        exc.code, exc.error.message, exc.error.data, local=exc.local
                    )
                except ClientError as exc:
                    outcome = relay_error(-32603, str(exc), None, local=True)
                held.outcome = outcome
                held.changed()
        finally:
            self._done_with(conn)

    async def ask_downstream(self, need: InputNeeded) -> Mapping[str, Any]:
        """The upstream client's input callback: the question joins its held call's round and
        waits for the downstream's answer."""
        meta = need.call.params.get("_meta") if need.call is not None else None
        hold_id = meta.get(HOLD_META) if isinstance(meta, Mapping) else None
        held = self._by_id.get(hold_id) if isinstance(hold_id, str) else None
        if held is None:  # SEP-2260: not tied to a held call of ours
            raise InputRejectedError(
                JsonRpcError(-32602, "No request of this client is waiting for this request")
            )
        if held.offered is not None and need.round == 1:
            offered = held.offered.get_response(str(need.key))
            if isinstance(offered, Mapping):
                return offered
        slot = _Slot(need)
        held.pending.append(slot)
        held.changed()
        try:
            await slot.done.wait()
        finally:
            if slot in held.pending:  # withdrawn before it was asked
                held.pending.remove(slot)
        assert slot.answer is not None
        return slot.answer

    def _release(self, hold_id: str) -> None:
        held = self._holds.release(hold_id)
        self._by_id.pop(hold_id, None)
        if held is not None:
            held.scope.cancel()

    async def _expire_loop(self) -> None:
        limits = self.limits
        while True:
            await anyio.sleep(min(1.0, limits.hold_timeout / 4, limits.upstream_idle_timeout / 4))
            now = self._clock()
            for conn in list(self._conns.values()):
                if conn.in_use == 0 and now - conn.last_used >= limits.upstream_idle_timeout:
                    conn.closing.set()
                    del self._conns[conn.key]
            for held in self._holds.expire(keep=lambda h: h.waiting):
                held.scope.cancel()
            for hold_id in [k for k, h in self._by_id.items() if h.scope.cancel_called]:
                del self._by_id[hold_id]

    # --- upstream connections ---------------------------------------------------------------

    async def _connection(self, request: RequestReceived) -> _Conn:
        """The upstream connection for ``request``, counted in use until :meth:`_done_with`
        (from before it is opened, so that it is never taken for idle meanwhile)."""
        session: Hashable | None = request.session
        key = upstream_key(request, session)
        conn = self._conns.get(key)
        if conn is not None and not conn.closing.is_set():
            conn.in_use += 1
            try:
                await conn.ready.wait()  # opened by another request a moment ago
            except BaseException:
                self._done_with(conn)
                raise
            if conn.client is None:  # that opening failed
                self._done_with(conn)
                raise BridgeRefusedError(relay_error(-32603, "opening failed", None, local=True))
        else:
            self._make_room(key)
            conn = self._conns[key] = _Conn(key)
            conn.in_use += 1
            caps = upstream_capabilities(request.client_capabilities)
            try:
                await self._tg.start(self._run_connection, conn, caps)
            except BaseException:
                self._conns.pop(key, None)
                conn.ready.set()
                self._done_with(conn)
                raise
        conn.last_used = self._clock()
        return conn

    def _done_with(self, conn: _Conn) -> None:
        conn.in_use -= 1
        conn.last_used = self._clock()

    def _make_room(self, key: UpstreamKey) -> None:
        """Close the longest idle connection when a bound is reached (of the same principal
        first); none idle: :class:`BridgeRefusedError`."""
        limits = self.limits
        mine = [c for c in self._conns.values() if c.key.principal == key.principal]
        if len(mine) >= limits.max_upstreams_per_principal:
            pool = mine
        elif len(self._conns) >= limits.max_upstreams:
            pool = list(self._conns.values())
        else:
            return
        idle = [c for c in pool if c.in_use == 0]
        if not idle:
            raise BridgeRefusedError(UPSTREAMS_EXHAUSTED)
        victim = min(idle, key=lambda c: c.last_used)
        victim.closing.set()
        self._conns.pop(victim.key, None)

    async def _run_connection(
        self,
        conn: _Conn,
        caps: dict[str, Any],
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        config = ClientConfig(client_info=BRIDGE_INFO, capabilities=caps, era=self.upstream.era)
        callbacks: dict[str, Any] = dict.fromkeys(caps, self.ask_downstream)
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


async def _tool_listing(client: AsyncClientBase) -> list[Mapping[str, Any]]:
    """Every page of the upstream's ``tools/list`` (at most ``_TOOL_PAGES``); none when the
    upstream fails it (its calls' headers are then not checked by the bridge)."""
    tools: list[Mapping[str, Any]] = []
    cursor = None
    for _ in range(_TOOL_PAGES):
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


def _log_level(request: RequestReceived) -> str | None:
    return request.session.log_level if request.session is not None else None


# --- the command ----------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mrtr-bridge",
        description="Relay MCP between a client and a server of either era (2025-11-25, "
        "2026-07-28), translating multi round-trip requests both ways.",
    )
    parser.add_argument(
        "--listen",
        required=True,
        help="http://HOST:PORT/PATH (Streamable HTTP) or stdio",
    )
    parser.add_argument(
        "--upstream",
        help="the upstream server's URL; or end the options with -- COMMAND ARGS... for a "
        "stdio server",
    )
    parser.add_argument("--downstream-era", choices=("auto", "modern", "legacy"), default="auto")
    parser.add_argument("--upstream-era", choices=("auto", "modern", "legacy"), default="auto")
    parser.add_argument("--hold-timeout", type=float, default=BridgeLimits().hold_timeout)
    parser.add_argument("--max-held", type=int, default=BridgeLimits().max_held)
    parser.add_argument(
        "--max-held-per-principal", type=int, default=BridgeLimits().max_held_per_principal
    )
    parser.add_argument("--log-level", default="warning")
    return parser


def _downstream_base(era: str) -> ServerConfig:
    if era == "modern":
        return ServerConfig(legacy_versions=())
    if era == "legacy":  # no modern version: a modern request is refused -32022
        return ServerConfig(supported_versions=())
    return ServerConfig()


async def _serve(args: argparse.Namespace, command: Sequence[str]) -> None:
    upstream = Upstream(url=args.upstream, command=command, era=args.upstream_era)
    limits = BridgeLimits(
        max_held=args.max_held,
        max_held_per_principal=args.max_held_per_principal,
        hold_timeout=args.hold_timeout,
    )
    async with Bridge.open(upstream, limits) as bridge:
        config = bridge.use_config(bridge.server_config(_downstream_base(args.downstream_era)))
        if args.listen == "stdio":
            from .anyio import serve_stdio

            await serve_stdio(bridge.handle, config)
            return
        import urllib.parse

        import uvicorn

        from .asgi import McpHttpApp

        url = urllib.parse.urlsplit(args.listen)
        if url.scheme != "http" or url.hostname is None:
            raise SystemExit("--listen: give http://HOST:PORT/PATH or stdio")
        app = McpHttpApp(
            bridge.handle, config, path=url.path or "/mcp", legacy=args.downstream_era != "modern"
        )
        server = uvicorn.Server(
            uvicorn.Config(
                app, host=url.hostname, port=url.port or 80, log_level=args.log_level, lifespan="on"
            )
        )
        await server.serve()


def main(argv: Sequence[str] | None = None) -> None:
    """``mrtr-bridge``: run the bridge until interrupted (or, on stdio, until stdin ends)."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in args_in:
        at = args_in.index("--")
        args_in, command = args_in[:at], args_in[at + 1 :]
    args = _parser().parse_args(args_in)
    if (args.upstream is None) == (not command):
        raise SystemExit("mrtr-bridge: give --upstream URL or -- COMMAND ARGS... (one of them)")
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    anyio.run(_serve, args, command)


if __name__ == "__main__":
    main()
