"""What the stream adapter tests share: the messages a client sends, the answers expected on
the wire, the test server's tools, and a transcript that checks every message against the
official schemas.

The tools (``tools/call`` names):

* ``greet`` — asks for a name by form elicitation (state ``"s1"``), then greets;
* ``fast`` — answers at once;
* ``boom`` — raises (-32603 expected);
* ``bad`` — returns a result that is not JSON (-32603 expected);
* ``chatty`` — sends progress and two log messages (one below the requested level), then answers;
* ``nap`` — sleeps 10 ms with ``ctx.sleep`` (a real timer), then answers;
* ``slow`` — waits for the test to open ``probe.gate``;
* ``hang`` — signals ``probe.started`` and waits forever; ``probe.cancelled`` once cancelled.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from mrtr_sansio import (
    UNSEALED,
    Era,
    InputRequiredResult,
    RequestReceived,
    ServerConfig,
    elicit_form,
)
from mrtr_sansio.adapters import HandlerResult
from mrtr_sansio.protocol import CLIENT_CAPABILITIES, LOG_LEVEL, PROTOCOL_VERSION, SERVER_INFO
from wire import check_message

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
SERVER = {"name": "test-server", "version": "1.0.0"}
# Unsealed: the scenarios look at the state on the wire (sealing has its own tests).
CONFIG = ServerConfig(server_info=SERVER, capabilities={"tools": {}}, request_state=UNSEALED)
FORM_CAPS: dict[str, Any] = {"elicitation": {"form": {}}}
NAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}
ASK_NAME: dict[str, Any] = {"message": "What is your name?", "requestedSchema": NAME_SCHEMA}
ADA = {"action": "accept", "content": {"name": "Ada"}}
TIMEOUT = 10.0  # seconds a test waits for the server before failing (never slept)


# --- what the client sends ----------------------------------------------------------------


def request(rid: Any, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = dict(params)
    return msg


def notification(method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = dict(params)
    return msg


def modern_call(
    rid: Any,
    name: str,
    *,
    caps: Mapping[str, Any] = FORM_CAPS,
    meta: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A modern ``tools/call``; ``meta`` entries join the envelope, ``extra`` the params."""
    params = {"name": name, "arguments": {}, **extra, "_meta": envelope(caps, **(meta or {}))}
    return request(rid, "tools/call", params)


def envelope(caps: Mapping[str, Any] = FORM_CAPS, **meta: Any) -> dict[str, Any]:
    """A modern request's ``_meta``: version, capabilities, and ``meta``."""
    return {PROTOCOL_VERSION: MODERN, CLIENT_CAPABILITIES: dict(caps), **meta}


def legacy_call(rid: Any, name: str) -> dict[str, Any]:
    return request(rid, "tools/call", {"name": name, "arguments": {}})


def initialize(rid: Any = 0, caps: Mapping[str, Any] = FORM_CAPS) -> dict[str, Any]:
    return request(
        rid,
        "initialize",
        {
            "protocolVersion": LEGACY,
            "capabilities": dict(caps),
            "clientInfo": {"name": "test-client", "version": "1.0.0"},
        },
    )


INITIALIZED = notification("notifications/initialized")


def cancelled(rid: Any) -> dict[str, Any]:
    return notification("notifications/cancelled", {"requestId": rid, "reason": "test"})


# --- what the server answers --------------------------------------------------------------


def result(rid: Any, body: Mapping[str, Any], era: Era = Era.MODERN) -> dict[str, Any]:
    """The response carrying ``body``, with what the connection adds on the modern wire."""
    if era is Era.LEGACY:
        return {"jsonrpc": "2.0", "id": rid, "result": dict(body)}
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "result": {**body, "resultType": "complete", "_meta": {SERVER_INFO: SERVER}},
    }


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def error(rid: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    if rid is None:
        return {"jsonrpc": "2.0", "error": err}
    return {"jsonrpc": "2.0", "id": rid, "error": err}


def ask_name(rid: Any, *, state: str | None = "s1") -> dict[str, Any]:
    """The modern ``input_required`` answer of ``greet``."""
    body: dict[str, Any] = {
        "resultType": "input_required",
        "inputRequests": {"name": {"method": "elicitation/create", "params": ASK_NAME}},
    }
    if state is not None:
        body["requestState"] = state
    body["_meta"] = {SERVER_INFO: SERVER}
    return {"jsonrpc": "2.0", "id": rid, "result": body}


def initialize_result(rid: Any = 0) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "result": {"protocolVersion": LEGACY, "capabilities": {"tools": {}}, "serverInfo": SERVER},
    }


def leg(leg_id: int) -> dict[str, Any]:
    """The legacy shim's ``elicitation/create`` request for ``greet``."""
    return request(leg_id, "elicitation/create", ASK_NAME)


def leg_cancelled(leg_id: int, reason: str) -> dict[str, Any]:
    return notification("notifications/cancelled", {"requestId": leg_id, "reason": reason})


INTERNAL = "Internal error"
TIMED_OUT = "Timed out waiting for the client's answer"


def chatty_call(rid: Any) -> dict[str, Any]:
    """``chatty`` asking for progress and for log messages from ``warning`` up."""
    return modern_call(rid, "chatty", meta={"progressToken": "p1", LOG_LEVEL: "warning"})


def chatty_transcript(rid: Any) -> list[dict[str, Any]]:
    """What ``chatty_call`` gets: progress, the warning (not the info), progress, the result."""
    return [
        notification(
            "notifications/progress",
            {"progressToken": "p1", "progress": 1, "total": 2, "message": "half"},
        ),
        notification(
            "notifications/message", {"level": "warning", "data": "shown", "logger": "test"}
        ),
        notification("notifications/progress", {"progressToken": "p1", "progress": 2}),
        result(rid, text("chatted")),
    ]


# --- the test server's tools ----------------------------------------------------------------


class Chat(Protocol):
    """What ``chatty`` uses of a request context (async and blocking alike)."""

    def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> bool: ...

    def log(self, level: str, data: Any, logger: str | None = None) -> None: ...


def answer_plain(request: RequestReceived, ctx: Chat) -> HandlerResult | None:
    """The tools that need no waiting; None for the others."""
    if request.method == "tools/list":  # wrongly: input_required is not allowed here
        return InputRequiredResult(None, "not allowed")
    if request.method != "tools/call":
        return request.method_not_found()
    name = request.name
    if name == "greet":
        content = request.input_responses.accepted_content("name")
        if content is None:
            return InputRequiredResult(
                {"name": elicit_form(ASK_NAME["message"], NAME_SCHEMA)}, "s1"
            )
        assert request.request_state == "s1"
        return text(f"Hello, {content['name']}!")
    if name == "fast":
        return text("fast")
    if name == "boom":
        raise RuntimeError("boom")
    if name == "bad":
        return {"content": [{"type": "text", "text": object()}]}
    if name == "chatty":
        ctx.progress(1, 2, "half")
        ctx.log("info", "hidden")
        ctx.log("warning", "shown", "test")
        ctx.progress(2)
        return text("chatted")
    return None


# --- the client's transcript ----------------------------------------------------------------


class Transcript:
    """Encodes what a test client sends and decodes what it gets, validating each message
    against the schema of the era in use (legacy once ``initialize`` was sent)."""

    def __init__(self) -> None:
        self.era = Era.MODERN
        self._methods: dict[Any, str] = {}
        self._buffer = b""

    def encode(self, msg: Mapping[str, Any]) -> bytes:
        if "method" in msg and "id" in msg:
            self._methods[msg["id"]] = msg["method"]
            if msg["method"] == "initialize":
                self.era = Era.LEGACY
        return json.dumps(msg).encode() + b"\n"

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def next_line(self) -> dict[str, Any] | None:
        """The next complete message received, validated; None if none is complete yet."""
        line, sep, rest = self._buffer.partition(b"\n")
        if not sep:
            return None
        self._buffer = rest
        msg: dict[str, Any] = json.loads(line)
        method = None if "method" in msg else self._methods.get(msg.get("id"))
        check_message(msg, self.era, method=method)
        return msg

    @property
    def leftover(self) -> bytes:
        return self._buffer
