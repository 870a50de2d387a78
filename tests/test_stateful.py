"""A hypothesis state machine driving our ClientConnection against our ServerConnection.

Each example picks an era (modern; legacy, served by the server's legacy shim; auto, which finds
the modern server; auto against a server without modern versions, which falls back to legacy),
the client's declared capabilities and round cap, the shim's, and whether the server seals
``requestState`` (HMAC-SHA256, AES-256-GCM, or not at all). Calls follow random *plans*:
rounds of input requests (random keys, kinds, and ``requestState`` of random size and content,
or state only), then a result. Rules make calls, move bytes in random chunks, let the server
application answer, answer input (accept, decline, cancel, reject), cancel calls, advance the
clock and feed junk. Checked on every step:

* every message the client writes is valid for its era's schema (``helpers.drain``), and the
  server never sees an invalid message from it;
* request ids are never reused;
* the server application sees, on every retry, the exact ``requestState`` it wrote last (any
  JSON value when sealed, a byte-exact string otherwise; absent when it wrote none) and
  exactly the answers the client application gave for the keys of the last round; first
  requests and other methods carry neither field (no leak across calls);
* every modern request carries the configured envelope;
* each round's events name the right call and round, one per key;
* a call ends at most once, and nothing about it is reported after its end or cancellation;
* at the end, with everything answered, every call has ended exactly as its plan predicts
  (completed, failed with -32021 or -32603, or RoundsExhausted) unless it was cancelled.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import event as record
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from helpers import (
    CLIENT,
    Clock,
    drain,
)
from mrtr_sansio import (
    NEED_DATA,
    UNSEALED,
    Call,
    CallCompleted,
    CallFailed,
    ClientConfig,
    ClientConnection,
    Era,
    EraDetected,
    InputNeeded,
    InputRequest,
    InputRequiredResult,
    InputWithdrawn,
    InvalidMessage,
    RequestReceived,
    RequestStateRejected,
    RoundsExhausted,
    ServerConfig,
    ServerConnection,
)
from mrtr_sansio.sealing import RequestStateSecurity

KINDS = ("form", "url", "sample", "roots")
ODD_STATES = ["", " ", "☃𝄞", '{"json": [1, 2]}', "\x00\n", "é" * 300]
# Text a UTF-8 wire can carry: a lone surrogate has no UTF-8 form, and the default codec
# (orjson) refuses to send one (LocalProtocolError) where the stdlib codec escaped it.
wire_text = st.characters(codec="utf-8")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(wire_text, max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(wire_text, max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
# None: no state. Other JSON values are sealed as they are by a sealing server, and travel as
# their JSON text otherwise (an unsealed modern server sends strings only).
states = st.one_of(
    st.none(),
    st.sampled_from(ODD_STATES),
    st.text(wire_text, max_size=40),
    st.text(wire_text, max_size=600),
    json_values.filter(lambda v: v is not None),
)
rounds = st.tuples(
    st.dictionaries(st.text(wire_text, min_size=1, max_size=6), st.sampled_from(KINDS), max_size=3),
    states,
).filter(lambda r: bool(r[0]) or r[1] is not None)
plans = st.lists(rounds, max_size=5)
KEY = bytes(range(32))


def tag_of(cid: int, rnd: int, key: str) -> str:
    return json.dumps([cid, rnd, key])


def build_request(kind: str, tag: str) -> InputRequest:
    if kind == "form":
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        return InputRequest("elicitation/create", {"message": tag, "requestedSchema": schema})
    if kind == "url":
        params = {"mode": "url", "message": tag, "url": "https://example.com/x"}
        return InputRequest("elicitation/create", params)
    if kind == "sample":
        text = {"type": "text", "text": tag}
        return InputRequest(
            "sampling/createMessage",
            {"messages": [{"role": "user", "content": text}], "maxTokens": 5},
        )
    return InputRequest("roots/list", {"_meta": {"tag": tag}})


def read_tag(event: InputNeeded) -> tuple[int, int, str]:
    params = event.params
    if event.method == "elicitation/create":
        tag = params["message"]
    elif event.method == "sampling/createMessage":
        tag = params["messages"][0]["content"]["text"]
    else:
        tag = params["_meta"]["tag"]
    cid, rnd, key = json.loads(tag)
    return cid, rnd, key


class CallModel:
    """What the test knows about one call: its plan, and the server application's view."""

    def __init__(self, cid: int, plan: list[tuple[dict[str, str], Any]], call: Call):
        self.cid = cid
        self.plan = plan
        self.call = call
        self.server_round = 0  # input_required results the server application returned
        self.sent_state: Any = None
        self.asked: dict[str, str] = {}
        self.answers: dict[str, Any] = {}
        self.outcome: str | None = None  # "completed" | "failed" | "exhausted" | "cancelled"
        self.failed_code: int | None = None
        self.rejected = False


class ClientServerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock(0.0)
        self.models: dict[int, CallModel] = {}
        self.by_call: dict[Call, CallModel] = {}
        self.pending: list[InputNeeded] = []
        self.ids: set[Any] = set()
        self.ended: set[Call] = set()
        self.next_cid = 0

    @initialize(
        era=st.sampled_from(["modern", "legacy", "auto", "auto-legacy"]),
        declared=st.sets(st.sampled_from(KINDS)),
        max_rounds=st.integers(1, 4),
        shim_rounds=st.integers(1, 4),
        sealing=st.sampled_from([None, "hmac-sha256", "aes-256-gcm"]),
    )
    def setup(
        self, era: str, declared: set[str], max_rounds: int, shim_rounds: int, sealing: Any
    ) -> None:
        self.era = era
        self.sealed = sealing is not None
        record(f"era {era}, sealing {sealing}")
        self.legacy = era in ("legacy", "auto-legacy")
        self.declared = declared
        caps: dict[str, Any] = {}
        if {"form", "url"} & declared:
            caps["elicitation"] = {m: {} for m in ("form", "url") if m in declared}
        if "sample" in declared:
            caps["sampling"] = {}
        if "roots" in declared:
            caps["roots"] = {}
        self.caps = caps
        # On the legacy wire the shim's cap is the one that bites; the client's stays above it.
        self.max_rounds = 10 if self.legacy else max_rounds
        self.shim_rounds = shim_rounds
        self.client = ClientConnection(
            ClientConfig(
                client_info=CLIENT,
                capabilities=caps,
                era="legacy" if era == "legacy" else "auto" if era.startswith("auto") else "modern",
                max_rounds=self.max_rounds,
                clock=self.clock,
            )
        )
        # a server without modern versions answers the probe -32022, listing legacy ones
        self.server = ServerConnection(
            ServerConfig(
                server_info={"name": "srv", "version": "1"},
                legacy_max_rounds=shim_rounds,
                supported_versions=() if era == "auto-legacy" else ("2026-07-28",),
                request_state=UNSEALED
                if sealing is None
                else RequestStateSecurity([KEY], codec=sealing),
            )
        )

    # --- the server application ---------------------------------------------------------------

    def handle(self, ev: RequestReceived) -> Any:
        assert ev.era is (Era.LEGACY if self.legacy else Era.MODERN)
        if ev.era is Era.MODERN:
            assert ev.client_capabilities == self.caps
            assert ev.client_info == CLIENT
        params = ev.params
        if ev.method == "tools/list":
            assert "inputResponses" not in params
            assert "requestState" not in params
            return {"tools": []}
        m = self.models[ev.arguments["cid"]]
        if m.server_round == 0:
            assert "inputResponses" not in params
            assert "requestState" not in params
        else:
            assert ev.request_state == m.sent_state  # byte-exact, None when none was sent
            if ev.era is Era.MODERN:
                assert ("requestState" in params) == (m.sent_state is not None)
                assert ("inputResponses" in params) == bool(m.asked)
            assert set(ev.input_responses) == set(m.asked)
            for key in m.asked:
                assert ev.input_responses[key] == m.answers[key]
        m.server_round += 1
        if m.server_round > len(m.plan):
            return {"content": [{"type": "text", "text": f"done {m.cid}"}]}
        kinds, state = m.plan[m.server_round - 1]
        # Unsealed, state must be a string on both wires (the shim holds the same rule).
        if not (self.sealed or state is None or isinstance(state, str)):
            state = json.dumps(state)
        m.sent_state = state
        m.asked = dict(kinds)
        m.answers = {}
        requests = {
            key: build_request(kind, tag_of(m.cid, m.server_round, key))
            for key, kind in kinds.items()
        }
        return InputRequiredResult(requests or None, request_state=state)

    # --- moving bytes -------------------------------------------------------------------------

    def _client_era(self) -> Era:
        return self.client.era or Era.MODERN

    @rule(cuts=st.lists(st.integers(0, 1 << 16), max_size=4))
    def client_to_server(self, cuts: list[int]) -> None:
        self._to_server(cuts)

    @rule()
    def server_handles(self) -> None:
        self._serve()

    @rule(cuts=st.lists(st.integers(0, 1 << 16), max_size=4))
    def server_to_client(self, cuts: list[int]) -> None:
        self._to_client(cuts)

    def _to_server(self, cuts: list[int]) -> bool:
        items = drain(self.client, self._client_era(), sender="client")
        for item in items:
            msg = item.message
            if "method" in msg and "id" in msg:
                assert msg["id"] not in self.ids, f"id reused: {msg}"
                self.ids.add(msg["id"])
        self._feed(self.server, b"".join(i.data + b"\n" for i in items), cuts)
        return bool(items)

    def _serve(self) -> bool:
        server = self.server
        moved = False
        while (event := server.next_event()) is not NEED_DATA:
            moved = True
            assert type(event) is not RequestStateRejected
            if type(event) is InvalidMessage:  # only the probe of a server with no modern version
                assert event.error.code == -32022, event
                assert self.era == "auto-legacy"
            if type(event) is RequestReceived:
                server.respond(event.request_id, self.handle(event))
        return moved

    def _to_client(self, cuts: list[int]) -> bool:
        items = drain(self.server, self._client_era())
        self._feed(self.client, b"".join(i.data + b"\n" for i in items), cuts)
        self._take_events()
        return bool(items)

    def _feed(self, conn: Any, data: bytes, cuts: list[int]) -> None:
        points = sorted({c % (len(data) + 1) for c in cuts}) if data else []
        start = 0
        for point in [*points, len(data)]:
            if point > start:
                conn.receive_data(data[start:point])
                start = point

    def _take_events(self) -> None:
        for event in self.client.events():
            self._on_event(event)

    def _on_event(self, event: Any) -> None:
        kind = type(event)
        call = getattr(event, "call", None)
        if call is not None:
            assert call not in self.ended, f"event after the call ended: {event}"
        if kind is InputNeeded:
            cid, rnd, key = read_tag(event)
            m = self.models[cid]
            if call is not None:
                assert call is m.call
            if not self.legacy:
                assert event.key == key
                assert event.round == rnd
                assert m.asked.get(key) is not None
            self.pending.append(event)
        elif kind is InputWithdrawn:
            self.pending = [e for e in self.pending if e.key != event.key or e.call is not call]
        elif kind in (CallCompleted, CallFailed, RoundsExhausted):
            assert call is not None
            m = self.by_call[call]
            assert m.outcome is None
            self.ended.add(call)
            self.pending = [e for e in self.pending if e.call is not call]
            if kind is CallCompleted:
                m.outcome = "completed"
                if m.cid >= 0:
                    assert event.result["content"][0]["text"] == f"done {m.cid}"
            elif kind is CallFailed:
                m.outcome = "failed"
                m.failed_code = event.error.code
                assert not event.local, event
            else:
                m.outcome = "exhausted"
                assert event.rounds == self.max_rounds
                assert event.last_result["resultType"] == "input_required"
        elif kind is EraDetected:
            assert event.era is (Era.LEGACY if self.legacy else Era.MODERN)
        else:
            # A legacy leg can reach the client after the call it served was cancelled: it
            # is unassociated then, and answered -32602.
            assert kind is InvalidMessage, event
            assert self.legacy
            assert event.error.code == -32602

    # --- the client application ---------------------------------------------------------------

    @rule(plan=plans)
    def make_call(self, plan: list[tuple[dict[str, str], Any]]) -> None:
        cid = self.next_cid
        self.next_cid += 1
        call = self.client.call("tools/call", {"name": "plan", "arguments": {"cid": cid}})
        m = CallModel(cid, plan, call)
        self.models[cid] = m
        self.by_call[call] = m

    @rule()
    def list_tools(self) -> None:
        call = self.client.call("tools/list")
        self.by_call[call] = CallModel(-1, [], call)

    @precondition(lambda self: bool(self.pending))
    @rule(data=st.data())
    def answer(self, data: st.DataObject) -> None:
        event = data.draw(st.sampled_from(self.pending))
        self.pending.remove(event)
        cid, rnd, key = read_tag(event)
        m = self.models[cid]
        tag = tag_of(cid, rnd, key)
        if event.method == "elicitation/create":
            action = data.draw(st.sampled_from(["accept", "decline", "cancel"]))
            if action == "decline":
                assert self.client.decline(event)
                reply: dict[str, Any] = {"action": "decline"}
            elif action == "cancel":
                assert self.client.dismiss(event)
                reply = {"action": "cancel"}
            else:
                reply = {"action": "accept"}
                if event.params.get("mode") != "url":
                    reply["content"] = {"name": tag}
                assert self.client.fulfil(event, reply)
        elif event.method == "sampling/createMessage":
            reply = {"role": "assistant", "content": {"type": "text", "text": tag}, "model": "m"}
            assert self.client.fulfil(event, reply)
        else:
            reply = {"roots": [{"uri": "file:///root", "name": tag}]}
            assert self.client.fulfil(event, reply)
        m.answers[key] = reply

    @precondition(lambda self: bool(self.pending))
    @rule(data=st.data())
    def reject(self, data: st.DataObject) -> None:
        event = data.draw(st.sampled_from(self.pending))
        self.pending.remove(event)
        m = self.models[read_tag(event)[0]]
        assert self.client.reject(event)
        if self.legacy:
            m.rejected = True  # the shim fails the call with -32603
        else:
            self._cancelled(m)

    @precondition(lambda self: any(m.outcome is None for m in self.models.values()))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        open_calls = [m for m in self.models.values() if m.outcome is None]
        m = data.draw(st.sampled_from(open_calls))
        assert self.client.cancel(m.call)
        self._cancelled(m)

    def _cancelled(self, m: CallModel) -> None:
        m.outcome = "cancelled"
        self.ended.add(m.call)
        self.pending = [e for e in self.pending if e.call is not m.call]

    # The probe's own deadline is left alone: a probe that times out against this modern
    # server would rightly fall back to legacy, which test_client_era.py pins.
    @precondition(lambda self: self.client.era is not None)
    @rule()
    def tick(self) -> None:
        self._tick()

    def _tick(self) -> bool:
        due = self.client.next_deadline()
        if due is None or self.client.era is None:
            return False
        self.clock.now = max(self.clock.now, due)
        self.client.handle_timer(self.clock.now)
        return True

    @rule(junk=st.binary(min_size=1, max_size=40))
    def junk(self, junk: bytes) -> None:
        self._take_events()
        line = junk.replace(b"\n", b" ")
        if not line.strip():
            return
        try:
            json.loads(line)
            return  # valid JSON could be a real message; junk must be junk
        except ValueError:
            pass
        self.client.receive_data(line + b"\n")
        (event,) = self.client.events()
        assert type(event) is InvalidMessage
        assert not event.answered

    # --- invariants ---------------------------------------------------------------------------

    @invariant()
    def ended_calls_are_not_in_flight(self) -> None:
        assert not (self.client.in_flight & self.ended)

    @invariant()
    def pending_input_belongs_to_open_calls(self) -> None:
        for event in self.pending:
            assert event.call is None or event.call not in self.ended

    def teardown(self) -> None:
        """Answer everything until nothing moves; then every plan must have played out."""
        for _ in range(1000):
            moved = self._to_server([]) | self._serve() | self._to_client([])
            answered = bool(self.pending)
            for event in list(self.pending):
                self._answer_plainly(event)
            if not (moved or answered or self._tick()):
                break
        else:  # pragma: no cover - only reached when the pair livelocks
            raise AssertionError("the pair never went quiet")
        for m in self.models.values():
            record(f"{self.era}: {m.outcome}")
            assert m.outcome == self.expected(m), (m.cid, m.plan, m.outcome, m.failed_code)
            if m.outcome == "failed":
                assert m.failed_code == self.expected_code(m)

    def _answer_plainly(self, event: InputNeeded) -> None:
        self.pending.remove(event)
        cid, rnd, key = read_tag(event)
        tag = tag_of(cid, rnd, key)
        if event.method == "elicitation/create":
            reply: dict[str, Any] = {"action": "accept"}
        elif event.method == "sampling/createMessage":
            reply = {"role": "assistant", "content": {"type": "text", "text": tag}, "model": "m"}
        else:
            reply = {"roots": []}
        assert self.client.fulfil(event, reply)
        self.models[cid].answers[key] = reply

    def expected(self, m: CallModel) -> str:
        if m.outcome == "cancelled":
            return "cancelled"
        if m.rejected:
            return "failed"
        for index, (kinds, _) in enumerate(m.plan, start=1):
            if self.legacy:
                if index > self.shim_rounds or set(kinds.values()) - self.declared:
                    return "failed"
            else:
                if set(kinds.values()) - self.declared:
                    return "failed"
                if index > self.max_rounds:
                    return "exhausted"
        return "completed"

    def expected_code(self, m: CallModel) -> int:
        return -32603 if self.legacy else -32021


TestClientServer = ClientServerMachine.TestCase
TestClientServer.settings = settings(
    max_examples=200,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
