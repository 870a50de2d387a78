"""The headers a Streamable HTTP transport sets on each POST of the client (DIGEST §1.2).

Modern: ``MCP-Protocol-Version`` on every message, ``Mcp-Method`` on requests, ``Mcp-Name`` on
``tools/call``/``prompts/get``/``resources/read`` (the task id on ``tasks/*``), and the
``Mcp-Param-*`` headers of a tool's ``x-mcp-header`` arguments; values that are not plain
header-safe ASCII are base64-wrapped.
Legacy: ``MCP-Protocol-Version`` with the negotiated version once ``initialize`` is answered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mrtr_sansio._mcp.envelope import PROTOCOL_VERSION_KEY
from mrtr_sansio._mcp.methods import NAME_FIELDS, PARAM_HEADER_METHOD
from mrtr_sansio.http._facts import encode_header_value
from mrtr_sansio.http._names import METHOD_DISPLAY, NAME_DISPLAY, PARAM_DISPLAY, VERSION_DISPLAY
from mrtr_sansio.http._param_headers import header_text

__all__ = ["request_headers"]


def request_headers(
    msg: Mapping[str, Any],
    negotiated: str | None,
    param_headers: Mapping[str, Mapping[str, tuple[str, ...]]] | None,
) -> dict[str, str]:
    """The headers for ``msg``; ``negotiated`` is the version in use, None before it is known."""
    method: str = msg.get("method", "")
    params = msg.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    version = meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, Mapping) else None
    if version is None:  # a notification, an answer, or a legacy request
        if method == "initialize" or negotiated is None:
            return {}
        return {VERSION_DISPLAY: negotiated}
    assert isinstance(params, Mapping)
    headers = {VERSION_DISPLAY: version, METHOD_DISPLAY: method}  # both sent as is
    field = NAME_FIELDS.get(method)
    if field is None:
        return headers
    name = params.get(field)
    if isinstance(name, str):
        headers[NAME_DISPLAY] = encode_header_value(name)
        mirrored = param_headers.get(name) if param_headers and field == "name" else None
        if mirrored and method == PARAM_HEADER_METHOD:
            headers.update(_mirror(params.get("arguments"), mirrored))
    return headers


def _mirror(arguments: Any, mirrored: Mapping[str, tuple[str, ...]]) -> dict[str, str]:
    """``Mcp-Param-{Name}`` headers for the arguments present at the mirrored paths."""
    out = {}
    for name, path in mirrored.items():
        value = arguments
        for step in path:
            value = value.get(step) if isinstance(value, Mapping) else None
        text = header_text(value)
        if text is not None:
            out[PARAM_DISPLAY + name] = encode_header_value(text)
    return out
