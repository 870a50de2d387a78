"""Where a legacy server's request falls in its call's rounds (pure).

A legacy server asks for a call's input with its own requests (``server_requests.py`` decides
whether to accept one and which call it belongs to; :func:`receive` asks it, then places the
request). This part decides what an accepted request means for that call: it joins the round
being answered, opens the next round once the previous one is answered, or is one round beyond
``ClientConfig.max_rounds`` and ends the call; and how the call moves when one of its requests
is answered or withdrawn. :class:`LegacyRounds` is the stateful part the
:class:`~mrtr_sansio.ClientConnection` holds: the open requests (its :class:`ServerRequests`,
their one record) with these rules, returning what to send and how a call moves; the connection
owns the calls and carries it out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from mrtr_sansio._errors import ErrorCode, JsonRpcError
from mrtr_sansio._events import InputNeeded, InputWithdrawn, RoundsExhausted
from mrtr_sansio._lifecycle import CallPhase, CallTrigger
from mrtr_sansio._mcp.envelope import Era
from mrtr_sansio._wire.jsonrpc import error_message

from .calls import CallState
from .server_requests import Accept, Refuse, Reply, ServerRequests

__all__ = ["Closed", "Exhausted", "LegacyRounds", "Opened", "closed_move", "place", "receive"]


@attrs.frozen
class Opened:
    """Surface ``event`` (and give it to :meth:`ServerRequests.opened`); its call ``st``, if
    any, moves by ``SERVER_REQUEST`` into ``event.round``."""

    event: InputNeeded
    st: CallState | None = None


@attrs.frozen
class Exhausted:
    """The request asks for a round beyond ``max_rounds``: refuse it with ``reply``, end the
    call ``st`` on the wire (``ROUND_CAP``) and report ``event``."""

    reply: Reply
    event: RoundsExhausted
    st: CallState


@attrs.frozen
class Closed:
    """``event``'s request no longer awaits the application's answer: ``outcome`` says why
    (``"answered"``, ``"error"``, or ``"withdrawn"``: the server cancelled it, or the stream
    closed, and the application is told with :class:`~mrtr_sansio.InputWithdrawn`); its
    call, when it has one still running, moves by ``move``."""

    event: InputNeeded
    outcome: str
    move: CallTrigger | None = None

    @property
    def withdrawn(self) -> InputWithdrawn | None:
        """What tells the application its request is withdrawn (None: it was answered)."""
        event = self.event
        return InputWithdrawn(event.call, event.key) if self.outcome is WITHDRAWN else None


def receive(
    server: ServerRequests,
    msg: dict[str, Any],
    related: Any,
    era: Era | None,
    legs: Mapping[Any, CallState],
    max_rounds: int,
) -> Reply | Refuse | Opened | Exhausted:
    """A legacy server's request ``msg``: what ``server`` decides (``legs``: our requests in
    flight and their calls), and for an accepted one where it falls in its call's rounds. It
    reads ``server`` and changes nothing."""
    verdict = server.on_request(
        msg, related, era, {rid: st.call.method for rid, st in legs.items()}
    )
    if not isinstance(verdict, Accept):
        return verdict
    return place(verdict, None if verdict.origin is None else legs[verdict.origin], msg, max_rounds)


def place(
    accepted: Accept, st: CallState | None, msg: dict[str, Any], max_rounds: int
) -> Opened | Exhausted:
    """What the accepted request ``msg`` means for the call ``st`` it belongs to (None: not
    linked to a call, a round of its own)."""
    rid, method, params = accepted.request_id, accepted.method, accepted.params
    if st is None:
        return Opened(InputNeeded(None, rid, method, params, 1))
    round_ = st.round
    if st.phase is CallPhase.AWAITING_ANSWER:  # the previous round is answered: a new one
        if round_ >= max_rounds:
            error = JsonRpcError(
                ErrorCode.INTERNAL_ERROR,
                f"The client ended the request after {round_} rounds of input "
                f"(max_rounds={max_rounds})",
            )
            reply = Reply(error_message(rid, error), error)
            return Exhausted(reply, RoundsExhausted(st.call, round_, msg), st)
        round_ += 1
    return Opened(InputNeeded(st.call, rid, method, params, round_), st)


def closed_move(more: bool) -> CallTrigger:
    """How a call moves when one of its server's requests is answered or withdrawn, by
    whether ``more`` of them remain open."""
    return CallTrigger.ANSWERED if more else CallTrigger.LAST_ANSWERED


#: The :attr:`Closed.outcome` of a request the application no longer answers.
WITHDRAWN = "withdrawn"


class LegacyRounds(ServerRequests):
    """The legacy server's open requests and the rounds of the calls they belong to."""

    __slots__ = ()

    def receive(
        self, msg: dict[str, Any], related: Any, era: Era | None, legs: Mapping[Any, CallState]
    ) -> Reply | Refuse | Opened | Exhausted:
        """The server's request ``msg``, by :func:`receive`; an :class:`Opened` one now awaits
        the application's answer."""
        step = receive(self, msg, related, era, legs, self._config.max_rounds)
        if isinstance(step, Opened):
            self.opened(step.event)
        return step

    def settle(self, event: InputNeeded, reply: Reply) -> Closed:
        """``reply`` to ``event`` went out: the request is closed, and its call moves."""
        self.closed(event)
        return Closed(event, "answered" if reply.error is None else "error", self._move(event))

    def withdraw(self, params: dict[str, Any] | None) -> Closed | None:
        """``notifications/cancelled`` from the server: the open request it withdraws, if any,
        and how its call moves."""
        event = self.on_cancelled(params)
        return None if event is None else Closed(event, WITHDRAWN, self._move(event))

    def withdraw_all(self) -> list[Closed]:
        """The stream ended (the calls ended first): every request still open is void."""
        return [Closed(event, WITHDRAWN) for event in self.close()]

    def _move(self, event: InputNeeded) -> CallTrigger | None:
        call = event.call
        return None if call is None else closed_move(self.has_open(call))
