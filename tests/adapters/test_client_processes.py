"""The anyio client, on asyncio and on trio, over real subprocess pipes: against the example
stdio servers (both eras and ``auto``), a server that dies mid-call, servers that ignore the
end of their input (the shutdown escalates to SIGTERM, then SIGKILL), and TCP."""

from __future__ import annotations

import subprocess
import sys

import anyio
import pytest
from anyio.abc import SocketAttribute
from stream_harness import (
    BOOKED,
    DIES,
    ESCALATIONS,
    EXAMPLES,
    LIBS,
    LISBON,
    Answers,
    EraName,
    FixtureServer,
    Lib,
    Wire,
    sealed_config,
)

import mrtr_sansio as m
from mrtr_sansio.adapters import ConnectionClosedError
from mrtr_sansio.adapters import anyio as anyio_adapter
from mrtr_sansio.adapters.anyio import Client

pytestmark = pytest.mark.parametrize("lib", LIBS, ids=lambda lib: lib.name)


@pytest.mark.parametrize("server", ["asyncio", "trio"])
@pytest.mark.parametrize("era", ["modern", "legacy", "auto"])
def test_book_trip_against_the_example_servers(lib: Lib, server: str, era: EraName) -> None:
    answers = Answers()
    wire = Wire()
    command = [sys.executable, str(EXAMPLES / server / "server.py")]

    options = answers.options()
    options["trace"] = wire

    async def main() -> None:
        async with Client.connect_stdio(command, m.ClientConfig(era=era), **options) as client:
            assert client.era is (m.Era.LEGACY if era == "legacy" else m.Era.MODERN)
            result = await client.call_tool("book_trip", LISBON)
            assert result["content"] == [{"type": "text", "text": BOOKED}]
            assert len(answers.asked) == 3
            process = client.process
        assert process is not None
        # The server saw the end of its input and exited by itself.
        assert process.returncode == 0

    lib.run(main)
    last_leg = wire.legs("book_trip")[-1]
    assert wire.received()[-1] == wire.answer_to(last_leg)


def test_server_dies_mid_call(lib: Lib) -> None:
    async def main() -> None:
        async with Client.connect_stdio(
            [sys.executable, "-c", DIES], m.ClientConfig(era="modern")
        ) as client:
            with pytest.raises(ConnectionClosedError):
                await client.call_tool("anything")
            with pytest.raises(ConnectionClosedError):
                await client.list_tools()
        assert client.process is not None
        assert client.process.returncode == 0

    lib.run(main)


def test_server_gone_before_the_call(lib: Lib) -> None:
    """Writing to a server that has exited fails quietly; the end of its output fails the
    call."""

    async def main() -> None:
        async with Client.connect_stdio(
            [sys.executable, "-c", "pass"], m.ClientConfig(era="modern")
        ) as client:
            assert client.process is not None
            await client.process.wait()
            with pytest.raises(ConnectionClosedError):
                await client.call_tool("anything")

    lib.run(main)


@ESCALATIONS
def test_shutdown_escalates(lib: Lib, script: str, signum: int) -> None:
    """Real timers: a server that outlives the end of its input gets SIGTERM after
    ``shutdown_timeout``, and SIGKILL after as long again."""

    async def main() -> None:
        start = lib.clock()
        async with Client.connect_stdio(
            [sys.executable, "-c", script],
            m.ClientConfig(era="modern"),
            stderr=subprocess.PIPE,
            shutdown_timeout=0.3,
        ) as client:
            # "ready": its SIGTERM handler is set.
            assert client.process is not None
            assert client.process.stderr is not None
            assert await client.process.stderr.receive(5) == b"ready"
        assert client.process.returncode == -signum
        assert lib.clock() - start < 5

    lib.run(main)


def test_connect_tcp(lib: Lib) -> None:
    """The client over TCP against the adapter's own TCP server."""
    answers = Answers()

    async def main() -> None:
        server = FixtureServer(lib.event)
        async with anyio.create_task_group() as tasks:
            listener = await tasks.start(
                anyio_adapter.serve_tcp, server.handle, sealed_config(), "127.0.0.1", 0
            )
            await book(listener.extra(SocketAttribute.local_port))
            tasks.cancel_scope.cancel()

    async def book(port: int) -> None:
        async with Client.connect_tcp(
            "127.0.0.1", port, m.ClientConfig(era="auto"), **answers.options()
        ) as client:
            result = await client.call_tool("book_trip", LISBON)
            assert result["content"] == [{"type": "text", "text": BOOKED}]

    lib.run(main)
