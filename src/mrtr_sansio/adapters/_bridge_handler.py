"""The era bridge's handler: :class:`Bridge` relays each downstream request upstream and holds
the upstream calls that ask for input while the downstream answers (see
:mod:`mrtr_sansio.adapters.bridge`)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc

from mrtr_sansio import (
    ClientConfig,
    InputNeeded,
    InputRequiredResult,
    JsonRpcError,
    RequestReceived,
    ServerConfig,
)
from mrtr_sansio.bridge import (
    HOLD_META,
    INPUT_METHODS,
    LIST_TASKS,
    TASK_PREFIX,
    UNKNOWN_HOLD,
    BridgeLimits,
    BridgeRefusedError,
    HeldCalls,
    TaskOwners,
    answers_for,
    created_task,
    downstream_config,
    input_required_for,
    legacy_error,
    over_round_cap,
    owned_listing,
    relay_error,
    relay_params,
    task_refusal,
)
from mrtr_sansio.protocol import SERVER_INFO

from ._bridge_held import HeldCall, Slot
from ._bridge_upstream import BRIDGE_INFO, Upstream, UpstreamConn, UpstreamPool, tool_listing
from ._client_common import SHUTDOWN_TIMEOUT, AsyncClientBase
from ._client_errors import CallFailedError, ClientError, InputRejectedError
from ._common import HandlerResult, RequestContext

__all__ = ["Bridge"]

log = logging.getLogger("mrtr_sansio.adapters.bridge")

#: Checkpoints a held call waits, after its first question of a round arrived, for the others
#: the same message carried (the client starts every callback of a message before any runs).
_ROUND_SETTLE = 3


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
        self._holds: HeldCalls[HeldCall] = HeldCalls(limits, clock, token_hex)
        self._by_id: dict[str, HeldCall] = {}
        self._tasks = TaskOwners(limits.max_tasks, limits.max_tasks_per_principal)
        self._pool = UpstreamPool(upstream, tasks, limits, clock, self.ask_downstream)
        self._downstream = ServerConfig()  # its round cap; see use_config
        #: The upstream's facts, read when the bridge opened.
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
                bridge._pool.era = c.era.value if c.era is not None else None
                bridge._learn(c.server_info, c.server_capabilities, c.instructions)
                if bridge.upstream_era == "modern" and c.server_capabilities is None:
                    await bridge._discover(c)  # the modern era forced: nothing probed it
                if "tools" in (bridge.server_capabilities or {}):
                    bridge.tools = await tool_listing(c)
            tg.start_soon(bridge._expire_loop)
            try:
                yield bridge
            finally:
                bridge._pool.close_all()
                for held in bridge._by_id.values():
                    held.scope.cancel()
                # each connection closes as its client does (a launched server is asked to
                # end first); cancelled only past the clients' own shutdown bound
                with anyio.move_on_after(2 * SHUTDOWN_TIMEOUT, shield=True):
                    while bridge._pool:
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
    def upstream_era(self) -> str | None:
        """The upstream's era (``modern`` or ``legacy``), found when the bridge opened."""
        return self._pool.era

    @property
    def held(self) -> int:
        """How many upstream calls are held now."""
        return len(self._holds)

    @property
    def tasks(self) -> int:
        """How many task ids the bridge remembers for their owners now."""
        return len(self._tasks)

    @property
    def upstream_connections(self) -> int:
        """How many upstream connections are open now."""
        return len(self._pool)

    # --- the handler ------------------------------------------------------------------------

    async def handle(self, request: RequestReceived, ctx: RequestContext) -> HandlerResult:
        """Relay ``request`` upstream; the handler of the downstream server."""
        answer: HandlerResult
        try:
            if request.method.startswith(TASK_PREFIX):
                answer = await self._task_request(request, ctx)
            elif request.method not in INPUT_METHODS:
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

    async def _task_request(self, request: RequestReceived, ctx: RequestContext) -> HandlerResult:
        """A ``tasks/*`` request: relayed only for the task's owner (``mrtr_sansio.bridge``'s
        task rules); a legacy ``tasks/list`` answer cut to the sender's own tasks."""
        legacy = self.upstream_era == "legacy"
        refused = task_refusal(
            self._tasks,
            request.principal,
            request.method,
            request.params,
            request.client_capabilities,
            legacy,
        )
        if refused is not None:
            return refused
        answer = await self._relay(request, ctx)
        if legacy and isinstance(answer, Mapping) and request.method == LIST_TASKS:
            return owned_listing(answer, self._tasks, request.principal)
        return answer

    async def _relay(self, request: RequestReceived, ctx: RequestContext) -> HandlerResult:
        """A request that cannot ask for input: one upstream call, its answer as it is."""
        conn = await self._pool.connection(request)
        try:
            assert conn.client is not None
            params = relay_params(request.params, None, _log_level(request), request.method)
            with conn.listening(ctx):
                return await conn.client.request(request.method, params)
        except CallFailedError as exc:
            return relay_error(exc.code, exc.error.message, exc.error.data, local=exc.local)
        except ClientError as exc:
            return relay_error(-32603, str(exc), None, local=True)
        finally:
            self._pool.done_with(conn)

    async def _start(self, request: RequestReceived, ctx: RequestContext) -> HandlerResult:
        conn = await self._pool.connection(request, asks=True)
        held = HeldCall(request.method, conn)
        try:
            hold_id = self._holds.hold(request.principal, held)
        except BaseException:
            self._pool.done_with(conn, asks=True)
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
        self, request: RequestReceived, ctx: RequestContext, hold_id: str, held: HeldCall
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
            outcome = held.outcome
            legacy = self.upstream_era == "legacy"
            task_id = None if isinstance(outcome, JsonRpcError) else created_task(outcome, legacy)
            if task_id is not None:  # passed on as it is; only its creator may reach it
                self._tasks.bind(request.principal, task_id)
            return held.outcome
        slots, held.pending = held.pending, []
        held.asked = slots
        return self._ask(request, hold_id, held, slots)

    def _ask(
        self, request: RequestReceived, hold_id: str, held: HeldCall, slots: list[Slot]
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

    async def _run(
        self, held: HeldCall, conn: UpstreamConn, method: str, params: dict[str, Any]
    ) -> None:
        """The held call's task: the upstream call to its end, or until released."""
        outcome: Mapping[str, Any] | JsonRpcError
        try:
            with held.scope:
                assert conn.client is not None
                try:
                    async with self._pool.turn(conn):
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
            self._pool.done_with(conn, asks=True)

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
        slot = Slot(need)
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
            self._pool.close_idle(self._clock())
            for held in self._holds.expire(keep=lambda h: h.waiting):
                held.scope.cancel()
            for hold_id in [k for k, h in self._by_id.items() if h.scope.cancel_called]:
                del self._by_id[hold_id]


def _log_level(request: RequestReceived) -> str | None:
    return request.session.log_level if request.session is not None else None
