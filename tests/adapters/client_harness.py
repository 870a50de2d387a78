"""Run a client test body under asyncio or trio: the library's ``Client`` against our server
adapter over in-memory streams, or against a server the test scripts message by message.

Every message on the wire is recorded by a :class:`Wire` (the client's ``trace`` hook), and
every message the client sends is checked against the official schema of its era. On exit
each session checks that no task was left behind (asyncio: none but the test's; trio: the
nursery closed).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Literal

import booking
import pytest
import trio
import trio.testing
from fixtures import Everything, server_config
from stream_harness import Gate
from stream_scenarios import TIMEOUT

import mrtr_sansio as m
from mrtr_sansio.adapters import (
    AsyncClientBase,
    BlockingClientOptions,
    ClientOptions,
    HandlerResult,
    RequestContext,
)
from mrtr_sansio.adapters import asyncio as asyncio_adapter
from mrtr_sansio.adapters import trio as trio_adapter
from wire import check_message

#: The example client's scripted user answers the tests' callbacks too.
DATES = booking.DATES
WORKSPACE = booking.ROOTS
PITCH = booking.PITCH
BOOKED = (
    "Booked Lisbon for 2: 2026-09-01 to 2026-09-05.\nWorkspace: file:///home/demo/trips\n"
    "Summary: Five days of light, tiles and custard tarts."
)
LISBON = booking.ARGUMENTS
EraName = Literal["modern", "legacy", "auto"]
#: Servers for ``python -c``: one that reads its first line, then exits without a word; ones
#: that say "ready" on stderr, then ignore the end of their input (and SIGTERM too).
DIES = "import sys; sys.stdin.buffer.readline()"
_LINGER = "sys.stderr.write('ready'); sys.stderr.flush(); sys.stdin.buffer.read(); time.sleep(60)"
LINGERS = "import sys, time; " + _LINGER
DEAF = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); " + _LINGER
#: (script, the signal that ends it) for the shutdown escalation tests.
ESCALATIONS = pytest.mark.parametrize(
    ("script", "signum"),
    [(LINGERS, signal.SIGTERM), (DEAF, signal.SIGKILL)],
    ids=["SIGTERM", "SIGKILL"],
)


# --- the wire ---------------------------------------------------------------------------------


class Wire:
    """Every message of one session, decoded, in order; what the client sends is validated
    against the schema of the era it speaks (legacy from its ``initialize`` on)."""

    def __init__(self) -> None:
        self.log: list[tuple[Literal["send", "recv"], dict[str, Any]]] = []
        self.era = m.Era.MODERN
        self._asked: dict[Any, str] = {}  # the server's request ids -> their methods
        self._watches: list[tuple[Callable[[str, dict[str, Any]], bool], Gate]] = []

    def when(self, gate: Gate, seen: Callable[[str, dict[str, Any]], bool]) -> Gate:
        """``gate``, set once a message for which ``seen(direction, msg)`` is true goes by.

        The trace runs as the client reads, before it acts on the message: a task waiting
        on the gate resumes after the client has acted on it.
        """
        self._watches.append((seen, gate))
        return gate

    def __call__(self, direction: Literal["send", "recv"], data: bytes) -> None:
        msg: dict[str, Any] = json.loads(data)
        self.log.append((direction, msg))
        for seen, gate in self._watches:
            if seen(direction, msg):
                gate.set()
        if direction == "recv":
            if "method" in msg and "id" in msg:
                self._asked[msg["id"]] = msg["method"]
            return
        if msg.get("method") == "initialize":
            self.era = m.Era.LEGACY
        method = None if "method" in msg else self._asked.get(msg.get("id"))
        check_message(msg, self.era, sender="client", method=method)

    def sent(self, method: str | None = None) -> list[dict[str, Any]]:
        """The client's messages (of ``method``, when given), in order."""
        return [
            msg
            for d, msg in self.log
            if d == "send" and (method is None or msg.get("method") == method)
        ]

    def received(self) -> list[dict[str, Any]]:
        return [msg for d, msg in self.log if d == "recv"]

    def answer_to(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The server's response to the client's ``request``."""
        for direction, msg in self.log:
            if direction == "recv" and "method" not in msg and msg.get("id") == request["id"]:
                return msg
        raise AssertionError(f"no answer to {request!r}")

    def legs(self, name: str) -> list[dict[str, Any]]:
        """The ``tools/call`` requests of tool ``name``, in order."""
        return [msg for msg in self.sent("tools/call") if msg["params"]["name"] == name]


def check_retries(wire: Wire, legs: list[dict[str, Any]]) -> None:
    """Each leg after the first is the retry the previous leg's ``input_required`` asked for:
    a fresh id, the same params, this round's answers only, the state echoed byte-for-byte."""
    ids = [leg["id"] for leg in legs]
    assert len(set(ids)) == len(ids), ids
    first = legs[0]["params"]
    for before, after in itertools.pairwise(legs):
        asked = wire.answer_to(before)["result"]
        assert asked["resultType"] == "input_required"
        params = dict(after["params"])
        answers = params.pop("inputResponses", {})
        state = params.pop("requestState", None)
        assert params == first
        assert set(answers) == set(asked.get("inputRequests", {}))
        assert state == asked.get("requestState")
        assert ("requestState" in after["params"]) == ("requestState" in asked)


# --- the test server --------------------------------------------------------------------------


class FixtureServer:
    """The fixtures, plus tools that exercise the client's edges:

    * ``hang`` — signals ``started``, waits forever, signals ``cancelled`` once cancelled;
    * ``forever`` — asks for input on every round (the round cap);
    * ``state_once`` — a state-only ``input_required`` first (the retry backoff), then done.
    """

    def __init__(self, event: Callable[[], Gate]) -> None:
        self.everything = Everything()
        self.started = event()
        self.cancelled = event()
        self._never = event()

    async def handle(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        name = request.name if request.method == "tools/call" else None
        if name == "hang":
            self.started.set()
            try:
                await self._never.wait()
            finally:
                self.cancelled.set()
        if name == "forever":
            ask = m.elicit_form("Again?", {"type": "object", "properties": {}})
            return m.InputRequiredResult({"again": ask}, f"round-{request.round}")
        if name == "state_once":
            if request.request_state is None:
                return m.InputRequiredResult(None, "wait-1")
            return {"content": [{"type": "text", "text": f"waited ({request.request_state})"}]}
        return await self.everything.handle(request, ctx)


def sealed_config(**options: Any) -> m.ServerConfig:
    return server_config(request_state=m.sealing.RequestStateSecurity.ephemeral(), **options)


# --- callbacks --------------------------------------------------------------------------------


class Answers:
    """Scripted callbacks that record what they were asked: async ones for the async clients,
    blocking ones (``*_now``) for the blocking client."""

    def __init__(self) -> None:
        self.asked: list[m.InputNeeded] = []

    def elicit_now(self, need: m.InputNeeded) -> Mapping[str, Any]:
        self.asked.append(need)
        if "check_in" in need.params.get("requestedSchema", {}).get("properties", {}):
            return {"action": "accept", "content": DATES}
        return {"action": "accept", "content": {"name": "Ada"}}

    def sample_now(self, need: m.InputNeeded) -> Mapping[str, Any]:
        self.asked.append(need)
        return PITCH

    def roots_now(self, need: m.InputNeeded) -> Mapping[str, Any]:
        self.asked.append(need)
        return WORKSPACE

    async def elicit(self, need: m.InputNeeded) -> Mapping[str, Any]:
        return self.elicit_now(need)

    async def sample(self, need: m.InputNeeded) -> Mapping[str, Any]:
        return self.sample_now(need)

    async def roots(self, need: m.InputNeeded) -> Mapping[str, Any]:
        return self.roots_now(need)

    def options(self) -> ClientOptions:
        return {"elicitation": self.elicit, "sampling": self.sample, "roots": self.roots}

    def blocking_options(self) -> BlockingClientOptions:
        return {
            "elicitation": self.elicit_now,
            "sampling": self.sample_now,
            "roots": self.roots_now,
        }


class Stuck:
    """A callback that never answers: ``asked`` once called, ``stopped`` once cancelled."""

    def __init__(self, lib: Lib) -> None:
        self._lib = lib
        self.asked = lib.event()
        self.stopped = lib.event()

    async def __call__(self, need: m.InputNeeded) -> Mapping[str, Any]:
        self.asked.set()
        try:
            await self._lib.wait(self._lib.event())  # nobody sets it: fails after TIMEOUT
        finally:
            self.stopped.set()
        raise AssertionError("unreachable")


# --- sessions ---------------------------------------------------------------------------------


class Spawned:
    """A call running in the background: its outcome once it ends."""

    def __init__(self, done: Gate) -> None:
        self.done = done
        self.value: Any = None
        self.error: BaseException | None = None
        self.cancelled = False

    def cancel(self) -> None:
        raise NotImplementedError


class Session:
    """A connected client, its wire, and a way to run calls in the background."""

    def __init__(self, client: AsyncClientBase, wire: Wire) -> None:
        self.client = client
        self.wire = wire

    def spawn(self, fn: Callable[[], Awaitable[Any]]) -> Spawned:
        raise NotImplementedError

    def kill_server(self) -> None:
        """The server goes away at once (its output ends mid-call)."""
        raise NotImplementedError


class ScriptPeer:
    """The server side of a scripted session: whole messages in and out."""

    def __init__(self) -> None:
        self._buffer = b""

    async def send(self, *messages: Mapping[str, Any]) -> None:
        await self._send(b"".join(json.dumps(msg).encode() + b"\n" for msg in messages))

    async def recv(self) -> dict[str, Any] | None:
        """The client's next message, or None once its output ended."""
        while b"\n" not in self._buffer:
            data = await self._receive()
            if not data:
                assert not self._buffer
                return None
            self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        msg: dict[str, Any] = json.loads(line)
        return msg

    async def _send(self, data: bytes) -> None:
        raise NotImplementedError

    async def _receive(self) -> bytes:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError


Script = Callable[[ScriptPeer], Awaitable[None]]


class Lib:
    """One async library, and its client and server adapters."""

    name: str

    def run(self, body: Callable[[], Awaitable[None]]) -> None:
        raise NotImplementedError

    def event(self) -> Gate:
        raise NotImplementedError

    async def wait(self, gate: Gate) -> None:
        raise NotImplementedError

    async def sleep(self, seconds: float) -> None:
        raise NotImplementedError

    def clock(self) -> float:
        raise NotImplementedError

    def pair(
        self,
        handler: Any,
        server: m.ServerConfig | None = None,
        config: m.ClientConfig | None = None,
        **options: Any,
    ) -> Any:
        """Async context manager: our server adapter and a connected :class:`Session`."""
        raise NotImplementedError

    def scripted(self, script: Script, config: m.ClientConfig | None = None, **options: Any) -> Any:
        """Async context manager: a :class:`Session` whose server is ``script``."""
        raise NotImplementedError


# --- asyncio ----------------------------------------------------------------------------------


class AsyncioSpawned(Spawned):
    def __init__(self, fn: Callable[[], Awaitable[Any]]) -> None:
        super().__init__(asyncio.Event())
        self.task = asyncio.ensure_future(self._run(fn))

    async def _run(self, fn: Callable[[], Awaitable[Any]]) -> None:
        try:
            self.value = await fn()
        except asyncio.CancelledError:
            self.cancelled = True
        except Exception as exc:
            self.error = exc
        finally:
            self.done.set()

    def cancel(self) -> None:
        self.task.cancel()


class AsyncioSession(Session):
    def __init__(self, client: AsyncClientBase, wire: Wire, server: asyncio.Task[None]) -> None:
        super().__init__(client, wire)
        self._server = server

    def spawn(self, fn: Callable[[], Awaitable[Any]]) -> Spawned:
        return AsyncioSpawned(fn)

    def kill_server(self) -> None:
        self._server.cancel()


class AsyncioPeer(ScriptPeer):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        super().__init__()
        self._reader = reader
        self._writer = writer

    async def _send(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    async def _receive(self) -> bytes:
        return await asyncio.wait_for(self._reader.read(65536), TIMEOUT)

    async def close(self) -> None:
        self._writer.close()


async def _socket_pair() -> tuple[
    tuple[asyncio.StreamReader, asyncio.StreamWriter],
    tuple[asyncio.StreamReader, asyncio.StreamWriter],
]:
    one, two = socket.socketpair()
    return await asyncio.open_connection(sock=one), await asyncio.open_connection(sock=two)


class AsyncioLib(Lib):
    name = "asyncio"

    def run(self, body: Callable[[], Awaitable[None]]) -> None:
        async def main() -> None:
            await body()
            assert asyncio.all_tasks() == {asyncio.current_task()}, "a task was left behind"

        asyncio.run(main())

    def event(self) -> Gate:
        return asyncio.Event()

    async def wait(self, gate: Gate) -> None:
        await asyncio.wait_for(gate.wait(), TIMEOUT)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def clock(self) -> float:
        return asyncio.get_running_loop().time()

    @asynccontextmanager
    async def _session(
        self,
        server: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
        config: m.ClientConfig | None,
        options: Any,
    ) -> AsyncIterator[Session]:
        (s_reader, s_writer), (c_reader, c_writer) = await _socket_pair()

        async def run_server() -> None:
            try:
                await server(s_reader, s_writer)
            finally:
                s_writer.close()

        task = asyncio.create_task(run_server())
        wire = Wire()
        try:
            async with asyncio_adapter.Client.connect(
                c_reader, c_writer, config, trace=wire, **options
            ) as client:
                yield AsyncioSession(client, wire, task)
            done, _ = await asyncio.wait((task,), timeout=TIMEOUT)
            assert done, "the server did not end after the client left"
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            s_writer.close()  # the task may have been cancelled before it started
            c_writer.close()
        if not task.cancelled():
            task.result()  # the server (or the script) itself must not fail

    def pair(
        self,
        handler: Any,
        server: m.ServerConfig | None = None,
        config: m.ClientConfig | None = None,
        **options: Any,
    ) -> Any:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await asyncio_adapter.serve(handler, server, reader, writer)

        return self._session(serve, config, options)

    def scripted(self, script: Script, config: m.ClientConfig | None = None, **options: Any) -> Any:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await script(AsyncioPeer(reader, writer))

        return self._session(serve, config, options)


# --- trio -------------------------------------------------------------------------------------


class TrioSpawned(Spawned):
    def __init__(self, nursery: trio.Nursery, fn: Callable[[], Awaitable[Any]]) -> None:
        super().__init__(trio.Event())
        self.scope = trio.CancelScope()
        nursery.start_soon(self._run, fn)

    async def _run(self, fn: Callable[[], Awaitable[Any]]) -> None:
        try:
            with self.scope:
                try:
                    self.value = await fn()
                except Exception as exc:
                    self.error = exc
            self.cancelled = self.scope.cancelled_caught
        finally:
            self.done.set()

    def cancel(self) -> None:
        self.scope.cancel()


class TrioSession(Session):
    def __init__(
        self, client: AsyncClientBase, wire: Wire, nursery: trio.Nursery, server: trio.CancelScope
    ) -> None:
        super().__init__(client, wire)
        self._nursery = nursery
        self._server = server

    def spawn(self, fn: Callable[[], Awaitable[Any]]) -> Spawned:
        return TrioSpawned(self._nursery, fn)

    def kill_server(self) -> None:
        self._server.cancel()


class TrioPeer(ScriptPeer):
    def __init__(self, stream: trio.abc.Stream) -> None:
        super().__init__()
        self._stream = stream

    async def _send(self, data: bytes) -> None:
        await self._stream.send_all(data)

    async def _receive(self) -> bytes:
        with trio.fail_after(TIMEOUT):
            return bytes(await self._stream.receive_some(65536))

    async def close(self) -> None:
        await self._stream.aclose()


class TrioLib(Lib):
    name = "trio"

    def run(self, body: Callable[[], Awaitable[None]]) -> None:
        trio.run(body)

    def event(self) -> Gate:
        return trio.Event()

    async def wait(self, gate: Gate) -> None:
        with trio.fail_after(TIMEOUT):
            await gate.wait()

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)

    def clock(self) -> float:
        return trio.current_time()

    @asynccontextmanager
    async def _session(
        self,
        server: Callable[[trio.abc.Stream], Awaitable[None]],
        config: m.ClientConfig | None,
        options: Any,
    ) -> AsyncIterator[Session]:
        server_stream, client_stream = trio.testing.memory_stream_pair()
        scope = trio.CancelScope()

        async def run_server() -> None:
            with scope:
                await server(server_stream)
            await server_stream.aclose()

        wire = Wire()
        failure: Exception | None = None
        # The nursery closing is the proof that nothing was left behind.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_server)
            try:
                async with trio_adapter.Client.connect(
                    client_stream, config, trace=wire, **options
                ) as client:
                    yield TrioSession(client, wire, nursery, scope)
            except Exception as exc:  # raised bare below, not in the nursery's group
                failure = exc
                scope.cancel()
            await client_stream.aclose()
        if failure is not None:
            raise failure

    def pair(
        self,
        handler: Any,
        server: m.ServerConfig | None = None,
        config: m.ClientConfig | None = None,
        **options: Any,
    ) -> Any:
        async def serve(stream: trio.abc.Stream) -> None:
            await trio_adapter.serve(handler, server, stream)

        return self._session(serve, config, options)

    def scripted(self, script: Script, config: m.ClientConfig | None = None, **options: Any) -> Any:
        async def serve(stream: trio.abc.Stream) -> None:
            await script(TrioPeer(stream))

        return self._session(serve, config, options)


LIBS = [AsyncioLib(), TrioLib()]
