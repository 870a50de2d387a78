"""Fuzzing the connections: arbitrary bytes and valid-but-hostile JSON-RPC, in random chunkings.

Each property feeds a connection, server or client role, modern or legacy wire, a stream of
hostile lines (arbitrary bytes, raw JSON texts that break parsers, valid messages with a field of
the wrong type, huge strings, deep nesting, unknown keys, and ordinary messages among them) split
at arbitrary points, answering what reaches the application (the server's requests with the test
server's handler; the client's input requests with valid answers). It asserts that no exception
escapes, that every message written is valid JSON-RPC by the official schema, that the limits
hold, and that requests (or calls) already in flight complete exactly as they would have alone;
and that any chunking of a stream gives the same events and bytes as the whole.

Short profile (the normal test run): a few hundred examples, derandomized. Long profile:
``MRTR_FUZZ_EXAMPLES=<n>`` runs ``n`` examples per property (see ``fuzz/run.py``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import event as note
from hypothesis import strategies as st

import mrtr_sansio as m
from helpers import (
    MODEL_KEYS,
    check_message,
    model_handler,
)
from mrtr_sansio.adapters import RequestContext, call_handler
from mrtr_sansio.testing import run_to_completion
from mrtr_sansio.testing import strategies as s

LONG = int(os.environ.get("MRTR_FUZZ_EXAMPLES", "0"))


def profile(short: int) -> settings:
    """``short`` derandomized examples normally; ``MRTR_FUZZ_EXAMPLES`` random ones if set."""
    return settings(
        max_examples=LONG or short,
        derandomize=not LONG,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=bool(LONG),
    )


LIMITS = m.Limits(
    max_message_bytes=2048,
    max_in_flight=6,
    max_input_requests=4,
    max_input_responses=4,
    max_request_state_bytes=512,
    max_shimmed_requests=2,
    max_pending_legs=4,
)
V = "2026-07-28"
ENVELOPE = {m.protocol.PROTOCOL_VERSION_KEY: V, m.protocol.CLIENT_CAPABILITIES: s.FULL_CAPABILITIES}


def config(*, legacy: bool) -> m.ServerConfig:
    """A deterministic server: fixed clock and randomness, small limits."""
    security = m.sealing.RequestStateSecurity(MODEL_KEYS, token_bytes=bytes)
    return m.ServerConfig(
        server_info={"name": "fuzz", "version": "1"},
        request_state=security,
        limits=LIMITS,
        legacy_versions=m.protocol.LEGACY_VERSIONS if legacy else (),
        clock=lambda: 1_000_000.0,
        token_hex=lambda n: "0" * (2 * n),
    )


class Harness:
    """A server connection whose requests are answered by the test handler, except those held
    back (requests in flight while the hostile input arrives)."""

    def __init__(
        self, *, legacy: bool, hold: frozenset[Any] = frozenset(), note_kinds: bool = True
    ) -> None:
        self.conn = m.ServerConnection(config(legacy=legacy), principal="alice")
        self.era = m.Era.LEGACY if legacy else m.Era.MODERN
        self.hold = hold
        self.held: list[m.RequestReceived] = []
        self.written: list[dict[str, Any]] = []
        self.methods: dict[Any, str] = {}
        self.eras: dict[Any, m.Era] = {}
        self.note = note_kinds

    def feed(self, data: bytes) -> None:
        self.conn.receive_data(data)
        self.pump()

    def pump(self) -> None:
        conn = self.conn
        # What the connection answered by itself (errors, ping, initialize) goes first: those
        # ids may be reused by requests queued behind them.
        self._drain()
        while (event := conn.next_event()) is not m.NEED_DATA:
            if type(event) is m.RequestReceived:
                self._check_limits(event)
                self.methods[event.request_id] = event.method
                self.eras[event.request_id] = event.era
                if event.request_id in self.hold and event.round == 1:
                    self.held.append(event)
                else:
                    self.answer(event)
                    self._drain()
        assert len(conn.in_flight) <= LIMITS.max_in_flight

    def _drain(self) -> None:
        for item in self.conn.outgoing():
            message = json.loads(item.data)
            assert message == item.message
            # Results are checked against the method and era of the request they answer.
            method = None if "method" in message else self.methods.pop(message.get("id"), None)
            era = self.eras.pop(message.get("id"), None) if method is not None else None
            if era is None:
                era = self.era
                if era is m.Era.LEGACY and "resultType" in message.get("result", {}):
                    era = m.Era.MODERN  # server/discover, answered by the connection itself
            check_message(message, era, method=method)
            self.written.append(message)
            if self.note:
                note(_kind(message))

    @staticmethod
    def _check_limits(event: m.RequestReceived) -> None:
        """The MRTR fields a handler sees are within the limits (on the legacy wire the
        client cannot send them at all: the shim owns them)."""
        if event.method not in m.protocol.MRTR_METHODS:
            return
        answers = event.params.get("inputResponses")
        state = event.params.get("requestState")
        if event.era is m.Era.LEGACY:
            assert state is None
            assert event.round == 1 or answers is not None
            assert event.round != 1 or answers is None
        else:
            assert answers is None or len(answers) <= LIMITS.max_input_responses
            assert state is None or len(state) <= LIMITS.max_request_state_bytes

    def answer(self, event: m.RequestReceived) -> None:
        conn = self.conn
        ctx = RequestContext(conn, event, lambda: None, _no_sleep)
        result = run_to_completion(call_handler(model_handler, ctx))
        try:
            conn.respond(event.request_id, result)
        except m.LocalProtocolError:
            conn.respond(event.request_id, m.JsonRpcError.internal())

    def release(self) -> None:
        """Answer the held requests, in order."""
        held, self.held = self.held, []
        for event in held:
            self.answer(event)
        self.pump()

    def answers_to(self, ids: frozenset[Any]) -> list[dict[str, Any]]:
        return [msg for msg in self.written if msg.get("id") in ids and "method" not in msg]


async def _no_sleep(_seconds: float) -> None:
    pass


def _kind(message: dict[str, Any]) -> str:
    """What a written message was, for hypothesis' statistics (--hypothesis-show-statistics)."""
    if "error" in message:
        return f"wrote error {message['error']['code']}"
    if "result" in message:
        return f"wrote {message['result'].get('resultType', 'legacy result')}"
    params = message.get("params")
    retry = isinstance(params, dict) and ("inputResponses" in params or "requestState" in params)
    return f"wrote {message['method']}{' retry' if retry else ''}"


def line(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


# --- what the streams are made of ------------------------------------------------------------

NAMES = st.sampled_from(["greet", "book", "capital", "roots", "multi", "echo", "nope"])


def _modern_params() -> st.SearchStrategy[dict[str, Any]]:
    answers = st.dictionaries(s.input_request_keys(), s.json_values(4), max_size=6)
    return st.fixed_dictionaries(
        {"name": NAMES, "arguments": st.dictionaries(st.text(max_size=4), s.json_values(3))},
        optional={
            "inputResponses": st.one_of(answers, s.invalid_input_responses(4)),
            "requestState": st.one_of(s.request_states(), s.invalid_request_states(512)),
        },
    )


MODERN_REQUESTS = s.modern_requests(
    st.sampled_from(["tools/call", "prompts/get", "resources/read", "tools/list", "ping", "x"]),
    _modern_params(),
    envelope=st.one_of(s.modern_envelopes(), s.invalid_envelopes()),
)
LEGACY_REQUESTS = st.builds(
    lambda rid, method, params: {"jsonrpc": "2.0", "id": rid, "method": method, "params": params},
    s.request_ids(),
    st.sampled_from(["tools/call", "prompts/get", "resources/read", "tools/list", "ping"]),
    _modern_params(),
)
NOTIFICATIONS = st.builds(
    lambda rid: {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": rid},
    },
    st.one_of(s.request_ids(), s.json_values(2)),
)
RESPONSES = st.builds(
    lambda rid, body: {"jsonrpc": "2.0", "id": rid, **body},
    st.one_of(st.integers(0, 8), s.request_ids()),
    st.one_of(
        st.builds(lambda r: {"result": r}, s.json_values(4)),
        st.builds(lambda e: {"error": e}, s.json_values(3)),
    ),
)


def hostile_lines(requests: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[bytes]:
    valid = st.one_of(requests, NOTIFICATIONS, RESPONSES)
    return st.one_of(
        valid.map(line),
        s.hostile_messages(valid, max_string=LIMITS.max_message_bytes).map(line),
        s.hostile_json_texts(LIMITS.max_message_bytes).map(lambda b: b + b"\n"),
        st.binary(max_size=64),
    )


# --- requests held in flight -----------------------------------------------------------------

HELD_IDS = frozenset({"held-request-000000", "held-request-000001", "held-request-000002"})


def held_modern() -> list[bytes]:
    ids = sorted(HELD_IDS)
    return [
        line(_call(ids[0], "echo", {"a": [1, "b"]})),
        line(_call(ids[1], "greet", {})),
        line(_call(ids[2], "book", {})),
    ]


def _call(rid: str, name: str, arguments: Any, meta: bool = True) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta:
        params["_meta"] = ENVELOPE
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def held_legacy() -> list[bytes]:
    return [
        line(_call(rid, "echo", {"n": i}, meta=False)) for i, rid in enumerate(sorted(HELD_IDS))
    ]


HANDSHAKE = [
    line(
        {
            "jsonrpc": "2.0",
            "id": "init",
            "method": "initialize",
            "params": {
                "protocolVersion": m.protocol.LATEST_LEGACY_VERSION,
                "capabilities": {"elicitation": {}, "sampling": {}, "roots": {}},
                "clientInfo": {"name": "fuzz", "version": "1"},
            },
        }
    ),
    line({"jsonrpc": "2.0", "method": "notifications/initialized"}),
]


def control(legacy: bool, held: list[bytes]) -> list[dict[str, Any]]:
    """What the held requests get with no hostile input around them."""
    harness = Harness(legacy=legacy, hold=HELD_IDS, note_kinds=False)
    for data in (HANDSHAKE if legacy else []) + held:
        harness.feed(data)
    harness.release()
    return harness.answers_to(HELD_IDS)


CONTROL = {False: control(False, held_modern()), True: control(True, held_legacy())}


def run(legacy: bool, chunks: list[bytes], *, note: bool = True) -> Harness:
    """Held requests in flight, then ``chunks``, then the held requests answered: check all."""
    harness = Harness(legacy=legacy, hold=HELD_IDS, note_kinds=note)
    for data in (HANDSHAKE if legacy else []) + (held_legacy() if legacy else held_modern()):
        harness.feed(data)
    assert len(harness.held) == len(HELD_IDS)
    for chunk in chunks:
        harness.feed(chunk)
    harness.feed(b"\n")  # end a dangling line
    harness.release()
    assert harness.answers_to(HELD_IDS) == CONTROL[legacy], "a request in flight was disturbed"
    return harness


def _streams(requests: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[list[bytes]]:
    return st.lists(hostile_lines(requests), max_size=8).map(b"".join).flatmap(s.chunked)


# --- the properties --------------------------------------------------------------------------


@profile(80)
@given(_streams(MODERN_REQUESTS))
def test_modern_server_survives_hostile_streams(chunks: list[bytes]) -> None:
    run(False, chunks)


@profile(60)
@given(_streams(LEGACY_REQUESTS))
def test_legacy_server_survives_hostile_streams(chunks: list[bytes]) -> None:
    run(True, chunks)


@profile(60)
@given(st.lists(hostile_lines(MODERN_REQUESTS), max_size=6).map(b"".join), st.data())
def test_any_chunking_gives_the_same_events_and_bytes(blob: bytes, data: st.DataObject) -> None:
    """Invariant 7: a byte stream split anywhere behaves as the whole."""

    def observe(chunks: list[bytes]) -> tuple[str, bytes]:
        conn = m.ServerConnection(config(legacy=False))
        seen = _feed_and_close(conn, chunks)
        return repr([_comparable(e) for e in seen]), conn.data_to_send()

    assert observe(data.draw(s.chunked(blob))) == observe([blob] if blob else [])


def _feed_and_close(
    conn: m.ServerConnection | m.ClientConnection, chunks: list[bytes]
) -> list[m.Event]:
    """Every event ``conn`` reports while ``chunks`` arrive, then the end of the stream."""
    seen: list[m.Event] = []
    for chunk in [*chunks, b""]:
        conn.receive_data(chunk)
        seen.extend(conn.events())
    return seen


def _comparable(event: m.Event) -> Any:
    if type(event) is m.RequestReceived:
        return ("request", event.request_id, event.method, event.params)
    return event


def test_oversized_lines_are_refused_and_the_stream_goes_on() -> None:
    harness = Harness(legacy=False, note_kinds=False)
    huge = line(_call("big", "echo", {"x": "y" * LIMITS.max_message_bytes}))
    for i in range(0, len(huge), 100):  # trickled in, never buffered whole
        harness.feed(huge[i : i + 100])
        assert harness.conn._framer.buffered <= LIMITS.max_message_bytes + 1
    harness.feed(line(_call("small", "echo", {"x": 1})))
    errors = [msg for msg in harness.written if "error" in msg]
    assert errors[0]["error"]["code"] == m.ErrorCode.INVALID_REQUEST
    assert "exceeds" in errors[0]["error"]["message"]
    assert [msg["id"] for msg in harness.written if "result" in msg] == ["small"]


def test_in_flight_limit_holds_under_a_flood() -> None:
    ids = frozenset(f"flood-{i}" for i in range(20))
    harness = Harness(legacy=False, hold=ids, note_kinds=False)
    for rid in sorted(ids):
        harness.feed(line(_call(rid, "echo", {})))
    assert len(harness.conn.in_flight) == LIMITS.max_in_flight
    refused = [msg for msg in harness.written if "error" in msg]
    assert len(refused) == 20 - LIMITS.max_in_flight
    harness.release()
    assert not harness.conn.in_flight


def test_hostile_texts_get_parse_or_request_errors() -> None:
    harness = Harness(legacy=False, note_kinds=False)
    for text in [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":1e400,"method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":"\xff","method":"tools/list"}',
        b"NaN",
    ]:
        harness.feed(text[:2000] + b"\n")
        harness.feed(text + b"\n")
    codes = {msg["error"]["code"] for msg in harness.written}
    assert codes <= {m.ErrorCode.PARSE_ERROR, m.ErrorCode.INVALID_REQUEST}
    assert all("id" not in msg for msg in harness.written)


def test_control_answers_are_what_the_handler_says() -> None:
    """The reference the properties compare with is itself right."""
    modern = CONTROL[False]
    assert [msg["id"] for msg in modern] == sorted(HELD_IDS)
    assert json.loads(modern[0]["result"]["content"][0]["text"]) == {"a": [1, "b"]}
    assert modern[1]["result"]["resultType"] == "input_required"
    assert modern[2]["result"]["requestState"]
    legacy = CONTROL[True]
    assert [msg["result"]["content"][0]["text"] for msg in legacy] == [
        '{"n": 0}',
        '{"n": 1}',
        '{"n": 2}',
    ]


# --- the client role -------------------------------------------------------------------------

CLIENT_LIMITS = m.Limits(max_message_bytes=2048, max_input_requests=4, max_pending_legs=4)
HELD_CALLS = ("held-a", "held-b", "held-c")
#: Calls the hostile stream may answer, fail, or drive through rounds.
VICTIM_CALLS = ("victim-1", "victim-2", "victim-3")
#: The ids the client gives them (its own id space starts at 0; legacy: initialize is 0).
VICTIM_IDS = st.integers(3, 12)


class ClientHarness:
    """A client with calls in flight, answering what the server asks with valid answers."""

    def __init__(self, *, legacy: bool, note_kinds: bool = True) -> None:
        self.now = 1000.0
        self.era = m.Era.LEGACY if legacy else m.Era.MODERN
        self.conn = m.ClientConnection(
            m.ClientConfig(
                client_info={"name": "fuzz-client", "version": "1"},
                capabilities=s.FULL_CAPABILITIES,
                era="legacy" if legacy else "modern",
                limits=CLIENT_LIMITS,
                clock=lambda: self.now,
            )
        )
        self.note = note_kinds
        self.written: list[dict[str, Any]] = []
        self.ended: dict[str, Any] = {}
        self.held_ids: dict[Any, str] = {}
        calls = [self.conn.call("tools/call", {"name": n}) for n in HELD_CALLS + VICTIM_CALLS]
        self.names = {c.call_id: c.params["name"] for c in calls}
        self._drain()
        if legacy:
            (init,) = [msg for msg in self.written if msg.get("method") == "initialize"]
            result = {
                "protocolVersion": m.protocol.LATEST_LEGACY_VERSION,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fuzz", "version": "1"},
            }
            self.feed(line({"jsonrpc": "2.0", "id": init["id"], "result": result}))
        for msg in self.written:
            if msg.get("method") == "tools/call" and msg["params"]["name"] in HELD_CALLS:
                self.held_ids[msg["id"]] = msg["params"]["name"]
        assert len(self.held_ids) == len(HELD_CALLS)

    def feed(self, data: bytes) -> None:
        conn = self.conn
        conn.receive_data(data)
        for event in conn.events():
            if type(event) is m.InputNeeded:
                self._answer(event)
            elif isinstance(event, (m.CallCompleted, m.CallFailed, m.RoundsExhausted)):
                self.ended[self.names[event.call.call_id]] = event
        due = conn.next_deadline()
        if due is not None:
            self.now = max(self.now, due)
            conn.handle_timer(self.now)
        self._drain()

    def _answer(self, event: m.InputNeeded) -> None:
        conn = self.conn
        if event.method == "elicitation/create":
            conn.decline(event)
        elif event.method == "roots/list":
            conn.fulfil(event, {"roots": [{"uri": "file:///fuzz"}]})
        elif event.method == "sampling/createMessage":
            answer = {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}
            conn.fulfil(event, answer)
        else:
            conn.reject(event)

    def _drain(self) -> None:
        for item in self.conn.outgoing():
            message = json.loads(item.data)
            assert message == item.message
            check_message(message, self.era, sender="client")
            if self.era is m.Era.MODERN:
                assert "method" in message, "a modern client never writes responses"
                assert message.get("id") not in self.held_ids or message["params"]["name"] in (
                    HELD_CALLS
                )
            self.written.append(message)
            if self.note:
                note("client " + _kind(message))

    def finish(self) -> list[tuple[str, str, Any]]:
        """Answer the held calls as a server would; report how each ended."""
        for rid, name in self.held_ids.items():
            result: dict[str, Any] = {"content": [{"type": "text", "text": name}]}
            if self.era is m.Era.MODERN:
                result["resultType"] = "complete"
            self.feed(line({"jsonrpc": "2.0", "id": rid, "result": result}))
        return [
            (
                name,
                type(self.ended.get(name)).__name__,
                getattr(self.ended.get(name), "result", None),
            )
            for name in HELD_CALLS
        ]


def _neutral(held: frozenset[Any]) -> Callable[[bytes], bytes]:
    """Hostile lines never answer the held calls (their ids are the one thing the stream must
    not guess): a message that could answer one of them gets another id."""

    def fix(data: bytes) -> bytes:
        try:
            message = json.loads(data)
        except (ValueError, RecursionError):
            return data
        # (A client takes any method-less message with its id as a broken answer to it.)
        if (
            isinstance(message, dict)
            and "method" not in message
            and type(message.get("id")) in (int, str)
            and message["id"] in held
        ):
            message["id"] = "neutralized"
            return line(message)
        return data

    return fix


def _as_request(value: Any) -> dict[str, Any]:
    """An invalid embedded request as the body of a server request (an object, at least)."""
    return value if isinstance(value, dict) else {"method": "elicitation/create", "params": value}


SERVER_REQUESTS = st.builds(
    lambda rid, request: {"jsonrpc": "2.0", "id": rid, **request},
    st.one_of(s.request_ids(), s.json_values(2)),
    st.one_of(s.input_requests(), s.invalid_input_requests().map(_as_request)),
)
SERVER_RESPONSES = st.builds(
    lambda rid, result: {"jsonrpc": "2.0", "id": rid, "result": result},
    VICTIM_IDS,
    st.one_of(
        s.input_required_results(),
        s.invalid_input_required_results(),
        st.just({"resultType": "complete", "content": []}),
        st.just({"content": []}),
        s.json_values(4),
    ),
)
SERVER_ERRORS = st.builds(
    lambda rid, code: {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": "x"}},
    VICTIM_IDS,
    st.sampled_from([-32602, -32603, -32021, -32022, -32601, 1]),
)


def client_lines() -> st.SearchStrategy[bytes]:
    valid = st.one_of(SERVER_RESPONSES, SERVER_ERRORS, SERVER_REQUESTS, NOTIFICATIONS)
    return st.one_of(
        valid.map(line),
        s.hostile_messages(valid, max_string=CLIENT_LIMITS.max_message_bytes).map(line),
        s.hostile_json_texts(CLIENT_LIMITS.max_message_bytes).map(lambda b: b + b"\n"),
        st.binary(max_size=64),
    )


def client_control(legacy: bool) -> list[tuple[str, str, Any]]:
    return ClientHarness(legacy=legacy, note_kinds=False).finish()


CLIENT_CONTROL = {False: client_control(False), True: client_control(True)}


def run_client(legacy: bool, lines: list[bytes], data: st.DataObject, *, note: bool = True) -> None:
    harness = ClientHarness(legacy=legacy, note_kinds=note)
    fix = _neutral(frozenset(harness.held_ids))
    blob = b"".join(fix(item) for item in lines)
    for chunk in data.draw(s.chunked(blob)) if data is not None else [blob]:
        harness.feed(chunk)
    harness.feed(b"\n")
    assert harness.finish() == CLIENT_CONTROL[legacy], "a call in flight was disturbed"


@profile(60)
@given(st.booleans(), st.lists(client_lines(), max_size=8), st.data())
def test_client_survives_hostile_streams(
    legacy: bool, lines: list[bytes], data: st.DataObject
) -> None:
    run_client(legacy, lines, data)


def test_client_control_is_what_the_server_said() -> None:
    for legacy in (False, True):
        ended = CLIENT_CONTROL[legacy]
        assert [(name, kind) for name, kind, _ in ended] == [
            (name, "CallCompleted") for name in HELD_CALLS
        ]
        assert [result["content"][0]["text"] for _, _, result in ended] == list(HELD_CALLS)


@profile(40)
@given(st.booleans(), st.lists(client_lines(), max_size=6).map(b"".join), st.data())
def test_client_chunking_gives_the_same_events_and_bytes(
    legacy: bool, blob: bytes, data: st.DataObject
) -> None:
    """Invariant 7 for the client role."""

    def observe(chunks: list[bytes]) -> tuple[str, bytes]:
        conn = m.ClientConnection(
            m.ClientConfig(
                capabilities=s.FULL_CAPABILITIES,
                era="legacy" if legacy else "modern",
                limits=CLIENT_LIMITS,
                clock=lambda: 0.0,
            )
        )
        for name in VICTIM_CALLS:
            conn.call("tools/call", {"name": name})
        return repr(_feed_and_close(conn, chunks)), conn.data_to_send()

    assert observe(data.draw(s.chunked(blob))) == observe([blob] if blob else [])
