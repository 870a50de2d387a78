"""Whatever a server sends, the client never raises, and whatever it writes back is valid.

Messages are drawn near the shapes the client reads (JSON-RPC envelopes, ``input_required``
results, server requests, DiscoverResults and InitializeResults), so that the draws reach the
deep checks rather than stopping at the first one; every byte is fed split at random points.
Also: a pair of our client and server exchanging bytes only through ``data_to_send`` and
``receive_data``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import (
    ACCEPT,
    CAPS,
    CLIENT,
    FORM,
    ROOTS,
    SAMPLE,
    URL,
    Clock,
    drain,
)
from mrtr_sansio import (
    NEED_DATA,
    CallCompleted,
    ClientConfig,
    ClientConnection,
    Era,
    EraDetected,
    Event,
    InputNeeded,
    InputRequiredResult,
    RequestReceived,
    ServerConfig,
    ServerConnection,
    elicit_form,
)

leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
anything = st.recursive(
    leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=10,
)
ids = st.one_of(st.integers(-1, 6), st.sampled_from(["0", "a", ""]), leaf)
methods = st.sampled_from(
    [
        "elicitation/create",
        "sampling/createMessage",
        "roots/list",
        "ping",
        "tasks/get",
        "notifications/cancelled",
        "notifications/progress",
    ]
)
embedded_params = st.fixed_dictionaries(
    {},
    optional={
        "message": leaf,
        "mode": st.sampled_from(["form", "url", "sms"]) | leaf,
        "requestedSchema": anything,
        "url": leaf,
        "messages": anything,
        "maxTokens": leaf,
        "tools": anything,
        "includeContext": st.sampled_from(["none", "thisServer"]) | leaf,
        "requestId": ids,
    },
)
embedded = st.fixed_dictionaries(
    {}, optional={"method": methods | leaf, "params": embedded_params | anything}
)
results = st.fixed_dictionaries(
    {},
    optional={
        "resultType": st.sampled_from(["complete", "input_required", "task"]) | leaf,
        "inputRequests": st.dictionaries(st.text(max_size=3), embedded, max_size=3) | anything,
        "requestState": leaf,
        "supportedVersions": st.lists(st.sampled_from(["2026-07-28", "2025-11-25", "x"])) | leaf,
        "protocolVersion": st.sampled_from(["2025-11-25", "2030-01-01"]) | leaf,
        "capabilities": anything,
        "serverInfo": anything,
        "content": anything,
    },
)
errors = st.fixed_dictionaries(
    {},
    optional={
        "code": st.sampled_from([-32601, -32602, -32020, -32021, -32022]) | leaf,
        "message": leaf,
        "data": st.fixed_dictionaries({}, optional={"supported": anything}) | anything,
    },
)
good_embedded = st.sampled_from(
    [FORM, URL, SAMPLE, ROOTS, {"method": "roots/list", "params": None}]
)
good_results = st.one_of(
    st.builds(
        lambda reqs, state: {"resultType": "input_required", "inputRequests": reqs, **state},
        st.dictionaries(st.text(max_size=3), good_embedded | embedded, max_size=3),
        st.fixed_dictionaries({}, optional={"requestState": st.text(max_size=5) | leaf}),
    ),
    st.just({"resultType": "input_required", "requestState": "s"}),
    st.just({"protocolVersion": "2025-11-25", "capabilities": {}}),
    st.just({"supportedVersions": ["2026-07-28"], "capabilities": {}}),
    st.just({"content": []}),
)
our_ids = st.integers(0, 6)
envelopes = st.one_of(
    st.builds(
        lambda i, r: {"jsonrpc": "2.0", "id": i, "result": r}, our_ids, good_results | results
    ),
    st.builds(lambda i, e: {"jsonrpc": "2.0", "id": i, "error": e}, our_ids, errors),
    st.builds(
        lambda i, m, p: {"jsonrpc": "2.0", "id": i, "method": m, "params": p},
        ids,
        methods,
        embedded_params | st.sampled_from([FORM["params"], URL["params"], SAMPLE["params"]]),
    ),
    st.builds(
        lambda m, p: {"jsonrpc": "2.0", "method": m, "params": p},
        methods,
        st.fixed_dictionaries({"requestId": ids}) | embedded_params,
    ),
)
messages = st.one_of(
    envelopes,
    st.fixed_dictionaries(
        {},
        optional={
            "jsonrpc": st.sampled_from(["2.0", "1.0"]) | leaf,
            "id": ids,
            "method": methods | leaf,
            "params": embedded_params | anything,
            "result": results | anything,
            "error": errors | anything,
        },
    ),
    anything,
)


def _feed(conn: ClientConnection, data: bytes, cuts: list[int]) -> None:
    start = 0
    for point in [*sorted({c % (len(data) + 1) for c in cuts}), len(data)]:
        if point > start:
            conn.receive_data(data[start:point])
            start = point


@settings(max_examples=250, deadline=None)
@given(
    era=st.sampled_from(["modern", "legacy", "auto"]),
    batch=st.lists(st.tuples(messages, st.lists(st.integers(0, 1 << 12), max_size=3)), max_size=12),
    answer=st.booleans(),
)
def test_no_server_message_makes_the_client_raise(
    era: str, batch: list[tuple[Any, list[int]]], answer: bool
) -> None:
    clock = Clock()
    conn = ClientConnection(
        ClientConfig(client_info=CLIENT, capabilities=CAPS, era=era, clock=clock)
    )
    for name in "abcd":
        conn.call("tools/call", {"name": name})
    conn.call("tools/list")
    for message, cuts in batch:
        drain(conn, conn.era or Era.MODERN, sender="client")
        data = json.dumps(message).encode() + b"\n"
        _feed(conn, data, cuts)
        for event in conn.events():
            assert isinstance(event, Event)
            if answer and type(event) is InputNeeded:
                if event.method == "elicitation/create":
                    conn.decline(event)
                elif event.method == "roots/list":
                    conn.fulfil(event, {"roots": []})
                else:
                    conn.reject(event)
        due = conn.next_deadline()
        if due is not None:
            clock.now = due
            conn.handle_timer(due)
    drain(conn, conn.era or Era.MODERN, sender="client")
    conn.receive_data(b"")
    conn.events()


@given(junk=st.binary(max_size=200), cuts=st.lists(st.integers(0, 300), max_size=4))
@settings(max_examples=200, deadline=None)
def test_no_bytes_make_the_client_raise(junk: bytes, cuts: list[int]) -> None:
    conn = ClientConnection(ClientConfig(era="legacy"))
    _feed(conn, junk + b"\n", cuts)
    conn.events()
    drain(conn, Era.LEGACY, sender="client")


@pytest.mark.parametrize("era", ["modern", "legacy", "auto"])
def test_pair_through_data_to_send_and_receive_data(era: Any) -> None:
    """What one side's ``data_to_send`` returns is all the other side reads."""
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}

    def handler(ev: RequestReceived) -> Any:
        name = ev.input_responses.accepted_content("who")
        if name is None:
            return InputRequiredResult({"who": elicit_form("Name?", schema)}, request_state="s")
        return {"content": [{"type": "text", "text": name["name"]}]}

    client = ClientConnection(ClientConfig(client_info=CLIENT, capabilities=CAPS, era=era))
    server = ServerConnection(ServerConfig(server_info={"name": "srv", "version": "1"}))
    call = client.call("tools/call", {"name": "greet"})
    seen: list[Event] = []
    for _ in range(20):
        server.receive_data(client.data_to_send() or b"\n")
        while (event := server.next_event()) is not NEED_DATA:
            if type(event) is RequestReceived:
                server.respond(event.request_id, handler(event))
        client.receive_data(server.data_to_send() or b"\n")
        for event in client.events():
            seen.append(event)
            if type(event) is InputNeeded:
                client.fulfil(event, ACCEPT)
    assert [type(e) for e in seen if type(e) is not EraDetected] == [InputNeeded, CallCompleted]
    last = seen[-1]
    assert type(last) is CallCompleted
    assert last.call is call
    assert last.result["content"] == [{"type": "text", "text": "Ada"}]
