"""What the durable stores write for a task: the record as compact JSON, read back (a corrupt
one a :class:`~mrtr_sansio.tasks.TaskStoreError`), its expiry on the task's clock, and the
form of task ids the server issues. In a batched read a corrupt record is None
(:func:`loads_in_batch`), so that it fails its own task only."""

from __future__ import annotations

import json
import logging
import re

from mrtr_sansio.tasks import Task, TaskStoreError

__all__ = ["TASK_ID", "dumps", "expires_at", "loads", "loads_in_batch"]

log = logging.getLogger("mrtr_sansio.adapters.stores")

#: The task ids a server issues (``ServerConfig.token_hex(16)``: 128 random bits in hex).
TASK_ID = re.compile(r"[0-9a-f]{32}")


def expires_at(task: Task) -> float | None:
    """When ``task`` expires on its clock (None: never): the indexed column."""
    return None if task.ttl_ms is None else task.created_at + task.ttl_ms / 1000


def dumps(task: Task) -> str:
    """The record of ``task`` as compact JSON (UTF-8 kept as is)."""
    return json.dumps(task.to_record(), separators=(",", ":"), ensure_ascii=False)


def loads(raw: str | bytes) -> Task:
    """The task a stored record holds; a record that does not parse is a TaskStoreError."""
    try:
        return Task.from_record(json.loads(raw))
    except (ValueError, TypeError, KeyError) as exc:
        raise TaskStoreError(f"A task record is corrupt ({type(exc).__name__})") from None


def loads_in_batch(task_id: str, raw: str | bytes | None) -> Task | None:
    """:func:`loads` for one record of a batched read (``get_many``): a corrupt record is None
    there (logged), so that the batch's other tasks are still read; :meth:`get` of that id
    still raises, and its ``tasks/get`` is -32603."""
    if raw is None:
        return None
    try:
        return loads(raw)
    except TaskStoreError as exc:
        log.warning("task %s is unreadable, left out of a batched read: %s", task_id, exc)
        return None
