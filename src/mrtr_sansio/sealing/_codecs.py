"""Token codecs for sealed ``requestState``: bytes in, one canonical base64url string out.

A codec authenticates (and optionally encrypts) an opaque payload under a key ring and refuses,
with :class:`RequestStateError`, every token it did not mint. Both built-in codecs share one
layout, before base64url (RFC 4648 §5, unpadded, canonical)::

    HMAC-SHA256:  0x01 | kid(4) | payload           | tag(32)   tag = HMAC(k_mac, 0x01|kid|payload)
    AES-256-GCM:  0x02 | kid(4) | nonce(12) | ciphertext+tag(16)   AAD = 0x02|kid

The first byte is the format version and is authenticated with the rest, so a token cannot be
re-read under another format. ``kid`` names the ring key that sealed it, so unsealing is one
dictionary lookup. Keys used on the wire are never the configured secrets themselves: each is
derived per purpose with HKDF-SHA256 (RFC 5869), so one secret can serve both codecs safely.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import secrets
import sys
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from ._state import RequestStateError

__all__ = [
    "MIN_KEY_BYTES",
    "AesGcmCodec",
    "HmacSha256Codec",
    "StateCodec",
    "b64url_decode",
    "b64url_encode",
    "derive_ring",
    "hkdf_sha256",
]

#: Shortest secret accepted in a key ring (256 bits).
MIN_KEY_BYTES = 32
HMAC_VERSION = 0x01
AES_GCM_VERSION = 0x02
_KID_BYTES = 4
_HEAD = 1 + _KID_BYTES
_MAC_BYTES = 32
_NONCE_BYTES = 12
_GCM_TAG_BYTES = 16
_SALT = b"mrtr-sansio requestState"
_SHA256_BLOCK = 64
_IPAD = bytes(b ^ 0x36 for b in range(256))  # translate tables: XOR every key byte
_OPAD = bytes(b ^ 0x5C for b in range(256))

_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_TO_STD = bytes.maketrans(b"-_", b"+/")
_URL_TO_STD_STRICT = bytes.maketrans(b"-_+/=", b"+/!!!")
_TO_URL = bytes.maketrans(b"+/", b"-_")
_SIXTETS = bytes(_ALPHABET.find(bytes([i])) % 64 for i in range(256))


class StateCodec(Protocol):
    """Turns an envelope into a token and back; bring your own (a KMS, say) to replace ours.

    ``unseal`` must raise :class:`RequestStateError` for every token it did not mint (other
    exceptions are treated the same way by :class:`RequestStateSecurity`, but lose the reason).
    """

    def seal(self, payload: bytes) -> str:
        """A token carrying ``payload``, authenticated (and maybe encrypted) under the ring."""
        ...

    def unseal(self, token: str) -> bytes:
        """The payload of a token this codec minted; raises :class:`RequestStateError`."""
        ...


def hkdf_sha256(ikm: bytes, info: bytes, length: int = 32, salt: bytes = _SALT) -> bytes:
    """HKDF-SHA256 (RFC 5869): extract with ``salt``, expand to ``length`` bytes for ``info``."""
    if not 0 < length <= 255 * 32:
        raise ValueError("HKDF-SHA256 output length must be 1..8160 bytes")
    prk = hmac.digest(salt, ikm, "sha256")
    out = b""
    block = b""
    counter = 1
    while len(out) < length:
        block = hmac.digest(prk, block + info + bytes([counter]), "sha256")
        out += block
        counter += 1
    return out[:length]


def b64url_encode(raw: bytes) -> str:
    """Unpadded base64url of ``raw``."""
    return binascii.b2a_base64(raw, newline=False).translate(_TO_URL).rstrip(b"=").decode("ascii")


def _b64url_decode_portable(text: str) -> bytes | None:
    """The bytes of a canonical unpadded base64url string, or None for anything else.

    Canonical means: only the 64 URL-safe characters, no padding, no length that cannot occur,
    and zero unused bits in the last character, so each byte string has exactly one encoding.
    """
    if not text.isascii():
        return None
    data = text.encode("ascii")
    rem = len(data) & 3
    if rem == 1 or data.translate(None, _ALPHABET):
        return None
    if rem and _SIXTETS[data[-1]] & (0x0F if rem == 2 else 0x03):
        return None
    return binascii.a2b_base64(data.translate(_TO_STD) + b"=" * (-rem & 3))


if sys.version_info >= (3, 11):

    def b64url_decode(text: str) -> bytes | None:
        """The bytes of a canonical unpadded base64url string, or None for anything else.

        Canonical means: only the 64 URL-safe characters, no padding, no length that cannot
        occur, and zero unused bits in the last character, so each byte string has exactly one
        encoding. "+", "/" and "=" are not base64url data: they become "!", which strict mode
        refuses like every other stray character.
        """
        if not text.isascii():
            return None
        data = text.encode("ascii")
        rem = len(data) & 3
        if rem and (rem == 1 or _SIXTETS[data[-1]] & (0x0F if rem == 2 else 0x03)):
            return None
        try:
            return binascii.a2b_base64(
                data.translate(_URL_TO_STD_STRICT) + b"=" * (-rem & 3), strict_mode=True
            )
        except binascii.Error:
            return None

else:  # pragma: no cover - Python 3.10 has no strict mode
    b64url_decode = _b64url_decode_portable


def derive_ring(keys: Iterable[Any], purpose: bytes) -> tuple[bytes, dict[bytes, bytes]]:
    """Derive ``(kid of keys[0], {kid: purpose key})`` from a ring of secrets, checking it."""
    if isinstance(keys, (bytes, bytearray, memoryview, str)):
        raise TypeError("keys must be a sequence of secrets, e.g. [key], not a single key")
    derived: dict[bytes, bytes] = {}
    first: bytes | None = None
    for key in keys:
        if not isinstance(key, (bytes, bytearray, memoryview)):
            raise TypeError(
                "each key must be bytes (decode your stored secret first), not "
                f"{type(key).__name__}"
            )
        secret = bytes(key)
        if len(secret) < MIN_KEY_BYTES:
            raise ValueError(
                f"each key must be at least {MIN_KEY_BYTES} random bytes, got {len(secret)}"
            )
        kid = hkdf_sha256(secret, b"mrtr-sansio/kid/" + purpose, _KID_BYTES)
        if kid in derived:
            raise ValueError("two keys in the ring share a key id (duplicate key?)")
        derived[kid] = hkdf_sha256(secret, b"mrtr-sansio/key/" + purpose, 32)
        if first is None:
            first = kid
    if first is None:
        raise ValueError("the key ring is empty: give at least one key")
    return first, derived


class HmacSha256Codec:
    """Integrity only, stdlib only: the client can read the payload but cannot change it.

    ``keys[0]`` seals; every key in the ring unseals (see the rotation procedure in
    :class:`RequestStateSecurity`).
    """

    __slots__ = ("_macs", "_sealer")

    def __init__(self, keys: Iterable[bytes]) -> None:
        kid, derived = derive_ring(keys, b"hmac-sha256")
        self._macs = {k: _HmacSha256(v, bytes([HMAC_VERSION]) + k) for k, v in derived.items()}
        self._sealer = self._macs[kid]

    def seal(self, payload: bytes) -> str:
        """``payload`` and its HMAC under ``keys[0]``, as canonical base64url."""
        sealer = self._sealer
        return b64url_encode(b"".join((sealer.head, payload, sealer.tag(payload))))

    def unseal(self, token: str) -> bytes:
        """The payload, once the token's key id and tag check out (constant-time compare)."""
        raw = b64url_decode(token)
        if raw is None:
            raise RequestStateError("malformed")
        if len(raw) < _HEAD + _MAC_BYTES:
            raise RequestStateError("truncated")
        if raw[0] != HMAC_VERSION:
            raise RequestStateError("unsupported_version")
        mac = self._macs.get(raw[1:_HEAD])
        if mac is None:
            raise RequestStateError("unknown_key")
        payload = raw[_HEAD:-_MAC_BYTES]
        if not hmac.compare_digest(mac.tag(payload), raw[-_MAC_BYTES:]):
            raise RequestStateError("bad_tag")
        return payload


class _HmacSha256:
    """HMAC-SHA256 (RFC 2104) of ``head + message``, the same tag as
    ``hmac.digest(key, head + message, "sha256")``.

    The inner hash with the padded key and ``head`` absorbed, and the outer one with its
    padded key, are made once and copied per message: two plain SHA-256 copies cost a fifth
    fewer instructions than copying an ``hmac.HMAC``, whose methods are Python layered over
    OpenSSL's MAC context.
    """

    __slots__ = ("_inner", "_outer", "head")

    def __init__(self, key: bytes, head: bytes) -> None:
        if len(key) > _SHA256_BLOCK:
            key = hashlib.sha256(key).digest()
        key = key.ljust(_SHA256_BLOCK, b"\x00")
        self._inner = hashlib.sha256(key.translate(_IPAD) + head)
        self._outer = hashlib.sha256(key.translate(_OPAD))
        self.head = head

    def tag(self, message: bytes) -> bytes:
        inner = self._inner.copy()
        inner.update(message)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()


class AesGcmCodec:
    """Integrity and confidentiality (AES-256-GCM): the client can neither read nor change it.

    Needs the optional ``cryptography`` package (``pip install 'mrtr-sansio[crypto]'``). Each
    token gets a fresh random 96-bit nonce from ``token_bytes``; rotate keys well before one
    key has sealed 2**32 tokens.
    """

    __slots__ = ("_aeads", "_head", "_invalid_tag", "_sealer", "_token_bytes")

    def __init__(
        self,
        keys: Iterable[bytes],
        *,
        token_bytes: Callable[[int], bytes] = secrets.token_bytes,
    ) -> None:
        try:
            from cryptography.exceptions import InvalidTag
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError as exc:
            raise ImportError(
                "AES-256-GCM sealing needs the 'cryptography' package: "
                "pip install 'mrtr-sansio[crypto]' (or use the stdlib HMAC-SHA256 codec)"
            ) from exc
        kid, derived = derive_ring(keys, b"aes-256-gcm")
        self._aeads = {k: AESGCM(v) for k, v in derived.items()}
        self._sealer = self._aeads[kid]
        self._head = bytes([AES_GCM_VERSION]) + kid
        self._invalid_tag: type[Exception] = InvalidTag
        self._token_bytes = token_bytes

    def seal(self, payload: bytes) -> str:
        """``payload`` encrypted under ``keys[0]`` with a fresh nonce, as canonical base64url."""
        head = self._head
        nonce = self._token_bytes(_NONCE_BYTES)
        if len(nonce) != _NONCE_BYTES:
            raise ValueError("token_bytes must return as many bytes as asked for")
        return b64url_encode(b"".join((head, nonce, self._sealer.encrypt(nonce, payload, head))))

    def unseal(self, token: str) -> bytes:
        """The decrypted payload, once the token's key id and GCM tag check out."""
        raw = b64url_decode(token)
        if raw is None:
            raise RequestStateError("malformed")
        if len(raw) < _HEAD + _NONCE_BYTES + _GCM_TAG_BYTES:
            raise RequestStateError("truncated")
        if raw[0] != AES_GCM_VERSION:
            raise RequestStateError("unsupported_version")
        aead = self._aeads.get(raw[1:_HEAD])
        if aead is None:
            raise RequestStateError("unknown_key")
        try:
            payload: bytes = aead.decrypt(
                raw[_HEAD : _HEAD + _NONCE_BYTES], raw[_HEAD + _NONCE_BYTES :], raw[:_HEAD]
            )
        except self._invalid_tag:
            raise RequestStateError("bad_tag") from None
        return payload
