"""Sealed ``requestState``: integrity, confidentiality, expiry, binding, replay and key rotation.

The specialist surface behind ``ServerConfig(request_state=...)``. A server seals by default
with :func:`process_state_protector` (one random key per process); several instances, or
retries that must survive a restart, configure a :class:`RequestStateSecurity` with a key ring
on every instance. :class:`RecordEncryption` encrypts the durable task stores' records under
such a ring. :data:`UNSEALED` (also at the front door) says "pass state through as is".
See the guide, *Sealing requestState*.
"""

from ._at_rest import RecordEncryption
from ._codecs import AesGcmCodec, HmacSha256Codec, StateCodec
from ._replay import MemoryReplayGuard, ReplayGuard
from ._security import REQUEST_STATE_REASONS, RequestStateSecurity, process_state_protector
from ._state import (
    UNSEALED,
    OpenedState,
    RequestStateError,
    StateBinding,
    StateProtector,
    Unsealed,
)
from ._swap import SwappableStateProtector

__all__ = [
    "REQUEST_STATE_REASONS",
    "UNSEALED",
    "AesGcmCodec",
    "HmacSha256Codec",
    "MemoryReplayGuard",
    "OpenedState",
    "RecordEncryption",
    "ReplayGuard",
    "RequestStateError",
    "RequestStateSecurity",
    "StateBinding",
    "StateCodec",
    "StateProtector",
    "SwappableStateProtector",
    "Unsealed",
    "process_state_protector",
]

from mrtr_sansio._public import publish_errors  # after __all__, which it reads

publish_errors(globals(), __name__)
del publish_errors


def __getattr__(name: str) -> object:
    """``UnsealedState``, the old name of :class:`OpenedState`, with a warning."""
    if name == "UnsealedState":
        import warnings

        warnings.warn(
            "mrtr_sansio.sealing.UnsealedState is deprecated: use OpenedState (UNSEALED and "
            "its type Unsealed are the choice not to seal)",
            DeprecationWarning,
            stacklevel=2,
        )
        return OpenedState
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
