"""What the durable stores write for a task: the record as compact JSON without its params
(kept apart, so that a read of the record fetches and decodes none of them), read back (a
corrupt one a :class:`~mrtr_sansio.tasks.TaskStoreError`; in a batched read None, by
:func:`loads_in_batch`, so that it fails its own task only), the params a write must store,
its expiry on the task's clock, and the form of task ids the server issues.

With a :class:`~mrtr_sansio.sealing.RecordEncryption` the record and the params are written
encrypted (bytes) and decrypted on reading; one written in clear before is read as it is
(unless the encryption's ``read_clear`` is off) and encrypted at its next write."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable

from mrtr_sansio.sealing import RecordEncryption
from mrtr_sansio.sealing._at_rest import is_encrypted
from mrtr_sansio.tasks import StoredParams, Task, TaskStoreError

__all__ = [
    "TASK_ID",
    "changed_params",
    "dumps",
    "expires_at",
    "loads",
    "loads_in_batch",
    "params_in",
    "params_out",
]

log = logging.getLogger("mrtr_sansio.adapters.stores")

#: The task ids a server issues (``ServerConfig.token_hex(16)``: 128 random bits in hex).
TASK_ID = re.compile(r"[0-9a-f]{32}")


def expires_at(task: Task) -> float | None:
    """When ``task`` expires on its clock (None: never): the indexed column."""
    return None if task.ttl_ms is None else task.created_at + task.ttl_ms / 1000


def dumps(task: Task, encryption: RecordEncryption | None) -> str | bytes:
    """The record of ``task`` as compact JSON (UTF-8 kept as is), without its params;
    encrypted when the store has ``encryption``."""
    text = json.dumps(task.to_record(params=False), separators=(",", ":"), ensure_ascii=False)
    return text if encryption is None else encryption.encrypt(task.task_id, "record", text.encode())


def params_out(task_id: str, params: str, encryption: RecordEncryption | None) -> str | bytes:
    """The params JSON of ``task_id`` as the store writes it (encrypted with ``encryption``)."""
    return params if encryption is None else encryption.encrypt(task_id, "params", params.encode())


def params_in(task_id: str, raw: str | bytes, encryption: RecordEncryption | None) -> str:
    """The params JSON of ``task_id`` from what the store holds (:func:`params_out`'s)."""
    opened = _opened(task_id, "params", raw, encryption)
    return opened.decode() if isinstance(opened, bytes) else opened


def _opened(
    task_id: str, field: str, raw: str | bytes, encryption: RecordEncryption | None
) -> str | bytes:
    """``raw`` decrypted, or as it is when it was written in clear (and that is allowed)."""
    if is_encrypted(raw):
        if encryption is None:
            raise TaskStoreError(
                f"A task {field} is encrypted and this store has no keys (give it encryption=)"
            )
        return encryption.decrypt(task_id, field, raw)
    if encryption is not None and not encryption.read_clear:
        raise TaskStoreError(f"A task {field} is in clear and this store reads encrypted ones only")
    return raw


def changed_params(task: Task, store: object) -> str | None:
    """The params JSON a replace of ``task`` in ``store`` must write: None when they are the
    ones ``store`` read (its own :class:`StoredParams`: unchanged, and left unread)."""
    source = task.params_source
    if isinstance(source, StoredParams) and source.origin is store:
        return None
    return task.params_json


def loads(
    task_id: str,
    raw: str | bytes,
    kept: Callable[[int], StoredParams],
    encryption: RecordEncryption | None,
) -> Task:
    """The task a stored record of ``task_id`` holds, its params from ``kept`` (called with
    their size) or, in a record written before they were kept apart, from the record itself;
    a record that does not parse or decrypt is a TaskStoreError."""
    opened = _opened(task_id, "record", raw, encryption)
    try:
        return Task.from_record(json.loads(opened), kept)
    except (ValueError, TypeError, KeyError) as exc:
        raise TaskStoreError(f"A task record is corrupt ({type(exc).__name__})") from None


def loads_in_batch(
    task_id: str,
    raw: str | bytes | None,
    kept: Callable[[int], StoredParams],
    encryption: RecordEncryption | None,
) -> Task | None:
    """:func:`loads` for one record of a batched read (``get_many``): a corrupt record is None
    there (logged), so that the batch's other tasks are still read; :meth:`get` of that id
    still raises, and its ``tasks/get`` is -32603."""
    if raw is None:
        return None
    try:
        return loads(task_id, raw, kept, encryption)
    except TaskStoreError as exc:
        log.warning("task %s is unreadable, left out of a batched read: %s", task_id, exc)
        return None
