"""The harness of the stream adapter tests (stdio, asyncio, trio), server side and client side.

* The scenarios: the messages a client sends, the answers expected on the wire, the test
  server's tools, and a :class:`Transcript` that checks every message against the official
  schemas. The tools (``tools/call`` names):

  * ``greet`` - asks for a name by form elicitation (state ``"s1"``), then greets;
  * ``fast`` - answers at once;
  * ``boom`` - raises (-32603 expected);
  * ``bad`` - returns a result that is not JSON (-32603 expected);
  * ``chatty`` - sends progress and two log messages (one below the requested level), then
    answers;
  * ``nap`` - sleeps 10 ms with ``ctx.sleep`` (a real timer), then answers;
  * ``slow`` - waits for the test to open ``probe.gate``;
  * ``hang`` - signals ``probe.started`` and waits forever; ``probe.cancelled`` once cancelled.

* :class:`BlockingPeer`: a blocking test client over OS pipes, for the stdio adapter (served in
  a thread) and for the example servers (run as subprocesses).
* :data:`HARNESSES`: one async test body under asyncio or trio against the anyio adapter,
  through ``asyncio.serve`` / ``trio.serve``, over an in-memory stream (a socketpair for
  asyncio, ``trio.testing.memory_stream_pair`` for trio); the test gets a :class:`Peer`, and on
  exit the client's side is closed, ``serve`` must return and no task may be left.
* :data:`LIBS`: a client test body under asyncio or trio, the library's ``Client`` against our
  server adapter over in-memory streams or against a server the test scripts message by
  message (:class:`ScriptPeer`). Every message is recorded by a :class:`Wire` (the client's
  ``trace`` hook) and every message the client sends is checked against its era's schema; on
  exit each session checks that no task was left behind.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import select
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Literal, Protocol

import anyio
import booking
import pytest
import trio
import trio.testing
from fixtures import Everything, server_config

import mrtr_sansio as m
from helpers import (
    check_message,
    legacy_request,
    notification,
)
from mrtr_sansio import (
    UNSEALED,
    Era,
    InputRequiredResult,
    RequestReceived,
    ServerConfig,
    elicit_form,
)
from mrtr_sansio.adapters import (
    AsyncClientBase,
    BlockingClientOptions,
    ClientOptions,
    Handler,
    HandlerResult,
    RequestContext,
)
from mrtr_sansio.adapters import anyio as anyio_adapter
from mrtr_sansio.adapters import asyncio as asyncio_adapter
from mrtr_sansio.adapters import trio as trio_adapter
from mrtr_sansio.protocol import CLIENT_CAPABILITIES, LOG_LEVEL, PROTOCOL_VERSION_KEY, SERVER_INFO

# --- the scenarios: messages, expected answers, the test server, the transcript -------------------

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
SERVER = {"name": "test-server", "version": "1.0.0"}
# Unsealed: the scenarios look at the state on the wire (sealing has its own tests).
CONFIG = ServerConfig(server_info=SERVER, capabilities={"tools": {}}, request_state=UNSEALED)
FORM_CAPS: dict[str, Any] = {"elicitation": {"form": {}}}
NAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}
ASK_NAME: dict[str, Any] = {"message": "What is your name?", "requestedSchema": NAME_SCHEMA}
ADA = {"action": "accept", "content": {"name": "Ada"}}
TIMEOUT = 10.0  # seconds a test waits for the server before failing (never slept)


# --- what the client sends ----------------------------------------------------------------

request = legacy_request  # the stream tests send envelope-free requests by this name


def modern_call(
    rid: Any,
    name: str,
    *,
    caps: Mapping[str, Any] = FORM_CAPS,
    meta: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A modern ``tools/call``; ``meta`` entries join the envelope, ``extra`` the params."""
    params = {"name": name, "arguments": {}, **extra, "_meta": envelope(caps, **(meta or {}))}
    return request(rid, "tools/call", params)


def envelope(caps: Mapping[str, Any] = FORM_CAPS, **meta: Any) -> dict[str, Any]:
    """A modern request's ``_meta``: version, capabilities, and ``meta``."""
    return {PROTOCOL_VERSION_KEY: MODERN, CLIENT_CAPABILITIES: dict(caps), **meta}


def legacy_call(rid: Any, name: str) -> dict[str, Any]:
    return request(rid, "tools/call", {"name": name, "arguments": {}})


def initialize(rid: Any = 0, caps: Mapping[str, Any] = FORM_CAPS) -> dict[str, Any]:
    return request(
        rid,
        "initialize",
        {
            "protocolVersion": LEGACY,
            "capabilities": dict(caps),
            "clientInfo": {"name": "test-client", "version": "1.0.0"},
        },
    )


INITIALIZED = notification("notifications/initialized")


def cancelled(rid: Any) -> dict[str, Any]:
    return notification("notifications/cancelled", {"requestId": rid, "reason": "test"})


# --- what the server answers --------------------------------------------------------------


def result(rid: Any, body: Mapping[str, Any], era: Era = Era.MODERN) -> dict[str, Any]:
    """The response carrying ``body``, with what the connection adds on the modern wire."""
    if era is Era.LEGACY:
        return {"jsonrpc": "2.0", "id": rid, "result": dict(body)}
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "result": {**body, "resultType": "complete", "_meta": {SERVER_INFO: SERVER}},
    }


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def error(rid: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    if rid is None:
        return {"jsonrpc": "2.0", "error": err}
    return {"jsonrpc": "2.0", "id": rid, "error": err}


def ask_name(rid: Any, *, state: str | None = "s1") -> dict[str, Any]:
    """The modern ``input_required`` answer of ``greet``."""
    body: dict[str, Any] = {
        "resultType": "input_required",
        "inputRequests": {"name": {"method": "elicitation/create", "params": ASK_NAME}},
    }
    if state is not None:
        body["requestState"] = state
    body["_meta"] = {SERVER_INFO: SERVER}
    return {"jsonrpc": "2.0", "id": rid, "result": body}


def initialize_result(rid: Any = 0) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "result": {"protocolVersion": LEGACY, "capabilities": {"tools": {}}, "serverInfo": SERVER},
    }


def leg(leg_id: int) -> dict[str, Any]:
    """The legacy shim's ``elicitation/create`` request for ``greet``."""
    return request(leg_id, "elicitation/create", ASK_NAME)


def leg_cancelled(leg_id: int, reason: str) -> dict[str, Any]:
    return notification("notifications/cancelled", {"requestId": leg_id, "reason": reason})


INTERNAL = "Internal error"
TIMED_OUT = "Timed out waiting for the client's answer"


def chatty_call(rid: Any) -> dict[str, Any]:
    """``chatty`` asking for progress and for log messages from ``warning`` up."""
    return modern_call(rid, "chatty", meta={"progressToken": "p1", LOG_LEVEL: "warning"})


def chatty_transcript(rid: Any) -> list[dict[str, Any]]:
    """What ``chatty_call`` gets: progress, the warning (not the info), progress, the result."""
    return [
        notification(
            "notifications/progress",
            {"progressToken": "p1", "progress": 1, "total": 2, "message": "half"},
        ),
        notification(
            "notifications/message", {"level": "warning", "data": "shown", "logger": "test"}
        ),
        notification("notifications/progress", {"progressToken": "p1", "progress": 2}),
        result(rid, text("chatted")),
    ]


# --- the test server's tools ----------------------------------------------------------------


class Chat(Protocol):
    """What ``chatty`` uses of a request context (async and blocking alike)."""

    def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> bool: ...

    def log(self, level: str, data: Any, logger: str | None = None) -> None: ...


def answer_plain(request: RequestReceived, ctx: Chat) -> HandlerResult | None:
    """The tools that need no waiting; None for the others."""
    if request.method == "tools/list":  # wrongly: input_required is not allowed here
        return InputRequiredResult(None, "not allowed")
    if request.method != "tools/call":
        return request.method_not_found()
    name = request.name
    if name == "greet":
        content = request.input_responses.accepted_content("name")
        if content is None:
            return InputRequiredResult(
                {"name": elicit_form(ASK_NAME["message"], NAME_SCHEMA)}, "s1"
            )
        assert request.request_state == "s1"
        return text(f"Hello, {content['name']}!")
    if name == "fast":
        return text("fast")
    if name == "boom":
        raise RuntimeError("boom")
    if name == "bad":
        return {"content": [{"type": "text", "text": object()}]}
    if name == "chatty":
        ctx.progress(1, 2, "half")
        ctx.log("info", "hidden")
        ctx.log("warning", "shown", "test")
        ctx.progress(2)
        return text("chatted")
    return None


# --- the client's transcript ----------------------------------------------------------------


class Transcript:
    """Encodes what a test client sends and decodes what it gets, validating each message
    against the schema of the era in use (legacy once ``initialize`` was sent)."""

    def __init__(self) -> None:
        self.era = Era.MODERN
        self._methods: dict[Any, str] = {}
        self._buffer = b""

    def encode(self, msg: Mapping[str, Any]) -> bytes:
        if "method" in msg and "id" in msg:
            self._methods[msg["id"]] = msg["method"]
            if msg["method"] == "initialize":
                self.era = Era.LEGACY
        return json.dumps(msg).encode() + b"\n"

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def next_line(self) -> dict[str, Any] | None:
        """The next complete message received, validated; None if none is complete yet."""
        line, sep, rest = self._buffer.partition(b"\n")
        if not sep:
            return None
        self._buffer = rest
        msg: dict[str, Any] = json.loads(line)
        method = None if "method" in msg else self._methods.get(msg.get("id"))
        check_message(msg, self.era, method=method)
        return msg

    @property
    def leftover(self) -> bytes:
        return self._buffer


# --- a blocking client over OS pipes --------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class BlockingPeer:
    """Writes requests to ``write_fd`` and reads lines from ``read_fd``, never waiting longer
    than :data:`TIMEOUT` for an answer."""

    def __init__(self, write_fd: int, read_fd: int) -> None:
        self.transcript = Transcript()
        self._write_fd: int | None = write_fd
        self._read_fd = read_fd

    def send(self, *messages: dict[str, Any]) -> None:
        self.send_raw(b"".join(self.transcript.encode(m) for m in messages))

    def send_raw(self, data: bytes) -> None:
        assert self._write_fd is not None
        view = memoryview(data)
        while view:
            view = view[os.write(self._write_fd, view) :]

    def _read(self) -> bytes:
        ready = select.select([self._read_fd], [], [], TIMEOUT)[0]
        assert ready, "the server did not answer in time"
        return os.read(self._read_fd, 65536)

    def recv(self) -> dict[str, Any]:
        while (msg := self.transcript.next_line()) is None:
            data = self._read()
            assert data, "the server closed its output"
            self.transcript.feed(data)
        return msg

    def recv_eof(self) -> None:
        """The server closed its output, with nothing more to say."""
        data = self._read()
        assert data == b"", f"unexpected output: {data!r}"
        assert not self.transcript.leftover

    def close_input(self) -> None:
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None

    def close(self) -> None:
        self.close_input()
        os.close(self._read_fd)


@contextmanager
def example_server(adapter: str) -> Iterator[tuple[BlockingPeer, subprocess.Popen[bytes]]]:
    """Run ``examples/<adapter>/echo_server.py`` on pipes; on exit close its stdin and check
    that it ends cleanly on its own."""
    script = EXAMPLES / adapter / "echo_server.py"
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert proc.stderr is not None
    peer = BlockingPeer(proc.stdin.fileno(), proc.stdout.fileno())
    try:
        yield peer, proc
        proc.stdin.close()  # end of input: the server must exit by itself
        peer.recv_eof()
        assert proc.wait(TIMEOUT) == 0, proc.stderr.read().decode()
        stderr = proc.stderr.read().decode()
        assert "Traceback" not in stderr, stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()


# --- the server side: asyncio and trio harnesses around serve -------------------------------------


class Gate(Protocol):
    def set(self) -> None: ...
    def is_set(self) -> bool: ...
    async def wait(self) -> Any: ...


class Peer:
    """A test client: ``send``/``recv`` whole messages (checked by its transcript)."""

    def __init__(self) -> None:
        self.transcript = Transcript()

    async def send(self, *messages: dict[str, Any]) -> None:
        await self.send_raw(b"".join(self.transcript.encode(m) for m in messages))

    async def recv(self) -> dict[str, Any]:
        while (msg := self.transcript.next_line()) is None:
            data = await self._receive()
            assert data, "the server closed its output"
            self.transcript.feed(data)
        return msg

    async def send_raw(self, data: bytes) -> None:
        raise NotImplementedError

    async def _receive(self) -> bytes:
        """The next bytes from the server (b"" at its end), failing after TIMEOUT."""
        raise NotImplementedError

    async def close_input(self) -> None:
        raise NotImplementedError

    async def vanish(self) -> None:
        """Close the connection at once, unread input and all."""
        raise NotImplementedError

    async def wait_closed(self) -> None:
        raise NotImplementedError


async def open_legacy(peer: Peer) -> None:
    """Start a legacy session: ``initialize`` (id 0), answered, then ``initialized``."""
    await peer.send(initialize(0))
    assert await peer.recv() == initialize_result(0)
    await peer.send(INITIALIZED)


class Probe:
    """What the test handler saw, and the gates a test opens or watches."""

    def __init__(self, event: Callable[[], Gate]) -> None:
        self.gate = event()  # "slow" waits for it
        self.never = event()  # "hang" waits for it (nobody sets it)
        self.started = event()  # "hang" is running
        self.cancelled = event()  # "hang" was cancelled
        self.calls: list[RequestReceived] = []

    def handler(self) -> Handler:
        async def handler(request: RequestReceived, ctx: RequestContext) -> HandlerResult:
            self.calls.append(request)
            plain = answer_plain(request, ctx)
            if plain is not None:
                return plain
            if request.name == "slow":
                await self.gate.wait()
                return text("slow")
            if request.name == "hang":
                self.started.set()
                try:
                    await self.never.wait()
                finally:
                    self.cancelled.set()
            if request.name == "print":
                print("stray output")  # must not reach the protocol stream
                return text("printed")
            if request.name == "nap":
                assert request.request_id in ctx.connection.in_flight
                await ctx.sleep(0.01)
                return text("rested")
            return request.unknown()

        return handler


class Harness:
    """Runs test bodies under one async library against its adapter."""

    name: str

    def event(self) -> Gate:
        raise NotImplementedError

    def run(self, body: Callable[[], Awaitable[None]]) -> None:
        raise NotImplementedError

    async def wait(self, gate: Gate) -> None:
        raise NotImplementedError

    def run_stdio(self, handler: Handler, config: ServerConfig | None = CONFIG) -> None:
        """Run the adapter's ``serve_stdio`` on this process's stdin/stdout until stdin ends."""
        raise NotImplementedError

    def session(self, handler: Handler, config: ServerConfig | None = CONFIG) -> Any:
        """An async context manager: ``serve`` running, and a :class:`Peer` talking to it."""
        raise NotImplementedError

    def serve(
        self,
        probe: Probe,
        body: Callable[[Peer], Awaitable[None]],
        config: ServerConfig | None = CONFIG,
    ) -> None:
        """Run ``body`` with a peer of a server whose handler is ``probe``'s."""

        async def main() -> None:
            async with self.session(probe.handler(), config) as peer:
                await body(peer)

        self.run(main)


# --- asyncio --------------------------------------------------------------------------------


class AsyncioPeer(Peer):
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, server: asyncio.Task[None]
    ) -> None:
        super().__init__()
        self._reader = reader
        self._writer = writer
        self.server = server

    async def send_raw(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    async def _receive(self) -> bytes:
        return await asyncio.wait_for(self._reader.read(65536), TIMEOUT)

    async def close_input(self) -> None:
        if self._writer.can_write_eof() and not self._writer.is_closing():
            self._writer.write_eof()

    async def vanish(self) -> None:
        self._writer.transport.abort()

    async def wait_closed(self) -> None:
        await asyncio.wait_for(asyncio.shield(self.server), TIMEOUT)


class AsyncioHarness(Harness):
    name = "asyncio"

    def event(self) -> Gate:
        return asyncio.Event()

    def run(self, body: Callable[[], Awaitable[None]]) -> None:
        async def main() -> None:
            await body()

        asyncio.run(main())

    def run_stdio(self, handler: Handler, config: ServerConfig | None = CONFIG) -> None:
        anyio.run(anyio_adapter.serve_stdio, handler, config, backend="asyncio")

    async def wait(self, gate: Gate) -> None:
        await asyncio.wait_for(gate.wait(), TIMEOUT)

    @asynccontextmanager
    async def session(
        self, handler: Handler, config: ServerConfig | None = CONFIG
    ) -> AsyncIterator[Peer]:
        server_sock, client_sock = socket.socketpair()
        s_reader, s_writer = await asyncio.open_connection(sock=server_sock)
        c_reader, c_writer = await asyncio.open_connection(sock=client_sock)
        server = asyncio.create_task(asyncio_adapter.serve(handler, config, s_reader, s_writer))
        peer = AsyncioPeer(c_reader, c_writer, server)
        try:
            yield peer
            if not server.done():
                await peer.close_input()
                await peer.wait_closed()
            assert not peer.transcript.leftover
        finally:
            server.cancel()
            await asyncio.gather(server, return_exceptions=True)
            s_writer.close()
            c_writer.close()
        if not server.cancelled():
            server.result()  # serve() itself must not fail
        assert asyncio.all_tasks() == {asyncio.current_task()}, "a task was left behind"


# --- trio -----------------------------------------------------------------------------------


class TrioPeer(Peer):
    def __init__(self, stream: trio.abc.Stream, done: trio.Event) -> None:
        super().__init__()
        self._stream = stream
        self._done = done
        self._closed = False

    async def send_raw(self, data: bytes) -> None:
        await self._stream.send_all(data)

    async def _receive(self) -> bytes:
        with trio.fail_after(TIMEOUT):
            return bytes(await self._stream.receive_some(65536))

    async def close_input(self) -> None:
        if not self._closed:
            self._closed = True
            assert isinstance(self._stream, trio.StapledStream)
            await self._stream.send_stream.aclose()

    async def vanish(self) -> None:
        self._closed = True
        await self._stream.aclose()

    async def wait_closed(self) -> None:
        with trio.fail_after(TIMEOUT):
            await self._done.wait()


class TrioHarness(Harness):
    name = "trio"

    def event(self) -> Gate:
        return trio.Event()

    def run(self, body: Callable[[], Awaitable[None]]) -> None:
        async def main() -> None:
            await body()

        trio.run(main)

    def run_stdio(self, handler: Handler, config: ServerConfig | None = CONFIG) -> None:
        anyio.run(anyio_adapter.serve_stdio, handler, config, backend="trio")

    async def wait(self, gate: Gate) -> None:
        with trio.fail_after(TIMEOUT):
            await gate.wait()

    @asynccontextmanager
    async def session(
        self, handler: Handler, config: ServerConfig | None = CONFIG
    ) -> AsyncIterator[Peer]:
        server_stream, client_stream = trio.testing.memory_stream_pair()
        done = trio.Event()

        async def run_server() -> None:
            await trio_adapter.serve(handler, config, server_stream)
            done.set()

        # The nursery exiting is the proof that serve() left no task behind.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_server)
            peer = TrioPeer(client_stream, done)
            yield peer
            await peer.close_input()
            await peer.wait_closed()
            assert not peer.transcript.leftover


HARNESSES = [AsyncioHarness(), TrioHarness()]


# --- the client side: our Client under asyncio or trio, real or scripted server -------------------

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


class AsyncioScriptPeer(ScriptPeer):
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
            await script(AsyncioScriptPeer(reader, writer))

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


class TrioScriptPeer(ScriptPeer):
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
            await script(TrioScriptPeer(stream))

        return self._session(serve, config, options)


LIBS = [AsyncioLib(), TrioLib()]
