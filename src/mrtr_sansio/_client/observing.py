"""What the client tells its observer (:mod:`mrtr_sansio.observe`): the facts of its calls,
their legs and the legacy server's requests. The connection holds one :class:`Reporter` only
when an observer is configured, so a connection without one pays nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mrtr_sansio._errors import JsonRpcError
from mrtr_sansio._events import Call, InputNeeded
from mrtr_sansio._mcp.methods import MRTR_METHODS, NAME_FIELDS
from mrtr_sansio._mcp.mrtr_fields import COMPLETE, INPUT_REQUIRED
from mrtr_sansio.observe import (
    CallFinished,
    CallRoundAnswered,
    CallRoundSent,
    CallRoundUnsent,
    CallStarted,
    LegReceived,
    LegReplied,
    Observer,
    SessionEnded,
    SessionStarted,
    Transport,
    connection_key,
    trace_of,
)

__all__ = ["Reporter"]


class Reporter:
    """Turns what happens to the client's calls into observer facts, stamped with the clock."""

    __slots__ = ("clock", "key", "observer")

    def __init__(self, observer: Observer, clock: Callable[[], float]) -> None:
        self.observer = observer
        self.clock = clock
        self.key = connection_key()

    def started(self, call: Call, transport: Transport | None) -> None:
        """A call was made (its target: the tool, prompt or resource it names)."""
        method = call.method
        target = call.params.get(NAME_FIELDS[method] if method in MRTR_METHODS else "name")
        self.observer.observe(
            CallStarted(
                self.clock(),
                self.key,
                call.call_id,
                method,
                target if type(target) is str else None,
                transport,
            )
        )

    def leg_sent(
        self,
        call: Call,
        rid: int,
        method: str,
        round_: int,
        params: dict[str, Any] | None,
        version: str | None,
        session_id: str | None,
    ) -> dict[str, Any] | None:
        """A request of the call goes out; return ``params`` with the observer's trace context
        in ``_meta`` (the spec's reserved keys only)."""
        observer = self.observer
        observer.observe(
            CallRoundSent(
                self.clock(), self.key, call.call_id, rid, method, round_, version, session_id
            )
        )
        carry = observer.carry(self.key, rid)
        if not carry:
            return params
        trace = trace_of(carry)
        if not trace:
            return params
        params = {} if params is None else dict(params)
        meta = params.get("_meta")
        params["_meta"] = {**(meta if isinstance(meta, Mapping) else {}), **trace}
        return params

    def unsent(self, call: Call, rid: int, exc: Exception) -> None:
        """The request just reported sent could not be encoded: it never went out (the
        application may answer again, and a new request is reported)."""
        self.observer.observe(CallRoundUnsent(self.clock(), self.key, call.call_id, rid, str(exc)))

    def answered(self, call: Call, msg: dict[str, Any], task_leg: bool) -> None:
        """The server answered a request of the call (``task_leg``: a tasks/get or
        tasks/update, whose tool result sits inside)."""
        result = msg.get("result")
        keys: tuple[str, ...] = ()
        error: JsonRpcError | None = None
        is_error = False
        if type(result) is dict:
            kind = result.get("resultType", COMPLETE)
            requests = result.get("inputRequests")
            if kind == INPUT_REQUIRED and type(requests) is dict:
                keys = tuple(requests)
            inner = result.get("result") if task_leg else result
            is_error = type(inner) is dict and inner.get("isError") is True
        else:
            kind = "error"
            error = JsonRpcError.from_wire(msg.get("error"))
        self.observer.observe(
            CallRoundAnswered(
                self.clock(),
                self.key,
                call.call_id,
                msg.get("id"),
                kind if type(kind) is str else "",
                keys,
                None if error is None else error.code,
                None if error is None else error.message,
                is_error,
            )
        )

    def finished(self, call: Call, outcome: Any, rounds: int) -> None:
        """The call ended: ``outcome`` is its last event, or how it was dropped (a string)."""
        code = None
        if type(outcome) is not str:
            error = getattr(outcome, "error", None)
            code = error.code if isinstance(error, JsonRpcError) else None
            outcome = type(outcome).__name__
        self.observer.observe(
            CallFinished(self.clock(), self.key, call.call_id, outcome, rounds, code)
        )

    def request_received(
        self, event: InputNeeded, session_id: str | None, version: str | None
    ) -> None:
        """A legacy server's request went to the application as ``event``."""
        call = event.call
        self.observer.observe(
            LegReceived(
                self.clock(),
                self.key,
                None if call is None else call.call_id,
                event.key,
                event.method,
                event.round,
                trace_of(event.params.get("_meta")),  # an object: checked on receipt
                session_id,
                version,
            )
        )

    def replied(self, request_id: Any, outcome: str) -> None:
        """A legacy server's request was answered, refused or withdrawn."""
        self.observer.observe(LegReplied(self.clock(), self.key, request_id, outcome))

    def session_started(self, version: str, transport: Transport | None) -> None:
        self.observer.observe(SessionStarted(self.clock(), self.key, "client", version, transport))

    def session_ended(self) -> None:
        self.observer.observe(SessionEnded(self.clock(), self.key))
