"""The protocol's facts: versions and eras, the modern envelope, method facts, capabilities.

For embedders who build or read messages themselves: which versions each era speaks, the
``_meta`` keys of the modern envelope and a builder for it, which methods allow multi
round-trip answers and which requests may be embedded, what a result's ``resultType`` may be,
the capabilities an embedded request needs, and the legacy session a request arrived in.
"""

from ._mcp.capabilities import merge_capabilities, missing_capabilities, required_capabilities
from ._mcp.envelope import (
    CLIENT_CAPABILITIES,
    CLIENT_INFO,
    LATEST_LEGACY_VERSION,
    LATEST_MODERN_VERSION,
    LEGACY_VERSIONS,
    LOG_LEVEL,
    MODERN_VERSIONS,
    PROTOCOL_VERSION_KEY,
    SERVER_INFO,
    SUBSCRIPTION_ID,
    Era,
    modern_envelope,
)
from ._mcp.methods import MRTR_METHODS
from ._mcp.mrtr_fields import ResultType
from ._mcp.session import LegacySession
from ._mcp.values import EMBEDDABLE_METHODS

__all__ = [
    "CLIENT_CAPABILITIES",
    "CLIENT_INFO",
    "EMBEDDABLE_METHODS",
    "LATEST_LEGACY_VERSION",
    "LATEST_MODERN_VERSION",
    "LEGACY_VERSIONS",
    "LOG_LEVEL",
    "MODERN_VERSIONS",
    "MRTR_METHODS",
    "PROTOCOL_VERSION_KEY",
    "SERVER_INFO",
    "SUBSCRIPTION_ID",
    "Era",
    "LegacySession",
    "ResultType",
    "merge_capabilities",
    "missing_capabilities",
    "modern_envelope",
    "required_capabilities",
]


def __getattr__(name: str) -> object:
    """``PROTOCOL_VERSION``, the old name of :data:`PROTOCOL_VERSION_KEY`, with a warning."""
    if name == "PROTOCOL_VERSION":
        import warnings

        warnings.warn(
            "mrtr_sansio.protocol.PROTOCOL_VERSION is the _meta key: use PROTOCOL_VERSION_KEY",
            DeprecationWarning,
            stacklevel=2,
        )
        return PROTOCOL_VERSION_KEY
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
