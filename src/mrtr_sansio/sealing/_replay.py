"""Replay guards: each sealed ``requestState`` accepted at most once, when a server needs it.

Binding and expiry do not make a token single-use (DIGEST §4.4); servers whose state must be
consumed at most once (one-time redemptions) plug a guard into ``RequestStateSecurity``.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Protocol

__all__ = ["MemoryReplayGuard", "ReplayGuard"]


class ReplayGuard(Protocol):
    """Remembers redeemed tokens so that each is accepted at most once (the spec's MUST for
    one-time redemptions).

    ``consume`` is called after a token passed every other check, with its unique id, its
    expiry and the current clock reading; it returns False if the id was seen before (or can
    no longer be vouched for). Ids need only be remembered until ``expires``: the token is
    refused as expired after that. Deployments with several instances need a shared store
    (e.g. an atomic set-if-absent with expiry).
    """

    def consume(self, token_id: bytes, expires: float, now: float) -> bool:
        """True the first time ``token_id`` is seen (remember it until ``expires``), else
        False."""
        ...


class MemoryReplayGuard:
    """A bounded in-memory :class:`ReplayGuard` for one process (not thread-safe).

    Holds at most ``max_entries`` ids. It forgets ids once they expire, or the oldest one when
    full, and refuses every token expiring no later than anything it forgot (it can no longer
    vouch for those): under pressure, or if the clock steps back, it fails closed, never open.
    """

    __slots__ = ("_floor", "_seen", "max_entries")

    def __init__(self, max_entries: int = 65536) -> None:
        if type(max_entries) is not int or max_entries < 1:
            raise ValueError(f"max_entries must be a positive integer, got {max_entries!r}")
        self.max_entries = max_entries
        self._seen: OrderedDict[bytes, float] = OrderedDict()
        self._floor = -math.inf

    def __len__(self) -> int:
        return len(self._seen)

    def consume(self, token_id: bytes, expires: float, now: float) -> bool:
        """True the first time ``token_id`` is seen; False for a repeat, or for a token it can
        no longer vouch for (expiring no later than one it had to forget)."""
        seen = self._seen
        if token_id in seen or not expires > self._floor:
            return False
        while seen and (len(seen) >= self.max_entries or next(iter(seen.values())) <= now):
            _, forgotten = seen.popitem(last=False)
            self._floor = max(self._floor, forgotten)
        if not expires > self._floor:
            return False
        seen[token_id] = expires
        return True
