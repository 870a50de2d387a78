"""Our HTTP client against our HTTP server over real loopback sockets: the example server under
uvicorn (a subprocess, asyncio inside) and the ASGI app under hypercorn on trio (in process);
the client under asyncio and trio. Both eras and auto, and a server that dies mid-call."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from fixtures import Everything, server_config
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve
from servers import HTTP_SERVER, free_port, http_server

import mrtr_sansio as m
from mrtr_sansio.adapters import CallFailedError
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.adapters.http import HttpClient

pytestmark = pytest.mark.anyio

BOOKED = [
    "Booked Lisbon for 2: 2026-08-01 to 2026-08-05.\nWorkspace: file:///trips\nSummary: Sunny"
]


async def elicitation(event: m.InputNeeded) -> Mapping[str, Any]:
    props = event.params["requestedSchema"]["properties"]
    if "check_in" in props:
        return {
            "action": "accept",
            "content": {"check_in": "2026-08-01", "check_out": "2026-08-05"},
        }
    return {"action": "accept", "content": {"name": "Ada"}}


async def sampling(event: m.InputNeeded) -> Mapping[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "Sunny"}, "model": "m"}


async def roots(event: m.InputNeeded) -> Mapping[str, Any]:
    return {"roots": [{"uri": "file:///trips", "name": "trips"}]}


def connect(url: str, era: str, **options: Any) -> Any:
    config = m.ClientConfig(era=era, client_info={"name": "live", "version": "1"})
    return HttpClient.connect(
        url, config, elicitation=elicitation, sampling=sampling, roots=roots, **options
    )


def texts(result: Mapping[str, Any]) -> list[str]:
    return [block["text"] for block in result["content"] if block["type"] == "text"]


@pytest.fixture(scope="module")
def uvicorn_url() -> Iterator[str]:
    with http_server(HTTP_SERVER, "--log-level", "error") as (url, _):
        yield url


@pytest.mark.parametrize("era", ["modern", "legacy", "auto"])
async def test_uvicorn_both_eras_and_auto(uvicorn_url: str, era: str) -> None:
    async with connect(uvicorn_url, era) as client:
        assert client.era is (m.Era.LEGACY if era == "legacy" else m.Era.MODERN)
        assert (client.session_id is not None) is (era == "legacy")
        result = await client.call_tool("book_trip", {"destination": "Lisbon", "guests": 2})
        async with anyio.create_task_group() as tg:  # calls in parallel, one POST each
            for _ in range(5):
                tg.start_soon(client.call_tool, "test_input_required_result_elicitation")
    assert texts(result) == BOOKED


async def test_a_server_that_dies_mid_call_fails_the_call_cleanly() -> None:
    with http_server(HTTP_SERVER, "--log-level", "error") as (url, proc):
        progressed = anyio.Event()

        def on_notification(method: str, params: Any) -> None:
            if method == "notifications/progress":
                progressed.set()

        async with connect(url, "modern", on_notification=on_notification) as client:
            failure: list[CallFailedError] = []

            async def call() -> None:
                with pytest.raises(CallFailedError) as failed:
                    await client.call_tool("test_tool_with_progress", meta={"progressToken": 1})
                failure.append(failed.value)

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                with anyio.fail_after(10):
                    await progressed.wait()
                proc.send_signal(signal.SIGKILL)
            (error,) = failure
            assert error.local
            assert "HTTP request failed" in error.error.message
            with pytest.raises(CallFailedError) as refused:  # nobody listens any more
                await client.call_tool("test_simple_text")
            assert refused.value.local  # a dead pooled connection, or a refused new one
            assert refused.value.error.message.startswith(
                ("HTTP request failed: ", f"could not connect to {url}: is the server running?")
            )


@asynccontextmanager
async def hypercorn(app: Any) -> AsyncIterator[str]:
    """``app`` under hypercorn on trio, on a free loopback port."""
    port = free_port()
    config = HypercornConfig()
    config.bind = [f"127.0.0.1:{port}"]
    config.loglevel = "ERROR"
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: hypercorn_serve(app, config, shutdown_trigger=stop.wait))
        deadline = anyio.current_time() + 10
        while True:
            try:
                await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                break
            except OSError:
                assert anyio.current_time() < deadline, "hypercorn did not start"
                await anyio.sleep(0.02)
        try:
            yield f"http://localhost:{port}/mcp"
        finally:
            stop.set()


@pytest.mark.parametrize("anyio_backend", ["trio"])
@pytest.mark.parametrize("era", ["modern", "legacy", "auto"])
async def test_hypercorn_on_trio_both_eras_and_auto(era: str) -> None:
    config = server_config(request_state=m.sealing.RequestStateSecurity.ephemeral())
    app = McpHttpApp(Everything().handle, config)
    async with hypercorn(app) as url, connect(url, era) as client:
        result = await client.call_tool("book_trip", {"destination": "Lisbon", "guests": 2})
        listed = await client.list_tools()
    assert texts(result) == BOOKED
    assert "execute_query" in client.param_headers or era == "legacy"
    assert len(listed["tools"]) > 20
