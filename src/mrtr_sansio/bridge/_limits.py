"""The era bridge's bounds, and its refusal."""

from __future__ import annotations

from typing import Any

import attrs

from mrtr_sansio._errors import JsonRpcError

__all__ = ["BridgeLimits", "BridgeRefusedError"]


def _positive(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) not in (int, float) or value <= 0:
        raise ValueError(f"{attribute.name}: must be a positive number, not {value!r}")


@attrs.frozen
class BridgeLimits:
    """The bridge's bounds; every one refuses rather than waits.

    ``max_held`` upstream calls held in all (``max_held_per_principal`` for one principal), each
    for at most ``hold_timeout`` seconds from its last round (S8: a downstream client need not
    retry, so a held call cannot wait for it forever); ``max_upstreams`` upstream connections
    (``max_upstreams_per_principal`` for one principal), the longest idle closed first, and
    any closed after ``upstream_idle_timeout`` seconds unused (a legacy downstream session that
    ended leaves its upstream connection idle: nothing tells the bridge it ended).
    ``max_tasks`` task ids remembered for their owners (``max_tasks_per_principal`` for one
    principal), the least recently used forgotten first (:class:`TaskOwners`).
    """

    max_held: int = attrs.field(default=256, validator=_positive)
    max_held_per_principal: int = attrs.field(default=32, validator=_positive)
    hold_timeout: float = attrs.field(default=600.0, validator=_positive)
    max_upstreams: int = attrs.field(default=64, validator=_positive)
    max_upstreams_per_principal: int = attrs.field(default=8, validator=_positive)
    upstream_idle_timeout: float = attrs.field(default=300.0, validator=_positive)
    max_tasks: int = attrs.field(default=4096, validator=_positive)
    max_tasks_per_principal: int = attrs.field(default=256, validator=_positive)


class BridgeRefusedError(Exception):
    """A request the bridge refuses; :attr:`error` is the downstream's answer."""

    def __init__(self, error: JsonRpcError) -> None:
        super().__init__(error.message)
        self.error = error
