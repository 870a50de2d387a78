"""The client for the MCP conformance harness's client scenarios, on :class:`HttpClient`.

    MCP_CONFORMANCE_SCENARIO=sep-2322-client-request-state \\
        python examples/http/conformance_client.py http://localhost:PORT/mcp

The harness starts a mock server, runs this with its URL, and reads what the mock saw. The
scenario comes from ``MCP_CONFORMANCE_SCENARIO``, the wire from
``MCP_CONFORMANCE_PROTOCOL_VERSION`` (a 2026 version: ``era="auto"``, so that a -32022 is
answered by choosing a supported version; a 2025 one: ``era="legacy"``), and any
scenario-specific instructions from ``MCP_CONFORMANCE_CONTEXT`` (JSON). The input callbacks
answer as a cooperative user would: elicitation is accepted with each field's default (or a
plain value of its type), sampling returns a fixed text, roots one folder.

It exits 0 when the scenario ran to the end, 1 when a call failed, 2 on bad usage.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

import mrtr_sansio as m
from mrtr_sansio.adapters.http import HttpClient

log = logging.getLogger("conformance_client")

CLIENT_INFO = {"name": "mrtr-sansio-conformance-client", "version": m.__version__}

Scenario = Callable[[HttpClient, Mapping[str, Any]], Awaitable[None]]


# --- the user: input callbacks ----------------------------------------------------------------

_PLAIN = {"string": "example", "integer": 1, "number": 1, "boolean": True}


def form_answer(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Content accepting a form: each field's default, else its first option or a plain value."""
    content: dict[str, Any] = {}
    properties = schema.get("properties")
    for name, field in (properties if isinstance(properties, Mapping) else {}).items():
        if not isinstance(field, Mapping):
            continue
        if "default" in field:
            content[name] = field["default"]
        elif isinstance(field.get("enum"), list) and field["enum"]:
            content[name] = field["enum"][0]
        elif isinstance(field.get("oneOf"), list) and field["oneOf"]:
            content[name] = field["oneOf"][0].get("const")
        elif field.get("type") == "array":
            items = field.get("items")
            items = items if isinstance(items, Mapping) else {}
            options = items.get("enum") or [o.get("const") for o in items.get("anyOf", [])]
            content[name] = options[:1]
        elif field.get("type") in _PLAIN:
            content[name] = _PLAIN[field["type"]]
    return content


async def elicit(event: m.InputNeeded) -> Mapping[str, Any]:
    params = event.params
    if params.get("mode") == "url":
        return {"action": "accept"}
    schema = params.get("requestedSchema")
    content = form_answer(schema if isinstance(schema, Mapping) else {})
    print(f"elicitation ({event.key!r}): accepting {json.dumps(content)}")
    return {"action": "accept", "content": content}


async def sample(event: m.InputNeeded) -> Mapping[str, Any]:
    print(f"sampling ({event.key!r}): answering")
    return {
        "role": "assistant",
        "content": {"type": "text", "text": "This is a test response from the client"},
        "model": "conformance-test-model",
        "stopReason": "endTurn",
    }


async def roots(event: m.InputNeeded) -> Mapping[str, Any]:
    return {"roots": [{"uri": "file:///tmp/conformance", "name": "conformance"}]}


# --- scenarios --------------------------------------------------------------------------------


async def list_tools(client: HttpClient) -> list[Mapping[str, Any]]:
    tools = list((await client.list_tools()).get("tools", []))
    print("tools:", ", ".join(str(t.get("name")) for t in tools))
    return tools


async def call(client: HttpClient, name: str, arguments: Mapping[str, Any] | None = None) -> None:
    result = await client.call_tool(name, arguments)
    texts = [c.get("text") for c in result.get("content", []) if isinstance(c, Mapping)]
    print(f"{name} -> {texts}{' (isError)' if result.get('isError') else ''}")


async def every_tool(client: HttpClient, context: Mapping[str, Any]) -> None:
    """List the tools and call each one the client kept, with no arguments."""
    for tool in await list_tools(client):
        await call(client, str(tool["name"]), {})


async def listing_only(client: HttpClient, context: Mapping[str, Any]) -> None:
    await list_tools(client)


async def add_numbers(client: HttpClient, context: Mapping[str, Any]) -> None:
    await list_tools(client)
    await call(client, "add_numbers", {"a": 5, "b": 3})


async def context_calls(client: HttpClient, context: Mapping[str, Any]) -> None:
    """List the tools (their x-mcp-header annotations), then make the calls the harness asks."""
    await list_tools(client)
    for spec in context.get("toolCalls", []):
        await call(client, spec["name"], spec.get("arguments"))


async def standard_headers(client: HttpClient, context: Mapping[str, Any]) -> None:
    """A request of every kind that carries Mcp-Method / Mcp-Name."""
    await every_tool(client, context)
    for resource in (await client.list_resources()).get("resources", []):
        await client.read_resource(resource["uri"])
        print("read", resource["uri"])
    for prompt in (await client.list_prompts()).get("prompts", []):
        await client.get_prompt(prompt["name"], {})
        print("got prompt", prompt["name"])


SCENARIOS: dict[str, Scenario] = {
    "sep-2322-client-request-state": every_tool,
    "tools_call": add_numbers,
    "initialize": listing_only,
    "request-metadata": every_tool,
    "http-standard-headers": standard_headers,
    "http-custom-headers": context_calls,
    "http-invalid-tool-headers": every_tool,
    "json-schema-ref-no-deref": listing_only,
    "elicitation-sep1034-client-defaults": every_tool,
    "sse-retry": every_tool,
}


def config_for(version: str | None) -> m.ClientConfig:
    if version in m.protocol.LEGACY_VERSIONS:
        return m.ClientConfig(client_info=CLIENT_INFO, era="legacy", legacy_version=version)
    return m.ClientConfig(
        client_info=CLIENT_INFO,
        era="auto",
        protocol_version=version or m.protocol.LATEST_MODERN_VERSION,
    )


async def run(url: str, scenario: Scenario, config: m.ClientConfig, context: Any) -> None:
    async with HttpClient.connect(
        url, config, elicitation=elicit, sampling=sample, roots=roots
    ) as client:
        print(f"connected: {client.era.name if client.era else '?'} {client.protocol_version}")
        await scenario(client, context)


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    name = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    scenario = SCENARIOS.get(name)
    if scenario is None:
        print(f"conformance_client: unknown scenario {name!r}", file=sys.stderr)
        return 2
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    config = config_for(os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION"))
    try:
        anyio.run(run, argv[1], scenario, config, context)
    except Exception as exc:  # a failed call: the harness shows our output
        log.error("scenario %s failed: %r", name, exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
