"""The key-ring file that servers and workers share: one reader, no extra needed.

A ring file holds one key a line, base64 (standard or URL-safe, padding optional); blank
lines and lines starting with ``#`` are skipped; the first key seals or encrypts, every key
opens. The HTTP example's ``--state-keys-file`` and ``mrtr-worker --state-keys-file`` read it
with :func:`read_key_file`, so that a ring written once works for both.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from pathlib import Path

from mrtr_sansio.sealing._codecs import MIN_KEY_BYTES

__all__ = ["KeyRingError", "decode_keys", "read_key_file"]


class KeyRingError(ValueError):
    """A key ring that cannot be used; the message says which file or line and why."""


def decode_keys(texts: Iterable[str], source: str) -> list[bytes]:
    """The keys of the base64 ``texts``, each at least ``MIN_KEY_BYTES`` (32) bytes; ``source``
    names where they came from in the error (a path, an environment variable)."""
    keys = []
    for number, text in enumerate(texts, 1):
        padded = text + "=" * (-len(text) % 4)
        try:
            key = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError):
            raise KeyRingError(f"{source}: key {number} is not valid base64") from None
        if len(key) < MIN_KEY_BYTES:
            raise KeyRingError(
                f"{source}: key {number} is {len(key)} bytes; each key must be at least "
                f"{MIN_KEY_BYTES} random bytes"
            )
        keys.append(key)
    if not keys:
        raise KeyRingError(f"{source}: the key ring is empty")
    return keys


def read_key_file(path: str | Path) -> list[bytes]:
    """The key ring in the file ``path`` (the format in the module docstring). Raises
    :class:`KeyRingError` for a file that is missing or unreadable, not ASCII, empty, or
    holding a key that is not base64 or too short."""
    try:
        text = Path(path).read_text(encoding="ascii")
    except UnicodeDecodeError:
        raise KeyRingError(f"{path}: the key ring is not ASCII text (base64 keys)") from None
    except OSError as exc:
        raise KeyRingError(f"{path}: cannot read the key ring: {exc.strerror or exc}") from None
    lines = (s for line in text.splitlines() if (s := line.strip()) and not s.startswith("#"))
    return decode_keys(lines, str(path))
