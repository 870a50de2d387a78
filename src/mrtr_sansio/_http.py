"""Streamable HTTP facts a transport hands to the core, and the mirror-header rules.

Modern HTTP requests mirror parts of the body in headers: ``MCP-Protocol-Version`` must equal the
envelope's version, ``Mcp-Method`` the method, and ``Mcp-Name`` the tool or prompt name or the
resource URI (on ``tools/call``, ``prompts/get``, ``resources/read``) or the task id (on
``tasks/get``, ``tasks/update``, ``tasks/cancel``). Values that are not plain
header-safe ASCII travel as ``=?base64?<base64 of UTF-8>?=``. Any violation is -32020 with
HTTP status 400. Tool arguments a tool marks with ``x-mcp-header`` are mirrored too, in
``Mcp-Param-{Name}`` headers (see :mod:`._param_headers`).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import attrs

from ._errors import HEADER_MISMATCH, JsonRpcError, RemoteProtocolError

__all__ = ["HttpRequestFacts", "decode_header_value", "encode_header_value"]

#: The body field each method mirrors in ``Mcp-Name`` (client and server read this one map).
NAME_FIELDS = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    # SEP-2663 "Streamable HTTP: Routing Headers": the task a request is about.
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


@attrs.frozen
class HttpRequestFacts:
    """The MCP headers of one HTTP POST, as received (None when a header was absent).

    ``params`` holds the ``Mcp-Param-{Name}`` headers by lower-case ``{Name}``.
    """

    protocol_version: str | None = None
    method: str | None = None
    name: str | None = None
    params: Mapping[str, str] = attrs.field(factory=dict, hash=False)

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> HttpRequestFacts:
        """Pick the MCP headers out of a mapping with lower-case names."""
        params = {k[10:]: v for k, v in headers.items() if k.startswith("mcp-param-")}
        return cls(
            headers.get("mcp-protocol-version"),
            headers.get("mcp-method"),
            headers.get("mcp-name"),
            params,
        )


def decode_header_value(value: str) -> str:
    """Undo the ``=?base64?...?=`` form; plain values come back unchanged.

    Raises ``ValueError`` for a malformed encoded value.
    """
    if value.startswith("=?base64?") and value.endswith("?="):
        payload = value[9:-2]
        try:
            return base64.b64decode(payload, validate=True).decode("utf-8")
        except ValueError as exc:  # binascii.Error, UnicodeDecodeError, non-ASCII payload
            raise ValueError("malformed base64 header value") from exc
    return value


def _header_safe(value: str) -> bool:
    return value.isascii() and value.isprintable() and value == value.strip()


def encode_header_value(value: str) -> str:
    """The header form of ``value``: itself when plain printable ASCII, else base64-wrapped."""
    if _header_safe(value) and not value.startswith("=?"):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def _mismatch(message: str, request_id: Any) -> RemoteProtocolError:
    return RemoteProtocolError(JsonRpcError(HEADER_MISMATCH, message), request_id)


def check_headers(
    facts: HttpRequestFacts,
    request_id: Any,
    method: str,
    params: Mapping[str, Any] | None,
    body_version: Any,
) -> None:
    """Raise -32020 when a required mirror header is missing or disagrees with the body.

    ``body_version`` is the envelope's version, or None when the body has none (then the
    missing envelope is reported by the envelope check, as -32602).
    """
    if facts.protocol_version is None:
        raise _mismatch("Missing required header MCP-Protocol-Version", request_id)
    if body_version is not None and facts.protocol_version.strip() != body_version:
        raise _mismatch(
            f"Header mismatch: MCP-Protocol-Version header value '{facts.protocol_version}' "
            f"does not match body value '{body_version}'",
            request_id,
        )
    if facts.method is None:
        raise _mismatch("Missing required header Mcp-Method", request_id)
    try:
        header_method = decode_header_value(facts.method.strip())
    except ValueError:
        raise _mismatch("Malformed Mcp-Method header", request_id) from None
    if header_method != method:
        raise _mismatch(
            f"Header mismatch: Mcp-Method header value '{header_method}' does not match "
            f"body value '{method}'",
            request_id,
        )
    field = NAME_FIELDS.get(method)
    if field is None:
        return
    body_name = params.get(field) if params is not None else None
    if facts.name is None:
        raise _mismatch("Missing required header Mcp-Name", request_id)
    try:
        header_name = decode_header_value(facts.name.strip())
    except ValueError:
        raise _mismatch("Malformed Mcp-Name header", request_id) from None
    if header_name != body_name:
        raise _mismatch(
            f"Header mismatch: Mcp-Name header value '{header_name}' does not match "
            f"body value '{body_name}'",
            request_id,
        )
