"""The example fixtures (``examples/fixtures.py``) served by the ASGI app, in process, on both
wires: every MRTR fixture round by round, the legacy shim turning the same handlers into real
server-to-client requests, the catalogue, subscriptions, and the example server's key ring.

Every message the server sends is validated against the official schema of its era.
"""

from __future__ import annotations

import base64
import importlib.util
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fixtures import SERVER_INFO, Everything, server_config
from http_harness import (
    Client,
    Response,
)

import mrtr_sansio as m
from helpers import (
    check_message,
)
from mrtr_sansio.adapters.asgi import McpHttpApp

pytestmark = pytest.mark.anyio

ALL_CAPS: dict[str, Any] = {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}}
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def everything() -> Everything:
    return Everything()


@pytest.fixture
async def client(everything: Everything) -> AsyncIterator[Client]:
    config = server_config(request_state=m.sealing.RequestStateSecurity.ephemeral())
    app = McpHttpApp(everything.handle, config)
    async with anyio.create_task_group() as tg:
        yield Client(app, tg)
        tg.cancel_scope.cancel()


def request(
    rid: int, method: str, params: dict[str, Any] | None = None, caps: Any = None
) -> dict[str, Any]:
    meta = {
        m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28",
        m.protocol.CLIENT_CAPABILITIES: ALL_CAPS if caps is None else caps,
    }
    body_params = dict(params or {})
    body_params["_meta"] = {**meta, **body_params.get("_meta", {})}
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": body_params}


def call(rid: int, name: str, arguments: Any = None, **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, **params}
    if arguments is not None:
        body["arguments"] = arguments
    caps = body.pop("caps", None)
    return request(rid, "tools/call", body, caps)


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def sampled(text: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": {"type": "text", "text": text},
        "model": "test-model",
        "stopReason": "endTurn",
    }


ROOTS = {"roots": [{"uri": "file:///work/trips", "name": "Trips"}]}


async def send(client: Client, body: dict[str, Any]) -> Response:
    """POST a modern request with the mirror headers its body calls for."""
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": body["method"]}
    target = body["params"].get("name", body["params"].get("uri"))
    if body["method"] in ("tools/call", "prompts/get", "resources/read"):
        headers["mcp-name"] = m.http.encode_header_value(target)
    response = await client.send(body, headers)
    for message in response.messages():
        check_message(message, m.Era.MODERN, method=body["method"])
    return response


async def result(client: Client, body: dict[str, Any]) -> dict[str, Any]:
    response = await send(client, body)
    assert response.status == 200, response.body
    (message,) = [msg for msg in response.messages() if "id" in msg]
    out: dict[str, Any] = message["result"]
    assert out["_meta"][m.protocol.SERVER_INFO] == SERVER_INFO
    return out


def texts(result: dict[str, Any]) -> list[str]:
    return [block["text"] for block in result["content"] if block["type"] == "text"]


def asked(result: dict[str, Any]) -> dict[str, str]:
    assert result["resultType"] == "input_required"
    return {key: req["method"] for key, req in result["inputRequests"].items()}


# --- the catalogue ----------------------------------------------------------------------------


async def test_catalogue_is_complete_and_well_formed(client: Client) -> None:
    tools = (await result(client, request(1, "tools/list")))["tools"]
    names = [t["name"] for t in tools]
    for tool in tools:
        assert re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", tool["name"])
        assert tool["description"]
        assert tool["inputSchema"]["type"] == "object"
    assert len(set(names)) == len(names)
    assert names == [t["name"] for t in (await result(client, request(2, "tools/list")))["tools"]]
    for needed in (
        "test_simple_text",
        "test_missing_capability",
        "test_streaming_elicitation",
        "test_logging_tool",
        "test_trigger_tool_change",
        "test_sampling",
        "test_elicitation_sep1330_enums",
        "book_trip",
    ):
        assert needed in names
    prompts = (await result(client, request(3, "prompts/list")))["prompts"]
    assert all(p["description"] for p in prompts)
    resources = (await result(client, request(4, "resources/list")))["resources"]
    first = await result(client, request(5, "resources/read", {"uri": resources[0]["uri"]}))
    assert first["contents"][0]["text"]
    assert first["ttlMs"] == 0
    assert first["cacheScope"] == "private"


async def test_discover_declares_what_the_fixtures_implement(client: Client) -> None:
    found = await result(client, request(1, "server/discover"))
    assert found["capabilities"] == {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": True},
        "resources": {"subscribe": True},
        "logging": {},
        "completions": {},
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("test_simple_text", ["text"]),
        ("test_image_content", ["image"]),
        ("test_audio_content", ["audio"]),
        ("test_embedded_resource", ["resource"]),
        ("test_multiple_content_types", ["text", "image", "resource"]),
    ],
)
async def test_content_tools(client: Client, name: str, kinds: list[str]) -> None:
    got = await result(client, call(1, name))
    assert [block["type"] for block in got["content"]] == kinds
    for block in got["content"]:
        if "data" in block:
            assert base64.b64decode(block["data"], validate=True)
    assert "isError" not in got


async def test_error_tool_is_a_result_not_a_protocol_error(client: Client) -> None:
    got = await result(client, call(1, "test_error_handling", {}))
    assert got["isError"] is True
    assert texts(got) == ["This tool intentionally returns an error for testing"]


async def test_unknown_names_are_invalid_params(client: Client) -> None:
    for body in (
        call(1, "no_such_tool"),
        request(2, "prompts/get", {"name": "no_such_prompt"}),
    ):
        response = await send(client, body)
        assert response.status == 400
        assert response.json()["error"]["code"] == m.ErrorCode.INVALID_PARAMS
    uri = "test://nonexistent-resource-for-conformance-testing"
    response = await send(client, request(3, "resources/read", {"uri": uri}))
    assert response.json()["error"]["code"] == m.ErrorCode.INVALID_PARAMS
    assert response.json()["error"]["data"] == {"uri": uri}


async def test_bad_arguments(client: Client) -> None:
    response = await send(client, call(1, "test_simple_text", [1, 2]))
    assert response.json()["error"]["code"] == m.ErrorCode.INVALID_PARAMS
    got = await result(client, call(2, "test_sampling", {"prompt": 7}))
    assert got["isError"] is True
    response = await send(client, request(3, "prompts/get", {"name": "test_prompt_with_arguments"}))
    assert response.json()["error"]["message"].endswith("missing required arguments: arg1, arg2")


async def test_resources_templates_and_completion(client: Client) -> None:
    templates = (await result(client, request(1, "resources/templates/list")))["resourceTemplates"]
    assert templates[0]["uriTemplate"] == "test://template/{id}/data"
    read = await result(client, request(2, "resources/read", {"uri": "test://template/123/data"}))
    assert read["contents"] == [
        {
            "uri": "test://template/123/data",
            "mimeType": "application/json",
            "text": '{"id":"123","templateTest":true,"data":"Data for ID: 123"}',
        }
    ]
    binary = await result(client, request(3, "resources/read", {"uri": "test://static-binary"}))
    assert binary["contents"][0]["blob"]
    ref = {"type": "ref/prompt", "name": "test_prompt_with_arguments"}
    done = await result(
        client,
        request(
            4, "completion/complete", {"ref": ref, "argument": {"name": "arg1", "value": "test"}}
        ),
    )
    assert done["completion"] == {
        "values": ["test", "testing", "tested"],
        "total": 3,
        "hasMore": False,
    }
    ref = {"type": "ref/resource", "uri": "test://template/{id}/data"}
    done = await result(
        client,
        request(5, "completion/complete", {"ref": ref, "argument": {"name": "id", "value": "1"}}),
    )
    assert done["completion"]["values"] == ["1", "123"]


async def test_prompts(client: Client) -> None:
    args = {"arg1": "testValue1", "arg2": "testValue2"}
    got = await result(
        client, request(1, "prompts/get", {"name": "test_prompt_with_arguments", "arguments": args})
    )
    assert got["messages"] == [
        {
            "role": "user",
            "content": {
                "type": "text",
                "text": "Prompt with arguments: arg1='testValue1', arg2='testValue2'",
            },
        }
    ]
    params = {
        "name": "test_prompt_with_embedded_resource",
        "arguments": {"resourceUri": "test://x"},
    }
    got = await result(client, request(2, "prompts/get", params))
    assert got["messages"][0]["content"]["resource"]["uri"] == "test://x"
    got = await result(client, request(3, "prompts/get", {"name": "test_prompt_with_image"}))
    assert got["messages"][0]["content"]["type"] == "image"


# --- MRTR fixtures on the modern wire ----------------------------------------------------------


async def test_elicitation_fixture_decides_from_the_answers_alone(client: Client) -> None:
    first = await result(client, call(1, "test_input_required_result_elicitation", {}))
    assert asked(first) == {"user_name": "elicitation/create"}
    assert "requestState" not in first
    # Answered, with keys nobody asked for: they are ignored.
    responses = {"user_name": accept(name="Alice"), "extra": accept(foo="bar")}
    done = await result(
        client, call(2, "test_input_required_result_elicitation", {}, inputResponses=responses)
    )
    assert done["resultType"] == "complete"
    assert texts(done) == ["Hello, Alice!"]
    # The wrong key, or a blank name: asked again.
    for answers in ({"wrong_key": accept(data="x")}, {"user_name": accept(name="  ")}):
        again = await result(
            client, call(3, "test_input_required_result_elicitation", {}, inputResponses=answers)
        )
        assert asked(again) == {"user_name": "elicitation/create"}
    declined = {"user_name": {"action": "decline"}}
    done = await result(
        client, call(4, "test_input_required_result_elicitation", {}, inputResponses=declined)
    )
    assert texts(done) == ["No name given."]
    # Malformed answers never reach the handler.
    for bad in ({"user_name": 12345}, None):
        response = await send(
            client, call(5, "test_input_required_result_elicitation", {}, inputResponses=bad)
        )
        assert response.status == 400
        assert response.json()["error"]["code"] == m.ErrorCode.INVALID_PARAMS


@pytest.mark.parametrize(
    ("tool", "key", "method", "answer", "text"),
    [
        ("test_input_required_result_sampling", "capital_question", "sampling/createMessage",
         sampled("Paris."), "The model says: Paris."),
        ("test_input_required_result_list_roots", "client_roots", "roots/list", ROOTS,
         "Roots: file:///work/trips"),
        ("test_streaming_elicitation", "user_name", "elicitation/create", accept(name="Bo"),
         "Streaming for Bo."),
        ("test_missing_capability", "haiku", "sampling/createMessage", sampled("Green bar."),
         "Green bar."),
    ],
)  # fmt: skip
async def test_one_round_fixtures(
    client: Client, tool: str, key: str, method: str, answer: dict[str, Any], text: str
) -> None:
    first = await result(client, call(1, tool, {}))
    assert asked(first) == {key: method}
    done = await result(client, call(2, tool, {}, inputResponses={key: answer}))
    assert texts(done) == [text]


@pytest.mark.parametrize(
    "tool",
    ["test_input_required_result_request_state", "test_input_required_result_tampered_state"],
)
async def test_state_fixtures_need_their_sealed_state(client: Client, tool: str) -> None:
    first = await result(client, call(1, tool, {}))
    assert asked(first) == {"confirm": "elicitation/create"}
    state = first["requestState"]
    assert isinstance(state, str)
    assert state != "awaiting-confirmation"  # sealed, not the handler's plain value
    answer = {"confirm": accept(ok=True)}
    done = await result(client, call(2, tool, {}, inputResponses=answer, requestState=state))
    assert done["resultType"] == "complete"
    tampered = await send(
        client, call(3, tool, {}, inputResponses=answer, requestState=state + "-TAMPERED")
    )
    assert tampered.status == 400
    assert tampered.json()["error"]["code"] == m.ErrorCode.INVALID_PARAMS
    # Without the state the operation starts over.
    again = await result(client, call(4, tool, {}, inputResponses=answer))
    assert asked(again) == {"confirm": "elicitation/create"}
    # Sealed state is bound to its tool: it does not unlock another one.
    other = (
        "test_input_required_result_request_state"
        if "tampered" in tool
        else "test_input_required_result_tampered_state"
    )
    moved = await send(client, call(5, other, {}, inputResponses=answer, requestState=state))
    assert moved.json()["error"]["code"] == m.ErrorCode.INVALID_PARAMS


async def test_multi_round_fixture(client: Client) -> None:
    tool = "test_input_required_result_multi_round"
    r1 = await result(client, call(1, tool, {}))
    assert asked(r1) == {"user_name": "elicitation/create"}
    r2 = await result(
        client,
        call(
            2,
            tool,
            {},
            inputResponses={"user_name": accept(name="Alice")},
            requestState=r1["requestState"],
        ),
    )
    assert asked(r2) == {"favorite_color": "elicitation/create"}
    assert r2["requestState"] != r1["requestState"]
    r3 = await result(
        client,
        call(
            3,
            tool,
            {},
            inputResponses={"favorite_color": accept(color="blue")},
            requestState=r2["requestState"],
        ),
    )
    assert texts(r3) == ["Alice's favourite colour is blue."]


async def test_multiple_inputs_fixture_asks_only_for_what_is_missing(client: Client) -> None:
    tool = "test_input_required_result_multiple_inputs"
    r1 = await result(client, call(1, tool, {}))
    assert asked(r1) == {
        "user_name": "elicitation/create",
        "greeting": "sampling/createMessage",
        "client_roots": "roots/list",
    }
    partial = {"user_name": accept(name="Alice"), "client_roots": ROOTS}
    r2 = await result(
        client, call(2, tool, {}, inputResponses=partial, requestState=r1["requestState"])
    )
    assert asked(r2) == {"greeting": "sampling/createMessage"}
    r3 = await result(
        client,
        call(
            3,
            tool,
            {},
            inputResponses={"greeting": sampled("Hello there!")},
            requestState=r2["requestState"],
        ),
    )
    assert texts(r3) == ["Hello there! Alice; roots: file:///work/trips"]


@pytest.mark.parametrize(
    ("caps", "key", "method"),
    [
        ({"sampling": {}}, "suggest_name", "sampling/createMessage"),
        ({"roots": {}}, "client_roots", "roots/list"),
        ({"elicitation": {"url": {}}, "roots": {}}, "client_roots", "roots/list"),
        (ALL_CAPS, "user_name", "elicitation/create"),
    ],
)
async def test_capabilities_fixture_asks_only_what_was_declared(
    client: Client, caps: dict[str, Any], key: str, method: str
) -> None:
    got = await result(client, call(1, "test_input_required_result_capabilities", {}, caps=caps))
    assert asked(got) == {key: method}


async def test_undeclared_capabilities_are_32021(client: Client) -> None:
    for tool, required in (
        ("test_input_required_result_capabilities", {"elicitation": {"form": {}}}),
        ("test_missing_capability", {"sampling": {}}),
    ):
        response = await send(client, call(1, tool, {}, caps={}))
        assert response.status == 400
        error = response.json()["error"]
        assert error["code"] == m.ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY
        assert error["data"]["requiredCapabilities"] == required


async def test_prompt_fixture_asks_for_context(client: Client) -> None:
    name = "test_input_required_result_prompt"
    first = await result(client, request(1, "prompts/get", {"name": name}))
    assert asked(first) == {"user_context": "elicitation/create"}
    params = {"name": name, "inputResponses": {"user_context": accept(context="test context")}}
    done = await result(client, request(2, "prompts/get", params))
    assert done["messages"][0]["content"]["text"] == "Using this context: test context"


async def test_lists_never_need_input(client: Client) -> None:
    for method in ("tools/list", "prompts/list"):
        assert (await result(client, request(1, method)))["resultType"] == "complete"


# --- the demo ---------------------------------------------------------------------------------


async def test_book_trip_two_rounds_with_sealed_state(client: Client) -> None:
    args = {"destination": "Lisbon", "guests": 2}
    r1 = await result(client, call(1, "book_trip", args))
    assert asked(r1) == {"dates": "elicitation/create", "workspace": "roots/list"}
    bad_dates = {"dates": accept(check_in="2026-09-10", check_out="2026-09-01"), "workspace": ROOTS}
    again = await result(
        client,
        call(2, "book_trip", args, inputResponses=bad_dates, requestState=r1["requestState"]),
    )
    assert asked(again) == {"dates": "elicitation/create"}  # the workspace is kept in the state
    message = again["inputRequests"]["dates"]["params"]["message"]
    assert message == "Check-out must come after check-in. Dates for Lisbon?"
    dates = {"dates": accept(check_in="2026-09-01", check_out="2026-09-05")}
    r2 = await result(
        client, call(3, "book_trip", args, inputResponses=dates, requestState=again["requestState"])
    )
    assert asked(r2) == {"summary": "sampling/createMessage"}
    summary = {"summary": sampled("Sunny days by the Tagus.")}
    done = await result(
        client, call(4, "book_trip", args, inputResponses=summary, requestState=r2["requestState"])
    )
    assert texts(done) == [
        "Booked Lisbon for 2: 2026-09-01 to 2026-09-05.\n"
        "Workspace: file:///work/trips\n"
        "Summary: Sunny days by the Tagus."
    ]
    # The state is bound to the arguments: another destination cannot reuse it.
    moved = await send(
        client,
        call(
            5,
            "book_trip",
            {"destination": "Porto", "guests": 2},
            inputResponses=summary,
            requestState=r2["requestState"],
        ),
    )
    assert moved.json()["error"]["code"] == m.ErrorCode.INVALID_PARAMS


async def test_book_trip_without_roots_or_sampling(client: Client) -> None:
    args = {"destination": "Oslo"}
    caps: dict[str, Any] = {"elicitation": {}}
    r1 = await result(client, call(1, "book_trip", args, caps=caps))
    assert asked(r1) == {"dates": "elicitation/create"}
    dates = {"dates": accept(check_in="2026-01-02", check_out="2026-01-03")}
    done = await result(
        client,
        call(
            2, "book_trip", args, caps=caps, inputResponses=dates, requestState=r1["requestState"]
        ),
    )
    assert texts(done) == ["Booked Oslo for 1: 2026-01-02 to 2026-01-03.\nWorkspace: (none)"]
    got = await result(client, call(3, "book_trip", {"destination": ""}))
    assert got["isError"] is True


# --- streams: progress, logs, subscriptions ---------------------------------------------------


async def test_progress_and_logs_stream_only_when_asked(client: Client) -> None:
    body = call(1, "test_tool_with_progress", {}, _meta={"progressToken": "p-1"})
    response = await send(client, body)
    assert response.content_type.startswith("text/event-stream")
    progress = [msg["params"]["progress"] for msg in response.messages() if msg.get("method")]
    assert progress == [0, 50, 100]
    quiet = await send(client, call(2, "test_logging_tool", {}))
    assert quiet.content_type == "application/json"
    loud = await send(
        client, call(3, "test_logging_tool", {}, _meta={m.protocol.LOG_LEVEL: "info"})
    )
    levels = [msg["params"]["level"] for msg in loud.messages() if msg.get("method")]
    assert levels == ["info"]  # debug is below the level asked for


async def test_listen_streams_get_the_changes_they_asked_for(
    client: Client, everything: Everything
) -> None:
    tools_stream = client.start(
        request(
            10,
            "subscriptions/listen",
            {"notifications": {"toolsListChanged": True, "resourcesListChanged": True}},
        ),
        {"mcp-protocol-version": "2026-07-28", "mcp-method": "subscriptions/listen"},
    )
    prompts_stream = client.start(
        request(11, "subscriptions/listen", {"notifications": {"promptsListChanged": True}}),
        {"mcp-protocol-version": "2026-07-28", "mcp-method": "subscriptions/listen"},
    )
    ack = await tools_stream.response.next_message()
    assert ack == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {
            "notifications": {"toolsListChanged": True},
            "_meta": {m.protocol.SUBSCRIPTION_ID: 10},
        },
    }  # resources never change here: that part of the filter is not honoured
    prompts_ack = await prompts_stream.response.next_message()
    assert prompts_ack is not None
    assert prompts_ack["params"]["_meta"] == {m.protocol.SUBSCRIPTION_ID: 11}
    assert len(everything.hub) == 2
    done = await result(client, call(1, "test_trigger_tool_change", {}))
    assert texts(done) == ["Tool list change sent to 2 open stream(s)"]
    await result(client, call(2, "test_trigger_prompt_change", {}))
    changed = await tools_stream.response.next_message()
    assert changed == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {"_meta": {m.protocol.SUBSCRIPTION_ID: 10}},
    }
    prompt_change = await prompts_stream.response.next_message()
    assert prompt_change is not None
    assert prompt_change["method"] == "notifications/prompts/list_changed"
    for stream in (tools_stream, prompts_stream):
        stream.disconnect()
        await stream.finished.wait()
    assert len(everything.hub) == 0


# --- the same handlers on the legacy wire, through the shim -----------------------------------


async def open_session(client: Client, caps: dict[str, Any]) -> dict[str, str]:
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": caps,
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    response = await client.send(body)
    check_message(response.json(), m.Era.LEGACY, method="initialize")
    assert response.json()["result"]["capabilities"]["tools"] == {"listChanged": True}
    session = {
        "mcp-session-id": response.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-11-25",
    }
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await client.send(initialized, session)).status == 202
    return session


async def legacy_call(
    client: Client,
    session: dict[str, str],
    name: str,
    arguments: dict[str, Any],
    answers: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Call a tool; answer each server request with the next answer; return (legs, result)."""
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    stream = client.start(body, session)
    legs: list[dict[str, Any]] = []
    while True:
        message = await stream.response.next_message()
        assert message is not None
        check_message(message, m.Era.LEGACY, method="tools/call")
        if "result" in message or "error" in message:
            await stream.finished.wait()
            return legs, message
        if "id" in message:
            legs.append(message)
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": answers[len(legs) - 1]}
            assert (await client.send(reply, session)).status == 202


async def test_legacy_sampling_and_elicitation_through_the_shim(client: Client) -> None:
    session = await open_session(client, {"sampling": {}, "elicitation": {}})
    legs, final = await legacy_call(
        client, session, "test_sampling", {"prompt": "Hi?"}, [sampled("Hello.")]
    )
    assert [leg["method"] for leg in legs] == ["sampling/createMessage"]
    assert legs[0]["params"]["maxTokens"] == 100
    assert final["result"] == {"content": [{"type": "text", "text": "LLM response: Hello."}]}
    answers = [accept(untitledSingle="option1", titledMulti=["value1"])]
    legs, final = await legacy_call(client, session, "test_elicitation_sep1330_enums", {}, answers)
    schema = legs[0]["params"]["requestedSchema"]["properties"]
    assert schema["legacyEnum"]["enumNames"] == ["Option One", "Option Two", "Option Three"]
    assert "enum" not in schema["titledSingle"]
    assert texts(final["result"]) == [
        'User provided: {"untitledSingle":"option1","titledMulti":["value1"]}'
    ]
    legs, final = await legacy_call(
        client, session, "test_elicitation_sep1034_defaults", {}, [{"action": "cancel"}]
    )
    assert legs[0]["params"]["requestedSchema"]["properties"]["score"]["default"] == 95.5
    assert texts(final["result"]) == ["User answered cancel: nothing provided."]


async def test_legacy_book_trip_two_rounds(client: Client) -> None:
    session = await open_session(client, ALL_CAPS)
    answers = [accept(check_in="2026-05-01", check_out="2026-05-03"), ROOTS, sampled("Spring!")]
    legs, final = await legacy_call(client, session, "book_trip", {"destination": "Rome"}, answers)
    assert [leg["method"] for leg in legs] == [
        "elicitation/create",
        "roots/list",
        "sampling/createMessage",
    ]
    assert texts(final["result"]) == [
        "Booked Rome for 1: 2026-05-01 to 2026-05-03.\n"
        "Workspace: file:///work/trips\n"
        "Summary: Spring!"
    ]


async def test_legacy_subscribe_and_logging(client: Client) -> None:
    session = await open_session(client, {})
    for rid, method in enumerate(("resources/subscribe", "resources/unsubscribe")):
        body = {
            "jsonrpc": "2.0",
            "id": rid,
            "method": method,
            "params": {"uri": "test://watched-resource"},
        }
        assert (await client.send(body, session)).json()["result"] == {}
    body = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "resources/subscribe",
        "params": {"uri": "test://nope"},
    }
    assert (await client.send(body, session)).json()["error"]["data"] == {"uri": "test://nope"}
    level = {"jsonrpc": "2.0", "id": 6, "method": "logging/setLevel", "params": {"level": "info"}}
    assert (await client.send(level, session)).json()["result"] == {}
    _legs, final = await legacy_call(client, session, "test_tool_with_logging", {}, [])
    assert texts(final["result"]) == ["Logging test completed"]


# --- the example server's key ring -------------------------------------------------------------


def _server_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "example_http_server", EXAMPLES / "http" / "server.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_key_ring_from_file_or_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = _server_module()
    keys = [bytes([i]) * 32 for i in (1, 2)]
    ring = tmp_path / "ring"
    ring.write_text(
        "# the first key seals\n"
        + base64.urlsafe_b64encode(keys[0]).decode().rstrip("=")
        + "\n\n"
        + base64.b64encode(keys[1]).decode()
        + "\n"
    )
    assert server.load_keys(file=str(ring)) == keys
    monkeypatch.setenv("RING", ",".join(base64.b64encode(k).decode() for k in keys))
    assert server.load_keys(env="RING") == keys
    assert server.load_keys() is None
    for bad_file, bad_env, message in (
        (str(ring), "RING", "not both"),
        (None, "UNSET_RING_VARIABLE", "is not set"),
    ):
        with pytest.raises(server.KeyRingError, match=message):
            server.load_keys(file=bad_file, env=bad_env)
    ring.write_text("# nothing\n")
    with pytest.raises(server.KeyRingError, match="empty"):
        server.load_keys(file=str(ring))
    ring.write_text("not base64!\n")
    with pytest.raises(server.KeyRingError, match="not valid base64"):
        server.load_keys(file=str(ring))
    with pytest.raises(ValueError, match="at least 32"):
        server.build_app([b"short"])
    assert isinstance(server.build_app(keys), McpHttpApp)
    assert isinstance(server.build_app(None).config.request_state, m.sealing.RequestStateSecurity)


async def test_mirrored_argument_is_checked_against_its_header(client: Client) -> None:
    body = call(1, "execute_query", {"region": "eu-west", "query": "SELECT 1"})
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call"}
    headers["mcp-name"] = "execute_query"
    ok = await client.send(body, {**headers, "mcp-param-region": "eu-west"})
    assert ok.json()["result"]["content"][0]["text"] == "Ran 'SELECT 1' in eu-west."
    for sent in ({}, {"mcp-param-region": "us-east"}):
        refused = await client.send(body, {**headers, **sent})
        assert refused.status == 400
        assert refused.json()["error"]["code"] == m.ErrorCode.HEADER_MISMATCH
        check_message(refused.json(), m.Era.MODERN)
