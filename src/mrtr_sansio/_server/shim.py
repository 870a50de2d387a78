"""The legacy shim: fulfil ``input_required`` on the 2025-11-25 wire with real server requests.

A legacy client cannot receive an ``input_required`` result, so when a handler returns one for a
legacy ``tools/call``, ``prompts/get`` or ``resources/read`` the connection sends each embedded
request as a server-to-client JSON-RPC request tied to the original request (SEP-2260),
collects the answers under the same keys, and replays the original request to the handler with
this round's answers and the state it wrote. The handler re-runs from the start: the same
contract as a modern retry, so one handler style serves both wires.

A *round* is one ``input_required`` answer the shim fulfils: its requests (the *legs*) sent and
all answered -- or, for a state-only result, nothing sent -- ending with a replay. The shim
fulfils at most ``legacy_max_rounds`` rounds per request, so the handler runs at most
``legacy_max_rounds + 1`` times; one more ``input_required`` fails the request with -32603 and a
:class:`RoundsExhausted` event.

Every round re-checks the session's capabilities before anything reaches the client. Legs wait
for ``notifications/initialized`` (a server sends no requests but ``ping`` before it). The rounds,
the shimmed requests and the pending legs are all bounded.

The shim is a pure part of the :class:`~mrtr_sansio.ServerConnection` that owns it: it keeps
its runs and legs and nothing else, and every call returns the actions the connection applies,
in order (:class:`SendRequest`, :class:`CancelLeg`, :class:`Replay`, :class:`Fail`,
:class:`Emit`). It never calls back into the connection, so no failure path re-enters it.
Which requests are in flight is the connection's record alone: a run exists only for a request
in flight, the connection tells the shim when one ends (:meth:`LegacyShim.finish`,
:meth:`~LegacyShim.abandon`, :meth:`~LegacyShim.abandon_all`) and asks which wait for the
client (:meth:`~LegacyShim.waiting`); the shim never decides that a request leaves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import attrs

from mrtr_sansio._config import Limits, ServerConfig
from mrtr_sansio._errors import JsonRpcError, LocalProtocolError
from mrtr_sansio._events import (
    Event,
    FulfilRequest,
    PingAnswered,
    RequestReceived,
    RoundsExhausted,
    UnexpectedResponse,
)
from mrtr_sansio._lifecycle import LEGACY_SHIM, ShimPhase, ShimTrigger
from mrtr_sansio._mcp.capabilities import ELICIT, capability_paths, missing_capabilities
from mrtr_sansio._mcp.values import InputRequiredResult
from mrtr_sansio._pending import Pending
from mrtr_sansio._wire.jsonrpc import is_valid_id, notification_message, request_message

__all__ = [
    "CancelLeg",
    "Emit",
    "Fail",
    "LegEnded",
    "LegacyShim",
    "Replay",
    "SendRequest",
    "ShimAction",
]


@attrs.frozen
class SendRequest:
    """Write ``item`` (an encoded outgoing-queue entry: leg ``leg_id`` of request
    ``request_id``, asking ``method`` under ``key`` in the shim's ``round``) to the client."""

    item: Pending
    request_id: Any
    leg_id: int
    key: str
    method: str
    round: int = 1


@attrs.frozen
class CancelLeg:
    """Tell the client (``notifications/cancelled``) that leg ``leg_id`` of request
    ``related_request_id`` is withdrawn, for ``reason``."""

    leg_id: int
    related_request_id: Any
    reason: str

    def message(self) -> dict[str, Any]:
        """The ``notifications/cancelled`` that withdraws the leg."""
        return notification_message(
            "notifications/cancelled", {"requestId": self.leg_id, "reason": self.reason}
        )


@attrs.frozen
class Replay:
    """Hand ``event`` (the original request with this round's answers) to the handler again."""

    event: RequestReceived


@attrs.frozen
class Fail:
    """Answer the original request ``request_id`` (still in flight) with ``error``."""

    request_id: Any
    error: JsonRpcError


@attrs.frozen
class LegEnded:
    """Leg ``leg_id`` (``key``) of request ``request_id`` ended: ``how`` is ``"answered"``,
    ``"failed"`` (a JSON-RPC error or a non-object result) or ``"timed_out"``. Only an
    observer needs it."""

    request_id: Any
    leg_id: int
    key: str
    how: Literal["answered", "failed", "timed_out"]


@attrs.frozen
class Emit:
    """Queue ``event`` for the application."""

    event: Event


#: What a shim call asks its connection to do.
ShimAction = SendRequest | CancelLeg | Replay | Fail | LegEnded | Emit


class _Leg:
    """One server-to-client request awaiting its answer; ``item`` is its outgoing-queue entry.

    Whether it is written yet is its run's phase (``HELD``: not yet), not a field of its own.
    """

    __slots__ = ("deadline", "item", "key", "leg_id", "method", "request_id")

    def __init__(self, request_id: Any, leg_id: int, key: str, method: str, item: Pending) -> None:
        self.request_id = request_id
        self.leg_id = leg_id
        self.key = key
        self.method = method
        self.deadline = 0.0
        self.item = item


class _Run:
    """One client request being fulfilled through the shim, across its rounds.

    ``phase`` changes only through the :data:`LEGACY_SHIM` table, and the shim reads what
    to do from it: legs are held while it is ``HELD``, written in ``AWAITING_INPUT``, and the
    handler may answer only where the table declares its answer.
    """

    __slots__ = ("answers", "first", "pending", "phase", "rounds", "state")

    def __init__(self, first: RequestReceived) -> None:
        self.first = first
        self.phase = ShimPhase.RUNNING
        self.rounds = 0
        self.pending: dict[str, int] = {}  # key -> leg id
        self.answers: dict[str, Any] = {}
        self.state: Any = None


#: The phases of a run whose handler cannot answer: its legs are held or with the client.
_WAITING = (
    frozenset(phase for phase in ShimPhase if not LEGACY_SHIM.allows(phase, ShimTrigger.RESULT))
    - LEGACY_SHIM.terminal
)


class LegacyShim:
    """The shim state of one server connection (legacy session or stdio process)."""

    def __init__(self, config: ServerConfig) -> None:
        self._config = config
        self._limits: Limits = config.limits
        self._runs: dict[Any, _Run] = {}
        self._legs: dict[int, _Leg] = {}  # in the order they were built
        self._pings: set[int] = set()
        self._next_id = 0

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def check_answer(self, request_id: Any) -> None:
        """Refuse (:class:`LocalProtocolError`) a handler's answer to ``request_id`` while its
        run is in a phase where the table declares no answer (legs held or awaiting the
        client); the request stays open."""
        run = self._runs.get(request_id)
        if run is not None and not LEGACY_SHIM.allows(run.phase, ShimTrigger.RESULT):
            raise LocalProtocolError(
                f"request {request_id!r} is waiting for the client's input "
                f"(legacy shim: {run.phase.value})"
            )

    # --- rounds -----------------------------------------------------------------------------

    def start_round(
        self,
        event: RequestReceived,
        ir: InputRequiredResult,
        encode: Callable[[Any], bytes],
        hold: bool,
    ) -> list[ShimAction]:
        """The handler answered ``event`` with ``ir``: send its legs (or replay at once).

        ``encode`` serializes a message (the connection's codec); ``hold`` says the session
        has not sent ``notifications/initialized`` yet, so the legs wait for :meth:`release`.
        Raises :class:`LocalProtocolError` (from encoding) before changing any state when a
        request cannot be serialized; the original request then stays open.
        """
        config = self._config
        limits = self._limits
        rid = event.request_id
        run = self._runs.get(rid)
        if run is None:
            run = _Run(event)
            if len(self._runs) >= limits.max_shimmed_requests:
                return self._refuse(
                    run,
                    ShimTrigger.REFUSED,
                    JsonRpcError.internal("Too many requests are waiting for input"),
                )
        if run.rounds >= config.legacy_max_rounds:
            return [
                Emit(RoundsExhausted(run.first, run.rounds, ir.to_wire())),
                *self._refuse(
                    run,
                    ShimTrigger.ROUND_CAP,
                    JsonRpcError.internal(
                        f"The handler still needed input after {run.rounds} rounds "
                        f"(legacy_max_rounds={config.legacy_max_rounds})"
                    ),
                ),
            ]
        required = ir.required_capabilities()
        if required:
            missing = missing_capabilities(required, event.client_capabilities)
            if missing:
                names = ", ".join(capability_paths(missing))
                return self._refuse(
                    run,
                    ShimTrigger.REFUSED,
                    JsonRpcError.internal(
                        f"The handler needs client capabilities this session did not declare: "
                        f"{names}",
                        {"requiredCapabilities": required},
                    ),
                )
        requests = ir.input_requests or {}
        if len(self._legs) + len(requests) > limits.max_pending_legs:
            return self._refuse(
                run,
                ShimTrigger.REFUSED,
                JsonRpcError.internal("Too many requests to the client are pending"),
            )
        legs: dict[int, _Leg] = {}
        for key, request in requests.items():
            params = None if request.params is None else dict(request.params)
            if (
                request.method == ELICIT
                and params is not None
                and params.get("mode") == "url"
                and params.get("elicitationId") is None
            ):
                params["elicitationId"] = config.token_hex(16)
            leg_id = self._new_id()
            msg = request_message(leg_id, request.method, params)
            item: Pending = (FulfilRequest, encode(msg), msg, rid, (leg_id, key))
            legs[leg_id] = _Leg(rid, leg_id, key, request.method, item)
        if not legs:
            trigger = ShimTrigger.STATE_ONLY
        else:
            trigger = ShimTrigger.LEGS_HELD if hold else ShimTrigger.LEGS_SENT
        phase = LEGACY_SHIM.step(run.phase, trigger)
        # Nothing below can fail: commit the round, and do what its phase says.
        self._runs[rid] = run
        run.phase = phase
        run.rounds += 1
        run.state = ir.request_state
        run.answers = {}
        if phase is ShimPhase.RUNNING:
            return [self._replay(run)]
        deadline = config.clock() + config.legacy_leg_timeout
        for leg_id, leg in legs.items():
            leg.deadline = deadline
            self._legs[leg_id] = leg
            run.pending[leg.key] = leg_id
        if phase is ShimPhase.HELD:
            return []  # written by release()
        return [self._write(leg, run.rounds) for leg in legs.values()]

    def release(self) -> list[ShimAction]:
        """``notifications/initialized`` arrived: write the legs held until now.

        Their deadlines start now, as the client sees them only now.
        """
        runs = self._runs
        held = [leg for leg in self._legs.values() if runs[leg.request_id].phase is ShimPhase.HELD]
        if not held:
            return []
        for run in runs.values():
            if LEGACY_SHIM.allows(run.phase, ShimTrigger.INITIALIZED):
                run.phase = LEGACY_SHIM.step(run.phase, ShimTrigger.INITIALIZED)
        config = self._config
        deadline = config.clock() + config.legacy_leg_timeout
        actions: list[ShimAction] = []
        for leg in held:
            leg.deadline = deadline
            actions.append(self._write(leg, runs[leg.request_id].rounds))
        return actions

    @staticmethod
    def _write(leg: _Leg, round: int) -> SendRequest:
        return SendRequest(leg.item, leg.request_id, leg.leg_id, leg.key, leg.method, round)

    @staticmethod
    def _replay(run: _Run) -> Replay:
        first = run.first
        params = dict(first.params)
        params["inputResponses"] = run.answers
        return Replay(
            RequestReceived(
                first.request_id,
                first.method,
                params,
                first.session,
                run.state,
                run.rounds + 1,
                first.principal,
            )
        )

    # --- answers from the client ------------------------------------------------------------

    def on_response(self, msg: dict[str, Any]) -> list[ShimAction]:
        """A response from the client: a leg's answer, a ping's, or nothing we asked for."""
        rid: Any = msg.get("id")
        leg = self._legs.get(rid) if is_valid_id(rid) else None
        run = None if leg is None else self._runs[leg.request_id]
        # Only a run whose legs are written takes answers (a held leg was never sent).
        if run is None or not LEGACY_SHIM.allows(run.phase, ShimTrigger.LEG_ANSWERED):
            if rid in self._pings:
                self._pings.discard(rid)
                return [Emit(PingAnswered(rid, "error" not in msg))]
            return [Emit(UnexpectedResponse(rid, msg))]
        assert leg is not None
        del self._legs[rid]
        del run.pending[leg.key]
        failed = "error" in msg or type(msg.get("result")) is not dict
        ended = LegEnded(leg.request_id, rid, leg.key, "failed" if failed else "answered")
        return [ended, *self._settle_leg(run, leg, msg)]

    def _settle_leg(self, run: _Run, leg: _Leg, msg: dict[str, Any]) -> list[ShimAction]:
        """What a leg's answer does to its run: fail it, wait for the other legs, or replay."""
        if "error" in msg:
            err = JsonRpcError.from_wire(msg["error"])
            return self._fail(
                run,
                JsonRpcError.internal(
                    f"The client answered {leg.method} with an error: {err.message} "
                    f"(code {err.code})",
                    {"clientError": err.to_wire()},
                ),
                "The original request failed",
                ShimTrigger.LEG_FAILED,
            )
        result = msg["result"]
        if type(result) is not dict:
            return self._fail(
                run,
                JsonRpcError.internal(f"The client's {leg.method} result is not an object"),
                "The original request failed",
                ShimTrigger.LEG_FAILED,
            )
        run.answers[leg.key] = result
        trigger = ShimTrigger.LEG_ANSWERED if run.pending else ShimTrigger.ALL_ANSWERED
        run.phase = LEGACY_SHIM.step(run.phase, trigger)
        return [self._replay(run)] if run.phase is ShimPhase.RUNNING else []

    # --- endings ----------------------------------------------------------------------------

    def _cancel_legs(self, run: _Run, reason: str | None) -> list[ShimAction]:
        """Forget ``run``'s pending legs (called before its phase moves on); the client is told
        about them unless ``reason`` is None or they were held (never written)."""
        rid = run.first.request_id
        tell = reason is not None and run.phase is ShimPhase.AWAITING_INPUT
        actions: list[ShimAction] = []
        for leg_id in run.pending.values():
            del self._legs[leg_id]
            if tell:
                actions.append(CancelLeg(leg_id, rid, reason))  # type: ignore[arg-type]
        run.pending.clear()
        return actions

    def _fail(
        self, run: _Run, error: JsonRpcError, reason: str, trigger: ShimTrigger
    ) -> list[ShimAction]:
        """End ``run`` with ``error``: cancel its outstanding legs, then answer the original."""
        return [*self._cancel_legs(run, reason), *self._refuse(run, trigger, error)]

    def _refuse(self, run: _Run, trigger: ShimTrigger, error: JsonRpcError) -> list[ShimAction]:
        """End ``run`` (which has no pending legs) on ``trigger``, answering ``error``."""
        run.phase = LEGACY_SHIM.step(run.phase, trigger)
        rid = run.first.request_id
        self._runs.pop(rid, None)
        return [Fail(rid, error)]

    def finish(self, request_id: Any, trigger: ShimTrigger) -> None:
        """The handler answered the original request (``trigger``: a result or an error):
        forget its run.

        It has no pending legs: the handler cannot answer while legs are pending. (When the
        shim itself fails a request, the run is gone before its :class:`Fail` is applied.)
        """
        if self._runs:
            run = self._runs.pop(request_id, None)
            if run is not None:
                run.phase = LEGACY_SHIM.step(run.phase, trigger)

    def abandon(self, request_id: Any) -> list[ShimAction]:
        """The client cancelled the original request: cancel its legs, send nothing else."""
        run = self._runs.pop(request_id, None)
        if run is None:
            return []
        actions = self._cancel_legs(run, "The original request was cancelled")
        run.phase = LEGACY_SHIM.step(run.phase, ShimTrigger.CANCELLED)
        return actions

    def waiting(self, request_id: Any) -> bool:
        """Whether request ``request_id`` waits for the client (its legs held or sent), so
        that its handler cannot answer it now."""
        run = self._runs.get(request_id)
        return run is not None and run.phase in _WAITING

    def abandon_all(self) -> None:
        """The stream closed: forget every run, leg and ping."""
        for run in self._runs.values():
            self._cancel_legs(run, None)
            run.phase = LEGACY_SHIM.step(run.phase, ShimTrigger.CLOSED)
        self._runs.clear()
        self._pings.clear()

    # --- timers and pings -------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """The earliest leg deadline, or None."""
        if not self._legs:
            return None
        return min(leg.deadline for leg in self._legs.values())

    def handle_timer(self, now: float) -> list[ShimAction]:
        """Fail every request one of whose legs is past its deadline."""
        late = {leg.request_id: None for leg in self._legs.values() if leg.deadline <= now}
        timeout = self._config.legacy_leg_timeout
        runs = self._runs
        actions: list[ShimAction] = [
            LegEnded(leg.request_id, leg_id, leg.key, "timed_out")
            for leg_id, leg in self._legs.items()
            if leg.deadline <= now and runs[leg.request_id].phase is ShimPhase.AWAITING_INPUT
        ]
        for rid in late:
            actions += self._fail(
                self._runs[rid],
                JsonRpcError.internal(
                    "Timed out waiting for the client's answer to an input request "
                    f"(legacy_leg_timeout={timeout}s)"
                ),
                "Timed out waiting for the client's answer",
                ShimTrigger.LEG_TIMEOUT,
            )
        return actions

    def new_ping(self) -> int:
        """The id of a ``ping`` the connection is about to send, remembered for its answer."""
        ping_id = self._new_id()
        self._pings.add(ping_id)
        return ping_id
