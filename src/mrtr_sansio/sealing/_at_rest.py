"""Task records encrypted at rest: AES-256-GCM under the sealing key ring, for the durable
task stores (``SqliteTaskStore``, ``RedisTaskStore``; ``encryption=``).

One ciphertext, stored as bytes::

    0x03 | kid(4) | nonce(12) | ciphertext+tag(16)     AAD = 0x03|kid|field|0x00|task id

The keys are derived from the ring's secrets for this purpose alone (HKDF-SHA256, see
:mod:`._codecs`), so a sealed ``requestState`` never decrypts as a record nor a record as a
``requestState``, even under the same secrets. Each ring key is narrowed once more to a key
per task, so that the 2**32 random-nonce budget of AES-GCM counts one task's writes, not the
store's. The associated data names the task and the field (``record`` or ``params``): a
ciphertext moved to another task or field does not decrypt.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable, Iterable
from typing import Any, TypeGuard

from mrtr_sansio.tasks._store import TaskStoreError

from ._codecs import derive_ring

__all__ = ["RECORD_VERSION", "RecordEncryption", "is_encrypted"]

#: The first byte of an encrypted record (never the first byte of a JSON record, ``{``).
RECORD_VERSION = 0x03
_KID_BYTES = 4
_HEAD = 1 + _KID_BYTES
_NONCE_BYTES = 12
_TAG_BYTES = 16
_MARK = bytes([RECORD_VERSION])
_PURPOSE = b"task-record/aes-256-gcm"
_FIELDS = frozenset({"record", "params"})
_CACHE_MAX = 1024  # tasks whose cipher is remembered


class RecordEncryption:
    """Encrypts what a durable task store writes of a task (its record and its params) under
    ``keys``, the same kind of ring as ``RequestStateSecurity(keys=...)``: ``keys[0]``
    encrypts, every key decrypts, each at least 32 random bytes (the same secrets may serve
    both: the keys are derived per purpose). Needs the ``crypto`` extra (``cryptography``).

    A record under a key no longer in the ring, altered, or moved from another task or field
    is unreadable: :class:`~mrtr_sansio.tasks.TaskStoreError`. ``read_clear`` (on by default)
    reads records written before encryption was turned on, each encrypted at its next write;
    turn it off once none is left, so that a record written in clear into the store is
    refused too. ``token_bytes`` is the randomness of the nonces, injectable for tests.
    """

    __slots__ = (
        "_aead",
        "_invalid_tag",
        "_keys",
        "_kid",
        "_task_aeads",
        "_token_bytes",
        "read_clear",
    )

    def __init__(
        self,
        keys: Iterable[bytes],
        *,
        read_clear: bool = True,
        token_bytes: Callable[[int], bytes] = secrets.token_bytes,
    ) -> None:
        try:
            from cryptography.exceptions import InvalidTag
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError as exc:
            raise ImportError(
                "task records encrypted at rest need the 'cryptography' package: "
                "pip install 'mrtr-sansio[crypto]'"
            ) from exc
        if type(read_clear) is not bool:
            raise TypeError(f"read_clear must be True or False, got {read_clear!r}")
        self._kid, self._keys = derive_ring(keys, _PURPOSE)
        self._aead: Callable[[bytes], Any] = AESGCM
        self._invalid_tag: type[Exception] = InvalidTag
        self._token_bytes = token_bytes
        self._task_aeads: dict[tuple[bytes, str], Any] = {}
        self.read_clear = read_clear

    def __repr__(self) -> str:
        return (
            f"RecordEncryption(keys=<{len(self._keys)} in the ring>, read_clear={self.read_clear})"
        )

    def encrypt(self, task_id: str, field: str, data: bytes) -> bytes:
        """``data`` (a record's or params' JSON) encrypted under ``keys[0]`` for ``field`` of
        ``task_id``, with a fresh nonce."""
        head = _MARK + self._kid
        nonce = self._token_bytes(_NONCE_BYTES)
        if len(nonce) != _NONCE_BYTES:
            raise ValueError("token_bytes must return as many bytes as asked for")
        aead = self._task_aead(self._keys[self._kid], task_id)
        return b"".join((head, nonce, aead.encrypt(nonce, data, _aad(head, field, task_id))))

    def decrypt(self, task_id: str, field: str, sealed: bytes) -> bytes:
        """The JSON :meth:`encrypt` wrote for ``field`` of ``task_id``; raises
        :class:`~mrtr_sansio.tasks.TaskStoreError` when its key left the ring or it was
        altered or moved (the message names which, never a key)."""
        if len(sealed) < _HEAD + _NONCE_BYTES + _TAG_BYTES or sealed[0] != RECORD_VERSION:
            raise TaskStoreError(f"A task {field} is unreadable (not an encrypted {field})")
        head = sealed[:_HEAD]
        key = self._keys.get(head[1:])
        if key is None:
            raise TaskStoreError(
                f"A task {field} is unreadable: the key it was encrypted with is not in the ring"
            )
        nonce = sealed[_HEAD : _HEAD + _NONCE_BYTES]
        try:
            data: bytes = self._task_aead(
                key, task_id
            ).decrypt(  # a view: no copy of 1 MB
                nonce, memoryview(sealed)[_HEAD + _NONCE_BYTES :], _aad(head, field, task_id)
            )
        except self._invalid_tag:
            raise TaskStoreError(
                f"A task {field} is unreadable: it was altered or belongs to another task"
            ) from None
        return data

    def _task_aead(self, key: bytes, task_id: str) -> Any:
        """The cipher of ``task_id`` under the ring key ``key``, remembered for the next read
        of the same task (a client polls one task: ``tasks/get`` after ``tasks/get``)."""
        aead = self._task_aeads.get((key, task_id))
        if aead is None:
            # HKDF-Expand (RFC 5869 §2.3) of one block: the ring key is already a pseudorandom
            # key (HKDF's output), so no second extract.
            info = b"mrtr-sansio/task/" + task_id.encode() + b"\x01"
            aead = self._aead(hmac.digest(key, info, "sha256"))
            if len(self._task_aeads) >= _CACHE_MAX:
                self._task_aeads.clear()
            self._task_aeads[key, task_id] = aead
        return aead


def _aad(head: bytes, field: str, task_id: str) -> bytes:
    if field not in _FIELDS:
        raise ValueError(f"field must be 'record' or 'params', got {field!r}")
    return b"".join((head, field.encode("ascii"), b"\x00", task_id.encode()))


def is_encrypted(raw: str | bytes) -> TypeGuard[bytes]:
    """Whether ``raw``, as a store read it, is a ciphertext (bytes opening with the version
    byte) rather than a record or params in clear (JSON: text, or bytes opening with ``{``)."""
    return isinstance(raw, bytes) and raw[:1] == _MARK
