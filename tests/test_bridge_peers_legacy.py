"""Real legacy-era clients through the era bridge to real modern servers, over HTTP: the
official Python SDK 1.x client and the MCP Inspector CLI (both 2025-11-25), to our example
server (the bridge in this process, both of its sides recorded and checked against the
schemas) and to the official TypeScript SDK's server 2.4 (the ``mrtr-bridge`` command, which
launches it on stdio).

The peers are installed apart: ``bash tests/interop/sdk1_peer/install.sh`` (``.venv-sdk1``)
and ``bash tests/interop/bridge_peers_legacy/install.sh`` (the npm packages). Without them the
module skips, unless ``MRTR_INTEROP_REQUIRED=1`` (CI) makes that a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fixtures import SERVER_INFO, Everything, server_config
from scale.cluster import free_port
from scale.cluster import served_here as served

import mrtr_sansio as m
from helpers import check_message, require_peer
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.adapters.bridge import Bridge, Upstream
from mrtr_sansio.bridge import HOLD_META

ROOT = Path(__file__).resolve().parents[1]
NPM = ROOT / "tests" / "interop" / "bridge_peers_legacy"
SDK1 = Path(os.environ.get("MRTR_SDK1_PYTHON", ROOT / ".venv-sdk1" / "bin" / "python"))
SDK1_SCRIPT = ROOT / "tests" / "interop" / "sdk1_peer" / "sdk1_bridge_peers.py"
INSPECTOR = NPM / "node_modules" / "@modelcontextprotocol" / "inspector-cli" / "build"
TS_SERVER = NPM / "ts_server.mjs"
NODE = shutil.which("node")

require_peer(SDK1.is_file(), "the mcp<2 venv is missing (bash tests/interop/sdk1_peer/install.sh)")
require_peer(
    NODE is not None and (INSPECTOR / "index.js").is_file(),
    "node or the npm peers are missing (bash tests/interop/bridge_peers_legacy/install.sh)",
)

pytestmark = pytest.mark.anyio

NAME_TOOL = "test_input_required_result_elicitation"
STATE_TOOL = "test_input_required_result_request_state"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # uvicorn serves in this loop


# --- recording both sides of the bridge -----------------------------------------------------


def sse_or_json(content_type: str, body: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages of one HTTP body (JSON, or the data of SSE events)."""
    if not body.strip():
        return []
    if content_type.startswith("text/event-stream"):
        data = [ln[5:].strip() for ln in body.decode().splitlines() if ln.startswith("data:")]
        return [json.loads(d) for d in data if d]
    value = json.loads(body)
    return value if isinstance(value, list) else [value]


def recorded(app: Any, into: list[tuple[str, dict[str, Any]]]) -> Any:
    """``app`` with every message of its request bodies (``"in"``, each body followed by its
    request's ``"headers"``) and of its responses (``"out"``) appended to ``into``, in order."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        kind = ""
        chunks: list[bytes] = []

        async def tap_in() -> Any:
            message = await receive()
            if message.get("body"):
                into.extend(("in", msg) for msg in sse_or_json("", message["body"]))
                heads = {k.decode(): v.decode() for k, v in scope["headers"]}
                into.append(("headers", heads))
            return message

        async def tap_out(message: Any) -> None:
            nonlocal kind
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers", ()))
                kind = headers.get(b"content-type", b"").decode()
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if kind.startswith("text/event-stream"):  # whole events only
                    text = b"".join(chunks)
                    *done, rest = text.split(b"\n\n")
                    chunks[:] = [rest]
                    for event in done:
                        into.extend(("out", msg) for msg in sse_or_json(kind, event))
                elif kind.startswith("application/json") and not message.get("more_body"):
                    into.extend(("out", msg) for msg in sse_or_json(kind, b"".join(chunks)))
            await send(message)

        await app(scope, tap_in, tap_out)

    return wrapped


def check_legacy_downstream(seen: list[tuple[str, dict[str, Any]]]) -> int:
    """Every message the bridge sent its legacy client is valid 2025-11-25 (results checked
    against the method asked); returns how many there were."""
    asked = {
        msg["id"]: msg["method"]
        for way, msg in seen
        if way == "in" and "method" in msg and "id" in msg
    }
    sent = [msg for way, msg in seen if way == "out"]
    for msg in sent:
        check_message(msg, m.Era.LEGACY, method=asked.get(msg.get("id")))
        result = msg.get("result", {})
        assert not {"resultType", "ttlMs", "cacheScope"} & set(result), msg  # modern only
        assert m.protocol.SERVER_INFO not in result.get("_meta", {}), msg
    return len(sent)


def check_modern_upstream(seen: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every request the bridge sent upstream is a valid 2026-07-28 client message, never
    ``initialize``; returns them."""
    sent = [msg for way, msg in seen if way == "in"]
    for msg in sent:
        check_message(msg, m.Era.MODERN, sender="client")
    assert not any(msg.get("method") == "initialize" for msg in sent)
    return sent


@asynccontextmanager
async def bridge_to_ours() -> AsyncIterator[
    tuple[str, Bridge, list[tuple[str, dict[str, Any]]], list[tuple[str, dict[str, Any]]]]
]:
    """Our example server (modern only), the bridge in front with the upstream's era forced
    modern (as ``--upstream-era modern``); yields the bridge's URL, the bridge, what crossed
    its downstream side and what crossed its upstream side."""
    down: list[tuple[str, dict[str, Any]]] = []
    up: list[tuple[str, dict[str, Any]]] = []
    config = server_config(request_state=m.sealing.RequestStateSecurity.ephemeral())
    upstream_app = McpHttpApp(Everything().handle, config, legacy=False)
    async with (
        served(recorded(upstream_app, up)) as up_url,
        Bridge.open(Upstream(url=up_url, era="modern")) as bridge,
    ):
        base = m.ServerConfig(request_state=m.sealing.RequestStateSecurity.ephemeral())
        app = McpHttpApp(bridge.handle, bridge.use_config(bridge.server_config(base)))
        async with served(recorded(app, down)) as url:
            yield url, bridge, down, up


# --- the bridge command in front of the TS server -------------------------------------------


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (Linux)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out.extend(int(p) for p in (task / "children").read_text().split())
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@contextmanager
def bridge_command_to_ts() -> Iterator[str]:
    """``mrtr-bridge --listen http://127.0.0.1:PORT/mcp --upstream-era modern -- node
    ts_server.mjs`` as a process; yields its URL once it answers, and on exit stops it and
    checks that it and the TS servers it launched are gone."""
    assert NODE is not None
    port = free_port()  # (a port of our own: --listen ...:0 is not honoured everywhere yet)
    url = f"http://127.0.0.1:{port}/mcp"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *sys.path])}
    command = [sys.executable, "-m", "mrtr_sansio.adapters.bridge", "--listen", url]
    command += ["--upstream-era", "modern", "--", NODE, str(TS_SERVER)]
    launched: set[int] = set()
    with tempfile.TemporaryFile() as log:  # (a file, not a pipe: nobody reads it meanwhile)
        proc = subprocess.Popen(command, env=env, cwd=NPM, stderr=log)
        try:
            for _ in range(300):
                if proc.poll() is not None:
                    log.seek(0)
                    raise AssertionError(log.read().decode()[-3000:])
                launched.update(children(proc.pid))
                try:
                    httpx.get(url, timeout=1)
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
            else:
                raise AssertionError("mrtr-bridge did not start listening")
            launched.update(children(proc.pid))
            yield url
            launched.update(children(proc.pid))
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # as Ctrl-C: the bridge ends its upstreams
            try:
                proc.wait(timeout=15)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    assert launched  # the TS server ran under the bridge
    assert not [pid for pid in launched if alive(pid)], "a TS server outlived the bridge"


# --- the clients ----------------------------------------------------------------------------


async def sdk1(url: str, *calls: str) -> list[dict[str, Any]]:
    """Run the SDK 1.x client script against ``url``; its JSON lines."""
    with anyio.fail_after(60):
        done = await anyio.run_process([str(SDK1), str(SDK1_SCRIPT), url, *calls], check=False)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return [json.loads(line) for line in done.stdout.decode().splitlines()]


async def inspector(url: str, method: str, *options: str) -> tuple[int, Any, str]:
    """The Inspector CLI (run from its build directory) against ``url``: its exit code, the
    JSON it printed (None if none) and its stderr."""
    assert NODE is not None
    command = [NODE, "index.js", url, "--transport", "http", "--method", method, *options]
    with anyio.fail_after(60):
        done = await anyio.run_process(command, cwd=INSPECTOR, check=False)
    out = done.stdout.decode().strip()
    return done.returncode, json.loads(out) if out else None, done.stderr.decode()


def calls_of(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {line["call"]: line for line in lines if "call" in line}


# --- the four legs --------------------------------------------------------------------------


async def test_sdk1_client_through_the_bridge_to_our_server() -> None:
    async with bridge_to_ours() as (url, bridge, down, up):
        lines = await sdk1(
            url,
            "test_simple_text",
            'execute_query={"region": "eu-west", "query": "select 1"}',
            NAME_TOOL,
            STATE_TOOL,
        )
        assert bridge.held == 0
    init = lines[0]["initialize"]
    assert init["protocolVersion"] == "2025-11-25"
    assert init["serverInfo"] == SERVER_INFO  # the upstream's, not the bridge's own
    assert {"tools", "prompts", "resources"} <= set(init["capabilities"])
    (tools,) = [line["tools"] for line in lines if "tools" in line]
    assert len(tools) == len(bridge.tools) == len(Everything().tools)
    assert NAME_TOOL in tools
    got = calls_of(lines)
    assert got["test_simple_text"]["text"] == "This is a simple text response for testing."
    assert got["execute_query"]["text"] == "Ran 'select 1' in eu-west."
    assert got[NAME_TOOL]["text"] == "Hello, Ada!"
    assert got[STATE_TOOL]["text"] == "Confirmed (state-ok)."
    assert not any(line["isError"] for line in got.values())
    asked = [line["asked"] for line in lines if "asked" in line]
    assert asked == [
        {"message": "What is your name?", "fields": ["name"]},
        {"message": "Please confirm to continue", "fields": ["ok"]},
    ]
    # downstream: real elicitation/create requests, valid legacy messages throughout
    # initialize, tools/list, four results and the two questions
    assert check_legacy_downstream(down) == 8
    elicits = [msg for way, msg in down if way == "out" and msg.get("method")]
    assert [msg["method"] for msg in elicits] == ["elicitation/create"] * 2
    # upstream: the modern wire, each call tagged by its hold, the retries carrying the answers
    # and the echoed state
    sent = check_modern_upstream(up)
    calls = [msg for msg in sent if msg.get("method") == "tools/call"]
    assert all(msg["params"]["_meta"][HOLD_META] for msg in calls)
    retries = {
        msg["params"]["name"]: msg["params"] for msg in calls if "inputResponses" in msg["params"]
    }
    assert set(retries) == {NAME_TOOL, STATE_TOOL}
    assert retries[STATE_TOOL]["requestState"]
    assert retries[NAME_TOOL]["inputResponses"]["user_name"]["content"] == {"name": "Ada"}
    assert sum(msg.get("method") == "server/discover" for msg in sent) == 1
    # the upstream's x-mcp-header annotation honoured: the region travels as a header too
    query_at = next(
        i for i, (way, msg) in enumerate(up) if msg.get("params", {}).get("name") == "execute_query"
    )
    way, headers = up[query_at + 1]
    assert way == "headers"
    assert headers["mcp-param-region"] == "eu-west"
    assert headers["mcp-name"] == "execute_query"


async def test_sdk1_client_through_the_bridge_command_to_the_ts_server() -> None:
    with bridge_command_to_ts() as url:
        lines = await sdk1(url, 'shout={"text": "bridged"}', "confirm_with_state")
    init = lines[0]["initialize"]
    assert init["protocolVersion"] == "2025-11-25"
    assert init["serverInfo"] == {"name": "bridge-peers-ts", "version": "2.4.0-test"}
    assert "tools" in init["capabilities"]
    assert lines[1] == {"tools": ["confirm_with_state", "shout"]}
    got = calls_of(lines)
    assert got["shout"] == {"call": "shout", "text": "BRIDGED", "isError": False}
    assert got["confirm_with_state"]["text"] == "Confirmed by TS (ts-awaiting-confirmation)."
    assert [line["asked"] for line in lines if "asked" in line] == [
        {"message": "TS server: confirm?", "fields": ["ok"]}
    ]


async def test_inspector_cli_through_the_bridge_to_our_server() -> None:
    async with bridge_to_ours() as (url, bridge, down, up):
        code, listed, err = await inspector(url, "tools/list")
        assert code == 0, err
        plain = await inspector(url, "tools/call", "--tool-name", "test_simple_text")
        query = await inspector(
            url,
            "tools/call",
            "--tool-name",
            "execute_query",
            "--tool-arg",
            "region=eu-west",
            "query=select 2",
        )
        refused = await inspector(url, "tools/call", "--tool-name", NAME_TOOL)
        assert bridge.held == 0
    assert len(listed["tools"]) == len(Everything().tools)
    assert plain[0] == 0, plain[2]
    assert plain[1]["content"][0]["text"] == "This is a simple text response for testing."
    assert query[0] == 0, query[2]
    assert query[1]["content"][0]["text"] == "Ran 'select 2' in eu-west."
    # the Inspector CLI declares no elicitation: the upstream refuses (-32021, modern), and
    # the legacy client reads the shim's -32603 naming the capability
    assert refused[0] == 1
    assert "MCP error -32603" in refused[2], refused[2]
    refusals = [msg["error"] for way, msg in down if way == "out" and "error" in msg]
    assert [e["code"] for e in refusals] == [-32603]
    assert refusals[0]["data"]["requiredCapabilities"] == {"elicitation": {"form": {}}}
    upstream_refusals = [msg["error"] for way, msg in up if way == "out" and "error" in msg]
    assert [e["code"] for e in upstream_refusals] == [-32021]
    assert check_legacy_downstream(down) >= 4
    sent = check_modern_upstream(up)
    caps = [
        msg["params"]["_meta"][m.protocol.CLIENT_CAPABILITIES]
        for msg in sent
        if msg.get("method") == "tools/call"
    ]
    assert caps
    assert all("elicitation" not in c for c in caps)  # as the Inspector declared


async def test_inspector_cli_through_the_bridge_command_to_the_ts_server() -> None:
    with bridge_command_to_ts() as url:
        code, listed, err = await inspector(url, "tools/list")
        shout = await inspector(
            url, "tools/call", "--tool-name", "shout", "--tool-arg", "text=inspected"
        )
        refused = await inspector(url, "tools/call", "--tool-name", "confirm_with_state")
    assert code == 0, err
    assert sorted(t["name"] for t in listed["tools"]) == ["confirm_with_state", "shout"]
    assert set(listed) == {"tools"}  # the TS server's modern decoration not relayed
    assert shout[0] == 0, shout[2]
    assert shout[1]["content"] == [{"type": "text", "text": "INSPECTED"}]
    assert refused[0] == 1  # the TS server's -32021, as a legacy client reads it
    assert "MCP error -32603" in refused[2], refused[2]
    assert "elicitation" in refused[2]


def test_the_recorder_reads_json_and_sse_alike() -> None:
    """This module's own reader gives the same messages for a JSON body and an SSE one, and
    none for an empty body, so the checks above read what was really sent."""
    msg = {"jsonrpc": "2.0", "id": 1, "result": {}}
    as_json = sse_or_json("application/json", json.dumps(msg).encode())
    event = f"event: message\ndata: {json.dumps(msg)}\n\n".encode()
    assert as_json == sse_or_json("text/event-stream", event) == [msg]
    assert sse_or_json("application/json", b"") == []
