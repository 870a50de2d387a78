"""A callable server that POSTs each message to a modern Streamable HTTP endpoint.

The one module of the testing package that does IO (stdlib ``urllib``; no extra needed). Each
request carries the modern mirror headers (``MCP-Protocol-Version``, ``Mcp-Method``,
``Mcp-Name``, non-ASCII values base64-wrapped), and the HTTP status of each answer is checked
against the spec's table as the model's ``http-status`` check.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from mrtr_sansio._mcp.methods import NAME_FIELDS, PARAM_HEADER_METHOD
from mrtr_sansio.http import encode_header_value
from mrtr_sansio.http._names import (
    METHOD_DISPLAY,
    NAME_DISPLAY,
    PARAM_DISPLAY,
    VERSION_DISPLAY,
    http_status,
)
from mrtr_sansio.protocol import PROTOCOL_VERSION_KEY

from ._checks import SpecViolationError

__all__ = ["HttpEndpoint", "expected_status", "http_endpoint", "parse_sse"]


def expected_status(message: Mapping[str, Any]) -> int | None:
    """The HTTP status the spec prescribes for a modern response, or None if it leaves it open.

    Results are 200; -32601 is 404; parse, request, params, header, capability and version
    errors are 400 (DIGEST §1.2, §1.5, §3.3).
    """
    error = message.get("error")
    if error is None:
        return 200
    status = http_status(error.get("code") if isinstance(error, Mapping) else None)
    return None if status == 200 else status


def parse_sse(body: bytes) -> list[Any]:
    """The JSON messages of a ``text/event-stream`` body (``data:`` lines of each event)."""
    messages: list[Any] = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = [
            line[5:].removeprefix(b" ") for line in block.split(b"\n") if line.startswith(b"data:")
        ]
        if data and any(data):
            messages.append(json.loads(b"\n".join(data)))
    return messages


class HttpEndpoint:
    """A callable server for one URL: ``endpoint(message) -> response or None``.

    ``headers`` are added to every POST (e.g. ``Authorization``). ``param_headers`` maps tool
    names to their ``x-mcp-header`` arguments (``mrtr_sansio.http.param_headers_for(tools)``, with
    the tools as ``tools/list`` shows them), sent as ``Mcp-Param-<Name>`` headers.
    ``notifications`` keeps what arrived on SSE streams before each response; ``last_status``
    is the last HTTP status.
    With ``check_status`` a status that contradicts the spec raises :class:`SpecViolationError`.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        check_status: bool = True,
        param_headers: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
    ) -> None:
        self.url = url
        self.headers = dict(headers or {})
        self.param_headers = dict(param_headers or {})
        self.timeout = timeout
        self.check_status = check_status
        self.notifications: list[Any] = []
        self.last_status: int | None = None

    def headers_for(self, message: Mapping[str, Any]) -> dict[str, str]:
        """The HTTP headers of one POST carrying ``message``."""
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **self.headers,
        }
        method = message.get("method")
        params = message.get("params")
        params = params if isinstance(params, Mapping) else {}
        meta = params.get("_meta")
        version = meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, Mapping) else None
        if isinstance(version, str):
            headers[VERSION_DISPLAY] = encode_header_value(version)
        if isinstance(method, str):
            headers[METHOD_DISPLAY] = encode_header_value(method)
            name = params.get(NAME_FIELDS.get(method, ""))
            if isinstance(name, str):
                headers[NAME_DISPLAY] = encode_header_value(name)
                if method == PARAM_HEADER_METHOD:
                    headers.update(self._mirrored(name, params.get("arguments")))
        return headers

    def _mirrored(self, tool: str, arguments: Any) -> dict[str, str]:
        """``Mcp-Param-<Name>`` headers for the tool's ``x-mcp-header`` arguments."""
        out: dict[str, str] = {}
        for header, path in self.param_headers.get(tool, {}).items():
            value = arguments
            for step in path:
                value = value.get(step) if isinstance(value, Mapping) else None
            if isinstance(value, bool):
                out[PARAM_DISPLAY + header] = "true" if value else "false"
            elif isinstance(value, (str, int)):
                out[PARAM_DISPLAY + header] = encode_header_value(str(value))
        return out

    def __call__(self, message: Mapping[str, Any]) -> dict[str, Any] | None:
        request = urllib.request.Request(
            self.url,
            data=json.dumps(message).encode(),
            headers=self.headers_for(message),
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as reply:
                status, ctype, body = (
                    reply.status,
                    reply.headers.get("Content-Type", ""),
                    reply.read(),
                )
        except urllib.error.HTTPError as exc:
            status, ctype, body = exc.code, exc.headers.get("Content-Type", ""), exc.read()
        self.last_status = status
        if status == 202 or not body:
            return None
        try:
            response = self._read(ctype, body)
        except ValueError:
            response = None
        if not isinstance(response, dict):
            raise SpecViolationError(
                "jsonrpc", f"HTTP {status} without a JSON-RPC response", message, body
            )
        wanted = expected_status(response)
        if self.check_status and wanted is not None and status != wanted:
            raise SpecViolationError(
                "http-status", f"HTTP {status}, expected {wanted}", message, response
            )
        return response

    def _read(self, content_type: str, body: bytes) -> Any:
        """The JSON-RPC response in a JSON or SSE body (notifications on SSE are kept)."""
        if content_type.split(";", maxsplit=1)[0].strip().lower() != "text/event-stream":
            return json.loads(body)
        response = None
        for item in parse_sse(body):
            if isinstance(item, dict) and ("result" in item or "error" in item):
                response = item
            else:
                self.notifications.append(item)
        return response


def http_endpoint(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    check_status: bool = True,
    param_headers: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
) -> HttpEndpoint:
    """A callable server POSTing to ``url`` (see :class:`HttpEndpoint`)."""
    return HttpEndpoint(
        url,
        headers=headers,
        timeout=timeout,
        check_status=check_status,
        param_headers=param_headers,
    )
