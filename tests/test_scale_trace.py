"""``examples/scale/trace.py``: one trace per call across processes, checked in process.

Three example apps (``examples/http/server.py``'s ``build_app``, one key ring) each export their
spans to a file of their own through ``file_observer``, behind an in-process round-robin
balancer; one ``book_trip`` flow with a traced client; the files are read back and checked with
the script's own :func:`check_trace`. The script itself (real processes behind nginx) runs in
``.ci/run``. The negatives show that the check fails when the trace is not linked.
"""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from scale import flows, trace

from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.otel import FLOW_ID, ROUND, OtelObserver
from test_otel import served

KEY = b"t" * 32
SERVER = Path(__file__).resolve().parents[1] / "examples" / "http" / "server.py"


def _server_module() -> Any:
    spec = importlib.util.spec_from_file_location("example_http_server_trace", SERVER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


server = _server_module()


class RoundRobin(httpx.AsyncBaseTransport):
    """Each request to the next app, named in ``X-Upstream`` as the demo's nginx does."""

    def __init__(self, apps: list[McpHttpApp]) -> None:
        self.backends = [httpx.ASGITransport(app) for app in apps]
        self.turn = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        index = self.turn % len(self.backends)
        self.turn += 1
        response = await self.backends[index].handle_async_request(request)
        response.headers[flows.UPSTREAM_HEADER] = f"app-{index}"
        return response


async def traced_flow(tmp_path: Path, keys: list[bytes] | None) -> tuple[Any, ...]:
    """One flow over three apps with an observer each; (outcome, spans by app, client spans)."""
    paths = [tmp_path / f"spans-{i}.jsonl" for i in range(3)]
    outs = [path.open("a", encoding="utf-8") for path in paths]
    try:
        apps = [
            server.build_app(keys, observer=server.file_observer(out, f"app-{i}"))
            for i, out in enumerate(outs)
        ]
        async with httpx.AsyncClient(transport=RoundRobin(apps)) as http:
            exporter = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            observer = OtelObserver(provider)
            outcome = await flows.book_trip(http, "http://localhost/mcp", 7, observer=observer)
    finally:
        for out in outs:
            out.close()
    spans = {f"app-{i}": trace.read_spans(path) for i, path in enumerate(paths)}
    client = [json.loads(s.to_json(indent=None)) for s in exporter.get_finished_spans()]
    return outcome, spans, client


@pytest.mark.anyio
async def test_a_flow_over_three_apps_is_one_linked_trace(tmp_path: Path) -> None:
    outcome, spans, client = await traced_flow(tmp_path, [KEY])
    assert outcome.completed
    upstreams = [leg.upstream for leg in outcome.legs]
    assert upstreams == ["app-0", "app-1", "app-2"]
    rounds, failed = trace.check_trace(spans, client, upstreams)
    assert failed == []
    assert [r["attributes"][ROUND] for r in rounds] == [1, 2, 3]
    assert {r["attributes"][FLOW_ID] for r in rounds} == {
        rounds[0]["context"]["span_id"].removeprefix("0x")
    }
    assert [len(spans[name]) for name in ("app-0", "app-1", "app-2")] == [1, 1, 1]


@pytest.mark.anyio
async def test_the_check_fails_for_unlinked_or_misplaced_rounds(tmp_path: Path) -> None:
    outcome, spans, client = await traced_flow(tmp_path, [KEY])
    upstreams = [leg.upstream for leg in outcome.legs]
    unlinked = copy.deepcopy(spans)
    unlinked["app-2"][0]["links"] = []
    assert trace.check_trace(unlinked, client, upstreams)[1] == ["round 3 links to round 2's span"]
    other_flow = copy.deepcopy(spans)
    other_flow["app-1"][0]["attributes"][FLOW_ID] = "0" * 16
    (claim,) = trace.check_trace(other_flow, client, upstreams)[1]
    assert claim.startswith("mrtr.flow.id is round 1's span id on every round")
    failed = trace.check_trace(spans, client, ["app-1", "app-0", "app-2"])[1]
    assert failed == [
        "the processes that wrote the rounds are those nginx names (['app-1', 'app-0', 'app-2'])"
    ]
    other_trace = copy.deepcopy(client)
    other_trace[0]["context"]["trace_id"] = "0x" + "1" * 32
    assert trace.check_trace(spans, other_trace, upstreams)[1] == [
        "one trace id over client and servers (got 2)"
    ]


@pytest.mark.anyio
async def test_processes_with_keys_of_their_own_fail_the_flow_not_the_trace(
    tmp_path: Path,
) -> None:
    # the first crossing is refused: the flow fails, and the script reports that first
    outcome, spans, _ = await traced_flow(tmp_path, None)
    assert not outcome.completed
    # round 1, and the retry another process refused (its state is sealed with another key)
    written = [span for process in spans.values() for span in process]
    assert len(written) == 2
    (refused,) = [span for span in written if span["status"]["status_code"] == "ERROR"]
    assert refused["attributes"]["error.type"] == "-32602"
    assert refused["attributes"]["rpc.response.status_code"] == "-32602"
    assert refused["attributes"]["mcp.method.name"] == "tools/call"


def _flow_spans(
    spans: dict[str, list[Any]], client: list[Any]
) -> tuple[dict[str, list[Any]], list[Any]]:
    """The spans of the book_trip flow's trace only."""
    (call,) = [
        s for s in client if s["name"] == trace.TOOL_SPAN and s["kind"] == "SpanKind.INTERNAL"
    ]
    ids = call["context"]["trace_id"]
    return (
        {p: [s for s in group if s["context"]["trace_id"] == ids] for p, group in spans.items()},
        [s for s in client if s["context"]["trace_id"] == ids],
    )


@pytest.mark.anyio
async def test_every_scenario_over_three_apps_is_traced_as_the_conventions_say(
    tmp_path: Path,
) -> None:
    paths = [tmp_path / f"spans-{i}.jsonl" for i in range(3)]
    outs = [path.open("a", encoding="utf-8") for path in paths]
    db = str(tmp_path / "tasks.db")
    try:
        apps = [
            server.build_app([KEY], tasks_db=db, observer=server.file_observer(out, f"app-{i}"))
            for i, out in enumerate(outs)
        ]
        # the legacy session streams (SSE) while the client answers: app-0 under uvicorn
        with served(apps[0]) as direct_url:
            async with (
                httpx.AsyncClient(transport=RoundRobin(apps)) as balanced,
                httpx.AsyncClient(timeout=20) as direct,
            ):
                with anyio.fail_after(60):
                    run = await trace.run_scenarios(
                        balanced, "http://localhost/mcp", direct, direct_url
                    )
    finally:
        for out in outs:
            out.close()
    spans = {f"app-{i}": trace.read_spans(path) for i, path in enumerate(paths)}
    assert run.outcome.completed
    flow_servers, flow_client = _flow_spans(spans, run.client)
    upstreams = [leg.upstream for leg in run.outcome.legs]
    assert trace.check_trace(flow_servers, flow_client, upstreams)[1] == []
    assert trace.check_run(spans, run) == []
    # the check fails when a span breaks the conventions or the task's trace is cut
    broken = copy.deepcopy(spans)
    for span in broken["app-1"]:
        span["attributes"].pop("mcp.method.name", None)
        span["links"] = []
    failed = trace.check_run(broken, run)
    assert any("mcp.method.name is required" in claim for claim in failed)
    assert any("links to the task's creation" in claim for claim in failed)
