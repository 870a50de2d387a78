"""Method facts that several layers read, as a leaf that imports nothing.

The events, the task machine and both roles' HTTP rules ask which method a task may augment
(:data:`TASK_METHOD`) and which method's arguments are mirrored in headers
(:data:`PARAM_HEADER_METHOD`); importing them from here spares those modules an upward import.
This is not yet every method fact: the MRTR methods live with the values
(:data:`mrtr_sansio._mcp.values.MRTR_METHODS`), the ``Mcp-Name`` fields with the header rules
(:data:`mrtr_sansio.http._facts.NAME_FIELDS`), the task requests with the tasks part
(:data:`mrtr_sansio.tasks._server.TASK_REQUESTS`).
"""

from __future__ import annotations

__all__ = ["LEGACY_ONLY_METHODS", "PARAM_HEADER_METHOD", "TASK_METHOD"]

#: The one method a task may augment today (SEP-2663 "Supported Methods").
TASK_METHOD = "tools/call"
#: The one method whose arguments are mirrored in ``Mcp-Param-{Name}`` headers: tools declare
#: ``x-mcp-header`` in their ``inputSchema`` (2026-07-28, transports: Custom Headers).
PARAM_HEADER_METHOD = "tools/call"
#: Methods of the legacy wire that the modern wire removed; with an envelope they are -32601.
LEGACY_ONLY_METHODS = frozenset(
    {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)
