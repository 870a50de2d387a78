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
import attrs
import httpx
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
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
from scale.flows import CLIENT_INFO, Outcome, book_trip, http_clients
from scale.semconv import violations

import mrtr_sansio as m
from mrtr_sansio.adapters import CallFailedError
from mrtr_sansio.adapters.http import HttpClient
from mrtr_sansio.otel import DURATION_BUCKETS, FLOW_ID, ROUND, TASK_ID, OtelObserver

__all__ = ["Run", "Span", "check_run", "check_trace", "main", "read_spans", "run_scenarios"]

#: What a span is here: the SDK's JSON form of it, as the exporter wrote it.
Span = Mapping[str, Any]
TOOL_SPAN = "tools/call book_trip"
TASKS = "io.modelcontextprotocol/tasks"
TRACEPARENT = "00-" + "5" * 32 + "-" + "6" * 16 + "-01"  # the refused requests' client context


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


async def run_all(url: str, direct_url: str, deadline: float) -> Run:
    """Every scenario (:func:`run_scenarios`) through nginx at ``url`` and one process at
    ``direct_url``, within ``deadline`` seconds."""
    with anyio.fail_after(deadline):
        async with http_clients(2) as (balanced, direct):
            return await run_scenarios(balanced, url, direct, direct_url)


@attrs.define
class Run:
    """What :func:`run_scenarios` did, for :func:`check_run`: the client's spans (JSON form)
    and measurements, and what each scenario returned."""

    outcome: Outcome
    client: list[dict[str, Any]]
    metrics: dict[str, list[Any]]
    failed_code: int | None = None
    tool_error: bool = False
    session: str | None = None
    refused: list[int] = attrs.field(factory=list)


async def _answer(event: m.InputNeeded) -> dict[str, Any]:
    """The user: a name, a colour, and yes to the confirmation."""
    return {"action": "accept", "content": {"name": "Ada", "color": "blue", "confirm": True}}


async def run_scenarios(
    balanced: httpx.AsyncClient, url: str, direct: httpx.AsyncClient, direct_url: str
) -> Run:
    """Every scenario, one after another, with one traced client: the MRTR flow, a task, a
    failed call and a tool error through the balancer at ``url``; a legacy session (the
    shim's legs) and two refused requests on one process at ``direct_url``."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    observer = OtelObserver(provider, MeterProvider(metric_readers=[reader]))
    outcome = await book_trip(balanced, url, 1, observer=observer)
    balanced.event_hooks = {"request": [], "response": []}
    run = Run(outcome, [], {})
    config = m.ClientConfig(
        client_info=CLIENT_INFO,
        observer=observer,
        capabilities={"extensions": {TASKS: {}}},
        task_poll_interval=0.2,
    )
    async with HttpClient.connect(
        url, config, http=balanced, listen=False, elicitation=_answer
    ) as client:
        # a task: created on one process, polled, answered and read on the next ones
        result = await client.call_tool("confirm_delete", {"filename": "notes.txt"})
        assert result["content"][0]["text"] == "Deleted notes.txt.", result
        # a failed request: the tool needs sampling, which this client did not declare
        try:
            await client.call_tool("test_missing_capability")
        except CallFailedError as exc:
            run.failed_code = exc.error.code
        # a tool error: a result with isError
        run.tool_error = (await client.call_tool("test_error_handling")).get("isError") is True
    legacy = m.ClientConfig(client_info=CLIENT_INFO, observer=observer, era="legacy")
    async with HttpClient.connect(
        direct_url, legacy, http=direct, listen=False, elicitation=_answer
    ) as client:
        run.session = client.session_id
        await client.call_tool("test_input_required_result_multi_round")
    run.refused = await _refusals(direct, direct_url)
    run.client = [json.loads(span.to_json(indent=None)) for span in exporter.get_finished_spans()]
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                run.metrics.setdefault(metric.name, []).extend(metric.data.data_points)
    return run


async def _refusals(http: httpx.AsyncClient, url: str) -> list[int]:
    """A tampered ``requestState`` (-32602) and an unknown legacy session (HTTP 404), both
    with a client trace context, and a body that is not JSON, refused at the HTTP edge
    before it is read (415); the HTTP statuses."""
    meta = {
        m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28",
        m.protocol.CLIENT_CAPABILITIES: {"elicitation": {}},
        "traceparent": TRACEPARENT,
    }
    params = {
        "name": "test_input_required_result_request_state",
        "arguments": {},
        "inputResponses": {"confirm": {"action": "accept", "content": {"ok": True}}},
        "requestState": "tampered",
        "_meta": meta,
    }
    tampered = await http.post(
        url,
        json={"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": params},
        headers={
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/call",
            "mcp-name": str(params["name"]),
        },
    )
    body = {
        "jsonrpc": "2.0",
        "id": 42,
        "method": "tools/list",
        "params": {"_meta": {"traceparent": TRACEPARENT}},
    }
    unknown = await http.post(
        url,
        json=body,
        headers={
            "accept": "application/json, text/event-stream",
            "mcp-session-id": "no-such-session",
            "mcp-protocol-version": "2025-11-25",
        },
    )
    not_json = await http.post(
        url,
        content=b"<call/>",
        headers={"content-type": "application/xml", "mcp-protocol-version": "2026-07-28"},
    )
    return [tampered.status_code, unknown.status_code, not_json.status_code]


def _attributes(span: Span) -> Mapping[str, Any]:
    return span.get("attributes") or {}


def check_run(servers: Mapping[str, Sequence[Span]], run: Run) -> list[str]:
    """Check every scenario's spans (``servers`` by process, as in :func:`check_trace`)
    and every span against the conventions' table; what failed (empty: all as stated)."""
    failed: list[str] = []

    def expect(ok: bool, claim: str) -> None:
        if not ok:
            failed.append(claim)

    where = {id(span): process for process, spans in servers.items() for span in spans}
    written = [span for spans in servers.values() for span in spans]
    for span in [*run.client, *written]:
        failed.extend(violations(span, wire=True))
    by_trace: dict[str, list[Span]] = {}
    for span in [*run.client, *written]:
        by_trace.setdefault(span["context"]["trace_id"], []).append(span)

    def call_trace(name: str) -> list[Span]:
        for span in run.client:
            if span["name"] == name and span.get("kind") == "SpanKind.INTERNAL":
                return by_trace[span["context"]["trace_id"]]
        failed.append(f"the client traced {name!r}")
        return []

    # the task: every process that read or moved it wrote spans linked to its creation
    spans = call_trace("tools/call confirm_delete")
    created = [
        s
        for s in spans
        if s.get("kind") == "SpanKind.SERVER" and s["name"] == "tools/call confirm_delete"
    ]
    expect(len(created) == 1, "one server span created the task")
    task_spans = [s for s in spans if id(s) in where and TASK_ID in _attributes(s)]
    processes = {where[id(s)] for s in task_spans} | {
        where[id(s)] for s in created if id(s) in where
    }
    expect(
        len(processes) == len(servers),
        f"the task's spans come from every process ({sorted(processes)})",
    )
    if created:
        creation = created[0]["context"]["span_id"]
        for span in task_spans:
            if span["name"].startswith("task "):
                expect(
                    span.get("parent_id") == creation,
                    f"{span['name']} is a child of the task's creation",
                )
            elif span.get("kind") == "SpanKind.SERVER":
                links = [link["context"]["span_id"] for link in span.get("links", ())]
                expect(links == [creation], f"{span['name']} links to the task's creation")
    statuses = {
        _attributes(s).get("mrtr.task.status") for s in task_spans if s["name"].startswith("task ")
    }
    expect(
        {"working", "input_required", "completed"} <= statuses,
        f"the task's statuses are recorded ({statuses})",
    )
    moved = {where[id(s)] for s in task_spans if s["name"].startswith("task ")}
    expect(len(moved) >= 2, f"the task was moved by more than one process ({sorted(moved)})")
    for span in spans:
        if span["name"] == "tasks/get":
            expect("gen_ai.operation.name" not in _attributes(span), "tasks/get is no execute_tool")
    # the failed request and the tool error, on both sides
    expect(run.failed_code == -32021, f"the failed call failed with -32021 ({run.failed_code})")
    for name, error in (
        ("tools/call test_missing_capability", "-32021"),
        ("tools/call test_error_handling", "tool_error"),
    ):
        sides = [
            s for s in call_trace(name) if s.get("kind") in ("SpanKind.CLIENT", "SpanKind.SERVER")
        ]
        expect(len(sides) == 2, f"{name}: a client and a server span ({len(sides)})")
        for span in sides:
            expect(
                _attributes(span).get("error.type") == error,
                f"{name}: error.type {error} on {span.get('kind')}",
            )
    expect(run.tool_error, "the tool error came back as a result")
    # the legacy shim: its legs carry their round and the session on both sides
    spans = call_trace("tools/call test_input_required_result_multi_round")
    legs = [s for s in spans if s["name"] == "elicitation/create"]
    server_legs = [s for s in legs if s.get("kind") == "SpanKind.CLIENT"]
    client_legs = [s for s in legs if s.get("kind") == "SpanKind.SERVER"]
    expect(
        sorted(int(_attributes(s).get(ROUND) or 0) for s in server_legs) == [1, 2],
        "the shim's legs are rounds 1 and 2",
    )
    expect(len(client_legs) == 2, "the client answered two legs")
    expect(run.session is not None, "the legacy session has an id")
    sessions = [
        _attributes(s).get("mcp.session.id")
        for s in [
            *legs,
            *(
                s
                for s in spans
                if s.get("kind") == "SpanKind.CLIENT" and s["name"].startswith("tools/call")
            ),
        ]
    ]
    expect(
        set(sessions) == {run.session},
        f"mcp.session.id on every leg and the client's tools/call ({set(sessions)})",
    )
    # the refusals: a server span each, in the client's trace, with its error
    expect(
        run.refused == [400, 404, 415], f"the refusals were answered 400, 404, 415 ({run.refused})"
    )
    refusals = sorted(
        (_attributes(s).get("error.type"), _attributes(s).get("mcp.method.name"))
        for s in by_trace.get("0x" + "5" * 32, ())
    )
    expect(
        refusals == [("-32600", "tools/list"), ("-32602", "tools/call")],
        f"each refusal is a server span ({refusals})",
    )
    edge = [s for s in written if _attributes(s).get("http.response.status_code") == 415]
    expect(
        [(_attributes(s).get("error.type"), _attributes(s).get("mcp.method.name")) for s in edge]
        == [("415", "_OTHER")],
        "the refusal at the HTTP edge is a server span (error.type 415, method _OTHER)",
    )
    # the conventions' metrics, for the client (the servers' are checked in the tests)
    points = run.metrics.get("mcp.client.operation.duration", [])
    errors = {p.attributes.get("error.type") for p in points}
    expect(
        {"-32021", "tool_error"} <= errors,
        f"mcp.client.operation.duration by error.type ({errors})",
    )
    expect(
        all(tuple(p.explicit_bounds) == DURATION_BUCKETS for p in points),
        "the conventions' buckets",
    )
    return failed


def flow_spans(
    servers: Mapping[str, Sequence[Span]], client: Sequence[Span]
) -> tuple[dict[str, list[Span]], list[Span]]:
    """The spans of the ``book_trip`` flow's trace only, by process and the client's."""
    ids = {
        s["context"]["trace_id"]
        for s in client
        if s["name"] == TOOL_SPAN and s.get("kind") == "SpanKind.INTERNAL"
    }
    return (
        {p: [s for s in spans if s["context"]["trace_id"] in ids] for p, spans in servers.items()},
        [s for s in client if s["context"]["trace_id"] in ids],
    )


def run(args: argparse.Namespace, nginx: str, workdir: Path) -> list[str]:
    """Start the processes, run the scenarios, stop them, read the files back and check."""
    ring = workdir / "ring"
    write_ring(ring, [secrets.token_bytes(32)])
    tasks = workdir / "tasks.db"
    tasks.unlink(missing_ok=True)
    files: dict[str, Path] = {}
    servers = []
    proxy = None
    try:
        for i in range(args.processes):
            path = workdir / f"spans-{i + 1}.jsonl"
            path.unlink(missing_ok=True)  # the exporter appends
            extra = ["--trace-file", str(path), "--tasks-db", str(tasks)]
            server = start_server(workdir, f"server-{i + 1}", keys_file=ring, ttl=60, extra=extra)
            servers.append(server)
            files[server.address] = path
        proxy, port = start_nginx(nginx, workdir / "nginx", [s.address for s in servers])
        direct = f"http://{servers[0].address}/mcp"
        result = anyio.run(run_all, f"http://127.0.0.1:{port}/mcp", direct, args.deadline)
    finally:
        if proxy is not None:
            stop(proxy)
        for server in servers:
            stop(server.proc)
    for server in servers:
        if server.proc.returncode not in (0, -15):
            raise ClusterError(f"{server.address} exited with {server.proc.returncode}")
    outcome = result.outcome
    if not outcome.completed:
        return [f"the flow did not complete: {outcome.error or outcome.problem}"]
    spans = {address: read_spans(path) for address, path in files.items() if path.exists()}
    flow, client = flow_spans(spans, result.client)
    rounds, failed = check_trace(flow, client, [leg.upstream for leg in outcome.legs])
    failed += check_run(spans, result)
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
    print("== a task through nginx: which process wrote what")
    for span in sorted(
        (
            s
            for group in spans.values()
            for s in group
            if TASK_ID in (s.get("attributes") or {}) or s["name"] == "tools/call confirm_delete"
        ),
        key=lambda s: s.get("start_time") or "",
    ):
        attributes = span.get("attributes") or {}
        status = attributes.get("mrtr.task.status", "")
        links = [link["context"]["span_id"] for link in span.get("links", ())]
        print(
            f"  {_instance(span)}  {span['name']:<26} {status:<15}"
            f" parent {span.get('parent_id')}  links {links or '-'}"
        )
    total = sum(map(len, spans.values()))
    print(f"  client spans: {len(result.client)}; server spans: {total}")
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
    print("every scenario traced as the conventions say, over three processes: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
