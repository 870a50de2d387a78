"""The same MRTR exchange through mrtr_sansio and through the official MCP Python SDK.

One modern two-leg exchange: ``tools/call`` -> ``input_required`` (one form elicitation and a
``requestState``) -> the retry with ``inputResponses`` and the state -> the complete result.
Every path starts from the request bytes and ends with the response bytes, and its handler
builds its answers on every call with its own library's types (ours: ``InputRequiredResult``
and a result mapping; the SDK's: ``InputRequiredResult`` and ``CallToolResult`` models). Both
sides produce the same two responses; the script checks that before measuring.

Paths (``mcp`` pinned in the ``bench`` dependency group; nothing is configured away from its
defaults, logging is disabled for both sides):

* **engine**, ours: one long-lived ``ServerConnection`` (stdlib codec), as on a stdio stream:
  ``receive_data(line)`` -> ``next_event()`` -> handler -> ``respond()`` -> ``data_to_send()``.
* **engine-orjson**, ours: the same with ``OrjsonCodec``.
* **engine**, SDK: two in-process paths of ``mcp`` 2.x, both measured; the faster one (its
  leanest) is the SDK's figure:

  - ``sdk-stream``: the low-level ``Server.run()`` loop (``serve_dual_era_loop``, which serves
    2026-07-28 requests through its ``JSONRPCDispatcher`` and ``serve_one``) over the SDK's own
    in-memory context streams. Bytes in and out as its stdio transport does them:
    ``jsonrpc_message_adapter.validate_json(line)`` and ``message.model_dump_json(...)``.
  - ``sdk-direct``: ``create_direct_dispatcher_pair()`` with the server side running
    ``modern_on_request(server, ...)`` (the SDK's in-process embedding of the modern
    per-request-envelope path: a fresh ``Connection`` per request and ``serve_one``, with no
    JSON-RPC framing or streams). Bytes in and out with the same two calls. It skips the
    SDK's envelope ladder (``classify_inbound_request``), which its stream and HTTP entries
    run and ours always runs: the leanest path there is, and the usual SDK figure.

  Either way the request reaches the ``Server``'s shipped middleware (OpenTelemetry, a no-op
  without an exporter), per-version params validation, the ``on_call_tool`` handler and the
  result sieve and ``serverInfo`` stamp.
* **asgi**: our ``McpHttpApp`` (modern-only, ``legacy=False``) against the SDK's
  ``Server.streamable_http_app(stateless_http=True, json_response=True)`` Starlette app (its
  2026-07-28 single-exchange entry, its leanest response mode), each driven as an ASGI
  callable in process: one ``http`` scope per POST with the same headers (``Host``,
  ``Content-Type``, ``Accept``, ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``).
* **sealed**: the engine exchange with AES-256-GCM sealed state on both sides (ours:
  ``RequestStateSecurity``; the SDK: its ``RequestStateBoundary`` middleware, as ``MCPServer``
  installs it), the retry carrying the token the first leg returned.
* **client**: the same flow from the client's side: call ``tools/call``, get
  ``input_required``, answer the elicitation, retry, get the result. Ours: one long-lived
  ``ClientConnection`` with the stdlib codec (``call`` -> ``data_to_send`` ->
  ``receive_data`` -> ``InputNeeded`` -> ``fulfil`` -> ... -> ``CallCompleted``). The SDK's:
  ``mcp.Client(mode="2026-07-28", elicitation_callback=...)`` and ``call_tool``, over
  in-memory streams with its stdio transport's byte conversions. Both talk to the same canned
  in-memory server, which answers each request line with our server's bytes for that leg under
  the request's id (and the SDK client's one ``tools/list``, sent on its first call to learn
  output schemas), so the figure is the client's own cost.
* **memory**: what one long-lived server still holds after N exchanges (ours: the engine
  path with the stdlib codec; the SDK: ``sdk-stream``, its long-lived equivalent), each in a
  fresh interpreter, from a baseline taken after 1,000 warm-up exchanges and ``gc.collect()``:
  the growth of the resident set size (``/proc/self/statm``) and of the live pymalloc blocks
  (``sys.getallocatedblocks()``). Neither slows the exchanges down, unlike ``tracemalloc``.

Timing: every path runs in one asyncio event loop; the paths are sampled in alternation (each
sample is a calibrated number of back-to-back exchanges) and the medians compared, so that
drifts hit all of them alike. Time is this process's CPU time (``time.process_time``), so that
other processes on a busy machine do not count; nothing here waits on IO. A busy machine still
slows the SDK's larger working set more than ours (shared caches): quote figures from a quiet
one.

    python bench/compare_sdk.py [--quick] [--samples N] [--seconds S] [--memory-exchanges N]

``--quick`` (for CI): 5 samples of about 10 ms per path and 1,000 memory exchanges, a few
seconds of CPU; the default is 31 samples of about 100 ms and 100,000 exchanges.

Last line: ``ratio sdk/ours: engine=<x.x> engine-orjson=<y.y> asgi=<z.z> client=<w.w>``.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from importlib.metadata import version
from typing import Any

import anyio
import mcp_types as types
from mcp.client.client import Client
from mcp.client.session import ClientRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.runner import modern_on_request
from mcp.shared._context_streams import create_context_streams
from mcp.shared.direct_dispatcher import create_direct_dispatcher_pair
from mcp.shared.message import SessionMessage
from server_exchange import ARGUMENTS, REQUEST_1, REQUEST_2, SCHEMA, SERVER_INFO, STATE

import mrtr_sansio as m
from mrtr_sansio.adapters.asgi import McpHttpApp

PROMPT = "When do you arrive?"
CLIENT_INFO = {"name": "bench-client", "version": "1.0.0"}
BOOKED = "Booked Paris for 2026-12-24."
AUDIENCE = "bench-server"
KEY = bytes(range(32))
TTL = 24 * 3600.0
HEADERS = [
    (b"host", b"localhost:8000"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
    (b"mcp-protocol-version", b"2026-07-28"),
    (b"mcp-method", b"tools/call"),
    (b"mcp-name", b"book"),
]

Leg = Callable[[bytes], Any]  # request bytes -> response bytes (or an awaitable of them)


class Path:
    """One way to run the exchange: a leg function (request bytes -> response bytes) called
    for both requests, or (clients) ``run``, which performs the whole exchange itself."""

    def __init__(
        self,
        name: str,
        leg: Leg | None = None,
        *,
        is_async: bool,
        run: Callable[[], Any] | None = None,
    ) -> None:
        self.name = name
        self.leg = leg
        self.run = run
        self.is_async = is_async
        self.lines = (_body(REQUEST_1), _body(REQUEST_2))

    async def answer(self, body: bytes) -> bytes:
        assert self.leg is not None
        out = self.leg(body)
        return (await out) if self.is_async else out  # type: ignore[no-any-return]

    async def exchange(self) -> Any:
        """One exchange, off the clock (setup and checks)."""
        if self.run is not None:
            out = self.run()
            return (await out) if self.is_async else out
        return await self.answer(self.lines[0]), await self.answer(self.lines[1])

    async def seal_second_leg(self) -> None:
        """Run the first leg and retry with the token it got back (sealed state)."""
        token = json.loads(await self.answer(self.lines[0]))["result"]["requestState"]
        self.lines = (self.lines[0], _body(_with_state(REQUEST_2, token)))


def _body(msg: dict[str, Any]) -> bytes:
    return json.dumps(msg, separators=(",", ":")).encode() + b"\n"


def _with_state(request: dict[str, Any], token: str) -> dict[str, Any]:
    return {**request, "params": {**request["params"], "requestState": token}}


# --- ours ------------------------------------------------------------------------------------


def ours_answer(event: m.RequestReceived) -> m.InputRequiredResult | dict[str, Any]:
    """Our handler: book once the arrival date is known, else ask for it."""
    content = event.input_responses.accepted_content("dates")
    if content is None:
        form = m.elicit_form(PROMPT, SCHEMA, mode="form")
        return m.InputRequiredResult({"dates": form}, STATE)
    assert content["checkin"] == "2026-12-24"
    return {"content": [{"type": "text", "text": BOOKED}], "isError": False}


def ours_config(codec: m.config.JsonCodec, sealed: bool = False) -> m.ServerConfig:
    if not sealed:
        return m.ServerConfig(server_info=SERVER_INFO, codec=codec, request_state=m.UNSEALED)
    security = m.sealing.RequestStateSecurity(
        keys=[KEY], codec="aes-256-gcm", audience=AUDIENCE, ttl=TTL
    )
    return m.ServerConfig(server_info=SERVER_INFO, codec=codec, request_state=security)


def ours_engine(name: str, codec: m.config.JsonCodec, sealed: bool = False) -> Path:
    """A long-lived ServerConnection on a stream (a stdio server, say)."""
    conn = m.ServerConnection(ours_config(codec, sealed))
    receive, next_event, respond, send = (
        conn.receive_data,
        conn.next_event,
        conn.respond,
        conn.data_to_send,
    )

    def leg(line: bytes) -> bytes:
        receive(line)
        event: Any = next_event()
        respond(event.request_id, ours_answer(event))
        return send()

    return Path(name, leg, is_async=False)


async def ours_handler(request: m.RequestReceived, ctx: Any) -> Any:
    return ours_answer(request)


# --- the SDK ---------------------------------------------------------------------------------


async def sdk_call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
    """The SDK's handler: the same two answers, with its types."""
    answer: Any = (params.input_responses or {}).get("dates")
    if answer is None or answer.action != "accept":
        form = types.ElicitRequestFormParams(message=PROMPT, requested_schema=SCHEMA)
        return types.InputRequiredResult(
            input_requests={"dates": types.ElicitRequest(params=form)}, request_state=STATE
        )
    assert answer.content["checkin"] == "2026-12-24"
    return types.CallToolResult(content=[types.TextContent(type="text", text=BOOKED)])


def sdk_server(sealed: bool = False) -> Server[Any]:
    server: Server[Any] = Server(
        SERVER_INFO["name"], version=SERVER_INFO["version"], on_call_tool=sdk_call_tool
    )
    if sealed:
        from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

        security = RequestStateSecurity(keys=[KEY], ttl=TTL)
        server.middleware.append(RequestStateBoundary(security, default_audience=AUDIENCE))
    return server


_parse = types.jsonrpc_message_adapter.validate_json


def _dump(message: Any) -> bytes:
    text: str = message.model_dump_json(by_alias=True, exclude_unset=True)
    return text.encode() + b"\n"


def sdk_stream(name: str, server: Server[Any], tg: Any) -> Path:
    """``Server.run()`` over the SDK's in-memory streams: its stdio transport minus the IO."""
    to_server, server_reads = create_context_streams[SessionMessage | Exception](0)
    server_writes, from_server = create_context_streams[SessionMessage](0)
    tg.start_soon(server.run, server_reads, server_writes, server.create_initialization_options())

    async def leg(line: bytes) -> bytes:
        await to_server.send(SessionMessage(_parse(line, by_name=False)))
        return _dump((await from_server.receive()).message)

    return Path(name, leg, is_async=True)


async def sdk_direct(name: str, server: Server[Any], tg: Any) -> Path:
    """A DirectDispatcher pair whose server side runs ``modern_on_request``."""
    client, peer = create_direct_dispatcher_pair(can_send_request=False)

    async def ignore(*_: Any) -> Any:
        return None

    await tg.start(peer.run, modern_on_request(server, {}), ignore)
    await tg.start(client.run, ignore, ignore)
    call = client.send_raw_request

    async def leg(line: bytes) -> bytes:
        request: Any = _parse(line, by_name=False)
        result = await call(request.method, request.params, {"request_id": request.id})
        return _dump(types.JSONRPCResponse(jsonrpc="2.0", id=request.id, result=result))

    return Path(name, leg, is_async=True)


# --- ASGI ------------------------------------------------------------------------------------


def _scope() -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": HEADERS,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


def asgi_path(name: str, app: Any, connected: anyio.Event) -> Path:
    """POSTs to an ASGI app called directly; the client stays connected until it has the
    whole response (``connected`` is never set)."""

    async def leg(body: bytes) -> bytes:
        pending = [{"type": "http.request", "body": body, "more_body": False}]
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            if pending:
                return pending.pop()
            await connected.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                assert message["status"] == 200, message
            else:
                chunks.append(message.get("body", b""))

        await app(_scope(), receive, send)
        return b"".join(chunks)

    return Path(name, leg, is_async=True)


# --- clients ---------------------------------------------------------------------------------

_ID = re.compile(rb'"id":(\d+)')
ANSWER = {"action": "accept", "content": {"checkin": "2026-12-24"}}
TOOLS = {
    "tools": [{"name": "book", "inputSchema": {"type": "object"}}],
    "resultType": "complete",
    "ttlMs": 0,
    "cacheScope": "private",
}


class CannedServer:
    """The in-memory server both clients talk to: it answers each request line with the bytes
    our server sent for that leg (``input_required``, then the result; ``tools/list`` for the
    SDK client's output-schema lookup), under the request's own id. Its cost is tiny and the
    same for both clients, so what is measured is the client."""

    def __init__(self, responses: tuple[bytes, bytes]) -> None:
        first, second = (json.dumps(json.loads(r)["result"]).encode() for r in responses)
        self.results = (first, second, json.dumps(TOOLS).encode())

    def __call__(self, line: bytes) -> bytes:
        match = _ID.search(line)
        assert match is not None
        if b'"inputResponses"' in line:
            result = self.results[1]
        elif b'"tools/list"' in line:
            result = self.results[2]
        else:
            result = self.results[0]
        return b'{"jsonrpc":"2.0","id":' + match[1] + b',"result":' + result + b"}\n"


def ours_client(name: str, server: CannedServer) -> Path:
    """A long-lived ClientConnection on a stream: call, answer the elicitation, get the result."""
    conn = m.ClientConnection(
        m.ClientConfig(client_info=CLIENT_INFO, capabilities={"elicitation": {"form": {}}})
    )
    call, receive, next_event, fulfil, send = (
        conn.call,
        conn.receive_data,
        conn.next_event,
        conn.fulfil,
        conn.data_to_send,
    )

    def run() -> Any:
        call("tools/call", {"name": "book", "arguments": ARGUMENTS})
        receive(server(send()))
        needed: Any = next_event()
        assert needed.params["message"] == PROMPT
        fulfil(needed, {"action": "accept", "content": {"checkin": "2026-12-24"}})
        receive(server(send()))
        done: Any = next_event()
        assert done.result["content"][0]["text"] == BOOKED
        return done.result

    return Path(name, run=run, is_async=False)


class _MemoryTransport:
    """A client transport over in-memory streams (what ``stdio_client`` yields, minus IO)."""

    def __init__(self, streams: tuple[Any, Any]) -> None:
        self.streams = streams

    async def __aenter__(self) -> tuple[Any, Any]:
        return self.streams

    async def __aexit__(self, *_: object) -> None:
        for stream in self.streams:
            await stream.aclose()


async def sdk_elicit(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult | types.ErrorData:
    """The SDK client's elicitation callback: the same answer as ours."""
    assert params.message == PROMPT
    return types.ElicitResult(action="accept", content={"checkin": "2026-12-24"})


async def sdk_client(name: str, server: CannedServer, tg: Any, stack: AsyncExitStack) -> Path:
    """``mcp.Client`` pinned to 2026-07-28 over in-memory streams, its messages turned into
    bytes and back exactly as its stdio transport does (``model_dump_json`` and
    ``jsonrpc_message_adapter.validate_json``)."""
    to_client, client_reads = create_context_streams[SessionMessage | Exception](0)
    client_writes, from_client = create_context_streams[SessionMessage](0)

    async def serve() -> None:
        async for message in from_client:
            line = message.message.model_dump_json(by_alias=True, exclude_unset=True).encode()
            await to_client.send(SessionMessage(_parse(server(line), by_name=False)))

    tg.start_soon(serve)
    client = Client(
        _MemoryTransport((client_reads, client_writes)),
        mode="2026-07-28",
        client_info=types.Implementation(name=CLIENT_INFO["name"], version=CLIENT_INFO["version"]),
        elicitation_callback=sdk_elicit,
    )
    await stack.enter_async_context(client)
    call_tool = client.call_tool

    async def run() -> Any:
        result = await call_tool("book", ARGUMENTS)
        assert result.content[0].text == BOOKED  # type: ignore[union-attr]
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)

    return Path(name, run=run, is_async=True)


# --- measuring -------------------------------------------------------------------------------


async def _timed(path: Path, loops: int) -> float:
    """Seconds for ``loops`` back-to-back exchanges."""
    run = path.run
    if run is not None:
        start = time.process_time()
        if path.is_async:
            for _ in range(loops):
                await run()
        else:
            for _ in range(loops):
                run()
        return time.process_time() - start
    leg = path.leg
    assert leg is not None
    line1, line2 = path.lines
    if path.is_async:
        start = time.process_time()
        for _ in range(loops):
            await leg(line1)
            await leg(line2)
    else:
        start = time.process_time()
        for _ in range(loops):
            leg(line1)
            leg(line2)
    return time.process_time() - start


async def _calibrate(path: Path, seconds: float) -> int:
    """How many exchanges take about ``seconds``."""
    loops = 1
    while True:
        elapsed = await _timed(path, loops)
        if elapsed >= seconds / 4:
            return max(1, round(loops * seconds / elapsed))
        loops *= 4


async def measure(paths: list[Path], samples: int, seconds: float) -> dict[str, float]:
    """Median microseconds per exchange of each path, sampled in alternation."""
    loops = {path.name: await _calibrate(path, seconds) for path in paths}
    times: dict[str, list[float]] = {path.name: [] for path in paths}
    for _ in range(samples):
        for path in paths:
            n = loops[path.name]
            times[path.name].append(await _timed(path, n) / n * 1e6)
    return {name: statistics.median(ts) for name, ts in times.items()}


def _same(ours: tuple[bytes, bytes], sdk: tuple[bytes, bytes], *, sealed: bool = False) -> bool:
    """Whether two exchanges produced the same messages (sealed tokens aside)."""
    a, b = [json.loads(x) for x in ours], [json.loads(x) for x in sdk]
    if sealed:
        for first in (a[0], b[0]):
            first["result"].pop("requestState")
    return a == b


# --- memory (a fresh interpreter per side) -------------------------------------------------


def _rss() -> int:
    """Resident set size in bytes (Linux ``/proc``; elsewhere the peak, from ``getrusage``)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # pragma: no cover - not Linux
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


async def _memory_child(side: str, exchanges: int) -> None:
    """Print what one long-lived server still holds after ``exchanges``: RSS bytes and
    pymalloc blocks, measured from a baseline taken after 1,000 warm-up exchanges."""
    logging.disable(logging.CRITICAL)
    async with anyio.create_task_group() as tg:
        path = (
            ours_engine(side, m.config.StdlibJsonCodec())
            if side == "ours"
            else sdk_stream(side, sdk_server(), tg)
        )
        await _timed(path, 1000)
        gc.collect()
        rss, blocks = _rss(), sys.getallocatedblocks()
        await _timed(path, exchanges)
        gc.collect()
        print(_rss() - rss, sys.getallocatedblocks() - blocks)
        tg.cancel_scope.cancel()


def _mib(n: float) -> str:
    return f"{n / 2**20:+.2f} MiB"


def retained(exchanges: int) -> dict[str, tuple[int, int]]:
    """(RSS bytes, blocks) retained by ours and by the SDK, each in its own interpreter."""
    children = {
        side: subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--memory-child",
                side,
                "--memory-exchanges",
                str(exchanges),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for side in ("ours", "sdk-stream")
    }
    out = {}
    for side, child in children.items():
        stdout, _ = child.communicate()
        if child.returncode:
            raise SystemExit(f"memory measurement of {side} failed")
        rss, blocks = stdout.split()[-2:]
        out[side] = (int(rss), int(blocks))
    return out


# --- main ------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> None:
    logging.disable(logging.CRITICAL)

    print(
        f"Python {sys.version.split()[0]}, mcp {version('mcp')}, pydantic {version('pydantic')}, "
        f"mrtr-sansio {version('mrtr-sansio')}"
    )
    connected = anyio.Event()
    async with anyio.create_task_group() as tg, AsyncExitStack() as stack:
        engine = [
            ours_engine("ours-stdlib", m.config.StdlibJsonCodec()),
            ours_engine("ours-orjson", m.config.OrjsonCodec()),
            sdk_stream("sdk-stream", sdk_server(), tg),
            await sdk_direct("sdk-direct", sdk_server(), tg),
        ]
        sdk_http = sdk_server()
        sdk_app = sdk_http.streamable_http_app(stateless_http=True, json_response=True)
        ours_app = McpHttpApp(
            ours_handler,
            m.ServerConfig(server_info=SERVER_INFO, request_state=m.UNSEALED),
            legacy=False,
        )
        asgi = [
            asgi_path("asgi-ours", ours_app, connected),
            asgi_path("asgi-sdk", sdk_app, connected),
        ]
        seal = [
            ours_engine("sealed-ours", m.config.StdlibJsonCodec(), sealed=True),
            sdk_stream("sealed-sdk-stream", sdk_server(sealed=True), tg),
            await sdk_direct("sealed-sdk-direct", sdk_server(sealed=True), tg),
        ]
        await stack.enter_async_context(sdk_http.session_manager.run())
        for path in seal:
            await path.seal_second_leg()
        first = {path.name: await path.exchange() for path in engine + asgi + seal}
        ours = first["ours-stdlib"]
        print(f"responses: {len(ours[0])} + {len(ours[1])} bytes")
        for name, out in first.items():
            if not _same(ours, out, sealed=name.startswith("sealed")):
                raise SystemExit(f"{name} answered differently:\n{out!r}\nours:\n{ours!r}")
        server = CannedServer(ours)
        clients = [
            ours_client("client-ours", server),
            await sdk_client("client-sdk", server, tg, stack),
        ]
        ours_result, sdk_result = [await path.exchange() for path in clients]
        if ours_result["content"] != sdk_result["content"]:
            raise SystemExit(
                f"the clients ended differently:\n{sdk_result!r}\nours:\n{ours_result!r}"
            )
        print("every path sends the same two responses (sealed tokens aside); both clients agree")
        result = await measure(engine + asgi + seal + clients, args.samples, args.seconds)
        tg.cancel_scope.cancel()

    print(f"\n{'path':20s} {'median':>10s}  (interleaved samples: {args.samples})")
    for name, us in result.items():
        print(f"{name:20s} {us:8.1f} us/exchange")
    sdk_engine = min(result["sdk-stream"], result["sdk-direct"])
    ratios = {
        "engine": sdk_engine / result["ours-stdlib"],
        "engine-orjson": sdk_engine / result["ours-orjson"],
        "asgi": result["asgi-sdk"] / result["asgi-ours"],
        "client": result["client-sdk"] / result["client-ours"],
    }
    sdk_sealed = min(result["sealed-sdk-stream"], result["sealed-sdk-direct"])
    print(f"sealed (AES-256-GCM): sdk/ours = {sdk_sealed / result['sealed-ours']:.1f}")

    n = args.memory_exchanges
    kept = retained(n)
    print(
        f"memory retained after {n:,} exchanges on one long-lived server (RSS; live blocks): "
        + ", ".join(f"{side} {_mib(rss)}; {blocks:+d}" for side, (rss, blocks) in kept.items())
    )
    targets = {"engine": 10, "engine-orjson": 25, "asgi": 5, "client": 10}
    missed = [f"{k}<{t}x" for k, t in targets.items() if ratios[k] < t]
    if kept["ours"][0] > 2**20:
        missed.append("memory>1MiB")
    print("targets: " + ("all met" if not missed else "MISSED " + ", ".join(missed)))
    print("ratio sdk/ours: " + " ".join(f"{k}={v:.1f}" for k, v in ratios.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds, for CI")
    parser.add_argument("--samples", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None, help="per path per sample")
    parser.add_argument("--memory-exchanges", type=int, default=None)
    parser.add_argument("--memory-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    quick = args.quick
    if args.samples is None:
        args.samples = 5 if quick else 31
    if args.seconds is None:
        args.seconds = 0.01 if quick else 0.1
    if args.memory_exchanges is None:
        args.memory_exchanges = 1000 if quick else 100_000
    if args.memory_child is not None:
        anyio.run(_memory_child, args.memory_child, args.memory_exchanges)
    else:
        anyio.run(run, args)


if __name__ == "__main__":
    main()
