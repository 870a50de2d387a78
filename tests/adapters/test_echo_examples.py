"""Each adapter's runnable example (``examples/<adapter>/echo_server.py``) as a subprocess on
pipes, driven like a client would: both wires, then end of input, then a clean exit."""

from __future__ import annotations

import pytest
from stream_harness import (
    ADA,
    ASK_NAME,
    INITIALIZED,
    example_server,
    initialize,
    leg,
    legacy_call,
    modern_call,
    request,
    text,
)

from mrtr_sansio.protocol import SERVER_INFO

ECHO = {"name": "echo", "version": "1.0.0"}
GREET_TOOL = {
    "name": "greet",
    "description": "Asks for your name, then greets you.",
    "inputSchema": {"type": "object"},
}


@pytest.mark.parametrize("adapter", ["stdio", "asyncio", "trio"])
def test_echo_example_on_both_wires(adapter: str) -> None:
    with example_server(adapter) as (peer, _proc):
        # Modern: the question comes back as input_required; the retry carries the answer.
        peer.send(modern_call(1, "greet"))
        assert peer.recv() == {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "resultType": "input_required",
                "inputRequests": {"name": {"method": "elicitation/create", "params": ASK_NAME}},
                "_meta": {SERVER_INFO: ECHO},
            },
        }
        peer.send(modern_call(2, "greet", inputResponses={"name": ADA}))
        assert peer.recv() == {
            "jsonrpc": "2.0",
            "id": 2,
            "result": {
                **text("Hello, Ada!"),
                "resultType": "complete",
                "_meta": {SERVER_INFO: ECHO},
            },
        }
        peer.send(request(3, "tools/list", {"_meta": modern_call(0, "x")["params"]["_meta"]}))
        listed = peer.recv()["result"]
        assert listed["tools"] == [GREET_TOOL]
        assert listed["resultType"] == "complete"
        # Legacy: a real elicitation/create while tools/call 5 is in flight.
        peer.send(initialize(4))
        assert peer.recv() == {
            "jsonrpc": "2.0",
            "id": 4,
            "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": ECHO,
            },
        }
        peer.send(INITIALIZED, legacy_call(5, "greet"))
        assert peer.recv() == leg(0)
        peer.send({"jsonrpc": "2.0", "id": 0, "result": {"action": "decline"}})
        assert peer.recv() == {"jsonrpc": "2.0", "id": 5, "result": text("Hello, stranger!")}
