"""The era bridge's downstream facts: what the downstream server answers about itself
(``initialize``, ``server/discover``) and which headers it checks, from the upstream's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from mrtr_sansio._config import ServerConfig
from mrtr_sansio._mcp.capabilities import TASKS_EXTENSION
from mrtr_sansio.http._param_headers import mirrored_params

__all__ = ["downstream_config", "mirrored_headers"]


def downstream_config(
    base: ServerConfig,
    server_info: Mapping[str, Any] | None,
    capabilities: Mapping[str, Any] | None,
    instructions: str | None,
    tools: Iterable[Mapping[str, Any]] = (),
) -> ServerConfig:
    """``base`` answering ``initialize`` and ``server/discover`` with the upstream's facts:
    its ``serverInfo``, capabilities and instructions (DIGEST §1.6, §5.1), and checking the
    ``Mcp-Param-*`` headers of a ``tools/call`` against the upstream ``tools``' annotations
    (:func:`mirrored_headers`). Of the extensions (``extensions``) only the tasks extension is
    kept, when the upstream declares it: the bridge relays its requests and no other's."""
    caps = {k: v for k, v in (capabilities or {}).items() if k != "extensions"}
    extensions = (capabilities or {}).get("extensions")
    if isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions:
        caps["extensions"] = {TASKS_EXTENSION: extensions[TASKS_EXTENSION]}
    return attrs.evolve(
        base,
        server_info=dict(server_info) if server_info is not None else base.server_info,
        capabilities=caps,
        instructions=instructions,
        param_headers={**base.param_headers, **mirrored_headers(tools)},
    )


def mirrored_headers(tools: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, tuple[str, ...]]]:
    """The upstream tools' ``x-mcp-header`` annotations (SEP-2243) as ``param_headers``: the
    downstream server checks a call's headers as the upstream would, since the upstream sees
    only the headers the bridge's own client writes. A tool with unusable annotations is left
    out, as the bridge's client leaves it out of the listing."""
    out = {}
    for tool in tools:
        name = tool.get("name")
        try:
            mirrored = mirrored_params(tool.get("inputSchema") or {})
        except ValueError:
            continue
        if mirrored and isinstance(name, str):
            out[name] = mirrored
    return out
