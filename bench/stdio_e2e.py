"""End-to-end MRTR over stdio: our stdio server against the official SDK's, each a real child
process on pipes, driven by the same lean closed-loop driver.

The exchange of ``bench/http_e2e.py`` (the ``test_input_required_result_request_state`` tool:
``tools/call`` -> ``input_required`` with a form elicitation and a ``requestState`` -> the
retry with ``inputResponses`` and the echoed state -> ``Confirmed (state-ok).``), one JSON
message a line, each side with its own library's defaults (no state sealing configured on
either, as a stdio server usually runs) and a handler written with its own types:

* **ours**: ``mrtr_sansio.adapters.stdio.serve`` (blocking, no async library).
* **sdk** (package ``mcp`` of the ``bench`` extra): its low-level ``Server.run()`` on
  ``mcp.server.stdio.stdio_server()`` under anyio.

The driver (this process) keeps ``--inflight`` exchanges outstanding on the pipe (default 1:
a stdio client usually waits for its answer; the SDK's server slows down with more): it reads
each answer line, finds its id and (leg 1) the ``requestState`` with a regular expression
rather than a JSON parser, so that it stays cheap next to the server, and checks that leg 1 is
``input_required`` and leg 2 carries the result text; anything else is an error. Each server is
checked with one exchange, warmed up for 1 s (not with ``--quick``), then measured
``--rounds`` times for ``--seconds``, the servers in alternation. Every child is stopped at the
end, on an error too.

    python bench/stdio_e2e.py [--quick] [--seconds S] [--rounds N] [--inflight K]

Last line: ``ratio ours/sdk: stdio=<x.xx>`` (``skipped`` without the SDK).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import time
from typing import Any

from http_e2e import (
    CONFIRM_SCHEMA,
    EXPECTED,
    STATE,
    Run,
    _compact,
    _die_with_parent,
    _percentile,
    request_1,
    request_2,
)

_ID = re.compile(rb'"id":\s*(\d+)')
_STATE = re.compile(rb'"requestState":\s*"([^"]+)"')


def serve_ours() -> None:
    """The stdio server on our side."""
    import mrtr_sansio as m
    from mrtr_sansio.adapters.stdio import serve

    def handler(request: m.RequestReceived, ctx: Any) -> Any:
        if request.method != "tools/call":
            return request.method_not_found()
        content = request.input_responses.accepted_content("confirm")
        if request.request_state != STATE or content is None or content.get("ok") is not True:
            ask = m.elicit_form("Please confirm to continue", CONFIRM_SCHEMA)
            return m.InputRequiredResult({"confirm": ask}, STATE)
        return {"content": [{"type": "text", "text": EXPECTED}]}

    info = {"name": "stdio-e2e-ours", "version": "1.0.0"}
    serve(handler, m.ServerConfig(server_info=info, capabilities={"tools": {}}))


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


class Child:
    """One stdio server process and the runs measured against it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.runs: list[Run] = []
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 (no threads in this process)
        )
        self.next_id = 0

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

    def drive(self, seconds: float, inflight: int, limit: int | None = None) -> Run:
        """Keep ``inflight`` exchanges outstanding for ``seconds`` (or until ``limit`` have
        been started); the exchanges still out at the end are finished but not counted."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None
        assert stdout is not None
        one_head, one_tail = _split(_compact(request_1(0)) + "\n", '"id":0')
        two = _compact(request_2(0, "@STATE@")) + "\n"
        two_head, rest = _split(two, '"id":0')
        two_mid, two_tail = rest.split(b"@STATE@", 1)
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
            stdin.write(one_head + b"%d" % self.next_id + one_tail)

        begin = clock()
        end = begin + seconds
        for _ in range(inflight if limit is None else min(inflight, limit)):
            send_one(clock())
        stdin.flush()
        while pending:
            line = stdout.readline()
            if not line:
                raise RuntimeError(f"{self.name}: the server closed its output")
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
                stdin.write(two_head + b"%d" % self.next_id + two_mid + token.group(1) + two_tail)
            elif now <= end and (limit is None or begun < limit):
                send_one(now)
            stdin.flush()
        return Run(exchanges, errors, min(clock(), end) - begin, latencies, first_error)


def _split(text: str, at: str) -> tuple[bytes, bytes]:
    head, tail = text.split(at, 1)
    return (head + '"id":').encode(), tail.encode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per measured run")
    parser.add_argument("--rounds", type=int, default=5, help="runs per server")
    parser.add_argument(
        "--inflight", type=int, default=1, help="exchanges kept outstanding (default 1)"
    )
    parser.add_argument("--quick", action="store_true", help="1 round of 1 s, no warm-up")
    parser.add_argument("--serve", choices=["ours", "sdk"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve == "ours":
        serve_ours()
        return 0
    if args.serve == "sdk":
        serve_sdk()
        return 0
    if args.quick:
        args.seconds, args.rounds = 1.0, 1
    if args.seconds <= 0 or args.rounds < 1 or args.inflight < 1:
        parser.error("values must be positive")
    names = ["ours"]
    if importlib.util.find_spec("mcp") is not None:
        names.append("sdk")
    else:
        print("sdk: skipped (mcp not installed: the bench extra)")
    print(
        f"stdio, {args.inflight} exchange(s) in flight, {args.rounds} round(s) of "
        f"{args.seconds:g} s per server, interleaved; load average {os.getloadavg()[0]:.2f}"
    )
    children: list[Child] = []
    try:
        for name in names:
            children.append(Child(name))
        for child in children:
            check = child.drive(60.0, 1, limit=1)
            if check.errors or check.exchanges != 1:
                raise RuntimeError(f"{child.name} answered wrong: {check.first_error}")
            print(f"{child.name:10s} answers a whole exchange right")
            if not args.quick:
                child.drive(1.0, args.inflight)
        for round_ in range(args.rounds):
            turn = round_ % len(children)
            for child in children[turn:] + children[:turn]:
                child.runs.append(child.drive(args.seconds, args.inflight))
    finally:
        for child in children:
            child.stop()
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"\n{'server':10s} {'exch/s':>9s} {'p50 ms':>8s} {'p99 ms':>8s} errors")
    rates: dict[str, float] = {}
    errors = 0
    for child in children:
        rates[child.name] = statistics.median(r.rate for r in child.runs)
        lat = [us for r in child.runs for us in r.latencies_us]
        bad = sum(r.errors for r in child.runs)
        errors += bad
        p50, p99 = (_percentile(lat, q) / 1000 if lat else float("nan") for q in (0.5, 0.99))
        print(f"{child.name:10s} {rates[child.name]:9.0f} {p50:8.2f} {p99:8.2f} {bad}")
    print(f"errors: {errors}")
    sdk_rate = rates.get("sdk")
    ratio = f"{rates['ours'] / sdk_rate:.2f}" if sdk_rate else "skipped"
    print(f"ratio ours/sdk: stdio={ratio}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
