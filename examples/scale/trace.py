"""One trace per call across processes: a flow whose three rounds three server processes answer.

    python examples/scale/trace.py [--processes 3] [--workdir DIR]

Starts ``--processes`` example servers (``examples/http/server.py`` under uvicorn, sharing a
key ring file), each exporting its OpenTelemetry spans to a file of its own
(``--trace-file``, one JSON object a line, the SDK's exporter), behind nginx as a plain
round-robin balancer. One ``book_trip`` flow runs through nginx with our client, itself
traced by an :class:`~mrtr_sansio.otel.OtelObserver` (spans kept in memory): round-robin sends
each of its three requests to the next process. The servers are then stopped (their files
complete) and the files read back. Checks: the flow completed; its rounds 1, 2, 3 were
answered by three different processes (nginx's ``X-Upstream``, and the span's
``service.instance.id``); every span, client and servers, is in ONE trace; each server round
is the child of the client's span for that request and, from round 2 on, links to the
previous round's span, which another process wrote; ``mrtr.flow.id`` is the same on all
rounds (the first round's span id). Nothing links the rounds but what rode in the sealed
``requestState`` and the request's ``_meta``: the processes share only the key ring.

Prints the rounds and exits 1 if a check fails (2 without nginx). Linux only, like the other
scale scripts; nginx from Debian's packages (``apt-get install -y nginx``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import secrets
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scale.cluster import (
    NGINX_MISSING,
    ClusterError,
    find_nginx,
    start_nginx,
    start_server,
    stop,
    write_ring,
)
from scale.flows import Outcome, book_trip, http_clients

from mrtr_sansio.otel import FLOW_ID, ROUND, OtelObserver

__all__ = ["Span", "check_trace", "main", "read_spans"]

#: What a span is here: the SDK's JSON form of it, as the exporter wrote it.
Span = Mapping[str, Any]
TOOL_SPAN = "tools/call book_trip"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", type=int, default=3, help="server processes (default 3)")
    parser.add_argument("--workdir", type=Path, help="keep span files, logs and configuration")
    parser.add_argument(
        "--deadline", type=float, default=60.0, help="seconds the flow may take (default 60)"
    )
    args = parser.parse_args(argv)
    if args.processes != 3:
        parser.error("--processes must be 3: book_trip has three rounds, one per process")
    return args


def read_spans(path: Path) -> list[dict[str, Any]]:
    """The spans of one exporter's file (one JSON object a line)."""
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def _instance(span: Span) -> str | None:
    value = span.get("resource", {}).get("attributes", {}).get("service.instance.id")
    return value if isinstance(value, str) else None


def check_trace(
    servers: Mapping[str, Sequence[Span]], client: Sequence[Span], upstreams: Sequence[str | None]
) -> tuple[list[Span], list[str]]:
    """Check one flow's spans: ``servers`` by process (its address), ``client`` the client's,
    ``upstreams`` the process nginx says answered each request. Returns the server round
    spans in round order and what failed (empty: one linked trace as stated)."""
    failed: list[str] = []
    where = {id(span): process for process, spans in servers.items() for span in spans}
    rounds = sorted(
        (s for spans in servers.values() for s in spans if s.get("kind") == "SpanKind.SERVER"),
        key=lambda s: s.get("attributes", {}).get(ROUND, 0),
    )

    def expect(ok: bool, claim: str) -> None:
        if not ok:
            failed.append(claim)

    numbers = [s.get("attributes", {}).get(ROUND) for s in rounds]
    expect(numbers == [1, 2, 3], f"the server spans are rounds 1, 2, 3 (got {numbers})")
    expect(all(s.get("name") == TOOL_SPAN for s in rounds), f"every round is {TOOL_SPAN!r}")
    processes = [where[id(s)] for s in rounds]
    expect(len(set(processes)) == len(rounds), f"each round on its own process ({processes})")
    expect(
        processes == list(upstreams),
        f"the processes that wrote the rounds are those nginx names ({list(upstreams)})",
    )
    expect(
        [_instance(s) for s in rounds] == processes,
        "each round span's service.instance.id is its process",
    )
    everything = [*client, *(s for spans in servers.values() for s in spans)]
    traces = {s["context"]["trace_id"] for s in everything}
    expect(len(traces) == 1, f"one trace id over client and servers (got {len(traces)})")
    client_requests = [s for s in client if s.get("kind") == "SpanKind.CLIENT"]
    client_requests.sort(key=lambda s: s.get("start_time") or "")
    expect(
        [s.get("parent_id") for s in rounds] == [s["context"]["span_id"] for s in client_requests],
        "each round's parent is the client's span of that request",
    )
    for before, after in itertools.pairwise(rounds):
        links = [link["context"]["span_id"] for link in after.get("links", ())]
        n = after.get("attributes", {}).get(ROUND)
        expect(
            links == [before["context"]["span_id"]],
            f"round {n} links to round {n - 1 if isinstance(n, int) else '?'}'s span",
        )
        expect(where[id(before)] != where[id(after)], f"round {n}'s link crosses processes")
    flows = {s.get("attributes", {}).get(FLOW_ID) for s in rounds}
    first = rounds[0]["context"]["span_id"].removeprefix("0x") if rounds else None
    expect(flows == {first}, f"mrtr.flow.id is round 1's span id on every round ({flows})")
    return rounds, failed


async def run_flow(url: str, deadline: float) -> tuple[Outcome, list[dict[str, Any]]]:
    """One book_trip flow through ``url`` with a traced client; its outcome and client spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observer = OtelObserver(provider)
    with anyio.fail_after(deadline):
        async with http_clients(1) as (http,):
            outcome = await book_trip(http, url, 1, observer=observer)
    spans = [json.loads(span.to_json(indent=None)) for span in exporter.get_finished_spans()]
    return outcome, spans


def run(args: argparse.Namespace, nginx: str, workdir: Path) -> list[str]:
    """Start the processes, run the flow, stop them, read the files back and check."""
    ring = workdir / "ring"
    write_ring(ring, [secrets.token_bytes(32)])
    files: dict[str, Path] = {}
    servers = []
    proxy = None
    try:
        for i in range(args.processes):
            path = workdir / f"spans-{i + 1}.jsonl"
            path.unlink(missing_ok=True)  # the exporter appends
            extra = ["--trace-file", str(path)]
            server = start_server(workdir, f"server-{i + 1}", keys_file=ring, ttl=60, extra=extra)
            servers.append(server)
            files[server.address] = path
        proxy, port = start_nginx(nginx, workdir / "nginx", [s.address for s in servers])
        outcome, client = anyio.run(run_flow, f"http://127.0.0.1:{port}/mcp", args.deadline)
    finally:
        if proxy is not None:
            stop(proxy)
        for server in servers:
            stop(server.proc)
    for server in servers:
        if server.proc.returncode not in (0, -15):
            raise ClusterError(f"{server.address} exited with {server.proc.returncode}")
    if not outcome.completed:
        return [f"the flow did not complete: {outcome.error or outcome.problem}"]
    spans = {address: read_spans(path) for address, path in files.items() if path.exists()}
    rounds, failed = check_trace(spans, client, [leg.upstream for leg in outcome.legs])
    print(f"== one book_trip flow, {len(outcome.legs)} requests through nginx")
    for span in rounds:
        attributes = span.get("attributes", {})
        links = [link["context"]["span_id"] for link in span.get("links", ())]
        context = span["context"]
        print(
            f"  round {attributes.get(ROUND)}: {_instance(span)}  trace {context['trace_id']}"
            f"  span {context['span_id']}  parent {span.get('parent_id')}"
            f"  links {links or '-'}  flow {attributes.get(FLOW_ID)}"
        )
    print(f"  client spans: {len(client)}; server spans: {sum(map(len, spans.values()))}")
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    nginx = find_nginx()
    if nginx is None:
        print(NGINX_MISSING, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="mrtr-trace-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        failed = run(args, nginx, workdir)
    for claim in failed:
        print(f"  check FAILED: {claim}")
    if failed:
        return 1
    print("one linked trace over three processes: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
