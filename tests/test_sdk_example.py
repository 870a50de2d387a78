"""``examples/sdk/``: the decorator registry on the core, and the issue's small server on it.

In process (the registry's lists, schemas from type hints, both eras through one function),
then the server as a subprocess on stdio, driven by the asyncio client on each era."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pytest
from files_server import app
from registry import Context, Registry, json_schema

from mrtr_sansio import ClientConfig, InputNeeded
from mrtr_sansio.adapters.asyncio import Client
from mrtr_sansio.protocol import LATEST_LEGACY_VERSION, LATEST_MODERN_VERSION, modern_envelope
from mrtr_sansio.testing import in_process_server

SERVER = Path(__file__).resolve().parents[1] / "examples" / "sdk" / "files_server.py"
CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "roots": {}}
YES = {"action": "accept", "content": {"confirm": True}}
ROOTS = {"roots": [{"uri": "file:///src"}, {"uri": "file:///docs"}]}


def modern(rid: int, method: str, **params: Any) -> dict[str, Any]:
    params["_meta"] = modern_envelope(LATEST_MODERN_VERSION, CAPS, None)
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def test_the_server_file_is_at_most_40_lines() -> None:
    assert len(SERVER.read_text().splitlines()) <= 40


def test_schemas_come_from_type_hints() -> None:
    assert json_schema(int) == {"type": "integer"}
    assert json_schema(float | None) == {"type": "number"}
    assert json_schema(Literal["a", "b"]) == {"enum": ["a", "b"]}
    assert json_schema(list[str]) == {"type": "array", "items": {"type": "string"}}
    assert json_schema(dict[str, bool]) == {
        "type": "object",
        "additionalProperties": {"type": "boolean"},
    }
    assert json_schema(int | str) == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    with pytest.raises(TypeError, match="no JSON Schema for"):
        json_schema(bytes)


def test_lists_describe_what_is_registered() -> None:
    server = in_process_server(app.handle, app.config())
    tools = server(modern(1, "tools/list"))
    assert tools is not None
    assert tools["result"]["tools"] == [
        {
            "name": "delete_file",
            "description": "Delete a file, once the user confirms.",
            "inputSchema": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "force": {"type": "boolean"}},
                "required": ["path"],
            },
        }
    ]
    prompts = server(modern(2, "prompts/list"))
    assert prompts is not None
    assert prompts["result"]["prompts"] == [
        {
            "name": "review",
            "description": "Review the client's workspace.",
            "arguments": [{"name": "focus", "required": False}],
        }
    ]
    assert app.config().capabilities == {"tools": {}, "prompts": {}, "resources": {}}
    read = server(modern(3, "resources/read", uri="notes://today"))
    assert read is not None
    assert read["result"]["contents"][0]["text"] == "Nothing planned."


def test_a_tool_asks_for_confirmation_then_completes_on_the_modern_wire() -> None:
    server = in_process_server(app.handle, app.config())
    first = server(modern(1, "tools/call", name="delete_file", arguments={"path": "a.txt"}))
    assert first is not None
    asked = first["result"]
    assert asked["resultType"] == "input_required"
    form = asked["inputRequests"]["confirm"]["params"]["requestedSchema"]
    assert form == {
        "type": "object",
        "properties": {"confirm": {"type": "boolean"}},
        "required": ["confirm"],
    }
    done = server(
        modern(
            2,
            "tools/call",
            name="delete_file",
            arguments={"path": "a.txt"},
            inputResponses={"confirm": YES},
        )
    )
    assert done is not None
    assert done["result"]["content"] == [{"type": "text", "text": "Deleted a.txt."}]
    declined = server(
        modern(
            3,
            "tools/call",
            name="delete_file",
            arguments={"path": "a.txt"},
            inputResponses={"confirm": {"action": "decline"}},
        )
    )
    assert declined is not None
    assert declined["result"]["content"] == [{"type": "text", "text": "Kept a.txt."}]


def test_wrong_arguments_and_unknown_names_are_errors() -> None:
    server = in_process_server(app.handle, app.config())
    missing = server(modern(1, "tools/call", name="delete_file", arguments={}))
    assert missing is not None
    assert missing["error"]["code"] == -32602
    extra = server(modern(2, "tools/call", name="delete_file", arguments={"path": "a", "x": 1}))
    assert extra is not None
    assert extra["error"]["code"] == -32602
    unknown = server(modern(3, "tools/call", name="nope", arguments={}))
    assert unknown is not None
    assert "error" in unknown


def test_the_same_prompt_runs_through_the_legacy_shim() -> None:
    server = in_process_server(app.handle, app.config())
    init = {
        "protocolVersion": LATEST_LEGACY_VERSION,
        "capabilities": CAPS,
        "clientInfo": {"name": "t", "version": "1"},
    }
    assert server({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
    server({"jsonrpc": "2.0", "method": "notifications/initialized"})
    get = {"name": "review", "arguments": {"focus": "style"}}
    assert server({"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": get}) is None
    leg = server.sent[-1]
    assert leg["method"] == "roots/list"
    answer = server({"jsonrpc": "2.0", "id": leg["id"], "result": ROOTS})
    assert answer is not None
    assert answer["id"] == 1
    text = answer["result"]["messages"][0]["content"]["text"]
    assert text == "Review the code under file:///src, file:///docs for style."


def test_a_context_parameter_may_have_any_name() -> None:
    reg = Registry("t", "1")

    @reg.tool("ask")
    async def ask(here: Context) -> str:
        return "yes" if here.confirm("ok", "Sure?") else "no"

    server = in_process_server(reg.handle, reg.config())
    first = server(modern(1, "tools/call", name="ask", arguments={}))
    assert first is not None
    assert list(first["result"]["inputRequests"]) == ["ok"]
    tools = server(modern(2, "tools/list"))
    assert tools is not None
    assert tools["result"]["tools"][0]["inputSchema"] == {"type": "object", "properties": {}}


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_the_server_over_the_asyncio_stdio_adapter(era: Literal["modern", "legacy"]) -> None:
    asked: list[str] = []

    async def confirm(need: InputNeeded) -> Mapping[str, Any]:
        asked.append(need.method)
        return YES

    async def roots(need: InputNeeded) -> Mapping[str, Any]:
        asked.append(need.method)
        return ROOTS

    async def run() -> tuple[Mapping[str, Any], Mapping[str, Any]]:
        async with Client.connect_stdio(
            [sys.executable, str(SERVER)],
            ClientConfig(era=era),
            elicitation=confirm,
            roots=roots,
        ) as client:
            tool = await client.call_tool("delete_file", {"path": "b.txt"})
            prompt = await client.get_prompt("review")
            return tool, prompt

    tool, prompt = asyncio.run(asyncio.wait_for(run(), 30))
    assert tool["content"] == [{"type": "text", "text": "Deleted b.txt."}]
    text = prompt["messages"][0]["content"]["text"]
    assert text == "Review the code under file:///src, file:///docs for bugs."
    assert asked == ["elicitation/create", "roots/list"]
    assert json.dumps(tool)  # a plain JSON result
