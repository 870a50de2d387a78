"""End-to-end MRTR over HTTP on loopback: our example server against a bare ASGI floor app,
both under the same uvicorn, driven by the same compiled load generator.

One exchange is the modern two-leg flow of the example server's
``test_input_required_result_request_state`` tool (it asks once): ``tools/call`` ->
``input_required`` (a form elicitation and a sealed ``requestState``) -> the retry with
``inputResponses`` and the echoed state -> the complete result (``Confirmed (state-ok).``).

Servers, each its own uvicorn process started from the command line with the same settings
(``--http httptools --loop uvloop`` and ``--http h11 --loop asyncio``; a configuration whose
packages are missing is printed as skipped), one worker, access log off:

* **floor**: a bare ASGI app that reads the body, parses it with ``json.loads`` and answers a
  fixed JSON-RPC response with the fields and sizes of the example server's (``input_required``
  with a fixed state of the sealed token's length for a request without ``inputResponses``,
  the result otherwise) encoded with ``json.dumps``: the least any JSON-over-HTTP server does
  on that uvicorn.
* **necessary**: the necessary-work floor, the bare app's IO around only what an MRTR server
  must do per POST: parse the body with orjson; check the ``_meta`` envelope (the protocol
  version key, the client capabilities), the method and the tool name; on leg 1 answer
  ``input_required`` with the elicitation and a ``requestState`` sealed with HMAC-SHA256 (a
  small JSON payload of the state and an expiry, base64url); on leg 2 verify the echoed state's
  HMAC and expiry and answer the result; encode with orjson.
* **ours**: ``build_app()`` of ``examples/http/server.py`` (the fixtures, both eras on one URL,
  HMAC-sealed state with a key of the process), as that script builds it.
* **sdk** (when the official SDK, package ``mcp`` of the ``bench`` extra, is installed): its
  low-level ``Server`` with the same tool (the same answers, its own types), state sealed by
  its ``RequestStateBoundary`` (AES-256-GCM, as ``MCPServer`` installs it), served by
  ``streamable_http_app(stateless_http=True, json_response=True)``.
* **server.py** (information, not in the ratio): ``python examples/http/server.py --port N`` as
  users run it. When the script takes ``--http`` / ``--loop`` it runs in every configuration;
  otherwise once with its own defaults (uvicorn's ``http="auto"`` inside the script's
  ``asyncio.run``), shown under ``server.py-defaults``.

Load: Debian's ``wrk`` (``apt-get install wrk``), closed loop, one connection per wrk thread
(``--connections`` of them), so that each thread's Lua state follows one connection's flow:
the script sends leg 1, checks the answer is ``input_required`` and takes its
``requestState``, sends leg 2 with it and checks the result text. Anything else (a wrong
status or body, a socket error or timeout) counts as an error. Exchange latency is measured in
the script (``clock_gettime`` through LuaJIT's FFI) from the start of leg 1 to the end of leg 2.

Every server gets one correctness exchange from Python first, then (unless ``--quick``) a
warm-up run; then the measured runs go round the servers ``--rounds`` times, in a rotating
order, so that drifts of a busy machine hit every server alike. Figures: the median of the
rounds' exchanges/s; p50 / p99 of all measured exchanges' latencies. Every process started is
stopped at the end, on error and on Ctrl-C too. Loopback only.

    python bench/http_e2e.py [--quick] [--seconds S] [--rounds N] [--connections C]
                             [--configs httptools,h11] [--no-sdk]

``--quick`` (the smoke test): 1 round of 1 s per server, 2 connections, no warm-up.

Last lines: ``ratio ours/necessary: httptools=<x.xx> h11=<y.yy>`` (our shipped, sealed app
against the necessary-work floor), then ``ratio ours/floor: httptools=<x.xx> h11=<y.yy>``
(against the bare app; ``skipped`` for a configuration that could not run).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import ctypes
import hmac
import http.client
import importlib.util
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import orjson
except ImportError:  # the necessary-work row needs it (the bench extra); it is skipped
    orjson = None  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "http" / "server.py"
HOST = "127.0.0.1"
PATH = "/mcp"
TOOL = "test_input_required_result_request_state"
EXPECTED = "Confirmed (state-ok)."
STATE = "awaiting-confirmation"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "http-e2e", "version": "1.0.0"},
}
ANSWERS = {"confirm": {"action": "accept", "content": {"ok": True}}}
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": TOOL,
}
#: uvicorn settings per configuration: (--http, --loop, the modules they need).
CONFIGS = {
    "httptools": ("httptools", "uvloop", ("httptools", "uvloop")),
    "h11": ("h11", "asyncio", ("h11",)),
}
MARK = "E2E-RESULT "
ERROR_MARK = "E2E-FIRST-ERROR "


def request_1(request_id: int | str) -> dict[str, Any]:
    """Leg 1: the plain call."""
    params = {"name": TOOL, "arguments": {}, "_meta": ENVELOPE}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def request_2(request_id: int | str, state: str) -> dict[str, Any]:
    """Leg 2: the retry with the answer and the state leg 1 returned."""
    params = {
        "name": TOOL,
        "arguments": {},
        "inputResponses": ANSWERS,
        "requestState": state,
        "_meta": ENVELOPE,
    }
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def _compact(msg: dict[str, Any]) -> str:
    return json.dumps(msg, separators=(",", ":"))


# --- the servers' apps (uvicorn --factory http_e2e:<name>) -------------------------------------

#: The example server's confirmation form (examples/fixtures.py, CONFIRM_FORM).
CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean", "description": "Go ahead?"}},
    "required": ["ok"],
}
#: The floor's fixed state: as long as the example server's sealed token for this tool.
FLOOR_STATE = "floor-" + "A" * 144
_FLOOR_META = {
    "io.modelcontextprotocol/serverInfo": {
        "name": "mrtr-sansio-bare-floor",
        "version": "0.0.0.bare",
    }
}
#: The floor's two answers: the fields and sizes of the example server's.
FLOOR_ASK = {
    "resultType": "input_required",
    "inputRequests": {
        "confirm": {
            "method": "elicitation/create",
            "params": {"message": "Please confirm to continue", "requestedSchema": CONFIRM_SCHEMA},
        }
    },
    "requestState": FLOOR_STATE,
    "_meta": _FLOOR_META,
}
FLOOR_DONE = {
    "content": [{"type": "text", "text": EXPECTED}],
    "resultType": "complete",
    "_meta": _FLOOR_META,
}


async def _lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _body(receive: Any) -> bytes:
    """The request body, read to its end (the floors' one bit of request IO)."""
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _floor(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The bare ASGI floor: read the body, parse it, answer a fixed response of the same shape."""
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    request = json.loads(await _body(receive))
    result = FLOOR_DONE if "inputResponses" in request["params"] else FLOOR_ASK
    answer = {"jsonrpc": "2.0", "id": request["id"], "result": result}
    body = json.dumps(answer, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def floor() -> Any:
    """uvicorn factory: the floor app."""
    return _floor


# --- the necessary-work floor: what any MRTR server must do per POST, and nothing else ---------

#: The necessary app's HMAC key (per process, like the example server's default).
NECESSARY_KEY = os.urandom(32)
NECESSARY_TTL = 600.0
_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
_NECESSARY_META = {
    "io.modelcontextprotocol/serverInfo": {"name": "mrtr-necessary", "version": "0.0.0"}
}
_NECESSARY_DONE = {**FLOOR_DONE, "_meta": _NECESSARY_META}


def necessary_seal(key: bytes, state: str, now: float) -> str:
    """HMAC-SHA256 over a small JSON payload (the state and an expiry), as base64url."""
    payload = orjson.dumps({"s": state, "e": now + NECESSARY_TTL})
    raw = payload + hmac.digest(key, payload, "sha256")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def necessary_open(key: bytes, token: str, now: float) -> str | None:
    """The state in ``token`` when its HMAC and its expiry check out, else None."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except ValueError:
        return None
    payload, tag = raw[:-32], raw[-32:]
    if len(raw) <= 32 or not hmac.compare_digest(hmac.digest(key, payload, "sha256"), tag):
        return None
    claims = orjson.loads(payload)
    if not now < claims["e"]:
        return None
    state: str = claims["s"]
    return state


def _necessary_error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def necessary_answer(body: bytes, now: float) -> bytes:
    """One POST's answer, doing only what an MRTR server must: parse, check the envelope, the
    method and the tool, seal the state (leg 1) or verify it (leg 2), encode."""
    request = orjson.loads(body)
    request_id = request.get("id")
    params = request.get("params")
    meta = params.get("_meta") if type(params) is dict else None
    if (
        type(meta) is not dict
        or meta.get(_VERSION_KEY) != "2026-07-28"
        or type(meta.get(_CAPABILITIES_KEY)) is not dict
    ):
        answer = _necessary_error(request_id, -32602, "missing or unsupported _meta envelope")
    elif request.get("method") != "tools/call" or params.get("name") != TOOL:
        answer = _necessary_error(request_id, -32602, "unknown tool")
    elif "inputResponses" not in params:
        if "elicitation" not in meta[_CAPABILITIES_KEY]:
            answer = _necessary_error(request_id, -32602, "the client cannot elicit")
        else:
            ask = {**FLOOR_ASK, "_meta": _NECESSARY_META}
            ask["requestState"] = necessary_seal(NECESSARY_KEY, STATE, now)
            answer = {"jsonrpc": "2.0", "id": request_id, "result": ask}
    else:
        token = params.get("requestState")
        state = necessary_open(NECESSARY_KEY, token, now) if type(token) is str else None
        confirm = params["inputResponses"].get("confirm")
        if state != STATE or type(confirm) is not dict or confirm.get("action") != "accept":
            answer = _necessary_error(request_id, -32602, "Invalid or expired requestState")
        else:
            answer = {"jsonrpc": "2.0", "id": request_id, "result": _NECESSARY_DONE}
    return orjson.dumps(answer)


async def _necessary(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The necessary-work floor as an ASGI app: the bare floor's IO, the MRTR server's work."""
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    body = necessary_answer(await _body(receive), time.time())
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def necessary() -> Any:
    """uvicorn factory: the necessary-work floor app."""
    return _necessary


def ours() -> Any:
    """uvicorn factory: the example server's app, built by its own ``build_app``."""
    spec = importlib.util.spec_from_file_location("mrtr_http_example_server", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_app(None)


def sdk() -> Any:
    """uvicorn factory: the official SDK's server with the same tool and sealed state."""
    import mcp_types as types
    from mcp.server.lowlevel.server import Server
    from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        answer: Any = (params.input_responses or {}).get("confirm")
        if params.request_state != STATE or answer is None or answer.action != "accept":
            form = types.ElicitRequestFormParams(
                message="Please confirm to continue",
                requested_schema=CONFIRM_SCHEMA,
            )
            return types.InputRequiredResult(
                input_requests={"confirm": types.ElicitRequest(params=form)}, request_state=STATE
            )
        return types.CallToolResult(content=[types.TextContent(type="text", text=EXPECTED)])

    server: Any = Server("http-e2e-sdk", version="1.0.0", on_call_tool=call_tool)
    security = RequestStateSecurity.ephemeral()
    server.middleware.append(RequestStateBoundary(security, default_audience="http-e2e-sdk"))
    return server.streamable_http_app(stateless_http=True, json_response=True)


# --- the load generator ------------------------------------------------------------------------


def _lua_string(text: str) -> str:
    return json.dumps(text)  # a JSON string of ASCII text is a valid Lua string literal


def lua_script(expected: str = EXPECTED) -> str:
    """The wrk script: the two legs per connection, checks (leg 2 must carry ``expected``),
    exchange latencies, totals."""
    one = _compact(request_1(0)).split('"id":0', 1)
    two = _compact(request_2(0, "@STATE@")).split('"id":0', 1)
    two_head, two_tail = two[1].split("@STATE@", 1)
    headers = ", ".join(f"[{_lua_string(k)}] = {_lua_string(v)}" for k, v in HEADERS.items())
    return f"""
local ffi = require("ffi")
ffi.cdef[[
typedef struct {{ long tv_sec; long tv_nsec; }} e2e_timespec;
int clock_gettime(int clock, e2e_timespec *ts);
]]
local ts = ffi.new("e2e_timespec")
local function now_us()
  ffi.C.clock_gettime(1, ts)  -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) * 1000000 + math.floor(tonumber(ts.tv_nsec) / 1000)
end

local ONE_HEAD, ONE_TAIL = {_lua_string(one[0] + '"id":')}, {_lua_string(one[1])}
local TWO_HEAD = {_lua_string(two[0] + '"id":')}
local TWO_MID, TWO_TAIL = {_lua_string(two_head)}, {_lua_string(two_tail)}
local EXPECTED = {_lua_string(expected)}
local threads = {{}}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  leg, token, started, next_id = 1, nil, 0, 0
  exchanges, errors, lat, first_error = 0, 0, {{}}, ""
end

local function fail(status, body)
  errors = errors + 1
  if first_error == "" then
    first_error = "leg " .. leg .. " status " .. status .. ": " .. string.sub(body, 1, 200)
  end
  leg = 1
end

function request()
  next_id = next_id + 1
  local headers = {{ {headers} }}
  if leg == 1 then
    started = now_us()
    return wrk.format("POST", "{PATH}", headers, ONE_HEAD .. next_id .. ONE_TAIL)
  end
  return wrk.format("POST", "{PATH}", headers, TWO_HEAD .. next_id .. TWO_MID .. token .. TWO_TAIL)
end

function response(status, headers, body)
  if status ~= 200 then return fail(status, body) end
  if leg == 1 then
    local got = nil
    if string.find(body, '"input_required"', 1, true) then
      got = string.match(body, '"requestState"%s*:%s*"([^"]+)"')
    end
    if got == nil then return fail(status, body) end
    token, leg = got, 2
  else
    if not string.find(body, EXPECTED, 1, true) then return fail(status, body) end
    exchanges = exchanges + 1
    lat[#lat + 1] = now_us() - started
    leg = 1
  end
end

function done(summary, latency, requests)
  local total, bad, all, first = 0, 0, {{}}, ""
  for _, thread in ipairs(threads) do
    total = total + thread:get("exchanges")
    bad = bad + thread:get("errors")
    if first == "" then first = thread:get("first_error") end
    for _, us in ipairs(thread:get("lat")) do all[#all + 1] = us end
  end
  local e = summary.errors
  io.write("{MARK}", string.format(
    '{{"exchanges":%d,"errors":%d,"socket_errors":%d,"duration_us":%d,"requests":%d,',
    total, bad, e.connect + e.read + e.write + e.timeout, summary.duration, summary.requests))
  io.write('"latencies_us":[', table.concat(all, ","), "]}}\\n")
  io.write("{ERROR_MARK}", (string.gsub(first, "[\\r\\n]", " ")), "\\n")
end
"""


@dataclass
class Run:
    """One measured wrk run against one server."""

    exchanges: int
    errors: int
    seconds: float
    latencies_us: list[int]
    first_error: str
    #: CPU time (user + system) the server process used during the run, in seconds.
    server_cpu: float = 0.0

    @property
    def rate(self) -> float:
        return self.exchanges / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_us(self) -> float:
        """Server CPU per exchange (µs): far steadier than exchanges/s on a busy machine."""
        return self.server_cpu * 1e6 / self.exchanges if self.exchanges else float("nan")


def process_cpu(pid: int) -> float:
    """User + system CPU seconds used so far by process ``pid`` (Linux ``/proc``; 0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_wrk(script: Path, port: int, seconds: int, connections: int, pid: int = 0) -> Run:
    """Drive one server for ``seconds`` with ``connections`` closed-loop connections; with
    ``pid``, also take the CPU time that process used meanwhile."""
    cpu_before = process_cpu(pid) if pid else 0.0
    argv = ["wrk", "-t", str(connections), "-c", str(connections), "-d", f"{seconds}s"]
    argv += ["--timeout", "10s", "-s", str(script), f"http://{HOST}:{port}{PATH}"]
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        check=False,
        preexec_fn=_die_with_parent,
    )
    server_cpu = process_cpu(pid) - cpu_before if pid else 0.0
    lines = [x for x in done.stdout.splitlines() if x.startswith(MARK)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    out = json.loads(lines[-1][len(MARK) :])
    first_error = [
        x[len(ERROR_MARK) :] for x in done.stdout.splitlines() if x.startswith(ERROR_MARK)
    ]
    return Run(
        exchanges=out["exchanges"],
        errors=out["errors"] + out["socket_errors"],
        seconds=out["duration_us"] / 1e6,
        latencies_us=out["latencies_us"],
        first_error=first_error[-1] if first_error else "",
        server_cpu=server_cpu,
    )


# --- processes ---------------------------------------------------------------------------------


@dataclass
class Server:
    """One server process under measurement, and what was measured against it."""

    config: str
    name: str
    argv: list[str]
    port: int
    log: Any = None
    process: subprocess.Popen[bytes] | None = None
    runs: list[Run] = field(default_factory=list)

    def start(self) -> None:
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop())
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            self.argv,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 (no threads in this process)
        )

    def output(self) -> str:
        if self.log is None:
            return ""
        self.log.seek(0)
        return str(self.log.read().decode(errors="replace"))

    def stop(self) -> None:
        """SIGTERM (uvicorn's graceful shutdown), then SIGKILL after 10 s."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self.log is not None:
            self.log.close()
            self.log = None


def _die_with_parent() -> None:
    """In a child before exec (Linux): SIGTERM when the bench dies, even by SIGKILL (a test's
    timeout), so that no server outlives it."""
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def uvicorn_argv(app: str, port: int, http: str, loop: str) -> list[str]:
    return [
        *(sys.executable, "-m", "uvicorn", "--factory", "--app-dir", str(ROOT / "bench")),
        *("--host", HOST, "--port", str(port), "--http", http, "--loop", loop),
        *("--lifespan", "on", "--log-level", "warning", "--no-access-log", f"http_e2e:{app}"),
    ]


def _post(conn: http.client.HTTPConnection, msg: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """POST ``msg``: the JSON-RPC answer and how it came (content type, body size)."""
    conn.request("POST", PATH, _compact(msg).encode(), HEADERS)
    response = conn.getresponse()
    body = response.read().decode()
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {body[:300]}")
    kind = response.getheader("content-type", "").split(";")[0]
    how = f"{kind} {len(body)} B"
    if kind == "text/event-stream":
        data = [line[5:].strip() for line in body.splitlines() if line.startswith("data:")]
        body = data[-1]
    answer: dict[str, Any] = json.loads(body)
    return answer, how


def check(server: Server, deadline: float) -> str:
    """Wait until ``server`` answers, then check one whole exchange's answers; returns how
    they came."""
    while True:
        assert server.process is not None
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.name} ({server.config}) exited:\n{server.output()}")
        try:
            with socket.create_connection((HOST, server.port), timeout=1):
                break
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{server.name} ({server.config}) did not start") from None
            time.sleep(0.1)
    conn = http.client.HTTPConnection(HOST, server.port, timeout=30)
    try:
        answer, how_1 = _post(conn, request_1(1))
        first = answer["result"]
        state = first.get("requestState")
        if first.get("resultType") != "input_required" or not isinstance(state, str):
            raise RuntimeError(f"{server.name}: leg 1 answered {first!r}")
        if set(first.get("inputRequests", {})) != {"confirm"}:
            raise RuntimeError(f"{server.name}: leg 1 asked {first.get('inputRequests')!r}")
        answer, how_2 = _post(conn, request_2(2, state))
        second = answer["result"]
        if second.get("content") != [{"type": "text", "text": EXPECTED}] or second.get("isError"):
            raise RuntimeError(f"{server.name}: leg 2 answered {second!r}")
        return f"{how_1} + {how_2}"
    finally:
        conn.close()


def _example_takes_loop_options() -> bool:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return "--http" in done.stdout and "--loop" in done.stdout


def plan(configs: list[str], with_sdk: bool) -> tuple[list[Server], dict[str, str]]:
    """The servers to start, and the configurations skipped (with why)."""
    servers: list[Server] = []
    skipped: dict[str, str] = {}
    necessary_row = ["necessary"] if orjson is not None else []
    apps = ["floor", *necessary_row, "ours", *(["sdk"] if with_sdk else [])]
    loop_options = _example_takes_loop_options()
    for config in configs:
        http, loop, modules = CONFIGS[config]
        missing = [m for m in modules if importlib.util.find_spec(m) is None]
        if missing:
            skipped[config] = f"{' and '.join(missing)} not installed (uvicorn[standard])"
            continue
        for app in apps:
            port = free_port()
            servers.append(Server(config, app, uvicorn_argv(app, port, http, loop), port))
        if loop_options:
            port = free_port()
            argv = [sys.executable, str(EXAMPLE), "--port", str(port), "--http", http]
            servers.append(Server(config, "server.py", [*argv, "--loop", loop], port))
    if not loop_options:
        port = free_port()
        argv = [sys.executable, str(EXAMPLE), "--port", str(port)]
        servers.append(Server("server.py-defaults", "server.py", argv, port))
    return servers, skipped


@contextlib.contextmanager
def running(servers: list[Server]) -> Iterator[None]:
    """Start every server; stop every one on the way out, whatever happened (SIGTERM too)."""

    def terminate(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        for server in servers:
            server.start()
        yield
    finally:
        for server in servers:
            server.stop()
        signal.signal(signal.SIGTERM, previous)


# --- report ------------------------------------------------------------------------------------


def _percentile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


def report(servers: list[Server], skipped: dict[str, str], configs: list[str]) -> int:
    """Print the table and the ratios; returns the number of errors counted."""
    head = f"{'config':20s} {'server':10s} {'exch/s':>9s} {'p50 ms':>8s} {'p99 ms':>8s}"
    print(f"\n{head} {'cpu us':>7s} errors")
    medians: dict[tuple[str, str], float] = {}
    cpus: dict[tuple[str, str], float] = {}
    errors = 0
    for server in servers:
        rate = statistics.median(r.rate for r in server.runs)
        medians[server.config, server.name] = rate
        lat = [us for r in server.runs for us in r.latencies_us]
        bad = sum(r.errors for r in server.runs)
        errors += bad
        p50, p99 = (_percentile(lat, q) / 1000 if lat else float("nan") for q in (0.5, 0.99))
        cpu = statistics.median(r.cpu_us for r in server.runs)
        cpus[server.config, server.name] = cpu
        row = f"{server.config:20s} {server.name:10s} {rate:9.0f} {p50:8.2f} {p99:8.2f}"
        print(f"{row} {cpu:7.0f} {bad}")
        first = next((r.first_error for r in server.runs if r.first_error), "")
        if first:
            print(f"    first error: {first}")
    for config, why in skipped.items():
        print(f"{config:20s} skipped: {why}")
    parts, sdk_parts, cpu_parts, necessary_parts, floor_parts = [], [], [], [], []
    for config in configs:
        necessary_rate = medians.get((config, "necessary"))
        ours_sealed, bare = medians.get((config, "ours")), medians.get((config, "floor"))
        if necessary_rate and ours_sealed is not None:
            necessary_parts.append(f"{config}={ours_sealed / necessary_rate:.2f}")
        else:
            necessary_parts.append(f"{config}=skipped")
        if bare and necessary_rate is not None:
            floor_parts.append(f"{config}={necessary_rate / bare:.2f}")
        floor_cpu, ours_cpu = cpus.get((config, "floor")), cpus.get((config, "ours"))
        if floor_cpu and ours_cpu:
            cpu_parts.append(f"{config}={floor_cpu / ours_cpu:.2f}")
        floor_rate, ours_rate = medians.get((config, "floor")), medians.get((config, "ours"))
        if floor_rate and ours_rate is not None:
            parts.append(f"{config}={ours_rate / floor_rate:.2f}")
        else:
            parts.append(f"{config}=skipped")
        sdk_rate = medians.get((config, "sdk"))
        if sdk_rate and ours_rate is not None:
            sdk_parts.append(f"{config}={ours_rate / sdk_rate:.2f}")
    print(f"errors: {errors}")
    if sdk_parts:
        print(f"ratio ours/sdk: {' '.join(sdk_parts)}")
    if floor_parts:  # what the necessary work costs against the bare app
        print(f"ratio necessary/floor: {' '.join(floor_parts)}")
    print(f"ratio ours/necessary: {' '.join(necessary_parts)}")
    if cpu_parts:  # the same ratio from server CPU per exchange (floor's / ours)
        print(f"cpu ratio floor/ours: {' '.join(cpu_parts)}")
    print(f"ratio ours/floor: {' '.join(parts)}")
    return errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=int, default=5, help="per measured run (default 5)")
    parser.add_argument("--rounds", type=int, default=5, help="runs per server (default 5)")
    parser.add_argument("--connections", type=int, default=8, help="closed-loop connections")
    parser.add_argument("--configs", default="httptools,h11", help="uvicorn configurations")
    parser.add_argument("--no-sdk", action="store_true", help="leave the official SDK out")
    parser.add_argument("--quick", action="store_true", help="1 round of 1 s, 2 connections")
    parser.add_argument(
        "--expect",
        default=EXPECTED,
        metavar="TEXT",
        help="the result text the load generator requires (another text makes every exchange "
        "an error: how the smoke test checks that errors are counted)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.rounds, args.connections = 1, 1, 2
    configs = [c for c in args.configs.split(",") if c]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown or args.seconds < 1 or args.rounds < 1 or args.connections < 1:
        parser.error(f"unknown configuration(s) {unknown}" if unknown else "values must be >= 1")
    if shutil.which("wrk") is None:
        sys.exit("http_e2e.py: wrk is not installed (Debian: apt-get install wrk)")
    if importlib.util.find_spec("uvicorn") is None:
        sys.exit("http_e2e.py: uvicorn is not installed (pip install 'uvicorn[standard]')")
    with_sdk = not args.no_sdk and importlib.util.find_spec("mcp") is not None
    if not with_sdk:
        print("sdk: skipped" + ("" if args.no_sdk else " (mcp not installed: the bench extra)"))
    servers, skipped = plan(configs, with_sdk)
    print(
        f"wrk, {args.connections} connection(s), {args.rounds} round(s) of {args.seconds} s per "
        f"server, interleaved; load average {os.getloadavg()[0]:.2f}"
    )
    with tempfile.TemporaryDirectory() as tmp, running(servers):
        script = Path(tmp) / "mrtr.lua"
        script.write_text(lua_script(args.expect), encoding="ascii")
        deadline = time.monotonic() + 120
        for server in servers:
            how = check(server, deadline)
            print(f"{server.config:20s} {server.name:10s} answers right: {how}")
        if not args.quick:
            for server in servers:
                run_wrk(script, server.port, 1, args.connections)
        for round_ in range(args.rounds):
            turn = round_ % len(servers)
            for server in servers[turn:] + servers[:turn]:
                assert server.process is not None
                pid = server.process.pid
                server.runs.append(
                    run_wrk(script, server.port, args.seconds, args.connections, pid)
                )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    errors = report(servers, skipped, configs)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
