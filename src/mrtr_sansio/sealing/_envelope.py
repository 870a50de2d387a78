"""The envelope a codec seals: claims, the binding block, the observer's carry, the state.

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
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from mrtr_sansio._errors import LocalProtocolError

from ._state import RequestStateError

if TYPE_CHECKING:
    from hashlib import _Hash

__all__ = [
    "BINDING_AT",
    "CARRY_VERSION",
    "CLAIMS",
    "ENVELOPE_VERSION",
    "ID_BYTES",
    "MAX_ROUND",
    "STATE_AT",
    "U16",
    "Identity",
    "audience_hint",
    "binding_digest",
    "canonical_chunks",
    "carry_bytes",
    "hash_texts",
    "make_identity",
    "mismatch",
    "read_carry",
    "state_chunks",
]

ENVELOPE_VERSION = 1
CARRY_VERSION = 2  # with the observer's carry after the binding block
U16 = struct.Struct(">H")
CLAIMS = struct.Struct(">BId16s")
ID_BYTES = 16
HINT = 2
DIGEST = 16
BINDING_AT = CLAIMS.size
STATE_AT = BINDING_AT + 1 + 3 * HINT + DIGEST
MAX_ROUND = 0xFFFFFFFF
METHOD_CODES = {"tools/call": b"\x01", "prompts/get": b"\x02", "resources/read": b"\x03"}
# (reason, slice of the binding block) in the order mismatches are reported; when every hint
# agrees, the arguments are what differs.
MISMATCHES = (
    ("audience_mismatch", slice(1 + 2 * HINT, 1 + 3 * HINT)),
    ("principal_mismatch", slice(1 + HINT, 1 + 2 * HINT)),
    ("method_mismatch", slice(0, 1)),
    ("target_mismatch", slice(1, 1 + HINT)),
)


def json_chunks(*, sort_keys: bool) -> Callable[[Any, int], Sequence[str]]:
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


state_chunks = json_chunks(sort_keys=False)
canonical_chunks = json_chunks(sort_keys=True)


def hash_texts(tag: bytes, *parts: str | None) -> _Hash:
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


def binding_digest(identity: Identity, arguments: Any) -> bytes:
    """The binding digest: the identity hash, continued with canonical JSON of ``arguments``
    (raises TypeError, ValueError or RecursionError for what JSON cannot carry); for None
    and ``{}`` the digest the identity worked out once from the same rule."""
    if arguments is None:
        return identity.no_arguments
    if type(arguments) is dict and not arguments:
        return identity.empty_arguments
    return arguments_digest(identity.partial, arguments)


def arguments_digest(partial: _Hash, arguments: Any) -> bytes:
    """``partial`` continued with canonical JSON of ``arguments``, truncated to the digest."""
    h = partial.copy()
    h.update("".join(canonical_chunks(arguments, 0)).encode("ascii"))
    return h.digest()[:DIGEST]


@attrs.frozen
class Identity:
    """Everything bound except the arguments, for one (method, target, principal)."""

    #: method code | target hint | principal hint | audience hint
    hints: bytes
    #: SHA-256 fed method, target, principal and audience, ready for the arguments.
    partial: _Hash
    #: The binding digests for no arguments and for ``{}`` (most calls), worked out once.
    no_arguments: bytes
    empty_arguments: bytes


def audience_hint(audience: str | None) -> bytes:
    """The 16-bit hint of an audience (see the binding block)."""
    return hash_texts(b"mrtr-sansio/audience\x00", audience).digest()[:HINT]


def make_identity(
    method: str, target: str | None, principal: str | None, audience: str | None, hint: bytes
) -> Identity:
    """What binds (method, target, principal) for ``audience``, whose hint is ``hint``."""
    partial = hash_texts(b"mrtr-sansio/binding\x00", method, target, principal, audience)
    return Identity(
        b"".join(
            (
                METHOD_CODES.get(method, b"\x00"),
                hash_texts(b"mrtr-sansio/target\x00", method, target).digest()[:HINT],
                hash_texts(b"mrtr-sansio/principal\x00", principal).digest()[:HINT],
                hint,
            )
        ),
        partial,
        arguments_digest(partial, None),
        arguments_digest(partial, {}),
    )


def mismatch(sealed: bytes, expected: bytes) -> str:
    """Which bound field differs, by the hints (only called once the block compared unequal).

    A field that differs has the same 16-bit hint with probability 2**-16; then the reason
    names the arguments instead. It is only ever a log line: the digest decides.
    """
    for reason, part in MISMATCHES:
        if sealed[part] != expected[part]:
            return reason
    return "arguments_mismatch"


def carry_bytes(carry: Mapping[str, str]) -> bytes:
    """Compact ASCII JSON of an observer's carry (string keys and values, checked)."""
    if not all(type(k) is str and type(v) is str for k, v in carry.items()):
        raise LocalProtocolError("an observer's carry must map strings to strings")
    data = json.dumps(dict(carry), separators=(",", ":"), ensure_ascii=True).encode("ascii")
    if len(data) > 0xFFFF:
        raise LocalProtocolError("an observer's carry is too large to seal")
    return data


def read_carry(payload: bytes) -> tuple[dict[str, str], int]:
    """The carry of a version 2 envelope and where its state starts; fails closed."""
    if len(payload) < STATE_AT + U16.size:
        raise RequestStateError("malformed_envelope")
    (size,) = U16.unpack_from(payload, STATE_AT)
    start = STATE_AT + U16.size
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
