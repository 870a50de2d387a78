"""One modern two-leg MRTR exchange through ServerConnection, bytes in and bytes out.

tools/call -> input_required (one form elicitation + requestState) -> retry with inputResponses
and the state -> complete. The engine's median cost per exchange is compared with the JSON floor:
decoding the two requests and encoding the two responses with the same codec, nothing else.
Floor and engine are sampled in alternation in one run, so machine noise hits both alike.

    python bench/server_exchange.py [--samples N] [--loops M]

Last line: ``ratio engine/floor: stdlib=<x.xx> orjson=<y.yy>``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import mrtr_sansio as m

ENVELOPE = {
    m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28",
    m.protocol.CLIENT_CAPABILITIES: {"elicitation": {"form": {}}},
    m.protocol.CLIENT_INFO: {"name": "bench-client", "version": "1.0.0"},
}
ARGUMENTS = {"city": "Paris", "nights": 2}
SCHEMA = {
    "type": "object",
    "properties": {"checkin": {"type": "string", "format": "date"}},
    "required": ["checkin"],
}
STATE = "eyJzdGVwIjoxLCJjaXR5IjoiUGFyaXMifQ"
REQUEST_1 = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "book", "arguments": ARGUMENTS, "_meta": ENVELOPE},
}
REQUEST_2 = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {
        "name": "book",
        "arguments": ARGUMENTS,
        "inputResponses": {"dates": {"action": "accept", "content": {"checkin": "2026-12-24"}}},
        "requestState": STATE,
        "_meta": ENVELOPE,
    },
}
SERVER_INFO = {"name": "bench-server", "version": "1.0.0"}
RESULT = {"content": [{"type": "text", "text": "Booked Paris for 2026-12-24."}], "isError": False}
INPUT_REQUIRED = m.InputRequiredResult(
    {"dates": m.elicit_form("When do you arrive?", SCHEMA)}, STATE
)


def _wire(msg: dict[str, Any]) -> bytes:
    return json.dumps(msg, separators=(",", ":")).encode() + b"\n"


def make_engine(codec: m.config.JsonCodec) -> tuple[Callable[[], None], list[bytes]]:
    """One exchange through a long-lived connection (a stdio server, say)."""
    conn = m.ServerConnection(
        m.ServerConfig(server_info=SERVER_INFO, codec=codec, request_state=m.UNSEALED)
    )
    req1, req2 = _wire(REQUEST_1), _wire(REQUEST_2)
    receive, next_event, respond, send = (
        conn.receive_data,
        conn.next_event,
        conn.respond,
        conn.data_to_send,
    )
    sent: list[bytes] = []

    def exchange() -> None:
        receive(req1)
        event = next_event()
        respond(event.request_id, INPUT_REQUIRED)  # type: ignore[union-attr]
        out1 = send()
        receive(req2)
        event = next_event()
        content = event.input_responses.accepted_content("dates")  # type: ignore[union-attr]
        assert content is not None
        respond(event.request_id, RESULT)  # type: ignore[union-attr]
        out2 = send()
        if not sent:
            sent.extend((out1, out2))

    return exchange, sent


def make_floor(
    loads: Callable[[bytes], Any], dumps: Callable[[Any], bytes], responses: list[bytes]
) -> Callable[[], None]:
    """The same four messages through the bare codec: two decodes, two encodes."""
    req1, req2 = _wire(REQUEST_1), _wire(REQUEST_2)
    resp1, resp2 = (json.loads(r) for r in responses)

    def floor() -> None:
        loads(req1)
        loads(req2)
        dumps(resp1)
        dumps(resp2)

    return floor


def measure(fns: dict[str, Callable[[], None]], samples: int, loops: int) -> dict[str, float]:
    """Median microseconds per call of each function, sampled in alternation."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(samples):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(loops):
                fn()
            times[name].append((time.perf_counter() - start) / loops * 1e6)
    return {name: statistics.median(ts) for name, ts in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=31)
    parser.add_argument("--loops", type=int, default=2000)
    args = parser.parse_args()

    engine_std, sent = make_engine(m.config.StdlibJsonCodec())
    engine_std()
    floor_std = make_floor(json.loads, lambda o: json.dumps(o).encode(), sent)
    fns = {"floor-stdlib": floor_std, "engine-stdlib": engine_std}
    try:
        import orjson

        engine_or, sent_or = make_engine(m.config.OrjsonCodec())
        engine_or()
        fns["floor-orjson"] = make_floor(orjson.loads, orjson.dumps, sent_or)
        fns["engine-orjson"] = engine_or
    except ImportError:
        print("orjson not installed: pip install 'mrtr-sansio[fast]'")
    print(f"responses: {len(sent[0])} + {len(sent[1])} bytes")
    result = measure(fns, args.samples, args.loops)
    for name, us in result.items():
        print(f"{name:15s} {us:8.2f} us/exchange")
    std = result["engine-stdlib"] / result["floor-stdlib"]
    orj = result["engine-orjson"] / result["floor-orjson"] if "engine-orjson" in result else 0.0
    print(f"ratio engine/floor: stdlib={std:.2f} orjson={orj:.2f}")


if __name__ == "__main__":
    main()
