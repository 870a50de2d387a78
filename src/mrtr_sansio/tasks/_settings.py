"""How a server runs tasks: the store, which tools may be tasks, and the bounds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ._store import InMemoryTaskStore, TaskStore
from ._values import TaskSupport

__all__ = ["TaskSettings"]


def _positive(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not int or value < 1:
        raise ValueError(f"{attribute.name}: must be a positive integer, got {value!r}")


def _optional_positive(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        _positive(inst, attribute, value)


def _optional_positive_number(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (
        not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0
    ):
        raise ValueError(f"{attribute.name}: must be a positive number or None, got {value!r}")


def _supports(value: Mapping[str, TaskSupport | str]) -> dict[str, TaskSupport]:
    return {name: TaskSupport(support) for name, support in value.items()}


@attrs.frozen
class TaskSettings:
    """The tasks extension on a server (``ServerConfig.tasks``): set, the server advertises
    ``io.modelcontextprotocol/tasks`` in ``server/discover`` and answers ``tasks/get``,
    ``tasks/update`` and ``tasks/cancel`` from ``store``.

    Task ids come from ``ServerConfig.token_hex`` (128 random bits each); times from
    ``ServerConfig.clock``.
    """

    #: Where task records live (in memory by default: gone with the process).
    store: TaskStore = attrs.field(factory=InMemoryTaskStore)
    #: Tools that may run as tasks, by name (``"optional"`` or ``"required"``); others never do.
    tools: Mapping[str, TaskSupport] = attrs.field(factory=dict, converter=_supports)
    #: ``ttlMs`` of new tasks: milliseconds from creation that a task stays readable (None:
    #: unlimited). An expired task is answered -32602 and deleted.
    ttl_ms: int | None = attrs.field(default=3_600_000, validator=_optional_positive)
    #: ``pollIntervalMs`` suggested to clients (None: not sent).
    poll_interval_ms: int | None = attrs.field(default=500, validator=_optional_positive)
    #: Tasks one principal may hold in the store at once (terminal ones count until they
    #: expire); one more is refused with -32603.
    max_tasks: int = attrs.field(default=256, validator=_positive)
    #: Runs of the handler per task (the first, one per answered round, one per state-only
    #: round); a task that would need one more fails with -32603.
    max_rounds: int = attrs.field(default=32, validator=_positive)
    #: Seconds a run may go without renewing its lease before the task is failed (a worker
    #: that died); None: no leases (one process, the task dies with it anyway).
    lease_seconds: float | None = attrs.field(default=None, validator=_optional_positive_number)

    def support(self, tool: Any) -> TaskSupport:
        """Whether the tool named ``tool`` may run as a task."""
        if type(tool) is not str:
            return TaskSupport.FORBIDDEN
        return self.tools.get(tool, TaskSupport.FORBIDDEN)
