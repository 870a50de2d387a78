"""The era bridge's upstream connections: which one serves a request (never another
principal's), what it declares upstream, which one closes to make room or when idle, and which
waiting request an upstream notification goes to."""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from mrtr_sansio._errors import ErrorCode, JsonRpcError
from mrtr_sansio._events import RequestReceived
from mrtr_sansio._mcp.capabilities import TASKS_EXTENSION, declares_tasks

from ._limits import BridgeLimits, BridgeRefusedError

__all__ = [
    "RELAYED_CAPABILITIES",
    "UPSTREAMS_EXHAUSTED",
    "UpstreamKey",
    "UpstreamUse",
    "idle_upstreams",
    "input_lane",
    "notification_target",
    "one_input_call_each",
    "upstream_capabilities",
    "upstream_key",
    "upstream_to_close",
]

#: The client capabilities the bridge can answer upstream by asking downstream: the three
#: embedded request kinds (DIGEST §3.2). Of anything else the downstream declares, the bridge
#: promises upstream only the tasks extension, whose requests it relays
#: (:func:`upstream_capabilities`).
RELAYED_CAPABILITIES = ("elicitation", "sampling", "roots")


def upstream_capabilities(client_capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """What the bridge declares upstream for a downstream client: exactly the embedded-request
    capabilities that client declared (DIGEST §2.3 S7 and §3: the upstream may then ask only
    what the downstream can answer, and the bridge never promises more), and the tasks
    extension when it declared it (ext-tasks: the upstream may then answer with a task, which
    the bridge passes on)."""
    out: dict[str, Any] = {
        name: dict(value) if isinstance(value, Mapping) else {}
        for name, value in client_capabilities.items()
        if name in RELAYED_CAPABILITIES
    }
    if declares_tasks(client_capabilities):
        out["extensions"] = {TASKS_EXTENSION: {}}
    return out


@attrs.frozen
class UpstreamKey:
    """Which upstream connection serves a request: never shared across principals, one per
    legacy downstream session (``session`` a token of it), and per declared capabilities
    (DIGEST §1.1: on the modern wire they travel per request; on the legacy wire the upstream
    session fixes them at ``initialize``). ``lane`` tells apart the connections of one key that
    the adapter opens side by side (:func:`input_lane`)."""

    principal: str | None
    session: Hashable | None
    capabilities: str
    lane: int = 0


def upstream_key(request: RequestReceived, session: Hashable | None = None) -> UpstreamKey:
    """The :class:`UpstreamKey` of ``request``; ``session`` is the transport's token of its
    legacy session (None on the modern wire)."""
    caps = upstream_capabilities(request.client_capabilities)
    return UpstreamKey(request.principal, session, json.dumps(caps, sort_keys=True))


#: A new upstream connection is needed, a bound is reached and none is idle to make room.
UPSTREAMS_EXHAUSTED = JsonRpcError(
    ErrorCode.INTERNAL_ERROR,
    "The bridge has too many upstream connections in use; try again later",
    {"reason": "bridge_upstreams_exhausted"},
)
#: One open upstream connection as the decisions below read it: its key, how many requests
#: use it now, and when it was last used.
UpstreamUse = tuple[UpstreamKey, int, float]


def upstream_to_close(
    key: UpstreamKey, open_now: Iterable[UpstreamUse], limits: BridgeLimits
) -> UpstreamKey | None:
    """The upstream connection to close before one opens for ``key``: None under both bounds;
    at ``max_upstreams_per_principal`` the longest idle of that principal's, at
    ``max_upstreams`` the longest idle of all; none idle: :class:`BridgeRefusedError` with
    :data:`UPSTREAMS_EXHAUSTED` (a connection in use is never taken from its request)."""
    uses = list(open_now)
    mine = [u for u in uses if u[0].principal == key.principal]
    if len(mine) >= limits.max_upstreams_per_principal:
        pool = mine
    elif len(uses) >= limits.max_upstreams:
        pool = uses
    else:
        return None
    idle = [u for u in pool if u[1] == 0]
    if not idle:
        raise BridgeRefusedError(UPSTREAMS_EXHAUSTED)
    return min(idle, key=lambda u: u[2])[0]


def idle_upstreams(
    open_now: Iterable[UpstreamUse], now: float, limits: BridgeLimits
) -> list[UpstreamKey]:
    """The upstream connections to close at ``now``: unused for ``upstream_idle_timeout``."""
    return [
        key
        for key, in_use, last_used in open_now
        if in_use == 0 and now - last_used >= limits.upstream_idle_timeout
    ]


def one_input_call_each(stdio: bool, era: str | None) -> bool:
    """Whether an upstream connection may carry only one input call at a time: a legacy one on
    stdio, where a server request names no call (SEP-2260 has no wire field for it), so it is
    certainly a call's only while that call is the one in flight. (On HTTP a legacy server's
    request rides its call's response stream; a modern one names its call in ``_meta``.)"""
    return stdio and era == "legacy"


def input_lane(
    key: UpstreamKey, asking: Mapping[UpstreamKey, int], limits: BridgeLimits
) -> UpstreamKey:
    """The lane of ``key`` an input call goes to when an upstream connection takes one at a
    time (:func:`one_input_call_each`): the first of ``max_upstreams_per_principal`` lanes
    with no input call (``asking``: how many each open connection carries now), else the least
    busy one, whose calls then go in turn. Only for requests with no downstream session (the
    modern wire): a legacy downstream session keeps its one upstream session."""
    if key.session is not None:
        return key
    lanes = [attrs.evolve(key, lane=i) for i in range(limits.max_upstreams_per_principal)]
    return min(lanes, key=lambda lane: asking.get(lane, 0))


def notification_target(
    method: str, params: Mapping[str, Any] | None, waiting: Sequence[Mapping[str, Any]]
) -> int | None:
    """Which of the downstream requests ``waiting`` on an upstream connection (their
    ``_meta``) an upstream notification is about, by index, or None to drop it: progress by
    its token (the downstream's own, relayed), a log message when only one request waits (it
    is then certainly that request's). Nothing else is relayed: it could be another
    request's, even another principal's on a shared wire."""
    if method == "notifications/progress" and params is not None:
        token = params.get("progressToken")
        return next(
            (i for i, meta in enumerate(waiting) if meta.get("progressToken") == token), None
        )
    if method == "notifications/message" and len(waiting) == 1:
        return 0
    return None
