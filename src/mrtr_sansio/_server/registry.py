"""Legacy HTTP sessions: who owns each one, when it expires, and which one gives way when full.

A pure part (no IO, no clock of its own): the adapter passes ``now`` to every call that depends
on time and asks :meth:`SessionRegistry.next_deadline` when to come back. The rules:

* a session belongs to the principal that opened it; :meth:`~SessionRegistry.get` with any other
  principal finds nothing, exactly as for an id that never existed (HTTP 404);
* a session is *busy* while at least one of its HTTP exchanges is open (:meth:`enter` /
  :meth:`leave`), otherwise *idle* since its last exchange ended; an idle session ends after
  ``idle_timeout`` seconds (a busy one is bounded by the leg timeout and the HTTP timeouts);
* opening a session when its principal already holds ``max_per_principal`` ends that
  principal's longest-idle session; when the server holds ``max_sessions``, the longest-idle
  session of anyone ends. Only when no candidate is idle is the newcomer refused.
  Anonymous sessions (principal None) are bounded by ``max_sessions`` alone.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Generic, TypeVar

import attrs

__all__ = ["Admission", "SessionRegistry"]

T = TypeVar("T")


@attrs.frozen
class Admission(Generic[T]):
    """What :meth:`SessionRegistry.open` decided: whether the session was added, and the
    sessions it ended to make room (already removed; the caller releases what they held)."""

    accepted: bool
    evicted: tuple[T, ...] = ()


class _Entry(Generic[T]):
    __slots__ = ("busy", "idle_since", "principal", "value")

    def __init__(self, value: T, principal: str | None, now: float) -> None:
        self.value = value
        self.principal = principal
        self.busy = 0
        self.idle_since = now


class SessionRegistry(Generic[T]):
    """The live sessions of one server, each holding a ``T`` (the adapter's connection).

    The one owner of the session table: ids, owners, idle order and the caps.
    """

    __slots__ = ("_by_principal", "_entries", "_idle", "idle_timeout", "max_per_principal",
                 "max_sessions")  # fmt: skip

    def __init__(self, *, max_sessions: int, max_per_principal: int, idle_timeout: float) -> None:
        self.max_sessions = max_sessions
        self.max_per_principal = max_per_principal
        self.idle_timeout = idle_timeout
        self._entries: dict[str, _Entry[T]] = {}
        #: Idle sessions, longest idle first.
        self._idle: OrderedDict[str, None] = OrderedDict()
        #: Every session of each named principal, in the order it went idle (busy ones too).
        self._by_principal: dict[str, dict[str, None]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[str]:
        """The ids of the live sessions, oldest first (a snapshot: closing while iterating is
        fine)."""
        return iter(list(self._entries))

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._entries

    def values(self) -> list[T]:
        """What every live session holds, oldest first."""
        return [entry.value for entry in self._entries.values()]

    def get(self, session_id: str, principal: str | None) -> T | None:
        """The session ``session_id`` if ``principal`` owns it, else None (as if unknown)."""
        entry = self._entries.get(session_id)
        if entry is None or entry.principal != principal:
            return None
        return entry.value

    def open(self, session_id: str, value: T, principal: str | None, now: float) -> Admission[T]:
        """Add a session for ``principal``, ending the longest-idle one its cap or the global
        cap calls for; refused (nothing changed) when the cap is reached and none is idle."""
        if session_id in self._entries:
            raise ValueError(f"session id {session_id!r} is already in use")
        victim: str | None = None
        own = self._by_principal.get(principal) if principal is not None else None
        if own is not None and len(own) >= self.max_per_principal:
            victim = next((sid for sid in own if sid in self._idle), None)
            if victim is None:
                return Admission(False)
        elif len(self._entries) >= self.max_sessions:
            victim = next(iter(self._idle), None)
            if victim is None:
                return Admission(False)
        evicted = () if victim is None else (self._remove(victim).value,)
        self._entries[session_id] = _Entry(value, principal, now)
        self._idle[session_id] = None
        if principal is not None:
            self._by_principal.setdefault(principal, {})[session_id] = None
        return Admission(True, evicted)

    def enter(self, session_id: str) -> None:
        """An HTTP exchange of the session began: it is busy until the matching :meth:`leave`."""
        entry = self._entries.get(session_id)
        if entry is not None:
            entry.busy += 1
            self._idle.pop(session_id, None)

    def leave(self, session_id: str, now: float) -> None:
        """An HTTP exchange of the session ended; with none left it is idle from ``now``.

        A session already closed (DELETE, expiry, eviction) is ignored.
        """
        entry = self._entries.get(session_id)
        if entry is None:
            return
        entry.busy -= 1
        if entry.busy == 0:
            entry.idle_since = now
            self._idle[session_id] = None
            if entry.principal is not None:  # keep the principal's order "longest idle first"
                own = self._by_principal[entry.principal]
                del own[session_id]
                own[session_id] = None

    def close(self, session_id: str) -> T | None:
        """Remove a session (DELETE, shutdown); what it held, or None if it was not live."""
        if session_id not in self._entries:
            return None
        return self._remove(session_id).value

    def expire(self, now: float) -> list[T]:
        """Remove and return every session idle for ``idle_timeout`` seconds or more."""
        ended: list[T] = []
        limit = now - self.idle_timeout
        while self._idle:
            session_id = next(iter(self._idle))
            if self._entries[session_id].idle_since > limit:
                break
            ended.append(self._remove(session_id).value)
        return ended

    def next_deadline(self) -> float | None:
        """When the longest-idle session expires (call :meth:`expire` then), or None."""
        for session_id in self._idle:
            return self._entries[session_id].idle_since + self.idle_timeout
        return None

    def _remove(self, session_id: str) -> _Entry[T]:
        entry = self._entries.pop(session_id)
        self._idle.pop(session_id, None)
        if entry.principal is not None:
            own = self._by_principal[entry.principal]
            del own[session_id]
            if not own:
                del self._by_principal[entry.principal]
        return entry
