"""Method facts that several layers read, written once, below everything that reads them.

The value types, the events, the task machine and both roles' HTTP rules ask "which method is
this fact about?"; each answer lives here, as a leaf, so that no module has to import upwards
(or restate the literal) to learn it. The table of MRTR methods stays with the values that use
it (:data:`mrtr_sansio._mcp.values.MRTR_METHODS`), the ``Mcp-Name`` fields with the header rules
(:data:`mrtr_sansio.http._facts.NAME_FIELDS`).
"""

from __future__ import annotations

__all__ = ["PARAM_HEADER_METHOD", "TASK_METHOD"]

#: The one method a task may augment today (SEP-2663 "Supported Methods").
TASK_METHOD = "tools/call"
#: The one method whose arguments are mirrored in ``Mcp-Param-{Name}`` headers: tools declare
#: ``x-mcp-header`` in their ``inputSchema`` (2026-07-28, transports: Custom Headers).
PARAM_HEADER_METHOD = "tools/call"
