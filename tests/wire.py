"""Validate what our connections put on the wire against the official MCP JSON schemas.

The schemas live outside the project (``../shared/spec/schema/<version>/schema.json``, or the
folder named by ``MRTR_SPEC_DIR``). When they are absent, as in a plain clone, validation is
skipped and ``test_wire.py`` reports the skip with its reason.

Use :func:`drain` in tests instead of ``conn.outgoing()``: it validates every message first.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from mrtr_sansio import Era, Outgoing

_HERE = Path(__file__).resolve().parent


def spec_dir() -> Path | None:
    """The folder holding ``schema/<version>/schema.json``, or None when absent."""
    candidates = []
    if os.environ.get("MRTR_SPEC_DIR"):
        candidates.append(Path(os.environ["MRTR_SPEC_DIR"]))
    for parent in _HERE.parents:
        candidates.append(parent / "shared" / "spec")
    for path in candidates:
        if (path / "schema" / "2026-07-28" / "schema.json").is_file():
            return path
    return None


SCHEMA_SKIP_REASON = (
    "official MCP schemas not found (set MRTR_SPEC_DIR to the folder holding "
    "schema/2026-07-28/schema.json); wire messages are not schema-validated"
)

MODERN = "2026-07-28"
LEGACY = "2025-11-25"

_ERROR_DEFS = {
    -32700: "ParseError",
    -32600: "InvalidRequestError",
    -32601: "MethodNotFoundError",
    -32602: "InvalidParamsError",
    -32603: "InternalError",
    -32020: "HeaderMismatchError",
    -32021: "MissingRequiredClientCapabilityError",
    -32022: "UnsupportedProtocolVersionError",
}
_RESULT_DEFS = {
    "tools/call": "CallToolResult",
    "tools/list": "ListToolsResult",
    "prompts/get": "GetPromptResult",
    "prompts/list": "ListPromptsResult",
    "resources/read": "ReadResourceResult",
    "resources/list": "ListResourcesResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "server/discover": "DiscoverResult",
    "completion/complete": "CompleteResult",
    "initialize": "InitializeResult",
    "elicitation/create": "ElicitResult",
    "sampling/createMessage": "CreateMessageResult",
    "roots/list": "ListRootsResult",
}


@cache
def _schema(version: str) -> dict[str, Any]:
    folder = spec_dir()
    assert folder is not None
    text = (folder / "schema" / version / "schema.json").read_text(encoding="utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


def _definition(version: str, name: str) -> dict[str, Any]:
    if spec_dir() is None:
        return {}
    return _schema(version)["$defs"].get(name, {})  # type: ignore[no-any-return]


@cache
def _validator(version: str, definition: str) -> Any:
    from jsonschema import Draft202012Validator

    full = _schema(version)
    if definition not in full["$defs"]:
        return None
    schema = {**full, "$ref": f"#/$defs/{definition}"}
    return Draft202012Validator(schema)


def check(version: str, definition: str, instance: Any) -> None:
    """Assert ``instance`` is a valid ``definition`` of schema ``version`` (no-op if absent)."""
    if spec_dir() is None:
        return
    validator = _validator(version, definition)
    if validator is None:
        return
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.path))
    if errors:
        details = "; ".join(f"{list(e.path)}: {e.message[:300]}" for e in errors[:5])
        raise AssertionError(f"not a valid {version} {definition}: {details}\n{instance!r}")


def check_message(
    message: Mapping[str, Any],
    era: Era,
    *,
    sender: str = "server",
    method: str | None = None,
) -> None:
    """Validate one message we sent; ``method`` (of the request answered) refines results."""
    version = MODERN if era is Era.MODERN else LEGACY
    msg = dict(message)
    if "method" in msg:
        if "id" in msg:
            union = "ClientRequest" if sender == "client" else "ServerRequest"
            if version == MODERN and sender == "server":
                raise AssertionError(f"a modern server must never send a request: {msg!r}")
            check(version, union, msg)
            check(version, "JSONRPCRequest", msg)
        else:
            union = "ClientNotification" if sender == "client" else "ServerNotification"
            check(version, union, msg)
            check(version, "JSONRPCNotification", msg)
        return
    if "error" in msg:
        check(version, "JSONRPCErrorResponse", msg)
        specific = _ERROR_DEFS.get(msg["error"].get("code"))
        if specific is not None and version == MODERN:
            # The MCP codes' definitions describe the whole response; the JSON-RPC ones (e.g.
            # ParseError) describe only its ``error`` member.
            whole = "jsonrpc" in _definition(version, specific).get("properties", {})
            check(version, specific, msg if whole else msg["error"])
        return
    check(version, "JSONRPCResultResponse", msg)
    result = msg["result"]
    if version == MODERN and sender == "server":
        assert "resultType" in result, f"modern result without resultType: {msg!r}"
        if result["resultType"] == "input_required":
            check(version, "InputRequiredResult", result)
            return
    if version == LEGACY and sender == "server":
        assert "resultType" not in result, f"legacy result with resultType: {msg!r}"
    if method is not None and method in _RESULT_DEFS:
        check(version, _RESULT_DEFS[method], result)


def drain(
    conn: Any,
    era: Era,
    *,
    sender: str = "server",
    methods: Mapping[Any, str] | None = None,
) -> list[Outgoing]:
    """Take everything ``conn`` wants to send, validating each message against the schema.

    ``methods`` maps request ids to the method they asked for, so that results are checked
    against the matching result definition.
    """
    items: list[Outgoing] = conn.outgoing()
    for item in items:
        assert json.loads(item.data) == item.message, "serialized bytes differ from message"
        method = None
        if methods is not None and "method" not in item.message:
            method = methods.get(item.message.get("id"))
        check_message(item.message, era, sender=sender, method=method)
    return items
