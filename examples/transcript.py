"""One handler, both wires: print the wire transcript of an MRTR exchange, in memory.

The same handler asks for a date by form elicitation. On the modern wire the server answers
``input_required`` and the client retries; on the legacy wire the server connection sends a real
``elicitation/create`` request and replays the handler with the answer. No IO: bytes go straight
from one side to the other.

    python examples/transcript.py
"""

from __future__ import annotations

import json
from typing import Any

import mrtr_sansio as m

SCHEMA = {"type": "object", "properties": {"date": {"type": "string"}}, "required": ["date"]}


# --8<-- [start:handler]
def handler(request: m.RequestReceived) -> Any:
    """Book a table: ask for the date unless the client already answered."""
    date = request.input_responses.accepted_content("date")
    if date is None:
        return m.InputRequiredResult(
            {"date": m.elicit_form("Which date?", SCHEMA)}, request_state="table-for-2"
        )
    return {
        "content": [{"type": "text", "text": f"Booked {request.request_state} on {date['date']}"}]
    }


# --8<-- [end:handler]


def show(direction: str, data: bytes) -> None:
    for line in data.splitlines():
        print(f"{direction} {json.dumps(json.loads(line))}")


def exchange(server: m.ServerConnection, message: dict[str, Any]) -> list[dict[str, Any]]:
    """Client -> server bytes; run the handler for every request; server -> client bytes."""
    data = json.dumps(message).encode() + b"\n"
    show("C→", data)
    server.receive_data(data)
    while (event := server.next_event()) is not m.NEED_DATA:
        if isinstance(event, m.RequestReceived):
            server.respond(event.request_id, handler(event))
    out = server.data_to_send()
    show("←S", out)
    return [json.loads(line) for line in out.splitlines()]


def main() -> None:
    config = m.ServerConfig(server_info={"name": "bistro", "version": "1.0"})
    caps: dict[str, Any] = {"elicitation": {"form": {}}}
    envelope = {m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28", m.protocol.CLIENT_CAPABILITIES: caps}
    call = {"name": "book", "arguments": {"guests": 2}}

    print("== modern wire (2026-07-28): input_required, then a retry with a new id")
    server = m.ServerConnection(config)
    (reply,) = exchange(
        server,
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {**call, "_meta": envelope}},
    )
    state = reply["result"]["requestState"]
    answer = {"date": {"action": "accept", "content": {"date": "2026-12-24"}}}
    exchange(
        server,
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {**call, "inputResponses": answer, "requestState": state, "_meta": envelope},
        },
    )

    print("\n== legacy wire (2025-11-25): the same handler, fulfilled by the shim")
    server = m.ServerConnection(config)
    exchange(
        server,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": caps,
                "clientInfo": {"name": "demo", "version": "1.0"},
            },
        },
    )
    exchange(server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    (leg,) = exchange(server, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
    exchange(
        server,
        {
            "jsonrpc": "2.0",
            "id": leg["id"],
            "result": {"action": "accept", "content": {"date": "2026-12-31"}},
        },
    )


if __name__ == "__main__":
    main()
