"""A three-round tool call served by two server processes, traced with OpenTelemetry.

Our client asks ``book`` for a date, then a seat, then gets the booking; each round goes to
the next of two ``ServerConnection``s that share a key ring (two processes behind a load
balancer). The client and each server have their own ``OtelObserver`` exporting to memory;
the script prints every finished span as one JSON line (the docs build draws the timeline
from them). Time is a hand-moved clock: the user takes 3 s, then 5 s, to answer.

    python examples/otel_trace.py
"""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mrtr_sansio import (
    NEED_DATA,
    CallCompleted,
    ClientConfig,
    ClientConnection,
    InputNeeded,
    InputRequiredResult,
    RequestReceived,
    ServerConfig,
    ServerConnection,
    elicit_form,
)
from mrtr_sansio.otel import OtelObserver
from mrtr_sansio.sealing import RequestStateSecurity

ASK = {"date": "Which date?", "seat": "Which seat?"}
WAIT = {"date": 3.0, "seat": 5.0}  # seconds the user takes to answer
FORM = {"type": "object", "properties": {"v": {"type": "string"}}}


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def book(event: RequestReceived, clock: Clock) -> Any:
    """Asks for the date, then the seat, then books (each round takes 40 ms of work)."""
    clock.now += 0.04
    state = dict(event.request_state or {})
    state.update({k: v["content"]["v"] for k, v in event.input_responses.items()})
    for key, question in ASK.items():
        if key not in state:
            return InputRequiredResult(
                input_requests={key: elicit_form(question, FORM)}, request_state=state
            )
    return {"content": [{"type": "text", "text": f"booked {state['seat']} on {state['date']}"}]}


def observer(exporter: InMemorySpanExporter) -> OtelObserver:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OtelObserver(provider, MeterProvider(), to_epoch=lambda t: t)


def run() -> list[tuple[str, ReadableSpan]]:
    clock = Clock()
    keys = [b"shared key ring for the example!"]
    exporters = {name: InMemorySpanExporter() for name in ("client", "server-1", "server-2")}
    servers = [
        ServerConnection(
            ServerConfig(
                request_state=RequestStateSecurity(keys=keys),
                observer=observer(exporters[name]),
                clock=clock,
            )
        )
        for name in ("server-1", "server-2")
    ]
    client = ClientConnection(
        ClientConfig(
            capabilities={"elicitation": {"form": {}}},
            observer=observer(exporters["client"]),
            clock=clock,
        )
    )
    client.call("tools/call", {"name": "book", "arguments": {"trip": "LIS-OSL"}})
    done = False
    for turn in range(20):  # three rounds need six hops; bounded
        data = client.data_to_send()
        server = servers[turn % 2]
        clock.now += 0.01  # the network
        server.receive_data(data)
        while (event := server.next_event()) is not NEED_DATA:
            if isinstance(event, RequestReceived):
                server.respond(event.request_id, book(event, clock))
        clock.now += 0.01
        client.receive_data(server.data_to_send())
        for event in client.events():
            if isinstance(event, InputNeeded):
                clock.now += WAIT[str(event.key)]
                client.fulfil(event, {"action": "accept", "content": {"v": str(event.key)}})
            elif isinstance(event, CallCompleted):
                done = True
        if done:
            break
    assert done, "the call did not complete"
    return [(name, s) for name, e in exporters.items() for s in e.get_finished_spans()]


def main() -> None:
    for process, span in sorted(run(), key=lambda p: p[1].start_time or 0):
        parent = span.parent
        print(
            json.dumps(
                {
                    "process": process,
                    "name": span.name,
                    "kind": span.kind.name,
                    "trace": format(span.context.trace_id, "032x"),
                    "span": format(span.context.span_id, "016x"),
                    "parent": None if parent is None else format(parent.span_id, "016x"),
                    "links": [format(link.context.span_id, "016x") for link in span.links],
                    "start": (span.start_time or 0) / 1e9,
                    "end": (span.end_time or 0) / 1e9,
                    "round": (span.attributes or {}).get("mrtr.round"),
                }
            )
        )


if __name__ == "__main__":
    main()
