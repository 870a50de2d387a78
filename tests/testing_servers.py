"""Servers for the testing-package tests: a correct one on our ServerConnection, and five
deliberately broken ones, each with one seeded bug the ServerModel must find.

The correct server is written the way a user of this package would write it: one handler in
the adapters' signature, reading answers with the typed readers of ``InputResponses``, with
``requestState`` sealed by ``RequestStateSecurity``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import attrs

import mrtr_sansio as m
from mrtr_sansio.adapters import HandlerResult, RequestContext
from mrtr_sansio.testing import InProcessServer, in_process_server, prompt, resource, tool

SERVER_INFO = {"name": "model-test-server", "version": "1.0"}
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
DATE_SCHEMA = {
    "type": "object",
    "properties": {"date": {"type": "string", "format": "date"}},
    "required": ["date"],
}
CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
}
TOOLS = ["greet", "book", "capital", "roots", "multi", "login", "echo", "pause"]

OPERATIONS = (
    tool("greet", mrtr=True),
    tool("book", mrtr=True),
    tool("capital", mrtr=True),
    tool("roots", mrtr=True),
    tool("multi", mrtr=True),
    tool("login", mrtr=True),
    tool("pause", mrtr=True),
    tool("echo", {"text": "hi"}, mrtr=False),
    prompt("intro", mrtr=True),
    resource("file:///secret.txt", mrtr=True),
)


# --- the correct server --------------------------------------------------------------------


def _text(text: str, *, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": error}


def _declined(request: m.RequestReceived, key: str) -> bool:
    return request.input_responses.elicitation_action(key) in ("decline", "cancel")


async def handler(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
    """Every tool, prompt and resource of the model tests."""
    method = request.method
    ctx.progress(0, 1)  # sent only when the request carries a progress token
    if method == "tools/list":
        return {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in TOOLS]}
    if method == "prompts/list":
        return {"prompts": [{"name": "intro"}]}
    if method == "resources/list":
        return {"resources": [{"uri": "file:///secret.txt", "name": "secret"}]}
    if method == "tools/call":
        return _tool(request)
    if method == "prompts/get":
        return _prompt(request)
    if method == "resources/read":
        return _resource(request)
    return request.method_not_found()


def _tool(request: m.RequestReceived) -> HandlerResult:
    answers = request.input_responses
    name = request.name
    if name == "echo":
        return _text(json.dumps(dict(request.arguments), sort_keys=True))
    if name == "greet":
        if _declined(request, "user_name"):
            return _text("No name given.", error=True)
        content = answers.accepted_content("user_name")
        if content is None or not isinstance(content.get("name"), str):
            return m.InputRequiredResult(
                {"user_name": m.elicit_form("What is your name?", NAME_SCHEMA)}
            )
        return _text(f"Hello, {content['name']}!")
    if name == "book":
        return _book(request)
    if name == "capital":
        text = answers.sampled_text("capital")
        if text is None:
            return m.InputRequiredResult(
                {"capital": m.sample("What is the capital of France?", 100)}
            )
        return _text(f"The model says: {text}")
    if name == "roots":
        uris = answers.root_uris("client_roots")
        if uris is None:
            return m.InputRequiredResult({"client_roots": m.list_roots()})
        return _text(f"{len(uris)} roots")
    if name == "multi":
        content = answers.accepted_content("who")
        text = answers.sampled_text("think")
        uris = answers.root_uris("where")
        if content is None or text is None or uris is None:
            if _declined(request, "who"):
                return _text("Declined.", error=True)
            return m.InputRequiredResult(
                {
                    "who": m.elicit_form("Name?", NAME_SCHEMA),
                    "think": m.sample("Think of a number", 10),
                    "where": m.list_roots(),
                },
                request_state={"step": "multi"},
            )
        return _text(f"{content.get('name')} / {text} / {len(uris)}")
    if name == "login":
        action = answers.elicitation_action("login")
        if action is None:
            return m.InputRequiredResult(
                {"login": m.elicit_url("Sign in", "https://example.com/login")},
                request_state={"step": "login"},
            )
        return _text(f"login: {action}", error=action != "accept")
    if name == "pause":
        # Load shedding: state only, no input requests, then done.
        if request.request_state is None:
            return m.InputRequiredResult(request_state={"step": "paused"})
        return _text("resumed")
    return request.unknown()


def _book(request: m.RequestReceived) -> HandlerResult:
    """Two rounds: a date, then a confirmation; the state carries the date."""
    answers = request.input_responses
    state = request.request_state if isinstance(request.request_state, dict) else {}
    if state.get("step") == "confirm":
        if _declined(request, "confirm"):
            return _text("Booking cancelled.", error=True)
        content = answers.accepted_content("confirm")
        if content is None or not isinstance(content.get("ok"), bool):
            return m.InputRequiredResult(
                {"confirm": m.elicit_form(f"Book {state['date']}?", CONFIRM_SCHEMA)}, state
            )
        return _text(f"Booked {state['date']}: {content['ok']}")
    if _declined(request, "date"):
        return _text("No date given.", error=True)
    content = answers.accepted_content("date")
    if content is None or not isinstance(content.get("date"), str):
        return m.InputRequiredResult(
            {"date": m.elicit_form("Which date?", DATE_SCHEMA)}, {"step": "date"}
        )
    date = content["date"]
    return m.InputRequiredResult(
        {"confirm": m.elicit_form(f"Book {date}?", CONFIRM_SCHEMA)},
        {"step": "confirm", "date": date},
    )


def _prompt(request: m.RequestReceived) -> HandlerResult:
    if request.name != "intro":
        return request.unknown()
    if _declined(request, "user_context"):
        return {"messages": [{"role": "user", "content": {"type": "text", "text": "Hi."}}]}
    content = request.input_responses.accepted_content("user_context")
    if content is None or not isinstance(content.get("context"), str):
        schema = {"type": "object", "properties": {"context": {"type": "string"}}}
        schema["required"] = ["context"]
        return m.InputRequiredResult({"user_context": m.elicit_form("Some context?", schema)})
    text = f"Context: {content['context']}"
    return {"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}


def _resource(request: m.RequestReceived) -> HandlerResult:
    uri = request.uri
    if uri != "file:///secret.txt":
        return request.unknown()
    if _declined(request, "confirm"):
        return m.JsonRpcError.invalid_params("Access declined", {"uri": uri})
    content = request.input_responses.accepted_content("confirm")
    if content is None or not isinstance(content.get("ok"), bool):
        return m.InputRequiredResult(
            {"confirm": m.elicit_form("Reveal the secret?", CONFIRM_SCHEMA)},
            request_state={"step": "reveal"},
        )
    text = "s3cret" if content["ok"] else "(not revealed)"
    return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]}


KEYS = [b"model-tests-key-0123456789abcdef"]


def config(*, sealed: bool = True, single_use: bool = False) -> m.ServerConfig:
    """The server config: sealed state unless ``sealed`` is False (single use if asked)."""
    guard = m.sealing.MemoryReplayGuard() if single_use else None
    security = m.sealing.RequestStateSecurity(KEYS, replay_guard=guard) if sealed else m.UNSEALED
    return m.ServerConfig(server_info=SERVER_INFO, request_state=security)


def correct_server() -> InProcessServer:
    """The correct server, in process."""
    return in_process_server(handler, config(), principal="alice")


# --- seeded bugs -----------------------------------------------------------------------------

Server = Callable[[dict[str, Any]], "Mapping[str, Any] | None"]


def _wrap(change: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any] | None]) -> Server:
    """The correct server with its responses passed through ``change(request, response)``."""
    inner = correct_server()

    def server(request: dict[str, Any]) -> Mapping[str, Any] | None:
        response = inner(request)
        if response is None:
            return None
        return change(request, response)

    return server


def no_result_type() -> Server:
    """Bug: results carry no ``resultType``."""

    def strip(_request: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
        if "result" in response:
            response["result"].pop("resultType", None)
        return response

    return _wrap(strip)


def input_required_on_list() -> Server:
    """Bug: ``tools/list`` answers ``input_required``."""

    def ask(request: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
        if request["method"] == "tools/list":
            response = {
                "jsonrpc": "2.0",
                "id": request["id"],
                "result": {"resultType": "input_required", "requestState": "list-state"},
            }
        return response

    return _wrap(ask)


async def plain_state_handler(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
    """The handler with its state as plain JSON text, trusting whatever comes back: a state
    that does not parse is taken as none (the seeded bug)."""
    raw = request.request_state
    try:
        state = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        state = None
    result = await handler(attrs.evolve(request, request_state=state), ctx)
    if isinstance(result, m.InputRequiredResult) and result.request_state is not None:
        result = m.InputRequiredResult(result.input_requests, json.dumps(result.request_state))
    return result


def accepts_tampered_state() -> Server:
    """Bug: state travels as plain JSON and is never verified."""
    return in_process_server(plain_state_handler, config(sealed=False), principal="alice")


def undeclared_elicitation() -> Server:
    """Bug: asks for a form elicitation even when the client did not declare it (the core
    would answer -32021, so this server swaps that error for the request it wanted)."""

    def ask(request: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
        error = response.get("error")
        if error is not None and error["code"] == m.ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY:
            elicit = m.elicit_form("Your name?", NAME_SCHEMA).to_wire()
            return {
                "jsonrpc": "2.0",
                "id": request["id"],
                "result": {"resultType": "input_required", "inputRequests": {"who": elicit}},
            }
        return response

    return _wrap(ask)


def errors_on_missing_answer() -> Server:
    """Bug: a retry lacking an answer the handler asks for again gets -32602 instead of a new
    ``input_required``. (The keys of the last round ride in the state to spot re-asks.)"""

    async def strict(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        wrapped = request.request_state
        asked: list[str] = wrapped["asked"] if isinstance(wrapped, dict) else []
        inner = attrs.evolve(
            request, request_state=wrapped["inner"] if isinstance(wrapped, dict) else None
        )
        result = await handler(inner, ctx)
        if not isinstance(result, m.InputRequiredResult):
            return result
        keys = sorted(result.input_requests or {})
        if asked and keys == asked and any(k not in request.input_responses for k in asked):
            return m.JsonRpcError.invalid_params("Missing input response")
        return m.InputRequiredResult(
            result.input_requests, {"inner": result.request_state, "asked": keys}
        )

    return in_process_server(strict, config(), principal="alice")
