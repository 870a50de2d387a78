"""The legacy session: what ``initialize`` established for a stdio process or HTTP session."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["LegacySession"]


class LegacySession:
    """What ``initialize`` established for a legacy stdio process or HTTP session."""

    __slots__ = (
        "client_capabilities",
        "client_info",
        "initialized",
        "log_level",
        "protocol_version",
        "session_id",
    )

    def __init__(
        self,
        protocol_version: str,
        client_capabilities: Mapping[str, Any],
        client_info: Mapping[str, Any] | None,
    ) -> None:
        self.protocol_version = protocol_version
        self.client_capabilities = client_capabilities
        self.client_info = client_info
        #: True once ``notifications/initialized`` arrived.
        self.initialized = False
        #: Minimum level set by ``logging/setLevel``, or None (send every level).
        self.log_level: str | None = None
        #: The transport's name for the session (HTTP ``Mcp-Session-Id``), set by the adapter
        #: that issued it; None on stdio. Observers report it (``mcp.session.id``).
        self.session_id: str | None = None
