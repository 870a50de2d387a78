"""End-to-end MRTR over stdio: our stdio servers against the official SDKs', each a real child
process on pipes, driven by the same lean driver.

The exchange of ``bench/http_e2e.py`` (the ``test_input_required_result_request_state`` tool:
``tools/call`` -> ``input_required`` with a form elicitation and a ``requestState`` -> the
retry with ``inputResponses`` and the echoed state -> ``Confirmed (state-ok).``), one JSON
message a line, each side with its own library's defaults (no state sealing configured, as a
stdio server usually runs, except where a row says ``sealed``) and a handler written with its
own types:

* **ours**: ``mrtr_sansio.adapters.stdio.serve`` (blocking, no async library).
* **asyncio** / **trio**: ``mrtr_sansio.adapters.anyio.serve_stdio`` (the one async adapter)
  run by ``asyncio.run`` / ``trio.run``; **asyncio-sealed**: the same as shipped, the state
  sealed with the default per-process key.
* **asyncio@base** / **asyncio-sealed@base** / **trio@base** (with ``--baseline SRC``): the
  same handler on the package found at ``SRC`` (another checkout's ``src``), to compare two
  versions in one run.
* **sdk** (package ``mcp`` of the ``bench`` extra): its low-level ``Server.run()`` on
  ``mcp.server.stdio.stdio_server()`` under anyio.
* **ts**: the official TypeScript SDK's ``serveStdio`` (``bench/ts/stdio_server.mjs``), when
  ``node`` is on the PATH and ``npm install --prefix bench/ts`` was run.

Two ways to drive them. **Closed loop** (default): the driver keeps ``--inflight``
exchanges outstanding (default 1: a stdio client usually waits for its answer). **Pipelined**
(``--pipeline K``): ``K`` first legs in one write, the ``K`` answers read, then the ``K``
retries in one write and their answers read; latencies are then those of a whole batch. The
driver finds each answer's id and (leg 1) its ``requestState`` with a regular expression rather
than a JSON parser, so that it stays cheap next to the server, and checks that leg 1 is
``input_required`` and leg 2 carries the result text; anything else is an error. Each server is
checked with one exchange, warmed up for 1 s (not with ``--quick``), then measured
``--rounds`` times for ``--seconds``, the servers in alternation (the machine's load moves
every absolute figure: compare the ratios of one run). ``--pin`` puts the servers on CPU 0 and
the driver on CPU 1. Every child is stopped at the end, on an error too.

    python bench/stdio_e2e.py [--quick] [--seconds S] [--rounds N] [--inflight K]
        [--pipeline K] [--servers NAME,...] [--baseline SRC] [--pin]

Before the last line, ``ratios: <a>/<b>=<x.xx> ...`` for the rows present (the async adapter
against the blocking one, the baseline and the SDKs; sealed against unsealed). Last line:
``ratio ours/sdk: stdio=<x.xx>`` (``skipped`` without the SDK).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from http_e2e import (
    CONFIRM_SCHEMA,
    EXPECTED,
    STATE,
    Run,
    _compact,
    _die_with_parent,
    _percentile,
    process_cpu,
    request_1,
    request_2,
)

HERE = Path(__file__).resolve().parent
TS_SERVER = HERE / "ts" / "stdio_server.mjs"
TS_SDK = HERE / "ts" / "node_modules" / "@modelcontextprotocol" / "server"
SERVERS = ("ours", "asyncio", "asyncio-sealed", "trio", "sdk", "ts")
BASELINE = ("asyncio@base", "asyncio-sealed@base", "trio@base")
#: The ratios printed, numerator / denominator, when both rows ran.
RATIOS = (
    ("asyncio", "asyncio@base"),
    ("trio", "trio@base"),
    ("asyncio-sealed", "asyncio"),
    ("asyncio-sealed@base", "asyncio@base"),
    ("asyncio-sealed", "asyncio-sealed@base"),
    ("asyncio", "ours"),
    ("asyncio", "ts"),
    ("asyncio", "sdk"),
    ("trio", "asyncio"),
)

_ID = re.compile(rb'"id":\s*(\d+)')
_STATE = re.compile(rb'"requestState":\s*"([^"]+)"')


def _handler() -> Any:
    """The bench's tool as a blocking handler, on whichever version of the package is found."""
    import mrtr_sansio as m

    def handler(request: m.RequestReceived, ctx: Any) -> Any:
        if request.method != "tools/call":
            return request.method_not_found()
        content = request.input_responses.accepted_content("confirm")
        if request.request_state != STATE or content is None or content.get("ok") is not True:
            ask = m.elicit_form("Please confirm to continue", CONFIRM_SCHEMA)
            return m.InputRequiredResult({"confirm": ask}, STATE)
        return {"content": [{"type": "text", "text": EXPECTED}]}

    return handler


def _config(sealed: bool = False) -> Any:
    import mrtr_sansio as m

    info = {"name": "stdio-e2e-ours", "version": "1.0.0"}
    config = m.ServerConfig(server_info=info, capabilities={"tools": {}})
    unsealed = getattr(m, "UNSEALED", None)  # older versions sent state unsealed by default
    if not sealed and unsealed is not None:
        config = m.ServerConfig(
            server_info=info, capabilities={"tools": {}}, request_state=unsealed
        )
    return config


def serve_ours() -> None:
    """The blocking stdio server on our side."""
    from mrtr_sansio.adapters.stdio import serve

    serve(_handler(), _config())


def serve_async(backend: str, sealed: bool = False) -> None:
    """The async stdio server on our side, on ``backend`` (asyncio or trio)."""
    blocking = _handler()

    async def handler(request: Any, ctx: Any) -> Any:
        return blocking(request, ctx)

    config = _config(sealed)
    if backend == "asyncio":
        import asyncio

        from mrtr_sansio.adapters.asyncio import serve_stdio

        asyncio.run(serve_stdio(handler, config))
    else:
        import trio

        from mrtr_sansio.adapters.trio import serve_stdio as trio_serve_stdio

        trio.run(trio_serve_stdio, handler, config)


def serve_sdk() -> None:
    """The stdio server on the SDK's side."""
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel.server import Server
    from mcp.server.stdio import stdio_server

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        answer: Any = (params.input_responses or {}).get("confirm")
        if params.request_state != STATE or answer is None or answer.action != "accept":
            form = types.ElicitRequestFormParams(
                message="Please confirm to continue", requested_schema=CONFIRM_SCHEMA
            )
            return types.InputRequiredResult(
                input_requests={"confirm": types.ElicitRequest(params=form)}, request_state=STATE
            )
        return types.CallToolResult(content=[types.TextContent(type="text", text=EXPECTED)])

    server: Any = Server("stdio-e2e-sdk", version="1.0.0", on_call_tool=call_tool)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


def serve(name: str) -> None:
    """Run the server ``name`` on this process's stdio."""
    if name == "ours":
        serve_ours()
    elif name == "sdk":
        serve_sdk()
    else:
        row = name.split("@", 1)[0]
        serve_async(row.removesuffix("-sealed"), sealed=row.endswith("-sealed"))


def _pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and os.cpu_count() and cpu < (os.cpu_count() or 1):
        os.sched_setaffinity(0, {cpu})


class Legs:
    """The two legs' lines as bytes, for any id (and, leg 2, any state token)."""

    def __init__(self) -> None:
        self._one_head, self._one_tail = _split(_compact(request_1(0)) + "\n", '"id":0')
        two_head, rest = _split(_compact(request_2(0, "@STATE@")) + "\n", '"id":0')
        self._two_head = two_head
        self._two_mid, self._two_tail = rest.split(b"@STATE@", 1)

    def first(self, rid: int) -> bytes:
        """Leg 1 with id ``rid``."""
        return self._one_head + b"%d" % rid + self._one_tail

    def retry(self, rid: int, token: bytes) -> bytes:
        """Leg 2 with id ``rid``, echoing ``token``."""
        return self._two_head + b"%d" % rid + self._two_mid + token + self._two_tail


class Child:
    """One stdio server process and the runs measured against it."""

    def __init__(self, name: str, baseline: str | None = None, pin: bool = False) -> None:
        self.name = name
        self.runs: list[Run] = []
        env = dict(os.environ)
        if name == "ts":
            argv = ["node", str(TS_SERVER)]
        else:
            argv = [sys.executable, __file__, "--serve", name]
            if name.endswith("@base"):
                assert baseline is not None
                env["PYTHONPATH"] = os.pathsep.join([baseline, str(HERE)])

        def start() -> None:
            _die_with_parent()
            if pin:
                _pin(0)

        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            preexec_fn=start,  # noqa: PLW1509 (no threads in this process)
        )
        self.next_id = 0
        self._legs = Legs()

    def stop(self) -> None:
        """Close its input (a stdio server's end), then SIGTERM, then SIGKILL."""
        proc = self.process
        if proc.poll() is None:
            try:
                assert proc.stdin is not None
                proc.stdin.close()
                proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)

    def _line(self) -> bytes:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name}: the server closed its output")
        return line

    def drive(self, seconds: float, inflight: int, limit: int | None = None) -> Run:
        """Keep ``inflight`` exchanges outstanding for ``seconds`` (or until ``limit`` have
        been started); the exchanges still out at the end are finished but not counted."""
        stdin = self.process.stdin
        assert stdin is not None
        expected = EXPECTED.encode()
        started: dict[int, float] = {}  # leg-1 id -> start; leg 2 keeps its exchange's start
        pending: dict[int, int] = {}  # outstanding id -> leg
        latencies: list[int] = []
        exchanges = errors = begun = 0
        first_error = ""
        clock = time.perf_counter

        def send_one(start: float) -> None:
            nonlocal begun
            begun += 1
            self.next_id += 1
            pending[self.next_id], started[self.next_id] = 1, start
            stdin.write(self._legs.first(self.next_id))

        begin = clock()
        end = begin + seconds
        for _ in range(inflight if limit is None else min(inflight, limit)):
            send_one(clock())
        stdin.flush()
        while pending:
            line = self._line()
            found = _ID.search(line)
            key = int(found.group(1)) if found else -1
            leg = pending.pop(key, 0)
            start = started.pop(key, 0.0)
            now = clock()
            token = _STATE.search(line) if leg == 1 and b'"input_required"' in line else None
            if leg == 2 and expected in line:
                if now <= end or limit is not None:
                    exchanges += 1
                    latencies.append(int((now - start) * 1e6))
            elif token is None or leg != 1:
                errors += 1
                first_error = first_error or f"leg {leg}: {line[:200]!r}"
                token = None
            if token is not None:  # an exchange under way is always finished
                self.next_id += 1
                pending[self.next_id], started[self.next_id] = 2, start
                stdin.write(self._legs.retry(self.next_id, token.group(1)))
            elif now <= end and (limit is None or begun < limit):
                send_one(now)
            stdin.flush()
        return Run(exchanges, errors, min(clock(), end) - begin, latencies, first_error)

    def pipeline(self, seconds: float, batch: int) -> Run:
        """Batches of ``batch`` exchanges for ``seconds``: all first legs in one write, their
        answers, all retries in one write, their answers. The batch under way at the end is
        finished but not counted."""
        stdin = self.process.stdin
        assert stdin is not None
        expected = EXPECTED.encode()
        latencies: list[int] = []
        exchanges = errors = 0
        first_error = ""
        clock = time.perf_counter
        begin = clock()
        end = begin + seconds
        now = begin
        while now <= end:
            start = now
            first = self.next_id + 1
            self.next_id += batch
            stdin.write(b"".join([self._legs.first(rid) for rid in range(first, first + batch)]))
            stdin.flush()
            tokens: dict[int, bytes] = {}
            for _ in range(batch):
                line = self._line()
                found = _ID.search(line)
                token = _STATE.search(line) if b'"input_required"' in line else None
                if found is None or token is None:
                    errors += 1
                    first_error = first_error or f"leg 1: {line[:200]!r}"
                    continue
                tokens[int(found.group(1))] = token.group(1)
            retries = [self._legs.retry(rid + batch, tokens[rid]) for rid in sorted(tokens)]
            self.next_id += batch
            stdin.write(b"".join(retries))
            stdin.flush()
            done = 0
            for _ in retries:
                line = self._line()
                if expected in line:
                    done += 1
                else:
                    errors += 1
                    first_error = first_error or f"leg 2: {line[:200]!r}"
            now = clock()
            if now <= end:
                exchanges += done
                latencies.append(int((now - start) * 1e6))
        return Run(exchanges, errors, min(clock(), end) - begin, latencies, first_error)

    def measure(self, seconds: float, inflight: int, batch: int) -> Run:
        """One run of the chosen mode, with the server's CPU time over it."""
        before = process_cpu(self.process.pid)
        run = self.pipeline(seconds, batch) if batch else self.drive(seconds, inflight)
        run.server_cpu = process_cpu(self.process.pid) - before
        return run


def _split(text: str, at: str) -> tuple[bytes, bytes]:
    head, tail = text.split(at, 1)
    return (head + '"id":').encode(), tail.encode()


def _available(names: list[str], baseline: str | None) -> list[str]:
    """The servers of ``names`` that can run here; prints why each other one is skipped."""
    found = []
    for name in names:
        why = ""
        if name == "sdk" and importlib.util.find_spec("mcp") is None:
            why = "mcp not installed: the bench extra"
        elif name.startswith("trio") and importlib.util.find_spec("trio") is None:
            why = "trio not installed: the trio extra"
        elif name.startswith("asyncio") and importlib.util.find_spec("anyio") is None:
            why = "anyio not installed: the anyio extra"
        elif name == "ts" and shutil.which("node") is None:
            why = "node is not on the PATH"
        elif name == "ts" and not TS_SDK.is_dir():
            why = "the TypeScript SDK is not installed: npm install --prefix bench/ts"
        elif name.endswith("@base") and baseline is None:
            why = "no --baseline"
        if why:
            print(f"{name}: skipped ({why})")
        else:
            found.append(name)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per measured run")
    parser.add_argument("--rounds", type=int, default=5, help="runs per server")
    parser.add_argument(
        "--inflight", type=int, default=1, help="exchanges kept outstanding (default 1)"
    )
    parser.add_argument(
        "--pipeline", type=int, default=0, metavar="K", help="pipelined batches of K exchanges"
    )
    parser.add_argument("--servers", help=f"comma-separated, of {', '.join(SERVERS + BASELINE)}")
    parser.add_argument(
        "--baseline", metavar="SRC", help="another version's src/ for the @base rows"
    )
    parser.add_argument("--pin", action="store_true", help="servers on CPU 0, driver on CPU 1")
    parser.add_argument("--quick", action="store_true", help="1 round of 1 s, no warm-up")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return 0
    if args.quick:
        args.seconds, args.rounds = 1.0, 1
    if args.seconds <= 0 or args.rounds < 1 or args.inflight < 1 or args.pipeline < 0:
        parser.error("values must be positive")
    wanted = args.servers.split(",") if args.servers else [*SERVERS, *BASELINE]
    unknown = set(wanted) - set(SERVERS + BASELINE)
    if unknown:
        parser.error(f"unknown server(s): {', '.join(sorted(unknown))}")
    if args.baseline:
        args.baseline = str(Path(args.baseline).resolve())
    names = _available(wanted, args.baseline)
    if "ours" not in names:
        names.insert(0, "ours")  # the last line's numerator
    mode = (
        f"pipelined, batches of {args.pipeline}"
        if args.pipeline
        else f"{args.inflight} exchange(s) in flight"
    )
    print(
        f"stdio, {mode}, {args.rounds} round(s) of {args.seconds:g} s per server, "
        f"interleaved; load average {os.getloadavg()[0]:.2f}"
    )
    if args.pin:
        _pin(1)
    children: list[Child] = []
    try:
        for name in names:
            children.append(Child(name, args.baseline, args.pin))
        for child in children:
            check = child.drive(60.0, 1, limit=1)
            if check.errors or check.exchanges != 1:
                raise RuntimeError(f"{child.name} answered wrong: {check.first_error}")
            print(f"{child.name:14s} answers a whole exchange right")
            if not args.quick:
                child.measure(1.0, args.inflight, args.pipeline)
        for round_ in range(args.rounds):
            turn = round_ % len(children)
            for child in children[turn:] + children[:turn]:
                child.runs.append(child.measure(args.seconds, args.inflight, args.pipeline))
    finally:
        for child in children:
            child.stop()
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    what = "batch" if args.pipeline else "p50"
    print(
        f"\n{'server':14s} {'exch/s':>9s} {what + ' ms':>9s} {'p99 ms':>8s} "
        f"{'cpu us/exch':>11s} errors"
    )
    rates: dict[str, float] = {}
    errors = 0
    for child in children:
        rates[child.name] = statistics.median(r.rate for r in child.runs)
        lat = [us for r in child.runs for us in r.latencies_us]
        bad = sum(r.errors for r in child.runs)
        errors += bad
        p50, p99 = (_percentile(lat, q) / 1000 if lat else float("nan") for q in (0.5, 0.99))
        cpu = statistics.median(r.cpu_us for r in child.runs)
        print(f"{child.name:14s} {rates[child.name]:9.0f} {p50:9.2f} {p99:8.2f} {cpu:11.1f} {bad}")
    print(f"errors: {errors}")
    ratios = [
        f"{a}/{b}={rates[a] / rates[b]:.2f}" for a, b in RATIOS if rates.get(a) and rates.get(b)
    ]
    print(f"ratios: {' '.join(ratios) or 'none'}")
    sdk_rate = rates.get("sdk")
    ratio = f"{rates['ours'] / sdk_rate:.2f}" if sdk_rate else "skipped"
    print(f"ratio ours/sdk: stdio={ratio}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
