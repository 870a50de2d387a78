"""Sealed ``requestState``: integrity, optional confidentiality, expiry, binding and rotation.

The spec makes an echoed ``requestState`` attacker-controlled input that the server must verify
whenever it matters (DIGEST §2.3 S5, §4). :class:`RequestStateSecurity` is the
:class:`StateProtector` that does it: handlers return any JSON value as state and get the same
value back on the retry; the client only ever holds an opaque token::

    ServerConfig(request_state=RequestStateSecurity(keys=[key], audience="https://mcp.example"))

**Envelope.** What a codec seals is a fixed binary header (``struct``, big-endian) followed by
the state as compact ASCII JSON::

    version(1)=1 | round(u32) | expires(f64) | token id(16)                     -- claims
    | method code(1) | target(2) | principal(2) | audience(2) | binding digest(16)  -- binding
    | [carry length(u16) | carry JSON]                                          -- version 2
    | state JSON

Envelope version 2 is sealed only when the server's observer hands over trace context to
carry (``mrtr_sansio.observe``: a flow id, the previous round's span); it is sealed and
authenticated like the state, and returned beside it.
The binding digest (SHA-256, truncated to 128 bits) covers, length-prefixed, the method, the
target (tool or prompt name, or resource URI), the principal and the audience (None distinct
from every string), then canonical JSON of ``arguments`` (sorted keys, no spaces, ASCII), so
that key order does not matter. It alone decides. The method code (``tools/call``,
``prompts/get``, ``resources/read``, 0 for anything else) and 16-bit hints of target, principal
and audience only name which field differs when it does not match, for the reason.
``expires`` is the injected clock's ``now`` at sealing plus ``ttl`` (instances sharing keys
need roughly agreeing clocks); the token id is 16 fresh random bytes, handed to the replay
guard.

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

import hashlib
import hmac
import json
import math
import secrets
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import attrs

from mrtr_sansio._errors import LocalProtocolError
from mrtr_sansio._wire.codec import JsonCodec

from ._codecs import AesGcmCodec, HmacSha256Codec, StateCodec
from ._replay import ReplayGuard
from ._state import RequestStateError, StateBinding, UnsealedState

if TYPE_CHECKING:
    from hashlib import _Hash

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

_ENVELOPE_VERSION = 1
_CARRY_VERSION = 2  # with the observer's carry after the binding block
_U16 = struct.Struct(">H")
_CLAIMS = struct.Struct(">BId16s")
_ID_BYTES = 16
_HINT = 2
_DIGEST = 16
_BINDING_AT = _CLAIMS.size
_STATE_AT = _BINDING_AT + 1 + 3 * _HINT + _DIGEST
_MAX_ROUND = 0xFFFFFFFF
_METHOD_CODES = {"tools/call": b"\x01", "prompts/get": b"\x02", "resources/read": b"\x03"}
# (reason, slice of the binding block) in the order mismatches are reported; when every hint
# agrees, the arguments are what differs.
_MISMATCHES = (
    ("audience_mismatch", slice(1 + 2 * _HINT, 1 + 3 * _HINT)),
    ("principal_mismatch", slice(1 + _HINT, 1 + 2 * _HINT)),
    ("method_mismatch", slice(0, 1)),
    ("target_mismatch", slice(1, 1 + _HINT)),
)
_CACHE_MAX = 1024


def _json_chunks(*, sort_keys: bool) -> Callable[[Any, int], Sequence[str]]:
    """``f(value, 0)`` -> chunks of compact ASCII JSON without NaN (raises TypeError,
    ValueError or RecursionError for what JSON cannot carry).

    ``JSONEncoder.encode`` builds the C encoder anew on every call, which costs about as much
    as encoding a small object; where CPython's C encoder exists it is built once here instead
    (same function, same output, pinned by a test against the public path).
    """
    public = json.JSONEncoder(
        separators=(",", ":"),
        ensure_ascii=True,
        allow_nan=False,
        check_circular=False,
        sort_keys=sort_keys,
    )
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is not None:
        try:
            encoder: Callable[[Any, int], Sequence[str]] = make(
                None, public.default, json.encoder.encode_basestring_ascii, None, ":", ",",
                sort_keys, False, False,
            )  # fmt: skip
        except TypeError:  # pragma: no cover - a future signature
            pass
        else:
            return encoder
    return lambda value, _level: (public.encode(value),)  # pragma: no cover - not CPython


_state_chunks = _json_chunks(sort_keys=False)
_canonical_chunks = _json_chunks(sort_keys=True)
_load_state = json.JSONDecoder().raw_decode
_equal = hmac.compare_digest


def _hash_texts(tag: bytes, *parts: str | None) -> _Hash:
    """SHA-256 fed ``tag`` then optional strings, each length-prefixed so that none can run
    into the next; None hashes differently from every string."""
    h = hashlib.sha256(tag)
    for part in parts:
        if part is None:
            h.update(b"\x00")
        else:
            raw = part.encode("utf-8", "surrogatepass")
            h.update(b"\x01" + len(raw).to_bytes(8, "big") + raw)
    return h


def _binding_digest(identity: _Identity, arguments: Any) -> bytes:
    """The binding digest: the identity hash, continued with canonical JSON of ``arguments``
    (raises TypeError, ValueError or RecursionError for what JSON cannot carry); for None
    and ``{}`` the digest the identity worked out once from the same rule."""
    if arguments is None:
        return identity.no_arguments
    if type(arguments) is dict and not arguments:
        return identity.empty_arguments
    return _digest(identity.partial, arguments)


def _digest(partial: _Hash, arguments: Any) -> bytes:
    h = partial.copy()
    h.update("".join(_canonical_chunks(arguments, 0)).encode("ascii"))
    return h.digest()[:_DIGEST]


@attrs.frozen
class _Identity:
    """Everything bound except the arguments, for one (method, target, principal)."""

    #: method code | target hint | principal hint | audience hint
    hints: bytes
    #: SHA-256 fed method, target, principal and audience, ready for the arguments.
    partial: _Hash
    #: The binding digests for no arguments and for ``{}`` (most calls), worked out once.
    no_arguments: bytes
    empty_arguments: bytes


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
        self._audience_hint = _hash_texts(b"mrtr-sansio/audience\x00", audience).digest()[:_HINT]
        # By (method, target, principal): strings only, so entries never go stale; bounded.
        self._identities: dict[tuple[str, str | None, str | None], _Identity] = {}
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
        if type(round) is not int or not 1 <= round <= _MAX_ROUND:
            raise LocalProtocolError(f"round must be an integer in 1..{_MAX_ROUND}, got {round!r}")
        try:
            if self.json_codec is None:
                body = "".join(_state_chunks(state, 0)).encode("ascii")
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
                digest = _binding_digest(identity, arguments)
            except (TypeError, ValueError, RecursionError) as exc:
                raise LocalProtocolError(f"arguments cannot be bound: {exc}") from None
        token_id = self._token_bytes(_ID_BYTES)
        if len(token_id) != _ID_BYTES:  # struct would pad or cut it silently
            raise ValueError("token_bytes(n) must return n random bytes")
        if carry is None:
            claims = _CLAIMS.pack(_ENVELOPE_VERSION, round, now + self.ttl, token_id)
            token = self._codec.seal(b"".join((claims, identity.hints, digest, body)))
        else:
            claims = _CLAIMS.pack(_CARRY_VERSION, round, now + self.ttl, token_id)
            carried = _carry_bytes(carry)
            token = self._codec.seal(
                b"".join((claims, identity.hints, digest, _U16.pack(len(carried)), carried, body))
            )
        if len(token) > self.max_token_bytes:
            raise LocalProtocolError(
                f"the sealed request_state is {len(token)} characters, more than "
                f"max_token_bytes={self.max_token_bytes} accepts back"
            )
        return token

    def unseal(self, token: str, binding: StateBinding, now: float) -> UnsealedState:
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
        if type(payload) is not bytes or len(payload) < _STATE_AT:
            raise RequestStateError("malformed_envelope")
        version, round_, expires, token_id = _CLAIMS.unpack_from(payload)
        state_at = _STATE_AT
        carried: dict[str, str] | None = None
        if version != _ENVELOPE_VERSION:
            if version != _CARRY_VERSION:
                raise RequestStateError("unsupported_envelope_version")
            carried, state_at = _read_carry(payload)
        if not now < expires:
            raise RequestStateError("expired")
        identity = self._identities.get((binding.method, binding.target, binding.principal))
        if identity is None:
            identity = self._identity(binding)
        arguments = binding.arguments
        try:
            digest = _binding_digest(identity, arguments)
        except (TypeError, ValueError, RecursionError):
            raise RequestStateError("arguments_mismatch") from None
        expected = identity.hints + digest
        sealed = payload[_BINDING_AT:_STATE_AT]
        if not _equal(sealed, expected):
            raise RequestStateError(_mismatch(sealed, expected))
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
        return UnsealedState(state, round_, carried)

    # --- internals -----------------------------------------------------------------------

    def _identity(self, binding: StateBinding) -> _Identity:
        """Compute and remember what binds (method, target, principal); callers look in
        ``_identities`` first."""
        method, target, principal = binding.method, binding.target, binding.principal
        partial = _hash_texts(b"mrtr-sansio/binding\x00", method, target, principal, self.audience)
        identity = _Identity(
            b"".join(
                (
                    _METHOD_CODES.get(method, b"\x00"),
                    _hash_texts(b"mrtr-sansio/target\x00", method, target).digest()[:_HINT],
                    _hash_texts(b"mrtr-sansio/principal\x00", principal).digest()[:_HINT],
                    self._audience_hint,
                )
            ),
            partial,
            _digest(partial, None),
            _digest(partial, {}),
        )
        if len(self._identities) >= _CACHE_MAX:
            self._identities.clear()
        self._identities[method, target, principal] = identity
        return identity


def _mismatch(sealed: bytes, expected: bytes) -> str:
    """Which bound field differs, by the hints (only called once the block compared unequal).

    A field that differs has the same 16-bit hint with probability 2**-16; then the reason
    names the arguments instead. It is only ever a log line: the digest decides.
    """
    for reason, part in _MISMATCHES:
        if sealed[part] != expected[part]:
            return reason
    return "arguments_mismatch"


def _carry_bytes(carry: Mapping[str, str]) -> bytes:
    """Compact ASCII JSON of an observer's carry (string keys and values, checked)."""
    if not all(type(k) is str and type(v) is str for k, v in carry.items()):
        raise LocalProtocolError("an observer's carry must map strings to strings")
    data = json.dumps(dict(carry), separators=(",", ":"), ensure_ascii=True).encode("ascii")
    if len(data) > 0xFFFF:
        raise LocalProtocolError("an observer's carry is too large to seal")
    return data


def _read_carry(payload: bytes) -> tuple[dict[str, str], int]:
    """The carry of a version 2 envelope and where its state starts; fails closed."""
    if len(payload) < _STATE_AT + _U16.size:
        raise RequestStateError("malformed_envelope")
    (size,) = _U16.unpack_from(payload, _STATE_AT)
    start = _STATE_AT + _U16.size
    end = start + size
    if len(payload) < end:
        raise RequestStateError("malformed_envelope")
    try:
        carried = json.loads(payload[start:end].decode("ascii"))
    except (ValueError, RecursionError):
        raise RequestStateError("malformed_envelope") from None
    if type(carried) is not dict or not all(
        type(k) is str and type(v) is str for k, v in carried.items()
    ):
        raise RequestStateError("malformed_envelope")
    return carried, end


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
