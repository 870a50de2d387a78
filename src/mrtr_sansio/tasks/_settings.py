"""How a server runs tasks: the store, which tools may be tasks, and the bounds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from mrtr_sansio._validators import positive, positive_number

from ._store import InMemoryTaskStore, TaskStore
from ._values import TaskSupport

__all__ = ["TaskSettings"]

MiB = 1024 * 1024
#: ``lease_seconds`` when the store is durable and none is given.
DURABLE_LEASE_SECONDS = 30.0


_OPTIONAL_POSITIVE: Any = attrs.validators.optional(positive)  # attrs types it for int | None


def _store(_inst: object, _attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, TaskStore):
        raise TypeError(
            "store: must be a TaskStore (InMemoryTaskStore, or SqliteTaskStore / "
            f"RedisTaskStore from mrtr_sansio.adapters.stores), got {type(value).__name__}"
        )


def _supports(value: Any) -> dict[str, TaskSupport]:
    if not isinstance(value, Mapping):
        raise TypeError(
            'tools: must be a mapping of tool name to "optional" or "required", e.g. '
            f'{{"slow": "optional"}}, got {type(value).__name__}'
        )
    out: dict[str, TaskSupport] = {}
    for name, support in value.items():
        if type(name) is not str:
            raise TypeError(f"tools: tool names must be strings, got {name!r}")
        try:
            out[name] = TaskSupport(support)
        except ValueError:
            raise ValueError(
                f'tools[{name!r}]: must be "optional", "required" or "forbidden", got {support!r}'
            ) from None
    return out


def _default_lease(settings: TaskSettings) -> float | None:
    return DURABLE_LEASE_SECONDS if getattr(settings.store, "durable", False) is True else None


@attrs.frozen
class TaskSettings:
    """The tasks extension on a server (``ServerConfig.tasks``): set, the server advertises
    ``io.modelcontextprotocol/tasks`` in ``server/discover`` and answers ``tasks/get``,
    ``tasks/update`` and ``tasks/cancel`` from ``store``.

    Task ids come from ``ServerConfig.token_hex`` (128 random bits each); times from
    ``ServerConfig.clock``.
    """

    #: Where task records live (in memory by default: gone with the process).
    store: TaskStore = attrs.field(factory=InMemoryTaskStore, validator=_store)
    #: Tools that may run as tasks, by name (``"optional"`` or ``"required"``); others never do.
    tools: Mapping[str, TaskSupport] = attrs.field(factory=dict, converter=_supports)
    #: ``ttlMs`` of new tasks: milliseconds from creation that a task stays readable (None:
    #: unlimited). An expired task is answered -32602 and deleted.
    ttl_ms: int | None = attrs.field(default=3_600_000, validator=_OPTIONAL_POSITIVE)
    #: ``pollIntervalMs`` suggested to clients (None: not sent).
    poll_interval_ms: int | None = attrs.field(default=500, validator=_OPTIONAL_POSITIVE)
    #: Live tasks one principal may hold in the store at once (terminal ones count until they
    #: expire; expired ones do not); one more is refused with -32603.
    max_tasks: int = attrs.field(default=256, validator=positive)
    #: Bytes one task may store (its params, state, answers, requests, result or error, as
    #: compact JSON): a larger call is refused with -32603, a larger ``tasks/update`` too,
    #: and a run whose outcome is larger fails the task.
    max_task_bytes: int = attrs.field(default=4 * MiB, validator=positive)
    #: Bytes the tasks of one principal may store together (enforced by a store that meters
    #: its bytes, as the in-memory, SQLite and Redis stores do); past it as past
    #: ``max_task_bytes``.
    max_task_bytes_per_principal: int = attrs.field(default=32 * MiB, validator=positive)
    #: Bytes all tasks may store together (same store, same rule).
    max_task_bytes_total: int = attrs.field(default=256 * MiB, validator=positive)
    #: Runs of the handler per task (the first, one per answered round, one per state-only
    #: round); a task that would need one more fails with -32603.
    max_rounds: int = attrs.field(default=32, validator=positive)
    #: Seconds a run may go without renewing its lease before the task is failed (a worker
    #: that died); None: no leases (one process, the task dies with it anyway). Default:
    #: 30.0 for a durable store (one whose ``durable`` attribute is True, as SQLite's and
    #: Redis's are), None otherwise.
    lease_seconds: float | None = attrs.field(
        default=attrs.Factory(_default_lease, takes_self=True),
        validator=attrs.validators.optional(positive_number),
    )
    #: Seconds between sweeps of expired tasks out of the store (the server connection's
    #: timer: ``next_deadline()`` / ``handle_timer()``).
    sweep_interval: float = attrs.field(default=60.0, validator=positive_number)
    #: Expired tasks deleted per sweep at most (a full batch sweeps again at once).
    sweep_batch: int = attrs.field(default=256, validator=positive)
    #: Times a run's outcome is written to a store that fails (then as many times the task's
    #: failure, naming the fault) before the connection gives up; past that a durable
    #: store's lease fails the task once the store is back.
    settle_attempts: int = attrs.field(default=5, validator=positive)
    #: Seconds before the first retry of such a write; each next one waits twice as long, up
    #: to 16 times this.
    settle_backoff: float = attrs.field(default=0.5, validator=positive_number)

    #: Distinct task ids one ``subscriptions/listen`` stream may watch (``taskIds``, once
    #: duplicates are dropped): more are refused with -32602 naming the limit. The default is
    #: ``max_tasks``'s: a principal can never have more live tasks to watch.
    max_listen_task_ids: int = attrs.field(default=256, validator=positive)

    def support(self, tool: Any) -> TaskSupport:
        """Whether the tool named ``tool`` may run as a task."""
        if type(tool) is not str:
            return TaskSupport.FORBIDDEN
        return self.tools.get(tool, TaskSupport.FORBIDDEN)
