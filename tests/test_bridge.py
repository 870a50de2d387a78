"""The era bridge end to end over real HTTP: our own clients (both eras) through the bridge
(uvicorn on a free port) to the example fixtures (uvicorn on another), the upstream spoken to
in either era; principals kept apart, and the bounds at and past their limits.

The pure part's rules are tested in ``test_bridge_rules.py``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Mapping, MutableMapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fixtures import SERVER_INFO, Everything, server_config
from scale.cluster import served_here as served

import mrtr_sansio as m
from mrtr_sansio.adapters import CallFailedError
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
async def bridged(
    upstream_era: str = "auto",
    limits: BridgeLimits | None = None,
    legacy_upstream: bool = True,
    upstream_options: Mapping[str, Any] | None = None,
    **downstream: Any,
) -> AsyncIterator[tuple[str, Bridge, list[dict[str, Any]]]]:
    """The fixtures upstream (``upstream_options`` add to its config), the bridge in front (its
    URL), and what the upstream received."""
    seen: list[dict[str, Any]] = []
    upstream_app = McpHttpApp(
        Everything().handle,
        server_config(
            request_state=m.sealing.RequestStateSecurity.ephemeral(), **(upstream_options or {})
        ),
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
    ("legacy", "modern"),  # the same, the upstream's era forced: its facts still discovered
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
            m.ClientConfig(era="auto" if down == "modern" else down),
            elicitation=name_it,
            sampling=model,
            roots=roots,
        ) as client,
    ):
        assert client.era is m.Era(down)
        assert bridge.upstream_era == ("legacy" if up == "legacy" else "modern")
        assert client.server_info == SERVER_INFO  # initialize/discover from the upstream's facts
        assert client.server_capabilities is not None
        assert "tools" in client.server_capabilities
        assert bridge.tools  # listed upstream: the calls' Mcp-Param headers are mirrored
        assert client.instructions is not None
        assert "book_trip" in client.instructions
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
    if up == "legacy":  # the upstream asked with real requests, answered by POSTed responses
        assert any(msg.get("method") == "initialize" for msg in seen)
        assert any("result" in msg and "method" not in msg for msg in seen)
    else:
        # the retries went upstream (their sealed states verified there: the tampered-state
        # tool answers only to its own state, C2), with the downstream's capabilities
        assert [msg for msg in calls if "inputResponses" in msg["params"]]
        caps = {
            json.dumps(msg["params"]["_meta"][m.protocol.CLIENT_CAPABILITIES], sort_keys=True)
            for msg in calls
        }
        assert caps == {
            json.dumps({"elicitation": {"form": {}}, "roots": {}, "sampling": {}}, sort_keys=True)
        }


async def post(url: str, who: str, message: dict[str, Any], **extra_headers: str) -> dict[str, Any]:
    """POST one modern request as ``who`` (``extra_headers`` too); its JSON-RPC response."""
    params = message["params"]
    headers = {
        **extra_headers,
        "x-user": who,
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": message["method"],
        "accept": "application/json, text/event-stream",
    }
    if "name" in params or "taskId" in params:
        headers["mcp-name"] = params.get("name", params.get("taskId"))
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(url, json=message, headers=headers)
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [ln[5:] for ln in response.text.splitlines() if ln.startswith("data:")]
        return dict(json.loads([d for d in data if d.strip()][-1]))
    return dict(response.json())


def tool_call(rid: int, name: str, **extra: Any) -> dict[str, Any]:
    meta = {
        m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28",
        m.protocol.CLIENT_CAPABILITIES: {"elicitation": {}},
    }
    params = {"name": name, "arguments": {}, "_meta": meta, **extra}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


NAME_TOOL = "test_input_required_result_elicitation"


async def test_an_auto_upstream_is_probed_once_and_then_spoken_to_in_its_era() -> None:
    """The facts connection finds a legacy-only upstream; the calls' connection goes straight
    to ``initialize``, not through another ``server/discover`` the upstream refuses (the SDK
    1.x server logs each such probe as a failed request)."""
    legacy_only = {"supported_versions": ()}
    async with (
        bridged("auto", upstream_options=legacy_only) as (url, bridge, seen),
        HttpClient.connect(url, m.ClientConfig(era="modern"), elicitation=name_it) as client,
    ):
        assert bridge.upstream_era == "legacy"
        result = await client.call_tool("test_input_required_result_elicitation")
        assert text_of(result) == "Hello, Ada!"
        assert bridge.upstream_connections == 1
    methods = [msg.get("method") for msg in seen]
    assert methods.count("server/discover") == 1
    assert methods.count("initialize") == 2  # the facts connection's, the call's


async def test_concurrent_calls_to_a_legacy_stdio_upstream_each_get_their_own_answers() -> None:
    """On stdio a legacy server's ``elicitation/create`` names no call (SEP-2260 has no wire
    field for it): the bridge gives each input call to such an upstream a connection (a lane)
    with no other, so each question is certainly its call's, and a call waiting on a person
    holds up no other. Before, a second call in flight made every question unplaceable and
    the calls failed."""
    server = (sys.executable, str(Path(__file__).parents[1] / "examples/asyncio/server.py"))
    async with Bridge.open(Upstream(command=server, era="legacy")) as bridge:
        config = bridge.use_config(bridge.server_config())
        async with served(McpHttpApp(bridge.handle, config)) as url:

            async def greeted(name: str | None, results: list[str]) -> None:
                async def answer(event: m.InputNeeded) -> Mapping[str, Any]:
                    if name is None:  # nobody answers this one
                        await anyio.sleep_forever()
                    await anyio.sleep(0.2)  # the other calls are sent meanwhile
                    return {"action": "accept", "content": {"name": name}}

                config = m.ClientConfig(era="modern")
                async with HttpClient.connect(url, config, elicitation=answer) as client:
                    results.append(text_of(await client.call_tool(NAME_TOOL)))

            results: list[str] = []
            with anyio.fail_after(30):
                async with anyio.create_task_group() as stuck:
                    stuck.start_soon(greeted, None, results)
                    while bridge.held == 0:
                        await anyio.sleep(0.01)
                    async with anyio.create_task_group() as tg:
                        for name in ("Ada", "Grace", "Linus"):
                            tg.start_soon(greeted, name, results)
                    stuck.cancel_scope.cancel()
            assert sorted(results) == ["Hello, Ada!", "Hello, Grace!", "Hello, Linus!"]
            assert bridge.upstream_connections == 4  # one lane each, at most 8 (per principal)


@pytest.mark.parametrize("sealed", [True, False])
async def test_another_principal_cannot_continue_a_held_call(sealed: bool) -> None:
    """Mallory replays Alice's requestState: refused (by the seal, or, unsealed, by the
    bridge's own owner check), and Alice's held call goes on unharmed."""
    state = m.sealing.RequestStateSecurity.ephemeral() if sealed else m.sealing.UNSEALED
    async with bridged(request_state=state) as (url, bridge, _):
        first = await post(url, "alice", tool_call(1, NAME_TOOL))
        assert first["result"]["resultType"] == "input_required"
        token = first["result"]["requestState"]
        (key,) = first["result"]["inputRequests"]
        answer = {key: {"action": "accept", "content": {"name": "Mallory"}}}
        stolen = await post(
            url, "mallory", tool_call(2, NAME_TOOL, inputResponses=answer, requestState=token)
        )
        assert stolen["error"]["code"] == -32602
        assert "Mallory" not in json.dumps(stolen)
        assert bridge.held == 1
        answer = {key: {"action": "accept", "content": {"name": "Alice"}}}
        done = await post(
            url, "alice", tool_call(3, NAME_TOOL, inputResponses=answer, requestState=token)
        )
        assert text_of(done["result"]) == "Hello, Alice!"
        assert bridge.held == 0
        again = await post(  # the same state once more: the hold is gone
            url, "alice", tool_call(4, NAME_TOOL, inputResponses=answer, requestState=token)
        )
        assert again["error"]["code"] == -32602
        assert again["error"]["data"]["reason"] == "bridge_hold_unknown"


async def test_answers_sent_with_the_first_request_answer_the_first_round() -> None:
    """A modern client that answers before being asked (no requestState, S12's extra keys
    too) gets the complete result in one request, as from the server itself; a key the
    upstream did not ask under is ignored, and a later round is still asked downstream."""
    async with bridged() as (url, bridge, seen):
        answers = {
            "user_name": {"action": "accept", "content": {"name": "Alice"}},
            "unknown_extra_key": {"action": "accept", "content": {"foo": "bar"}},
        }
        done = await post(url, "alice", tool_call(1, NAME_TOOL, inputResponses=answers))
        assert text_of(done["result"]) == "Hello, Alice!"
        assert bridge.held == 0
        wrong = {"not_asked": {"action": "accept", "content": {"name": "Eve"}}}
        asked = await post(url, "alice", tool_call(2, NAME_TOOL, inputResponses=wrong))
        assert asked["result"]["resultType"] == "input_required"
        assert list(asked["result"]["inputRequests"]) == ["user_name"]
        assert "Eve" not in json.dumps(seen)


async def test_a_mirrored_header_that_disagrees_with_its_argument_is_refused() -> None:
    """The bridge checks ``Mcp-Param-Region`` against the upstream tool's annotation (SEP-2243)
    as the upstream itself would; a matching header goes through."""
    async with bridged() as (url, _, _seen):
        call = tool_call(1, "execute_query", arguments={"region": "eu"})
        bad = await post(url, "alice", call, **{"mcp-param-region": "us"})
        assert bad["error"]["code"] == -32020
        good = await post(url, "alice", call, **{"mcp-param-region": "eu"})
        assert "result" in good


async def test_held_calls_are_bounded_per_principal_at_and_past_the_limit() -> None:
    limits = BridgeLimits(max_held=3, max_held_per_principal=2)
    async with bridged(limits=limits) as (url, bridge, _):
        for rid in (1, 2):  # at the limit: held
            held = await post(url, "alice", tool_call(rid, NAME_TOOL))
            assert held["result"]["resultType"] == "input_required"
        past = await post(url, "alice", tool_call(3, NAME_TOOL))
        assert past["error"]["code"] == -32603
        assert past["error"]["data"]["reason"] == "bridge_holds_exhausted"
        other = await post(url, "bob", tool_call(4, NAME_TOOL))  # bob's share is his own
        assert other["result"]["resultType"] == "input_required"
        whole = await post(url, "carol", tool_call(5, NAME_TOOL))  # the whole bridge: 3
        assert whole["error"]["data"]["reason"] == "bridge_holds_exhausted"
        assert bridge.held == 3


async def test_a_held_call_expires_and_its_retry_is_told_so() -> None:
    async with bridged(limits=BridgeLimits(hold_timeout=0.2)) as (url, bridge, _):
        first = await post(url, "alice", tool_call(1, NAME_TOOL))
        token = first["result"]["requestState"]
        await anyio.sleep(0.6)
        assert bridge.held == 0
        late = await post(
            url,
            "alice",
            tool_call(
                2,
                NAME_TOOL,
                requestState=token,
                inputResponses={"user_name": {"action": "decline"}},
            ),
        )
        assert late["error"]["code"] == -32602
        assert "not held by this bridge process" in late["error"]["message"]


async def test_the_legacy_round_cap_ends_the_held_call() -> None:
    """A legacy downstream with a cap of one round: the two-round tool fails as the shim
    fails it, and the bridge lets the upstream call go."""
    async with (
        bridged(legacy_max_rounds=1) as (url, bridge, _),
        HttpClient.connect(url, m.ClientConfig(era="legacy"), elicitation=name_it) as client,
    ):
        with pytest.raises(CallFailedError) as failed:
            await client.call_tool("test_input_required_result_multi_round")
        assert "still needed input after 1 round" in failed.value.error.message
        with anyio.fail_after(5):
            while bridge.held:
                await anyio.sleep(0.01)


async def test_lists_and_their_meta_are_relayed() -> None:
    async with (
        bridged() as (url, _, seen),
        HttpClient.connect(url, m.ClientConfig(era="legacy")) as client,
    ):
        direct = list(seen)
        tools = await client.request("tools/list", {"_meta": {"trace": "t-1"}})
        names = {tool["name"] for tool in tools["tools"]}
        assert {NAME_TOOL, "book_trip", "greet"} <= names
        prompts = await client.list_prompts()
        assert prompts["prompts"]
        resources = await client.list_resources()
        assert resources["resources"]
        listed = [msg for msg in seen[len(direct) :] if msg.get("method") == "tools/list"]
        assert listed[-1]["params"]["_meta"]["trace"] == "t-1"


@pytest.mark.parametrize("down", ["legacy", "modern"])
async def test_progress_and_logs_reach_the_request_they_are_about(down: str) -> None:
    got: list[tuple[str, Any]] = []
    async with (
        bridged() as (url, _, _seen),
        HttpClient.connect(
            url,
            m.ClientConfig(era=down),
            progress=True,
            log_level="info",
            on_notification=lambda method, params: got.append((method, params)),
        ) as client,
    ):
        await client.call_tool("test_tool_with_progress")
        progress = [p["progress"] for method, p in got if method == "notifications/progress"]
        assert progress == [0, 50, 100]
        got.clear()
        await client.call_tool("test_tool_with_logging")
        assert [p["level"] for method, p in got if method == "notifications/message"] == [
            "info"
        ] * 3


@pytest.mark.parametrize(
    ("down", "up"), [("legacy", "legacy"), ("modern", "legacy"), ("legacy", "auto")]
)
async def test_a_cancelled_downstream_call_cancels_the_upstream_call(down: str, up: str) -> None:
    async with (
        bridged(up) as (url, bridge, seen),
        HttpClient.connect(url, m.ClientConfig(era=down)) as client,
    ):
        with anyio.move_on_after(0.5) as scope:
            await client.call_tool("slow_compute", {"seconds": 30})
        assert scope.cancelled_caught
        with anyio.fail_after(5):
            while bridge.held:
                await anyio.sleep(0.01)
            if up == "legacy":  # the upstream session was told (a modern one: its stream closed)
                while not any(msg.get("method") == "notifications/cancelled" for msg in seen):
                    await anyio.sleep(0.01)
        after = await client.call_tool("greet", {"name": "Ada"})  # the bridge goes on
        assert "Ada" in text_of(after)


async def test_upstream_connections_are_bounded_per_principal_at_and_past_the_limit() -> None:
    """One connection per principal and capability set; at the bound the idle one gives way,
    and when it is in use (a held call) the new one is refused."""
    limits = BridgeLimits(max_upstreams_per_principal=1)
    async with bridged(limits=limits) as (url, bridge, _):
        plain = tool_call(1, "greet", arguments={"name": "Ada"})
        plain["params"]["_meta"][m.protocol.CLIENT_CAPABILITIES] = {}
        assert "Ada" in text_of((await post(url, "alice", plain))["result"])
        assert bridge.upstream_connections == 1  # at the limit
        held = await post(url, "alice", tool_call(2, NAME_TOOL))  # {"elicitation": {}}: another
        assert held["result"]["resultType"] == "input_required"  # the idle one gave way
        assert bridge.upstream_connections == 1
        plain["id"] = 3
        past = await post(url, "alice", plain)  # the only one is busy: refused
        assert past["error"]["data"]["reason"] == "bridge_upstreams_exhausted"
        plain["id"] = 4
        assert "Ada" in text_of((await post(url, "bob", plain))["result"])  # bob's own
        assert bridge.upstream_connections == 2


async def test_a_retry_reaching_another_bridge_process_is_told_so() -> None:
    """Two bridges sharing one key ring (as processes behind one URL must): the state unseals
    at the other, which holds no such call and says so."""
    ring = m.sealing.RequestStateSecurity.ephemeral()
    async with (
        bridged(request_state=ring) as (one, _, _),
        bridged(request_state=ring) as (
            other,
            bridge,
            _,
        ),
    ):
        first = await post(one, "alice", tool_call(1, NAME_TOOL))
        token = first["result"]["requestState"]
        answer = {"user_name": {"action": "accept", "content": {"name": "Ada"}}}
        elsewhere = await post(
            other, "alice", tool_call(2, NAME_TOOL, inputResponses=answer, requestState=token)
        )
        assert elsewhere["error"]["code"] == -32602
        assert elsewhere["error"]["data"] == {"reason": "bridge_hold_unknown"}
        assert "held by another bridge process" in elsewhere["error"]["message"]
        assert bridge.held == 0
        back = await post(
            one, "alice", tool_call(3, NAME_TOOL, inputResponses=answer, requestState=token)
        )
        assert text_of(back["result"]) == "Hello, Ada!"


async def test_an_idle_upstream_connection_is_closed() -> None:
    async with (
        bridged(limits=BridgeLimits(upstream_idle_timeout=0.2)) as (url, bridge, _),
        HttpClient.connect(url, m.ClientConfig(era="legacy")) as client,
    ):
        await client.call_tool("greet", {"name": "Ada"})
        assert bridge.upstream_connections == 1
        await until_no_connection(bridge)
        after = await client.call_tool("greet", {"name": "Bo"})  # a new one is opened
        assert "Bo" in text_of(after)
        assert bridge.upstream_connections == 1


async def until_no_connection(bridge: Bridge) -> None:
    with anyio.fail_after(5):
        while bridge.upstream_connections:
            await anyio.sleep(0.02)


async def test_a_legacy_only_downstream_sends_a_dual_era_client_to_initialize() -> None:
    async with (
        bridged(supported_versions=()) as (url, _, _),  # what --downstream-era legacy serves
        HttpClient.connect(url, m.ClientConfig(era="auto"), elicitation=name_it) as client,
    ):
        assert client.era is m.Era.LEGACY
        result = await client.call_tool(NAME_TOOL)
        assert text_of(result) == "Hello, Ada!"
    async with (
        bridged(supported_versions=()) as (url, _, _),
        HttpClient.connect(url, m.ClientConfig(era="modern")) as modern,
    ):
        with pytest.raises(CallFailedError) as refused:
            await modern.call_tool("greet", {"name": "Ada"})
        assert refused.value.code == -32022
