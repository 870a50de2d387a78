"""Where a legacy server's request falls in its call's rounds (pure).

A legacy server asks for a call's input with its own requests (``server_requests.py`` decides
whether to accept one and which call it belongs to). This part decides what an accepted request
means for that call: it joins the round being answered, opens the next round once the previous
one is answered, or is one round beyond ``ClientConfig.max_rounds`` and ends the call; and how
the call moves when one of its requests is answered or withdrawn. The
:class:`~mrtr_sansio.ClientConnection` that owns the call carries it out.
"""

from __future__ import annotations

from typing import Any

import attrs

from mrtr_sansio._errors import ErrorCode, JsonRpcError
from mrtr_sansio._events import InputNeeded, RoundsExhausted
from mrtr_sansio._lifecycle import CallPhase, CallTrigger
from mrtr_sansio._wire.jsonrpc import error_message

from .calls import CallState
from .server_requests import Accept, Reply

__all__ = ["Exhausted", "Opened", "closed_move", "place"]


@attrs.frozen
class Opened:
    """Surface ``event``; its call, if any, moves by ``SERVER_REQUEST`` into ``event.round``."""

    event: InputNeeded


@attrs.frozen
class Exhausted:
    """The request asks for a round beyond ``max_rounds``: refuse it with ``reply``, end the
    call on the wire (``ROUND_CAP``) and report ``event``."""

    reply: Reply
    event: RoundsExhausted


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
            return Exhausted(
                Reply(error_message(rid, error), error), RoundsExhausted(st.call, round_, msg)
            )
        round_ += 1
    return Opened(InputNeeded(st.call, rid, method, params, round_))


def closed_move(more: bool) -> CallTrigger:
    """How a call moves when one of its server's requests is answered or withdrawn, by
    whether ``more`` of them remain open."""
    return CallTrigger.ANSWERED if more else CallTrigger.LAST_ANSWERED
