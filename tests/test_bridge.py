"""The era bridge end to end over real HTTP: our own clients (both eras) through the bridge
(uvicorn on a free port) to the example fixtures (uvicorn on another), the upstream spoken to
in either era; principals kept apart, and the bounds at and past their limits.

The pure part's rules are tested in ``test_bridge_rules.py``.
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Iterator, Mapping, MutableMapping
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import httpx
import pytest
import uvicorn
from fixtures import SERVER_INFO, Everything, server_config

import mrtr_sansio as m
from mrtr_sansio.adapters import CallFailedError, RoundsExhaustedError
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.adapters.bridge import Bridge, Upstream
from mrtr_sansio.adapters.http import HttpClient
from mrtr_sansio.bridge import HOLD_META, BridgeLimits

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # uvicorn serves in this loop


def user(scope: MutableMapping[str, Any]) -> str | None:
    return next((v.decode() for k, v in scope["headers"] if k == b"x-user"), None)


@asynccontextmanager
async def served(app: Any) -> AsyncIterator[str]:
    """``app`` under uvicorn in this event loop on a free port; its URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="off"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        finally:
            server.should_exit = True
    sock.close()


@asynccontextmanager
async def bridged(
    upstream_era: str = "auto",
    limits: BridgeLimits | None = None,
    legacy_upstream: bool = True,
    **downstream: Any,
) -> AsyncIterator[tuple[str, Bridge, list[dict[str, Any]]]]:
    """The fixtures upstream, the bridge in front (its URL), and what the upstream received."""
    seen: list[dict[str, Any]] = []
    upstream_app = McpHttpApp(
        Everything().handle,
        server_config(request_state=m.sealing.RequestStateSecurity.ephemeral()),
        legacy=legacy_upstream,
    )

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        async def tap() -> Any:
            message = await receive()
            if message.get("body"):
                seen.append(json.loads(message["body"]))
            return message

        await upstream_app(scope, tap, send)

    async with served(recording) as up_url:
        upstream = Upstream(url=up_url, era=upstream_era)  # type: ignore[arg-type]
        async with Bridge.open(upstream, limits) as bridge:
            base = m.ServerConfig(request_state=m.sealing.RequestStateSecurity.ephemeral())
            config = bridge.use_config(bridge.server_config(attrs_evolve(base, **downstream)))
            app = McpHttpApp(bridge.handle, config, principal=user)
            async with served(app) as url:
                yield url, bridge, seen


def attrs_evolve(config: m.ServerConfig, **changes: Any) -> m.ServerConfig:
    import attrs

    return attrs.evolve(config, **changes)


async def name_it(event: m.InputNeeded) -> Mapping[str, Any]:
    if event.params.get("requestedSchema", {}).get("properties", {}).get("ok") is not None:
        return {"action": "accept", "content": {"ok": True}}
    if "colour" in json.dumps(event.params) or "color" in json.dumps(event.params):
        return {"action": "accept", "content": {"colour": "teal", "color": "teal"}}
    return {"action": "accept", "content": {"name": "Ada"}}


async def model(event: m.InputNeeded) -> Mapping[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}


async def roots(event: m.InputNeeded) -> Mapping[str, Any]:
    return {"roots": [{"uri": "file:///work"}]}


def text_of(result: Mapping[str, Any]) -> str:
    return " ".join(block["text"] for block in result["content"])


ERAS = [
    ("legacy", "auto"),  # legacy client -> modern server (the upstream chosen modern)
    ("modern", "auto"),  # modern -> modern relay
    ("modern", "legacy"),  # modern client -> legacy server (the shim upstream asks for real)
    ("legacy", "legacy"),  # legacy -> legacy
]


@pytest.mark.parametrize(("down", "up"), ERAS)
async def test_every_direction_carries_every_kind_of_input(down: str, up: str) -> None:
    async with (
        bridged(up) as (url, bridge, seen),
        HttpClient.connect(
            url,
            m.ClientConfig(era=down),  # type: ignore[arg-type]
            elicitation=name_it,
            sampling=model,
            roots=roots,
        ) as client,
    ):
        assert client.era is m.Era(down)
        assert bridge.upstream_era == "modern"  # probed; the forced era applies per connection
        assert client.server_info == SERVER_INFO  # initialize/discover from the upstream's facts
        assert client.instructions is not None and "book_trip" in client.instructions
        one = await client.call_tool("test_input_required_result_elicitation")
        assert text_of(one) == "Hello, Ada!"
        many = await client.call_tool("test_input_required_result_multiple_inputs")
        assert text_of(many) == "Paris Ada; roots: file:///work"
        state = await client.call_tool("test_input_required_result_request_state")
        assert text_of(state) == "Confirmed (state-ok)."
        tampered = await client.call_tool("test_input_required_result_tampered_state")
        assert text_of(tampered) == "Confirmed (state verified)."
        rounds = await client.call_tool("test_input_required_result_multi_round")
        assert "Ada" in text_of(rounds)
        assert bridge.held == 0
    calls = [msg for msg in seen if msg.get("method") == "tools/call"]
    for msg in calls:  # nothing of the downstream's envelope: the bridge's own, and its tag
        assert msg["params"]["_meta"][HOLD_META]
    if up == "auto":
        # every retry carried the upstream's own state back, byte for byte (C2)
        retries = [msg for msg in calls if "inputResponses" in msg["params"]]
        assert retries and all(isinstance(r["params"].get("requestState", ""), str) for r in retries)
        caps = {
            json.dumps(msg["params"]["_meta"][m.protocol.CLIENT_CAPABILITIES], sort_keys=True)
            for msg in calls
        }
        assert caps == {json.dumps({"elicitation": {"form": {}}, "roots": {}, "sampling": {}}, sort_keys=True)}
