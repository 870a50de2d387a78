"""The bytes a task stores: a record's size, and whether a new or changed record fits the
bounds of ``TaskSettings`` (per task, per principal, in all). Pure: values in, a reason out."""

from __future__ import annotations

import attrs

from ._settings import TaskSettings
from ._store import GuardedStore
from ._values import Task, encoded

__all__ = ["PAYLOAD", "sized", "too_big"]

#: The record fields whose bytes a task's size counts.
PAYLOAD = frozenset({"params", "state", "answers", "outstanding", "result", "error"})


def sized(task: Task) -> Task:
    """``task`` with its :attr:`Task.size`: the bytes of its payload as compact JSON."""
    size = task.params_size + sum(
        len(encoded(value))
        for value in (task.state, task.answers, task.outstanding, task.result, task.error)
    )
    return attrs.evolve(task, size=size)


def too_big(
    settings: TaskSettings, store: GuardedStore, old: Task | None, new: Task, now: float
) -> str | None:
    """Why ``new`` may not replace ``old`` (None: a new task) in ``store``: the bytes it
    would store, per task, per principal or in all; None when it fits. A new task that does
    not fit sweeps one batch of expired records first (they still hold bytes)."""
    if new.size > settings.max_task_bytes:
        return (
            f"The task would store {new.size} bytes, more than the "
            f"{settings.max_task_bytes} a task may (TaskSettings.max_task_bytes)"
        )
    grow = new.size - (0 if old is None else old.size)
    if grow <= 0 or not store.metered:
        return None
    why = _no_room(settings, store, new.owner, grow)
    if why is not None and old is None and store.sweep(now, settings.sweep_batch):
        why = _no_room(settings, store, new.owner, grow)
    return why


def _no_room(
    settings: TaskSettings, store: GuardedStore, owner: str | None, grow: int
) -> str | None:
    mine, total = store.usage(owner)
    if mine + grow > settings.max_task_bytes_per_principal:
        return (
            f"This caller's tasks would store more than "
            f"{settings.max_task_bytes_per_principal} bytes "
            "(TaskSettings.max_task_bytes_per_principal)"
        )
    if total + grow > settings.max_task_bytes_total:
        return (
            f"The server's tasks would store more than {settings.max_task_bytes_total} "
            "bytes (TaskSettings.max_task_bytes_total)"
        )
    return None
