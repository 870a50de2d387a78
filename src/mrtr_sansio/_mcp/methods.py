"""The methods table: every per-method fact, written once, as a leaf that imports nothing.

Which requests may be answered with ``input_required`` (:data:`MRTR_METHODS`), which body
field names each request's target (:data:`NAME_FIELDS`: the ``Mcp-Name`` header and every
observer read it) and what that target is called (:data:`TARGET_KINDS`), which method a task
may augment (:data:`TASK_METHOD`), which requests the tasks extension adds
(:data:`TASK_REQUESTS`), which results carry cache hints (:data:`CACHEABLE_METHODS`), whose
arguments are mirrored in headers (:data:`PARAM_HEADER_METHOD`) and which methods only the
legacy wire has (:data:`LEGACY_ONLY_METHODS`). ``tests/test_facts_once.py`` fails if another
core module states one of them again.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CACHEABLE_METHODS",
    "LEGACY_ONLY_METHODS",
    "MRTR_METHODS",
    "NAME_FIELDS",
    "PARAM_HEADER_METHOD",
    "RESOURCE_METHOD",
    "TARGET_KINDS",
    "TASK_METHOD",
    "TASK_REQUESTS",
]

#: The requests that may be answered with ``input_required`` (spec: Supported Requests).
MRTR_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
#: The one MRTR request whose target is a URI and which carries no ``arguments``.
RESOURCE_METHOD: Final = "resources/read"
#: The one method a task may augment today (SEP-2663 "Supported Methods").
TASK_METHOD: Final = "tools/call"
#: The requests the tasks extension adds (SEP-2663).
TASK_REQUESTS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
#: The body field naming each request's target: mirrored in ``Mcp-Name`` and read by observers.
NAME_FIELDS: Final = {
    "tools/call": "name",
    "prompts/get": "name",
    RESOURCE_METHOD: "uri",
    # SEP-2663 "Streamable HTTP: Routing Headers": the task a request is about.
    **dict.fromkeys(sorted(TASK_REQUESTS), "taskId"),
}
#: What each MRTR request's target is called in an error message ("Unknown tool: x").
TARGET_KINDS: Final = {"tools/call": "tool", "prompts/get": "prompt", RESOURCE_METHOD: "resource"}
#: Methods whose complete results carry ``ttlMs`` and ``cacheScope`` (SEP-2549).
CACHEABLE_METHODS = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        RESOURCE_METHOD,
    }
)
#: The one method whose arguments are mirrored in ``Mcp-Param-{Name}`` headers: tools declare
#: ``x-mcp-header`` in their ``inputSchema`` (2026-07-28, transports: Custom Headers).
PARAM_HEADER_METHOD: Final = "tools/call"
#: Methods of the legacy wire that the modern wire removed; with an envelope they are -32601.
LEGACY_ONLY_METHODS = frozenset(
    {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)
