"""Sealed ``requestState``: integrity, optional confidentiality, expiry, binding and rotation.

The spec makes an echoed ``requestState`` attacker-controlled input that the server must verify
whenever it matters (DIGEST §2.3 S5, §4). :class:`RequestStateSecurity` is the
:class:`StateProtector` that does it: handlers return any JSON value as state and get the same
value back on the retry; the client only ever holds an opaque token::

    ServerConfig(request_state=RequestStateSecurity(keys=[key], audience="https://mcp.example"))

**Envelope** and binding: see :mod:`._envelope`.

**Token.** The codec adds a version byte and a 4-byte key id and authenticates everything
(see :mod:`._codecs`); the token is unpadded canonical base64url. With HMAC-SHA256 the
client can read the state (and test guesses against the binding digest); use AES-256-GCM when
any of it is confidential. Unsealing checks, in order and failing closed:
type, size (``max_token_bytes``, before any decoding or crypto), encoding, version, key id,
tag, envelope version, expiry, audience, principal, method, target, arguments, state JSON,
then the replay guard. The precise failure is :attr:`RequestStateError.reason` (one of
:data:`REQUEST_STATE_REASONS`), for events and logs only; the wire answer never says more than
"Invalid or expired requestState".

**Rotation.** ``keys[0]`` seals and every key unseals. To replace ``old`` by ``new``, roll each
phase out to every instance before the next, at least one ``ttl`` apart:
``[old]`` -> ``[old, new]`` (all instances accept ``new``) -> ``[new, old]`` (seal with ``new``,
still accept ``old``) -> ``[new]`` (``old`` tokens have all expired).

**Several instances must share keys.** On the modern wire a retry is an independent request
and may reach any instance, or the same one after a restart; a token only unseals where its key
is. Keys from :meth:`RequestStateSecurity.ephemeral` live and die with one process.

**Without protection** (``ServerConfig.request_state=None``) the state is passed through as
the handler wrote it (a string) and comes back exactly as the client sent it: acceptable only
when tampering can cause nothing worse than a failed request.
"""

from __future__ import annotations

import hmac
import json
import math
import secrets
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Literal

from mrtr_sansio._errors import LocalProtocolError
from mrtr_sansio._wire.codec import JsonCodec

from ._codecs import AesGcmCodec, HmacSha256Codec, StateCodec
from ._envelope import (
    BINDING_AT,
    CARRY_VERSION,
    CLAIMS,
    ENVELOPE_VERSION,
    ID_BYTES,
    MAX_ROUND,
    STATE_AT,
    U16,
    Identity,
    audience_hint,
    binding_digest,
    carry_bytes,
    make_identity,
    mismatch,
    read_carry,
    state_chunks,
)
from ._replay import ReplayGuard
from ._state import OpenedState, RequestStateError, StateBinding

__all__ = [
    "REQUEST_STATE_REASONS",
    "RequestStateSecurity",
    "is_process_protector",
    "process_state_protector",
]

#: Every :attr:`RequestStateError.reason` this module and its codecs produce.
REQUEST_STATE_REASONS = frozenset(
    {
        "not_a_string",
        "oversized",
        "empty",
        "malformed",
        "truncated",
        "unsupported_version",
        "unknown_key",
        "bad_tag",
        "codec_error",
        "malformed_envelope",
        "unsupported_envelope_version",
        "expired",
        "audience_mismatch",
        "principal_mismatch",
        "method_mismatch",
        "target_mismatch",
        "arguments_mismatch",
        "malformed_state",
        "replayed",
    }
)
_CACHE_MAX = 1024
_load_state = json.JSONDecoder().raw_decode
_equal = hmac.compare_digest

# No arguments object is ``is``-identical to this one (see ``RequestStateSecurity.seal``).
_NOTHING_VERIFIED: tuple[Any, Any, bytes] = (object(), None, b"")


class RequestStateSecurity:
    """Seals handler state into tokens bound to their request, and verifies them on return.

    ``keys`` is the rotation ring (``keys[0]`` seals, all unseal; each at least 32 random
    bytes); ``codec`` is ``"hmac-sha256"`` (stdlib; integrity only, the client can read the
    state), ``"aes-256-gcm"`` (integrity and confidentiality; needs the ``crypto`` extra) or
    your own :class:`StateCodec`, given instead of ``keys``. Tokens expire ``ttl`` seconds
    after sealing; ``audience`` names this server, so that servers sharing keys cannot accept
    each other's tokens. ``replay_guard`` makes each token single-use. ``max_token_bytes``
    bounds accepted and produced tokens (characters), checked before any other work, so that
    this class is safe on its own; in a server keep it no larger than
    ``Limits.max_request_state_bytes`` (same default, 64 KiB), which is checked first.
    ``json_codec`` replaces the built-in strict JSON of the state (e.g. ``OrjsonCodec()``,
    several times faster on large states); it must round-trip your states (orjson writes NaN as
    null and reads integers beyond 64 bits as floats). Instances may differ in it.
    ``token_bytes`` is the randomness source (token ids, nonces), injectable for tests.
    """

    __slots__ = (
        "_audience_hint",
        "_codec",
        "_identities",
        "_token_bytes",
        "_verified",
        "audience",
        "json_codec",
        "max_token_bytes",
        "replay_guard",
        "ttl",
    )

    def __init__(
        self,
        keys: Iterable[bytes] | None = None,
        *,
        ttl: float = 600.0,
        audience: str | None = None,
        codec: Literal["hmac-sha256", "aes-256-gcm"] | StateCodec = "hmac-sha256",
        replay_guard: ReplayGuard | None = None,
        max_token_bytes: int = 64 * 1024,
        json_codec: JsonCodec | None = None,
        token_bytes: Callable[[int], bytes] = secrets.token_bytes,
    ) -> None:
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl < math.inf:
            raise ValueError(f"ttl must be a positive number of seconds, got {ttl!r}")
        if audience is not None and type(audience) is not str:
            raise TypeError(f"audience must be a string or None, got {type(audience).__name__}")
        if type(max_token_bytes) is not int or max_token_bytes < 1:
            raise ValueError(f"max_token_bytes must be a positive integer, got {max_token_bytes}")
        if isinstance(codec, str):
            if keys is None:
                raise ValueError("keys are required (or bring your own codec)")
            if codec == "hmac-sha256":
                self._codec: StateCodec = HmacSha256Codec(keys)
            elif codec == "aes-256-gcm":
                self._codec = AesGcmCodec(keys, token_bytes=token_bytes)
            else:
                raise ValueError(f"unknown codec {codec!r}: 'hmac-sha256' or 'aes-256-gcm'")
        else:
            if keys is not None:
                raise ValueError("give keys or your own codec, not both (the codec owns its keys)")
            self._codec = codec
        self.ttl = float(ttl)
        self.audience = audience
        self.replay_guard = replay_guard
        self.max_token_bytes = max_token_bytes
        self.json_codec = json_codec
        self._token_bytes = token_bytes
        self._audience_hint = audience_hint(audience)
        # By (method, target, principal): strings only, so entries never go stale; bounded.
        self._identities: dict[tuple[str, str | None, str | None], Identity] = {}
        # (arguments object, identity, digest) last verified by ``unseal`` (see ``seal``).
        self._verified: tuple[Any, Any, bytes] = _NOTHING_VERIFIED

    @classmethod
    def ephemeral(
        cls,
        *,
        token_bytes: Callable[[int], bytes] = secrets.token_bytes,
        **options: Any,
    ) -> RequestStateSecurity:
        """Protection with a random key that lives as long as this process.

        Enough for a single-process server. Not for several instances, nor for retries that
        must survive a restart: a retry may reach an instance (or a new process) that never
        had the key, and fails there. Those deployments pass the same ``keys`` everywhere.
        """
        return cls([token_bytes(32)], token_bytes=token_bytes, **options)

    @property
    def codec(self) -> StateCodec:
        """The codec that turns envelopes into tokens."""
        return self._codec

    # --- StateProtector ------------------------------------------------------------------

    #: Seals an observer's carry beside the state (``seal(..., carry=...)``, envelope 2).
    seals_carry: ClassVar[bool] = True

    def seal(
        self,
        state: Any,
        binding: StateBinding,
        round: int,
        now: float,
        *,
        carry: Mapping[str, str] | None = None,
    ) -> str:
        """The token for ``state`` (any JSON value), bound to ``binding``, valid ``ttl`` s;
        ``carry`` (trace context) is sealed beside it in envelope version 2."""
        if type(round) is not int or not 1 <= round <= MAX_ROUND:
            raise LocalProtocolError(f"round must be an integer in 1..{MAX_ROUND}, got {round!r}")
        try:
            if self.json_codec is None:
                body = "".join(state_chunks(state, 0)).encode("ascii")
            else:
                body = self.json_codec.dumps(state)
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            raise LocalProtocolError(f"request_state is not a JSON value: {exc}") from None
        identity = self._identities.get((binding.method, binding.target, binding.principal))
        if identity is None:
            identity = self._identity(binding)
        # A retry's state is sealed for the very request unseal just verified: its digest is
        # reused, and binds what the client sent even if the handler changed the arguments.
        arguments = binding.arguments
        verified = self._verified
        if verified[0] is arguments and verified[1] is identity:
            digest = verified[2]
            self._verified = _NOTHING_VERIFIED  # hold on to no request's arguments
        else:
            try:
                digest = binding_digest(identity, arguments)
            except (TypeError, ValueError, RecursionError) as exc:
                raise LocalProtocolError(f"arguments cannot be bound: {exc}") from None
        token_id = self._token_bytes(ID_BYTES)
        if len(token_id) != ID_BYTES:  # struct would pad or cut it silently
            raise ValueError("token_bytes(n) must return n random bytes")
        if carry is None:
            claims = CLAIMS.pack(ENVELOPE_VERSION, round, now + self.ttl, token_id)
            token = self._codec.seal(b"".join((claims, identity.hints, digest, body)))
        else:
            claims = CLAIMS.pack(CARRY_VERSION, round, now + self.ttl, token_id)
            carried = carry_bytes(carry)
            token = self._codec.seal(
                b"".join((claims, identity.hints, digest, U16.pack(len(carried)), carried, body))
            )
        if len(token) > self.max_token_bytes:
            raise LocalProtocolError(
                f"the sealed request_state is {len(token)} characters, more than "
                f"max_token_bytes={self.max_token_bytes} accepts back"
            )
        return token

    def unseal(self, token: str, binding: StateBinding, now: float) -> OpenedState:
        """The state and round sealed in ``token``; raises :class:`RequestStateError`."""
        if type(token) is not str:
            raise RequestStateError("not_a_string")
        if len(token) > self.max_token_bytes:
            raise RequestStateError("oversized")
        if not token:
            raise RequestStateError("empty")
        try:
            payload = self._codec.unseal(token)
        except RequestStateError:
            raise
        except Exception:  # a codec brought by the application, failing its own way
            raise RequestStateError("codec_error") from None
        if type(payload) is not bytes or len(payload) < STATE_AT:
            raise RequestStateError("malformed_envelope")
        version, round_, expires, token_id = CLAIMS.unpack_from(payload)
        state_at = STATE_AT
        carried: dict[str, str] | None = None
        if version != ENVELOPE_VERSION:
            if version != CARRY_VERSION:
                raise RequestStateError("unsupported_envelope_version")
            carried, state_at = read_carry(payload)
        if not now < expires:
            raise RequestStateError("expired")
        identity = self._identities.get((binding.method, binding.target, binding.principal))
        if identity is None:
            identity = self._identity(binding)
        arguments = binding.arguments
        try:
            digest = binding_digest(identity, arguments)
        except (TypeError, ValueError, RecursionError):
            raise RequestStateError("arguments_mismatch") from None
        expected = identity.hints + digest
        sealed = payload[BINDING_AT:STATE_AT]
        if not _equal(sealed, expected):
            raise RequestStateError(mismatch(sealed, expected))
        self._verified = (arguments, identity, digest)
        try:
            if self.json_codec is None:
                text = payload[state_at:].decode("utf-8")  # ASCII from us, UTF-8 from others
                state, end = _load_state(text)
                if end != len(text):
                    raise ValueError("trailing data")
            else:
                state = self.json_codec.loads(payload[state_at:])
        except (ValueError, RecursionError):  # UnicodeDecodeError, JSONDecodeError, nesting
            raise RequestStateError("malformed_state") from None
        if round_ < 1:
            raise RequestStateError("malformed_state")
        guard = self.replay_guard
        if guard is not None and not guard.consume(token_id, expires, now):
            raise RequestStateError("replayed")
        return OpenedState(state, round_, carried)

    # --- internals -----------------------------------------------------------------------

    def _identity(self, binding: StateBinding) -> Identity:
        """Compute and remember what binds (method, target, principal); callers look in
        ``_identities`` first."""
        method, target, principal = binding.method, binding.target, binding.principal
        identity = make_identity(method, target, principal, self.audience, self._audience_hint)
        if len(self._identities) >= _CACHE_MAX:
            self._identities.clear()
        self._identities[method, target, principal] = identity
        return identity


_process_state: list[RequestStateSecurity] = []


def process_state_protector() -> RequestStateSecurity:
    """The default ``ServerConfig.request_state``: one random key for this process.

    Made on first use (``RequestStateSecurity.ephemeral()``), then shared by every config in
    the process, so that connections and apps built from separate configs accept each other's
    tokens. Tokens die with the process: several instances, or retries that must survive a
    restart, need a key ring configured on every instance.
    """
    if not _process_state:
        _process_state.append(RequestStateSecurity.ephemeral())
    return _process_state[0]


def is_process_protector(value: object) -> bool:
    """Whether ``value`` is the per-process default of :func:`process_state_protector`."""
    return bool(_process_state) and value is _process_state[0]
