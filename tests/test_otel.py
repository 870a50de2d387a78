"""One trace per call: the observer facts, the sealed carry, and the OpenTelemetry observer.

Our client and our servers talk in memory (bytes through ``data_to_send``/``receive_data``);
a modern call's rounds go to the servers in turn, as behind a load balancer, and the servers
share one key ring. Spans are read back from the OpenTelemetry SDK's in-memory exporter.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from scale import semconv

from helpers import Clock
from mrtr_sansio import (
    NEED_DATA,
    UNSEALED,
    CallCompleted,
    CallFailed,
    ClientConfig,
    ClientConnection,
    Event,
    InputNeeded,
    InputRequiredResult,
    InvalidMessage,
    JsonRpcError,
    Limits,
    LocalProtocolError,
    RequestReceived,
    ServerConfig,
    ServerConnection,
    elicit_form,
)
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.adapters.serve import http_server
from mrtr_sansio.http import HttpRequestFacts
from mrtr_sansio.observe import (
    CARRY_MAX_BYTES,
    CallFinished,
    CallRoundSent,
    CallRoundUnsent,
    CallStarted,
    Fact,
    LegAnswered,
    LegKey,
    LegReceived,
    LegReplied,
    LegSent,
    LegTimedOut,
    RequestAnswered,
    RequestStarted,
    SessionEnded,
    SessionStarted,
    TaskStatusChanged,
    Transport,
)
from mrtr_sansio.otel import DURATION_BUCKETS, FLOW_ID, INPUT_KEYS, ROUND, TASK_ID, OtelObserver
from mrtr_sansio.sealing import RequestStateSecurity, SwappableStateProtector
from mrtr_sansio.tasks import InMemoryTaskStore, RunAsTask, Task, TaskSettings, TaskStatus

FORM = {"type": "object", "properties": {"v": {"type": "string"}}}
CAPS: dict[str, Any] = {"elicitation": {"form": {}}}
TASK_CAPS: dict[str, Any] = {**CAPS, "extensions": {"io.modelcontextprotocol/tasks": {}}}
ENVELOPE: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
KEYS = [b"k" * 32]
ENVELOPE_CAPS = "io.modelcontextprotocol/clientCapabilities"
Handler = Callable[[RequestReceived], Any]


class Recorder:
    """An observer that keeps every fact and carries a fixed context."""

    def __init__(self, carry: Mapping[str, Any] | None = None) -> None:
        self.facts: list[Fact] = []
        self.asked: list[tuple[int, Any]] = []
        self._carry = carry

    def observe(self, fact: Fact) -> None:
        self.facts.append(fact)

    def carry(self, connection: int, request_id: Any) -> Mapping[str, str] | None:
        self.asked.append((connection, request_id))
        return self._carry

    def of(self, kind: type[Fact]) -> list[Any]:
        return [f for f in self.facts if type(f) is kind]


def three_rounds(event: RequestReceived) -> Any:
    """Asks for ``a``, then ``b``, then completes with both answers."""
    state = event.request_state or {}
    got = {k: v["content"]["v"] for k, v in event.input_responses.items()}
    state = {**state, **got}
    for key in ("a", "b"):
        if key not in state:
            return InputRequiredResult(
                input_requests={key: elicit_form(f"give {key}", FORM)}, request_state=state
            )
    return {"content": [{"type": "text", "text": state["a"] + state["b"]}]}


class Net:
    """Our client and several server connections in memory; each client message goes to the
    next server in turn (a legacy session keeps to ``servers[0]``)."""

    def __init__(
        self, client: ClientConnection, servers: Sequence[ServerConnection], handler: Handler
    ) -> None:
        self.client = client
        self.servers = servers
        self.handler = handler
        self.turn = 0
        self.events: list[Event] = []

    def pump(self, answer: Callable[[InputNeeded], Mapping[str, Any] | None] | None = None) -> None:
        """Move messages until nothing moves; ``answer`` fulfils each InputNeeded (None
        from it: the application holds that one)."""
        for _ in range(100):
            moved = False
            data = self.client.data_to_send()
            if data:
                moved = True
                for line in data.splitlines(keepends=True):
                    server = self.servers[self.turn % len(self.servers)]
                    if self.client.era is not None and self.client.era.value == "modern":
                        self.turn += 1
                    server.receive_data(line)
            for server in self.servers:
                while (event := server.next_event()) is not NEED_DATA:
                    moved = True
                    if isinstance(event, RequestReceived) and event.task_id is not None:
                        server.settle_task(event, self.handler(event))
                    elif isinstance(event, RequestReceived):
                        server.respond(event.request_id, self.handler(event))
                out = server.data_to_send()
                if out:
                    moved = True
                    self.client.receive_data(out)
            for event in self.client.events():
                moved = True
                self.events.append(event)
                if isinstance(event, InputNeeded):
                    assert answer is not None
                    result = answer(event)
                    if result is not None:
                        self.client.fulfil(event, result)
            if not moved:
                return
        raise AssertionError("the exchange did not settle in 100 steps")


def accept(event: InputNeeded) -> dict[str, Any]:
    return {"action": "accept", "content": {"v": str(event.key)}}


@pytest.fixture(autouse=True)
def conventions(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ReadableSpan]]:
    """Every span any in-memory exporter receives in a test is held to the conventions'
    table (``examples/scale/semconv.py``) when the test ends."""
    seen: list[ReadableSpan] = []
    export = InMemorySpanExporter.export

    def keep(self: InMemorySpanExporter, spans: Sequence[ReadableSpan]) -> Any:
        seen.extend(spans)
        return export(self, spans)

    monkeypatch.setattr(InMemorySpanExporter, "export", keep)
    yield seen
    assert [v for span in seen for v in semconv.violations(span)] == []


@pytest.fixture
def otel() -> tuple[OtelObserver, InMemorySpanExporter, InMemoryMetricReader]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    return OtelObserver(provider, meters, to_epoch=lambda t: t), exporter, reader


def metric_points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    out: dict[str, list[Any]] = {}
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                out.setdefault(metric.name, []).extend(metric.data.data_points)
    return out


def modern_net(
    observer: Any,
    handler: Handler = three_rounds,
    processes: int = 1,
    *,
    client_observer: Any = None,
    caps: Mapping[str, Any] = CAPS,
    **server: Any,
) -> Net:
    clock = Clock(1_800_000_000.0)
    server.setdefault("request_state", RequestStateSecurity(keys=KEYS))
    servers = [
        ServerConnection(
            ServerConfig(
                observer=observer,
                clock=clock,
                **server,
            )
        )
        for _ in range(processes)
    ]
    client = ClientConnection(
        ClientConfig(capabilities=caps, observer=client_observer, clock=clock)
    )
    return Net(client, servers, handler)


def by_name(spans: Sequence[ReadableSpan], kind: SpanKind) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.kind is kind), key=lambda s: s.start_time or 0)


# --- the facts --------------------------------------------------------------------------


def test_a_three_round_call_reports_each_round_and_carries_the_context_onward() -> None:
    carry = {"flow": "f1", "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    rec = Recorder(carry)
    net = modern_net(rec)
    call = net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(accept)
    assert isinstance(net.events[-1], CallCompleted)
    assert net.events[-1].call is call
    started = rec.of(RequestStarted)
    assert [s.round for s in started] == [1, 2, 3]
    assert [s.target for s in started] == ["join"] * 3
    assert started[0].carried is None
    # what the observer handed over at each input_required came back sealed in the state
    assert started[1].carried == started[2].carried == carry
    answered = rec.of(RequestAnswered)
    assert [(a.result_type, a.input_keys) for a in answered] == [
        ("input_required", ("a",)),
        ("input_required", ("b",)),
        ("complete", ()),
    ]
    assert all(f.at == 1_800_000_000.0 for f in rec.facts)


def test_the_client_reports_its_call_and_sends_the_observer_s_trace_keys_only() -> None:
    client_rec = Recorder({"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01", "x": "y"})
    server_rec = Recorder()
    net = modern_net(server_rec, client_observer=client_rec)
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(accept)
    sent = client_rec.of(CallRoundSent)
    assert [s.round for s in sent] == [1, 2, 3]
    assert client_rec.of(CallStarted)[0].target == "join"
    finished = client_rec.of(CallFinished)
    assert [(f.outcome, f.rounds) for f in finished] == [("CallCompleted", 2)]
    # each request's _meta carried the observer's traceparent, and not its other keys
    assert [s.trace for s in server_rec.of(RequestStarted)] == [
        {"traceparent": client_rec._carry["traceparent"]}  # type: ignore[index]
    ] * 3


@pytest.mark.parametrize(
    "carry",
    [
        None,
        {},
        {"flow": 1},
        "not a mapping",
        {"flow": "x" * (CARRY_MAX_BYTES - len('{"flow":""}') + 1)},
    ],
)
def test_a_carry_that_cannot_be_sealed_is_dropped(carry: Any) -> None:
    rec = Recorder(carry)
    net = modern_net(rec)
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(accept)
    assert isinstance(net.events[-1], CallCompleted)
    assert [s.carried for s in rec.of(RequestStarted)] == [None, None, None]


def test_a_carry_at_the_limit_is_sealed() -> None:
    carry = {"flow": "x" * (CARRY_MAX_BYTES - len('{"flow":""}'))}
    rec = Recorder(carry)
    net = modern_net(rec)
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(accept)
    assert [s.carried for s in rec.of(RequestStarted)] == [None, carry, carry]


class PlainProtector:
    """A protector that cannot seal a carry (no ``seals_carry``): forwards to a ring."""

    def __init__(self) -> None:
        self.inner = RequestStateSecurity(keys=KEYS)

    def seal(self, state: Any, binding: Any, round: int, now: float) -> str:
        return self.inner.seal(state, binding, round, now)

    def unseal(self, token: str, binding: Any, now: float) -> Any:
        return self.inner.unseal(token, binding, now)


def test_a_swappable_protector_forwards_the_carry_across_a_swap() -> None:
    carry = {"flow": "f1", "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    rec = Recorder(carry)
    protector = SwappableStateProtector(RequestStateSecurity(keys=KEYS))
    net = modern_net(rec, processes=2, request_state=protector)
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(accept)
    assert isinstance(net.events[-1], CallCompleted)
    assert [s.carried for s in rec.of(RequestStarted)] == [None, carry, carry]
    # a ring swapped in (the same keys, a new object) keeps carrying
    protector.swap(RequestStateSecurity(keys=KEYS))
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(accept)
    assert [s.carried for s in rec.of(RequestStarted)[3:]] == [None, carry, carry]


def test_a_swappable_protector_drops_the_carry_for_a_protector_that_cannot_seal_it() -> None:
    rec = Recorder({"flow": "f1"})
    protector = SwappableStateProtector(PlainProtector())
    net = modern_net(rec, request_state=protector)
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(accept)
    assert isinstance(net.events[-1], CallCompleted)
    assert [s.carried for s in rec.of(RequestStarted)] == [None, None, None]
    assert len(rec.asked) == 2  # asked, offered, and dropped by the plain protector


def test_unsealed_state_carries_nothing() -> None:
    rec = Recorder({"flow": "f"})
    clock = Clock(1_800_000_000.0)

    def handler(event: RequestReceived) -> Any:
        if event.request_state is None:
            return InputRequiredResult(
                input_requests={"a": elicit_form("a", FORM)}, request_state="s"
            )
        return {"content": []}

    server = ServerConnection(ServerConfig(request_state=UNSEALED, observer=rec, clock=clock))
    client = ClientConnection(ClientConfig(capabilities=CAPS, clock=clock))
    net = Net(client, [server], handler)
    net.client.call("tools/call", {"name": "t", "arguments": {}})
    net.pump(accept)
    assert [s.carried for s in rec.of(RequestStarted)] == [None, None]
    assert rec.asked == []


def test_without_an_observer_nothing_is_asked_or_added() -> None:
    net = modern_net(None)
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(accept)
    assert isinstance(net.events[-1], CallCompleted)
    assert net.client._report is None  # no observer: no reporter, nothing to pay
    assert net.servers[0]._observer is None


def test_importing_the_package_imports_no_opentelemetry() -> None:
    code = (
        "import sys, mrtr_sansio, mrtr_sansio.observe, mrtr_sansio.adapters.serve\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


# --- OpenTelemetry ----------------------------------------------------------------------


def test_a_three_round_call_on_two_processes_is_one_trace_of_linked_rounds(otel: Any) -> None:
    observer, exporter, reader = otel
    # two ServerConnections sharing a key ring stand for two processes; the client's
    # observer is another instance, as in another process
    client_exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(client_exporter))
    client_observer = OtelObserver(provider, MeterProvider(), to_epoch=lambda t: t)
    net = modern_net(observer, processes=2, client_observer=client_observer)
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(accept)
    assert isinstance(net.events[-1], CallCompleted)
    server_spans = by_name(exporter.get_finished_spans(), SpanKind.SERVER)
    client_spans = client_exporter.get_finished_spans()
    (call_span,) = [
        s for s in client_spans if s.kind is SpanKind.INTERNAL and s.name == "tools/call join"
    ]
    round_spans = by_name(client_spans, SpanKind.CLIENT)
    waits = [s for s in client_spans if s.name.startswith("input ")]
    assert [s.name for s in waits] == ["input a", "input b"]
    assert len(server_spans) == 3
    assert len(round_spans) == 3
    trace_ids = {s.context.trace_id for s in [*server_spans, *client_spans]}
    assert trace_ids == {call_span.context.trace_id}
    for server_span, round_span in zip(server_spans, round_spans, strict=False):
        assert server_span.parent is not None
        assert server_span.parent.span_id == round_span.context.span_id
        assert round_span.parent is not None
        assert round_span.parent.span_id == call_span.context.span_id
    # each round links to the one before, across the two processes
    assert list(server_spans[0].links) == []
    for before, after in itertools.pairwise(server_spans):
        (link,) = after.links
        assert link.context.span_id == before.context.span_id
    flows = {s.attributes[FLOW_ID] for s in server_spans}  # type: ignore[index]
    assert flows == {format(server_spans[0].context.span_id, "016x")}
    first = server_spans[0].attributes
    assert first is not None
    assert first["mcp.method.name"] == "tools/call"
    assert first["gen_ai.tool.name"] == "join"
    assert first["jsonrpc.request.id"] == "0"
    assert first["mcp.protocol.version"] == "2026-07-28"
    assert [s.attributes[ROUND] for s in server_spans] == [1, 2, 3]  # type: ignore[index]
    assert [s.attributes.get(INPUT_KEYS) for s in server_spans] == [("a",), ("b",), None]  # type: ignore[union-attr]
    assert all(s.name == "tools/call join" for s in server_spans)
    assert call_span.attributes[ROUND] == 3  # type: ignore[index]
    points = metric_points(reader)
    assert sum(p.value for p in points["mrtr.server.input_required"]) == 2
    assert sum(p.count for p in points["mcp.server.operation.duration"]) == 3
    (rounds,) = points["mrtr.server.flow.rounds"]
    assert rounds.sum == 3


def test_rounds_without_client_trace_context_still_make_one_trace(otel: Any) -> None:
    observer, exporter, _ = otel
    net = modern_net(observer, processes=3)
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(accept)
    spans = by_name(exporter.get_finished_spans(), SpanKind.SERVER)
    assert len({s.context.trace_id for s in spans}) == 1
    assert spans[0].parent is None
    assert [s.parent.span_id for s in spans[1:]] == [s.context.span_id for s in spans[:2]]  # type: ignore[union-attr]


def test_a_missing_capability_refusal_is_an_error_span_and_counted(otel: Any) -> None:
    observer, exporter, reader = otel
    net = modern_net(observer, caps={})
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(accept)
    assert isinstance(net.events[-1], CallFailed)
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "-32021"
    (point,) = metric_points(reader)["mrtr.server.missing_capability"]
    assert point.value == 1


def legacy_net(
    observer: Any, handler: Handler = three_rounds, *, client_observer: Any = None, **server: Any
) -> Net:
    clock = Clock(1_800_000_000.0)
    srv = ServerConnection(ServerConfig(observer=observer, clock=clock, **server))
    client = ClientConnection(
        ClientConfig(era="legacy", capabilities=CAPS, clock=clock, observer=client_observer)
    )
    return Net(client, [srv], handler)


def test_a_legacy_shim_call_is_one_request_span_with_a_child_per_leg(otel: Any) -> None:
    observer, exporter, reader = otel
    net = legacy_net(observer)
    net.pump()
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    clock = net.servers[0].config.clock
    assert isinstance(clock, Clock)

    def slow_user(event: InputNeeded) -> dict[str, Any]:
        clock.now += 2.5  # the user takes 2.5 s to answer each leg
        return accept(event)

    net.pump(slow_user)
    assert isinstance(net.events[-1], CallCompleted)
    spans = exporter.get_finished_spans()
    (request,) = [s for s in spans if s.kind is SpanKind.SERVER and s.name == "tools/call join"]
    legs = by_name(spans, SpanKind.CLIENT)
    assert [s.attributes["mrtr.leg.key"] for s in legs] == ["a", "b"]  # type: ignore[index]
    assert all(s.parent is not None and s.parent.span_id == request.context.span_id for s in legs)
    assert [((s.end_time or 0) - (s.start_time or 0)) / 1e9 for s in legs] == [2.5, 2.5]
    assert request.attributes["mrtr.legacy"] is True
    assert request.attributes["mcp.protocol.version"] == "2025-11-25"
    points = metric_points(reader)
    assert sum(p.value for p in points["mrtr.server.shim.legs"]) == 2
    assert sum(p.sum for p in points["mrtr.server.shim.leg.duration"]) == 5.0


def test_a_leg_that_times_out_ends_its_span_with_the_wait(otel: Any) -> None:
    observer, exporter, _ = otel
    rec = Recorder()

    class Both:
        def observe(self, fact: Fact) -> None:
            rec.observe(fact)
            observer.observe(fact)

        def carry(self, connection: int, request_id: Any) -> Mapping[str, str] | None:
            return observer.carry(connection, request_id)  # type: ignore[no-any-return]

    net = legacy_net(Both(), legacy_leg_timeout=30.0)
    net.pump()
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(lambda e: None)  # the application holds the leg
    server = net.servers[0]
    clock = server.config.clock
    assert isinstance(clock, Clock)
    clock.now += 30.0
    server.handle_timer(clock.now)
    assert len(rec.of(LegSent)) == 1
    assert [f.key for f in rec.of(LegTimedOut)] == ["a"]
    assert rec.of(LegAnswered) == []
    spans = exporter.get_finished_spans()
    (leg,) = by_name(spans, SpanKind.CLIENT)
    assert leg.attributes["error.type"] == "timeout"  # type: ignore[index]
    assert ((leg.end_time or 0) - (leg.start_time or 0)) / 1e9 == 30.0
    (request,) = by_name(spans, SpanKind.SERVER)
    assert request.status.status_code is StatusCode.ERROR


def test_a_leg_answered_with_an_error_is_an_error_leg(otel: Any) -> None:
    observer, exporter, _ = otel
    net = legacy_net(observer)
    net.pump()
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(lambda e: None)
    needed = [e for e in net.events if isinstance(e, InputNeeded)]
    net.client.reject(needed[0], JsonRpcError(-1, "no"))
    net.pump()
    (leg,) = by_name(exporter.get_finished_spans(), SpanKind.CLIENT)
    assert leg.attributes["error.type"] == "error"  # type: ignore[index]


def test_a_task_records_its_status_changes_as_events(otel: Any) -> None:
    observer, exporter, reader = otel
    store = InMemoryTaskStore()

    def handler(event: RequestReceived) -> Any:
        if event.task_id is None:
            return RunAsTask()
        return {"content": [{"type": "text", "text": "done"}]}

    net = modern_net(
        observer,
        handler,
        caps=TASK_CAPS,
        tasks=TaskSettings(store=store, tools={"slow": "optional"}),
    )
    net.client.call("tools/call", {"name": "slow", "arguments": {}})
    clock = net.servers[0].config.clock
    assert isinstance(clock, Clock)
    for _ in range(5):
        net.pump(accept)
        if isinstance(net.events[-1], CallCompleted):
            break
        clock.now += 1.0
        net.client.handle_timer(clock.now)
    assert isinstance(net.events[-1], CallCompleted)
    spans = exporter.get_finished_spans()
    changes = [s for s in spans if s.name.startswith("task ")]
    assert [s.name for s in changes] == ["task working", "task completed"]
    statuses = [e.attributes["mrtr.task.status"] for s in changes for e in s.events]
    assert statuses == ["working", "completed"]
    (create,) = [s for s in spans if s.kind is SpanKind.SERVER and s.name == "tools/call slow"]
    # each change is a child of the creating request, through the context stored with the task
    assert all(s.parent is not None and s.parent.span_id == create.context.span_id for s in changes)
    assert create.attributes["mrtr.result_type"] == "task"
    (task_id,) = {s.attributes[TASK_ID] for s in changes}
    assert store.get(task_id).trace["traceparent"].split("-")[2] == format(  # type: ignore[union-attr,index]
        create.context.span_id, "016x"
    )
    polls = [s for s in spans if s.kind is SpanKind.SERVER and s.name == "tasks/get"]
    assert polls
    for poll in polls:  # every poll's span links to the task's creation
        assert poll.attributes[TASK_ID] == task_id
        assert [link.context.span_id for link in poll.links] == [create.context.span_id]
        assert "gen_ai.operation.name" not in (poll.attributes or {})
    points = metric_points(reader)["mrtr.server.tasks"]
    assert {p.attributes["mrtr.task.status"]: p.value for p in points} == {
        "working": 1,
        "completed": 1,
    }


def test_task_facts_name_the_creating_request() -> None:
    rec = Recorder()

    def handler(event: RequestReceived) -> Any:
        return RunAsTask() if event.task_id is None else {"content": []}

    net = modern_net(
        rec,
        handler,
        caps=TASK_CAPS,
        tasks=TaskSettings(store=InMemoryTaskStore(), tools={"slow": "optional"}),
    )
    net.client.call("tools/call", {"name": "slow", "arguments": {}})
    net.pump(accept)
    changes = rec.of(TaskStatusChanged)
    assert changes[0].status == "working"
    assert changes[0].request_id == rec.of(RequestStarted)[0].request_id
    assert all(c.request_id is None for c in changes[1:])


@pytest.mark.parametrize(
    ("method", "params", "name", "attribute"),
    [
        ("prompts/get", {"name": "greet"}, "prompts/get greet", ("gen_ai.prompt.name", "greet")),
        (
            "resources/read",
            {"uri": "file:///a"},
            "resources/read",
            ("mcp.resource.uri", "file:///a"),
        ),
    ],
)
def test_prompts_and_resources_name_their_target(
    otel: Any, method: str, params: dict[str, Any], name: str, attribute: tuple[str, str]
) -> None:
    observer, exporter, _ = otel

    def handler(event: RequestReceived) -> Any:
        if method == "prompts/get":
            return {"messages": []}
        return {"contents": []}

    net = modern_net(observer, handler, client_observer=observer)
    net.client.call(method, params)
    net.pump()
    assert isinstance(net.events[-1], CallCompleted)
    (server,) = by_name(exporter.get_finished_spans(), SpanKind.SERVER)
    assert server.name == name
    assert server.attributes[attribute[0]] == attribute[1]  # type: ignore[index]
    (client,) = by_name(exporter.get_finished_spans(), SpanKind.CLIENT)
    assert client.name == name
    assert client.attributes[attribute[0]] == attribute[1]  # type: ignore[index]


def test_a_failed_call_is_an_error_on_the_client_too(otel: Any) -> None:
    observer, exporter, reader = otel
    net = modern_net(observer, lambda e: JsonRpcError(-32000, "boom"), client_observer=observer)
    net.client.call("tools/call", {"name": "t", "arguments": {}})
    net.pump()
    assert isinstance(net.events[-1], CallFailed)
    spans = exporter.get_finished_spans()
    (round_,) = by_name(spans, SpanKind.CLIENT)
    (call,) = by_name(spans, SpanKind.INTERNAL)
    assert round_.status.status_code is StatusCode.ERROR
    assert call.status.status_code is StatusCode.ERROR
    assert call.attributes["error.type"] == "-32000"  # type: ignore[index]
    # the request's own span: the code as error.type and status code, the message as status
    assert round_.attributes["error.type"] == "-32000"  # type: ignore[index]
    assert round_.attributes["rpc.response.status_code"] == "-32000"  # type: ignore[index]
    assert round_.status.description == "boom"
    (server,) = by_name(spans, SpanKind.SERVER)
    assert server.attributes["rpc.response.status_code"] == "-32000"  # type: ignore[index]
    points = metric_points(reader)
    assert sum(p.count for p in points["mcp.client.operation.duration"]) == 1
    (rounds,) = points["mrtr.client.call.rounds"]
    assert rounds.sum == 1


def test_a_cancelled_call_ends_its_spans_while_the_user_is_asked(otel: Any) -> None:
    observer, exporter, _ = otel
    rec = Recorder()
    net = modern_net(None, client_observer=observer)
    call = net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(lambda e: None)
    assert net.client.cancel(call)
    spans = exporter.get_finished_spans()
    (wait,) = [s for s in spans if s.name == "input a"]
    (span,) = [s for s in spans if s.name == "tools/call join" and s.kind is SpanKind.INTERNAL]
    assert span.attributes["mrtr.outcome"] == "CallCancelled"
    assert span.status.status_code is StatusCode.ERROR
    assert wait.end_time is not None
    assert rec.facts == []


def test_the_example_trace_is_one_trace_whose_rounds_link_across_processes() -> None:
    import otel_trace

    spans = otel_trace.run()
    rounds = sorted(
        (s for _, s in spans if s.kind is SpanKind.SERVER), key=lambda s: s.start_time or 0
    )
    assert [p for p, s in spans if s.kind is SpanKind.SERVER].count("server-2") == 1
    assert len({s.context.trace_id for _, s in spans}) == 1
    assert [[link.context.span_id for link in s.links] for s in rounds] == [
        [],
        [rounds[0].context.span_id],
        [rounds[1].context.span_id],
    ]


@pytest.mark.parametrize("how", ["cancelled", "closed"])
def test_a_request_ended_without_an_answer_ends_its_spans(otel: Any, how: str) -> None:
    observer, exporter, _ = otel
    net = legacy_net(observer)
    net.pump()
    call = net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(lambda e: None)  # the leg waits for the user
    server = net.servers[0]
    if how == "cancelled":
        assert net.client.cancel(call)
        server.receive_data(net.client.data_to_send())
    else:
        server.receive_data(b"")  # the stream closed
    spans = exporter.get_finished_spans()
    (leg,) = by_name(spans, SpanKind.CLIENT)
    (request,) = by_name(spans, SpanKind.SERVER)
    assert request.attributes["mrtr.outcome"] == how  # type: ignore[index]
    assert leg.attributes["mrtr.outcome"] == "withdrawn"  # type: ignore[index]


def test_a_retry_that_cannot_be_encoded_ends_its_round_span_as_an_error(otel: Any) -> None:
    observer, exporter, reader = otel
    net = modern_net(None, client_observer=observer)
    call = net.client.call("tools/call", {"name": "join", "arguments": {}})
    held: list[InputNeeded] = []
    net.pump(held.append)  # the application holds the question
    (event,) = held
    with pytest.raises(LocalProtocolError, match="'a'"):
        net.client.fulfil(event, {"action": "accept", "content": {"v": object()}})
    spans = exporter.get_finished_spans()
    unsent = [s for s in spans if s.kind is SpanKind.CLIENT and s.attributes[ROUND] == 2]
    (span,) = unsent
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "unsent"
    assert span.end_time is not None
    # the application answers again: a new round 2 goes out, and the call completes
    net.client.fulfil(event, accept(event))
    net.pump(accept)
    assert isinstance(net.events[-1], CallCompleted)
    assert net.events[-1].call is call
    spans = exporter.get_finished_spans()
    rounds = [s.attributes[ROUND] for s in by_name(spans, SpanKind.CLIENT)]  # type: ignore[index]
    assert rounds == [1, 2, 2, 3]
    (call_span,) = [s for s in spans if s.kind is SpanKind.INTERNAL and s.name.startswith("tools")]
    assert call_span.attributes[ROUND] == 3  # requests that went out
    (point,) = metric_points(reader)["mrtr.client.call.rounds"]
    assert point.sum == 3


def test_an_unsent_request_is_reported_with_its_reason() -> None:
    rec = Recorder()
    net = modern_net(None, client_observer=rec)
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    held: list[InputNeeded] = []
    net.pump(held.append)
    (event,) = held
    with pytest.raises(LocalProtocolError):
        net.client.fulfil(event, {"action": "accept", "content": {"v": object()}})
    (sent_then_unsent,) = [f for f in rec.of(CallRoundSent) if f.round == 2]
    (unsent,) = rec.of(CallRoundUnsent)
    assert unsent.request_id == sent_then_unsent.request_id
    assert unsent.call_id == sent_then_unsent.call_id
    assert unsent.reason


@pytest.mark.parametrize("observed", [True, False])
def test_a_task_update_that_cannot_be_encoded_is_reported_unsent(observed: bool) -> None:
    rec = Recorder()

    def handler(event: RequestReceived) -> Any:
        if event.task_id is None:
            return RunAsTask()
        if not event.input_responses:
            return InputRequiredResult(input_requests={"a": elicit_form("a", FORM)})
        return {"content": []}

    net = modern_net(
        None,
        handler,
        client_observer=rec if observed else None,
        caps=TASK_CAPS,
        tasks=TaskSettings(store=InMemoryTaskStore(), tools={"slow": "optional"}),
    )
    net.client.call("tools/call", {"name": "slow", "arguments": {}})
    clock = net.servers[0].config.clock
    assert isinstance(clock, Clock)
    held: list[InputNeeded] = []
    for _ in range(5):
        net.pump(held.append)
        if held:
            break
        clock.now += 1.0
        net.client.handle_timer(clock.now)
    (event,) = held
    with pytest.raises(LocalProtocolError):
        net.client.fulfil(event, {"action": "accept", "content": {"v": object()}})
    if not observed:
        assert rec.facts == []
        return
    (unsent,) = rec.of(CallRoundUnsent)
    (update,) = [f for f in rec.of(CallRoundSent) if f.method == "tasks/update"]
    assert unsent.request_id == update.request_id


# --- over HTTP ------------------------------------------------------------------------------


@contextlib.contextmanager
def served(app: Any) -> Iterator[str]:
    """``app`` under uvicorn (``http_server``) in a thread on a free loopback port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = http_server(app, log_level="error", lifespan="off")
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive(), "uvicorn did not start"
        assert time.monotonic() < deadline, "uvicorn did not start in time"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        server.should_exit = True
        thread.join(20)
        sock.close()
        assert not thread.is_alive()


async def greet(event: RequestReceived, context: Any) -> Any:
    return {"content": [{"type": "text", "text": "hello"}]}


def legacy_session(http: httpx.Client, url: str) -> str:
    """Open a legacy session over HTTP (initialize, initialized); its Mcp-Session-Id."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    response = http.post(url, json=init)
    assert response.status_code == 200
    session = response.headers["mcp-session-id"]
    headers = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    done = http.post(
        url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
    )
    assert done.status_code == 202
    return session


def test_a_legacy_request_over_http_names_its_session(otel: Any) -> None:
    observer, exporter, _ = otel
    rec = Recorder()
    config = ServerConfig(
        request_state=RequestStateSecurity(keys=KEYS), observer=Tee(observer, rec)
    )
    app = McpHttpApp(greet, config)
    headers = {"accept": "application/json, text/event-stream"}
    with served(app) as url, httpx.Client(headers=headers, timeout=20) as http:
        sessions = [legacy_session(http, url) for _ in range(2)]
        for rid, session in enumerate(sessions, 2):
            call = {
                "jsonrpc": "2.0",
                "id": rid,
                "method": "tools/call",
                "params": {"name": "greet"},
            }
            extra = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
            response = http.post(url, json=call, headers=extra)
            assert response.status_code == 200
            assert b"hello" in response.content
        modern = {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tools/call",
            "params": {"name": "greet", "arguments": {}, "_meta": dict(ENVELOPE)},
        }
        extra = {
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/call",
            "mcp-name": "greet",
        }
        assert http.post(url, json=modern, headers=extra).status_code == 200
    assert sessions[0] != sessions[1]
    started = rec.of(RequestStarted)
    assert [(s.legacy, s.session_id) for s in started] == [
        (True, sessions[0]),
        (True, sessions[1]),
        (False, None),
    ]
    spans = by_name(exporter.get_finished_spans(), SpanKind.SERVER)
    assert [(s.attributes or {}).get("mcp.session.id") for s in spans] == [*sessions, None]


class Tee:
    """Two observers as one (the first one carries)."""

    def __init__(self, first: Any, second: Any) -> None:
        self.first, self.second = first, second

    def observe(self, fact: Fact) -> None:
        self.first.observe(fact)
        self.second.observe(fact)

    def carry(self, connection: int, request_id: Any) -> Mapping[str, str] | None:
        result: Mapping[str, str] | None = self.first.carry(connection, request_id)
        return result


# --- the client on the legacy wire: the server's requests it answers ---------------------


def test_a_legacy_call_has_a_child_span_per_server_request_with_the_user_s_time(
    otel: Any,
) -> None:
    observer, exporter, _ = otel
    net = legacy_net(None, client_observer=observer)
    net.pump()
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    clock = net.servers[0].config.clock
    assert isinstance(clock, Clock)

    def slow_user(event: InputNeeded) -> dict[str, Any]:
        clock.now += 2.5 if event.round == 1 else 4.0
        return accept(event)

    net.pump(slow_user)
    assert isinstance(net.events[-1], CallCompleted)
    spans = exporter.get_finished_spans()
    (call,) = [s for s in spans if s.kind is SpanKind.INTERNAL and s.name == "tools/call join"]
    (request,) = by_name(spans, SpanKind.CLIENT)
    legs = by_name(spans, SpanKind.SERVER)
    assert [s.name for s in legs] == ["elicitation/create"] * 2
    assert all(s.parent is not None and s.parent.span_id == call.context.span_id for s in legs)
    assert [((s.end_time or 0) - (s.start_time or 0)) / 1e9 for s in legs] == [2.5, 4.0]
    assert [s.attributes[ROUND] for s in legs] == [1, 2]  # type: ignore[index]
    assert all(s.attributes["mrtr.outcome"] == "answered" for s in legs)  # type: ignore[index]
    assert all(s.attributes["mrtr.legacy"] is True for s in legs)  # type: ignore[index]
    assert request.parent is not None
    assert request.parent.span_id == call.context.span_id
    assert {s.context.trace_id for s in spans} == {call.context.trace_id}


def test_legacy_server_requests_are_facts_with_their_call_and_outcome() -> None:
    rec = Recorder()
    net = legacy_net(None, client_observer=rec)
    net.pump()
    call = net.client.call("tools/call", {"name": "join", "arguments": {}})
    held: list[InputNeeded] = []
    net.pump(held.append)
    (first,) = held
    assert net.client.reject(first)
    net.pump()
    (received,) = rec.of(LegReceived)
    assert (received.call_id, received.request_id, received.method, received.round) == (
        call.call_id,
        first.key,
        "elicitation/create",
        1,
    )
    assert [(r.request_id, r.outcome) for r in rec.of(LegReplied)] == [(first.key, "error")]


def test_a_server_request_withdrawn_or_dropped_with_its_call_ends_its_span(otel: Any) -> None:
    observer, exporter, _ = otel
    net = legacy_net(None, client_observer=observer)
    net.pump()
    call = net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(lambda e: None)  # the user has not answered yet
    assert net.client.cancel(call)
    (leg,) = by_name(exporter.get_finished_spans(), SpanKind.SERVER)
    assert leg.attributes["mrtr.outcome"] == "withdrawn"  # type: ignore[index]
    assert leg.status.status_code is StatusCode.UNSET
    # the server withdraws its request (notifications/cancelled)
    rec = Recorder()
    net = legacy_net(None, client_observer=rec)
    net.pump()
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(lambda e: None)
    (received,) = rec.of(LegReceived)
    cancel = {"method": "notifications/cancelled", "params": {"requestId": received.request_id}}
    net.client.receive_data(json.dumps({"jsonrpc": "2.0", **cancel}).encode() + b"\n")
    assert [(r.request_id, r.outcome) for r in rec.of(LegReplied)] == [
        (received.request_id, "withdrawn")
    ]


def test_a_server_request_of_no_call_is_withdrawn_when_the_stream_closes(otel: Any) -> None:
    observer, exporter, _ = otel
    net = legacy_net(None, client_observer=observer)
    net.pump()
    for _ in range(2):  # with two calls in flight, the request belongs to neither for sure
        net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.client.data_to_send()  # (not delivered: the server never answers them)
    ask = {"id": 77, "method": "elicitation/create", "params": elicit_form("?", FORM).params}
    net.client.receive_data(json.dumps({"jsonrpc": "2.0", **ask}).encode() + b"\n")
    (event,) = [e for e in net.client.events() if isinstance(e, InputNeeded)]
    assert event.call is None
    net.client.receive_data(b"")
    (leg,) = by_name(exporter.get_finished_spans(), SpanKind.SERVER)
    assert leg.name == "elicitation/create"
    assert leg.attributes["jsonrpc.request.id"] == "77"  # type: ignore[index]
    assert leg.parent is None
    assert leg.attributes["mrtr.outcome"] == "withdrawn"  # type: ignore[index]


def test_a_refused_server_request_ends_its_span_as_an_error(otel: Any) -> None:
    observer, exporter, _ = otel
    net = legacy_net(None, client_observer=observer)
    net.pump()
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    held: list[InputNeeded] = []
    net.pump(held.append)
    assert net.client.reject(held[0])
    (leg,) = by_name(exporter.get_finished_spans(), SpanKind.SERVER)
    assert leg.status.status_code is StatusCode.ERROR
    assert leg.attributes["mrtr.outcome"] == "error"  # type: ignore[index]
    assert leg.attributes["error.type"] == "error"  # type: ignore[index]


# --- the shim's legs carry the server's leg span to the client's ---------------------------


def test_the_client_span_of_a_shim_leg_is_a_child_of_the_server_leg_span(otel: Any) -> None:
    server_observer, exporter, _ = otel
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # one exporter for both peers
    client_observer = OtelObserver(provider, to_epoch=lambda t: t)
    net = legacy_net(server_observer, client_observer=client_observer)
    net.pump()
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    seen: list[Mapping[str, Any]] = []

    def user(event: InputNeeded) -> dict[str, Any]:
        seen.append(dict(event.params.get("_meta") or {}))
        return accept(event)

    net.pump(user)
    assert isinstance(net.events[-1], CallCompleted)
    spans = exporter.get_finished_spans()
    server_legs = [s for s in by_name(spans, SpanKind.CLIENT) if s.name == "elicitation/create"]
    client_legs = [s for s in by_name(spans, SpanKind.SERVER) if s.name == "elicitation/create"]
    (call,) = [s for s in spans if s.kind is SpanKind.INTERNAL and s.name == "tools/call join"]
    assert len(server_legs) == len(client_legs) == 2
    for server_leg, client_leg, meta in zip(server_legs, client_legs, seen, strict=True):
        context = server_leg.context
        assert meta["traceparent"].startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")
        assert client_leg.parent is not None
        assert client_leg.parent.span_id == context.span_id
        assert client_leg.context.trace_id == context.trace_id
        assert [link.context.span_id for link in client_leg.links] == [call.context.span_id]
    # client call -> its request -> the server's request -> its leg -> the client's leg
    assert {s.context.trace_id for s in spans} == {call.context.trace_id}


def test_without_an_observer_a_shim_leg_has_no_trace_keys_in_meta() -> None:
    metas: list[Any] = []

    def user(event: InputNeeded) -> dict[str, Any]:
        metas.append(event.params.get("_meta"))
        return accept(event)

    for server_observer in (None, Recorder()):  # none; one that carries nothing for legs
        metas.clear()
        client = Recorder()
        net = legacy_net(server_observer, client_observer=client)
        net.pump()
        net.client.call("tools/call", {"name": "join", "arguments": {}})
        net.pump(user)
        assert isinstance(net.events[-1], CallCompleted)
        assert metas == [None, None]
        assert [f.trace for f in client.of(LegReceived)] == [{}, {}]
        if isinstance(server_observer, Recorder):
            legs = [f.leg_id for f in server_observer.of(LegSent)]
            asked = [r.leg_id for _, r in server_observer.asked if isinstance(r, LegKey)]
            assert asked == legs
            assert len(legs) == 2


def with_meta(event: RequestReceived) -> Any:
    """Asks once, with a ``_meta`` of its own on the request to the client."""
    if event.input_responses:
        return {"content": []}
    params = {
        **(elicit_form("give a", FORM).params or {}),
        "_meta": {"app": "1", "traceparent": "x"},
    }
    request = {"method": "elicitation/create", "params": params}
    return {"resultType": "input_required", "inputRequests": {"a": request}}


def test_a_leg_s_own_meta_is_kept_and_the_trace_keys_are_the_observer_s() -> None:
    parent = "00-" + "c" * 32 + "-" + "d" * 16 + "-01"
    server = Recorder({"traceparent": parent, "tracestate": "k=v", "flow": "f"})
    client = Recorder()
    net = legacy_net(server, with_meta, client_observer=client)
    net.pump()
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    metas: list[Any] = []
    net.pump(lambda e: metas.append(e.params["_meta"]) or accept(e))  # type: ignore[func-returns-value]
    assert isinstance(net.events[-1], CallCompleted)
    assert metas == [{"app": "1", "traceparent": parent, "tracestate": "k=v"}]  # no "flow"
    trace = {"traceparent": parent, "tracestate": "k=v"}
    assert [f.trace for f in client.of(LegReceived)] == [trace]


def test_a_carry_that_is_not_a_mapping_or_a_meta_that_is_not_an_object_is_ignored(
    otel: Any,
) -> None:
    net = legacy_net(Recorder("not a mapping"))  # type: ignore[arg-type]
    net.pump()
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    metas: list[Any] = []
    net.pump(lambda e: metas.append(e.params.get("_meta")) or accept(e))  # type: ignore[func-returns-value]
    assert metas == [None, None]
    # a server request whose _meta is no object is refused before any observer sees it
    observer, exporter, _ = otel
    net = legacy_net(None, client_observer=observer)
    net.pump()
    params = {**(elicit_form("?", FORM).params or {}), "_meta": "traceparent"}
    ask = {"jsonrpc": "2.0", "id": 5, "method": "elicitation/create", "params": params}
    net.client.receive_data(json.dumps(ask).encode() + b"\n")
    assert [type(e) for e in net.client.events()] == [InvalidMessage]
    net.client.receive_data(b"")
    assert by_name(exporter.get_finished_spans(), SpanKind.SERVER) == []


def test_a_client_leg_with_an_invalid_traceparent_stays_under_its_call(otel: Any) -> None:
    observer, exporter, _ = otel
    server = Recorder({"traceparent": "00-zz-yy-01"})
    net = legacy_net(server, client_observer=observer)
    net.pump()
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(accept)
    assert isinstance(net.events[-1], CallCompleted)
    spans = exporter.get_finished_spans()
    (call,) = [s for s in spans if s.kind is SpanKind.INTERNAL]
    legs = by_name(spans, SpanKind.SERVER)
    assert len(legs) == 2
    assert all(s.parent is not None and s.parent.span_id == call.context.span_id for s in legs)
    assert all(not s.links for s in legs)
    assert observer.carry(1, LegKey(99)) is None  # a leg it never saw sent


# --- issue 26: what the conventions require, refusals, tasks over processes -----------------


def test_a_tool_error_result_is_tool_error_on_both_sides(otel: Any) -> None:
    observer, exporter, reader = otel
    failing = {"content": [{"type": "text", "text": "no"}], "isError": True}
    net = modern_net(observer, lambda e: failing, client_observer=observer)
    net.client.call("tools/call", {"name": "t", "arguments": {}})
    net.pump()
    assert isinstance(net.events[-1], CallCompleted)  # a result, not a protocol error
    spans = exporter.get_finished_spans()
    for span in [*by_name(spans, SpanKind.SERVER), *by_name(spans, SpanKind.CLIENT)]:
        assert span.attributes["error.type"] == "tool_error"  # type: ignore[index]
        assert "rpc.response.status_code" not in span.attributes  # type: ignore[operator]
        assert span.status.status_code is StatusCode.ERROR
    points = metric_points(reader)
    for name in ("mcp.server.operation.duration", "mcp.client.operation.duration"):
        assert [p.attributes["error.type"] for p in points[name]] == ["tool_error"]


def tampered(event: RequestReceived) -> Any:
    """Asks once with state (which the test then changes on the wire)."""
    if event.request_state is None:
        return InputRequiredResult(input_requests={"a": elicit_form("a", FORM)}, request_state=1)
    return {"content": []}


def test_a_tampered_request_state_is_a_refused_server_span_in_the_call_s_trace(
    otel: Any,
) -> None:
    observer, exporter, reader = otel
    net = modern_net(observer, tampered, client_observer=observer)
    net.client.call("tools/call", {"name": "t", "arguments": {}})
    held: list[InputNeeded] = []
    net.pump(held.append)
    net.client.fulfil(held[0], accept(held[0]))
    retry = json.loads(net.client.data_to_send())
    retry["params"]["requestState"] = retry["params"]["requestState"][:-4] + "AAAA"
    net.servers[0].receive_data(json.dumps(retry).encode() + b"\n")
    net.client.receive_data(net.servers[0].data_to_send())
    spans = exporter.get_finished_spans()
    refused = by_name(spans, SpanKind.SERVER)[1]
    assert refused.name == "tools/call t"
    assert refused.attributes["error.type"] == "-32602"  # type: ignore[index]
    assert refused.attributes["rpc.response.status_code"] == "-32602"  # type: ignore[index]
    assert refused.attributes["jsonrpc.request.id"] == str(retry["id"])  # type: ignore[index]
    assert refused.status.status_code is StatusCode.ERROR
    retry_span = by_name(spans, SpanKind.CLIENT)[1]
    assert refused.parent is not None
    assert refused.parent.span_id == retry_span.context.span_id
    assert retry_span.attributes["error.type"] == "-32602"  # type: ignore[index]
    (point,) = [
        p
        for p in metric_points(reader)["mcp.server.operation.duration"]
        if p.attributes.get("error.type") == "-32602"
    ]
    assert point.count == 1


@pytest.mark.parametrize(
    ("feed", "code", "method"),
    [
        ("header", "-32020", "tools/call"),
        ("oversized", "-32600", "_OTHER"),
        ("junk", "-32700", "_OTHER"),
        ("unknown task", "-32602", "tasks/get"),
        ("task required", "-32021", "tools/call"),
    ],
)
def test_every_refusal_writes_a_server_span_with_its_error(
    otel: Any, feed: str, code: str, method: str
) -> None:
    observer, exporter, reader = otel
    server = ServerConnection(
        ServerConfig(
            observer=observer,
            clock=Clock(1_800_000_000.0),
            limits=Limits(max_message_bytes=4096),
            tasks=TaskSettings(store=InMemoryTaskStore(), tools={"job": "required"}),
        )
    )
    meta = {**ENVELOPE, "traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}
    if feed == "header":
        body = {**call, "params": {"name": "t", "arguments": {}, "_meta": meta}}
        facts = HttpRequestFacts("2026-07-28", "tools/call", "other")
        server.receive_message(json.dumps(body), http=facts)
    elif feed == "oversized":
        server.receive_data(b'{"x": "' + b"y" * 5000 + b'"}\n')
    elif feed == "junk":
        server.receive_data(b"{nope\n")
    elif feed == "unknown task":
        caps: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
        params = {"taskId": "t1", "_meta": {**meta, ENVELOPE_CAPS: caps}}
        server.receive_message({"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": params})
    else:
        body = {**call, "params": {"name": "job", "arguments": {}, "_meta": meta}}
        server.receive_message(body)
    assert [type(e) for e in server.events()] == [InvalidMessage]
    (span,) = exporter.get_finished_spans()
    assert span.kind is SpanKind.SERVER
    assert span.attributes["mcp.method.name"] == method
    assert span.attributes["error.type"] == code
    assert span.status.status_code is StatusCode.ERROR
    if method == "_OTHER":  # nothing could be read: no id, no parent
        assert span.parent is None
        assert "jsonrpc.request.id" not in span.attributes
    else:  # the client's trace context is the parent, as for any request
        assert span.parent is not None
        assert span.parent.span_id == int("b" * 16, 16)
        assert span.attributes["jsonrpc.request.id"] == "7"
        assert span.attributes["mcp.protocol.version"] == "2026-07-28"
    (point,) = metric_points(reader)["mcp.server.operation.duration"]
    assert point.attributes["error.type"] == code


def test_without_an_observer_a_refusal_reports_nothing_and_answers_the_same() -> None:
    plain = ServerConnection(ServerConfig(clock=Clock(1_800_000_000.0)))
    rec = Recorder()
    observed = ServerConnection(ServerConfig(clock=Clock(1_800_000_000.0), observer=rec))
    for conn in (plain, observed):
        conn.receive_data(b"{nope\n")
    assert plain.data_to_send() == observed.data_to_send()
    assert [type(f).__name__ for f in rec.facts] == ["RequestRefused"]


def test_legacy_legs_carry_their_round_and_session_on_both_sides(otel: Any) -> None:
    observer, exporter, _ = otel
    net = legacy_net(observer, client_observer=observer)
    net.pump()
    net.servers[0].session.session_id = "s-1"  # type: ignore[union-attr]
    net.client.session_id = "s-1"
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(accept)
    assert isinstance(net.events[-1], CallCompleted)
    spans = exporter.get_finished_spans()
    server_legs = [s for s in by_name(spans, SpanKind.CLIENT) if s.name == "elicitation/create"]
    client_legs = [s for s in by_name(spans, SpanKind.SERVER) if s.name == "elicitation/create"]
    assert [s.attributes[ROUND] for s in server_legs] == [1, 2]  # type: ignore[index]
    assert [s.attributes[ROUND] for s in client_legs] == [1, 2]  # type: ignore[index]
    for span in [*server_legs, *client_legs]:
        assert span.attributes["mcp.session.id"] == "s-1"  # type: ignore[index]
        assert span.attributes["mcp.protocol.version"] == "2025-11-25"  # type: ignore[index]
    (call,) = [s for s in by_name(spans, SpanKind.CLIENT) if s.name == "tools/call join"]
    assert call.attributes["mcp.session.id"] == "s-1"  # type: ignore[index]
    assert call.attributes["gen_ai.operation.name"] == "execute_tool"  # type: ignore[index]


def test_sessions_and_operations_are_measured_with_the_conventions_buckets(otel: Any) -> None:
    observer, _, reader = otel
    net = legacy_net(observer, client_observer=observer)
    net.pump()
    clock = net.servers[0].config.clock
    assert isinstance(clock, Clock)
    clock.now += 42.0
    net.client.call("tools/call", {"name": "join", "arguments": {}})
    net.pump(accept)
    net.client.receive_data(b"")
    net.servers[0].receive_data(b"")
    points = metric_points(reader)
    for role in ("server", "client"):
        (session,) = points[f"mcp.{role}.session.duration"]
        assert session.sum == 42.0
        assert session.attributes["mcp.protocol.version"] == "2025-11-25"
        operations = points[f"mcp.{role}.operation.duration"]
        assert operations
        assert all(tuple(p.explicit_bounds) == DURATION_BUCKETS for p in [session, *operations])


def test_the_task_record_keeps_its_trace_context() -> None:
    task = Task("t", None, TaskStatus.WORKING, 1.0, 1.0, None, None, {}, trace={"traceparent": "x"})
    assert Task.from_record(task.to_record()) == task
    record = task.to_record()
    del record["trace"]  # a record stored before the field existed
    assert Task.from_record(record).trace is None


def test_a_task_moved_by_three_processes_is_one_trace_linked_to_its_creation() -> None:
    # three server processes sharing one task store, each with its own observer and
    # exporter; each client message goes to the next one
    exporters = [InMemorySpanExporter() for _ in range(3)]
    observers = []
    for exporter in exporters:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        observers.append(OtelObserver(provider, MeterProvider(), to_epoch=lambda t: t))
    client_exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(client_exporter))
    client_observer = OtelObserver(provider, MeterProvider(), to_epoch=lambda t: t)
    store = InMemoryTaskStore()
    clock = Clock(1_800_000_000.0)

    def handler(event: RequestReceived) -> Any:
        if event.task_id is None:
            return RunAsTask()
        if not event.input_responses:
            return InputRequiredResult(input_requests={"a": elicit_form("a", FORM)})
        return {"content": []}

    settings = TaskSettings(store=store, tools={"slow": "optional"})
    servers = [
        ServerConnection(ServerConfig(observer=o, clock=clock, tasks=settings)) for o in observers
    ]
    client = ClientConnection(
        ClientConfig(capabilities=TASK_CAPS, observer=client_observer, clock=clock)
    )
    net = Net(client, servers, handler)
    net.client.call("tools/call", {"name": "slow", "arguments": {}})
    for _ in range(8):
        net.pump(accept)
        if isinstance(net.events[-1], CallCompleted):
            break
        clock.now += 1.0
        net.client.handle_timer(clock.now)
    assert isinstance(net.events[-1], CallCompleted)
    by_process = [e.get_finished_spans() for e in exporters]
    everything = [*client_exporter.get_finished_spans(), *(s for p in by_process for s in p)]
    assert len({s.context.trace_id for s in everything}) == 1
    (create,) = [s for s in by_process[0] if s.name == "tools/call slow"]
    changes = {
        (n, s.attributes["mrtr.task.status"])  # type: ignore[index]
        for n, spans in enumerate(by_process)
        for s in spans
        if s.name.startswith("task ")
    }
    assert {status for _, status in changes} == {"working", "input_required", "completed"}
    assert len({n for n, _ in changes}) >= 2  # moved by more than one process
    task_spans = [s for s in everything if s.attributes and TASK_ID in s.attributes]
    for span in task_spans:
        if span.name.startswith("task "):
            assert span.parent is not None
            assert span.parent.span_id == create.context.span_id
        elif span.kind is SpanKind.SERVER:  # tasks/get, tasks/update on any process
            assert [link.context.span_id for link in span.links] == [create.context.span_id]
    served = {n for n, spans in enumerate(by_process) for s in spans if s.name.startswith("tasks/")}
    assert served == {0, 1, 2}  # tasks/* were served, and traced, by all three
    polls = [s for s in client_exporter.get_finished_spans() if s.name == "tasks/get"]
    assert polls
    assert all("gen_ai.operation.name" not in (s.attributes or {}) for s in polls)


#: One row of the page's conventions table: attribute, level, the span kinds it is for.
_PAGE_ROW = re.compile(
    r"^\| `([a-z_.]+)` \| (Required|Conditionally required|Recommended) \| ([a-z, ]+) \|",
    re.MULTILINE,
)


def test_the_observability_page_lists_the_conventions_table_the_checks_use() -> None:
    page = Path(__file__).resolve().parents[1] / "docs" / "observability.md"
    rows = _PAGE_ROW.findall(page.read_text(encoding="utf-8"))
    listed = [(name, level, kind) for name, level, kinds in rows for kind in kinds.split(", ")]
    both = ("client", "server")
    expected = {
        *((name, "Required", kind) for name in semconv.REQUIRED for kind in both),
        *((name, "Conditionally required", kind) for name in semconv.CONDITIONAL for kind in both),
        *(
            (name, "Recommended", kind.lower())
            for kind, names in semconv.RECOMMENDED.items()
            for name in names
        ),
    }
    assert len(listed) == len(set(listed))  # each attribute once per kind
    assert set(listed) == expected


def test_a_server_session_is_measured_without_the_peer_address(otel: Any) -> None:
    observer, _, reader = otel
    peer = Transport("tcp", "http", "1.1", client_address="203.0.113.7", client_port=5000)
    observer.observe(SessionStarted(1.0, 99, "server", "2025-11-25", peer))
    observer.observe(SessionEnded(3.5, 99))
    (point,) = metric_points(reader)["mcp.server.session.duration"]
    assert point.sum == 2.5
    assert dict(point.attributes) == {
        "mcp.protocol.version": "2025-11-25",
        "network.transport": "tcp",
        "network.protocol.name": "http",
        "network.protocol.version": "1.1",
    }


def test_a_client_session_over_a_socket_without_a_port_names_its_server_only(otel: Any) -> None:
    observer, _, reader = otel
    socket_file = Transport("unix", address="/run/mcp.sock")
    observer.observe(SessionStarted(1.0, 98, "client", "2025-11-25", socket_file))
    observer.observe(SessionEnded(2.0, 98, error="closed"))
    (point,) = metric_points(reader)["mcp.client.session.duration"]
    assert dict(point.attributes) == {
        "mcp.protocol.version": "2025-11-25",
        "network.transport": "unix",
        "server.address": "/run/mcp.sock",
        "error.type": "closed",
    }
