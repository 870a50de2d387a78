"""The ``mrtr-bridge`` command as a process: listening on stdio in front of the fixtures on
stdio (``--upstream -- COMMAND``), and on HTTP in front of a URL, for clients of both eras."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

import mrtr_sansio as m
from mrtr_sansio.adapters.anyio import Client
from mrtr_sansio.adapters.http import HttpClient

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = [sys.executable, str(ROOT / "examples" / "asyncio" / "server.py")]
BRIDGE = [sys.executable, "-m", "mrtr_sansio.adapters.bridge"]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "examples")])}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def name_it(event: m.InputNeeded) -> Mapping[str, Any]:
    return {"action": "accept", "content": {"name": "Ada"}}


@pytest.mark.parametrize("era", ["legacy", "modern", "auto"])
async def test_stdio_bridge_in_front_of_a_stdio_server(era: str) -> None:
    command = [*BRIDGE, "--listen", "stdio", "--", *FIXTURES]
    async with Client.connect_stdio(
        command, m.ClientConfig(era=era), env=ENV, elicitation=name_it
    ) as client:
        result = await client.call_tool("test_input_required_result_elicitation")
        assert result["content"][0]["text"] == "Hello, Ada!"
        if era != "modern":
            assert client.server_info is not None
            assert client.server_info["name"] == "mrtr-sansio-everything"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def process(args: list[str], url: str) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(args, env=ENV, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, "the process ended"
            assert time.monotonic() < deadline, "the process did not listen in time"
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize(("down", "up"), [("legacy", "modern"), ("modern", "legacy")])
async def test_http_bridge_in_front_of_an_http_server(down: str, up: str) -> None:
    port = free_port()
    up_url = f"http://127.0.0.1:{port}/mcp"
    server = [sys.executable, str(ROOT / "examples" / "http" / "server.py")]
    with process([*server, "--port", str(port)], up_url):
        url = f"http://127.0.0.1:{free_port()}/mcp"
        bridge = [*BRIDGE, "--listen", url, "--upstream", up_url, "--upstream-era", up]
        with process(bridge, url):
            async with HttpClient.connect(
                url, m.ClientConfig(era=down), elicitation=name_it
            ) as client:
                assert client.era is m.Era(down)
                result = await client.call_tool("test_input_required_result_elicitation")
                assert result["content"][0]["text"] == "Hello, Ada!"


async def test_port_0_takes_a_free_port_and_announces_it() -> None:
    bridge = [*BRIDGE, "--listen", "http://127.0.0.1:0/mcp", "--", *FIXTURES]
    proc = subprocess.Popen(bridge, env=ENV, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        pattern = r"mrtr-bridge: listening on (http://127\.0\.0\.1:(\d+)/mcp)\n"
        lines = iter(proc.stderr.readline, b"")  # logging's warnings may come first
        found = next(filter(None, (re.fullmatch(pattern, x.decode()) for x in lines)), None)
        assert found, "no announcement before stderr ended"
        assert int(found[2]) not in (0, 80)
        async with HttpClient.connect(found[1], m.ClientConfig(), elicitation=name_it) as client:
            result = await client.call_tool("test_input_required_result_elicitation")
            assert result["content"][0]["text"] == "Hello, Ada!"
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()


def test_the_command_needs_one_upstream() -> None:
    done = subprocess.run(
        [*BRIDGE, "--listen", "stdio"], env=ENV, capture_output=True, timeout=30, check=False
    )
    assert done.returncode != 0
    assert b"--upstream URL or -- COMMAND" in done.stderr


def test_the_bridge_bench_keeps_its_last_line() -> None:
    """``bench/bridge.py`` runs (figures are not checked here: a quiet machine's job)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bridge.py"), "--calls", "2", "--batches", "1"],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    last = done.stdout.strip().splitlines()[-1]
    pattern = r"ratio bridge/direct: plain=\d+\.\d\d mrtr=\d+\.\d\d legacy-mrtr=\d+\.\d\d"
    assert re.fullmatch(pattern, last), last
