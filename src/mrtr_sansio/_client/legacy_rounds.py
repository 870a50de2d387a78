"""Where a legacy server's request falls in its call's rounds (pure).

A legacy server asks for a call's input with its own requests (``server_requests.py`` decides
whether to accept one and which call it belongs to; :func:`receive` asks it, then places the
request). This part decides what an accepted request means for that call: it joins the round
being answered, opens the next round once the previous one is answered, or is one round beyond
``ClientConfig.max_rounds`` and ends the call; and how the call moves when one of its requests
is answered or withdrawn. The
:class:`~mrtr_sansio.ClientConnection` that owns the call carries it out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from mrtr_sansio._errors import ErrorCode, JsonRpcError
from mrtr_sansio._events import InputNeeded, RoundsExhausted
from mrtr_sansio._lifecycle import CallPhase, CallTrigger
from mrtr_sansio._mcp.envelope import Era
from mrtr_sansio._wire.jsonrpc import error_message

from .calls import CallState
from .server_requests import Accept, Refuse, Reply, ServerRequests

__all__ = ["Exhausted", "Opened", "closed_move", "place", "receive"]


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
