"""``ClientDriver``, the IO-free half every client adapter shares, driven by hand: bytes in,
hooks called, bytes out. What the adapters cannot easily provoke is pinned here (a trace
across cut reads, unlinked legacy requests, late answers, failures after a failed
handshake)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from stream_harness import (
    LEGACY,
    EraName,
)

import mrtr_sansio as m
from helpers import (
    check_message,
)
from mrtr_sansio.adapters import (
    CallFailedError,
    ClientDriver,
    ConnectionClosedError,
    HandshakeFailedError,
    InputRejectedError,
)
from mrtr_sansio.adapters._client_options import client_config


class Hooks:
    """A driver whose hooks record what they were told."""

    def __init__(self, era: EraName = "legacy") -> None:
        config, callbacks = client_config(m.ClientConfig(era=era), {"elicitation": self.elicit})
        self.started: list[m.InputNeeded] = []
        self.stopped: list[m.InputNeeded] = []
        self.settled: list[m.Call] = []
        self.ready = 0
        self.traced: list[tuple[str, bytes]] = []
        self.driver = ClientDriver(
            m.ClientConnection(config),
            callbacks,
            start_input=lambda event, _callback: self.started.append(event),
            stop_input=self.stopped.append,
            settled=self.settled.append,
            ready=self.count_ready,
            trace=lambda direction, data: self.traced.append((direction, data)),
        )

    def elicit(self, need: m.InputNeeded) -> Mapping[str, Any]:
        raise NotImplementedError  # never run: the tests answer through the driver

    def count_ready(self) -> None:
        self.ready += 1

    def sent(self) -> list[dict[str, Any]]:
        era = self.driver.conn.era or m.Era.MODERN
        out = []
        for line in self.driver.data_to_send().splitlines():
            msg = json.loads(line)
            check_message(msg, era, sender="client")
            out.append(msg)
        return out

    def feed(self, *messages: Mapping[str, Any]) -> None:
        self.driver.receive(b"".join(json.dumps(msg).encode() + b"\n" for msg in messages))

    def open_legacy(self) -> None:
        (init,) = self.sent()
        result = {"protocolVersion": LEGACY, "capabilities": {}}
        self.feed({"jsonrpc": "2.0", "id": init["id"], "result": result})
        assert self.ready == 1
        assert self.driver.handshake_error is None
        self.sent()  # notifications/initialized


def ask(rid: int) -> dict[str, Any]:
    params = {"message": "Name?", "requestedSchema": {"type": "object"}}
    return {"jsonrpc": "2.0", "id": rid, "method": "elicitation/create", "params": params}


def test_trace_sees_whole_lines_whatever_the_reads() -> None:
    hooks = Hooks()
    hooks.sent()
    hooks.driver.receive(b'{"jsonrpc":"2.0","method":"x"}\n\n{"jsonrpc":')
    hooks.driver.receive(b'"2.0","method":"y"}\n{"jsonrpc":"2.0","method":"z"}')
    hooks.driver.close()
    received = [data for direction, data in hooks.traced if direction == "recv"]
    assert [json.loads(data)["method"] for data in received] == ["x", "y", "z"]
    assert hooks.traced[0][0] == "send"


def test_after_a_failed_handshake_every_call_fails_typed() -> None:
    hooks = Hooks()
    queued = hooks.driver.call("tools/call", {"name": "a"})  # waits for the handshake
    (init,) = hooks.sent()
    error = {"code": -32602, "message": "Unsupported protocol version"}
    hooks.feed({"jsonrpc": "2.0", "id": init["id"], "error": error})
    assert hooks.ready == 1
    assert hooks.settled == [queued]
    with pytest.raises(HandshakeFailedError) as failed:
        hooks.driver.take(queued)
    assert failed.value.code == -32602
    assert failed.value.call is queued
    with pytest.raises(HandshakeFailedError):
        hooks.driver.call("tools/list", None)


def test_calls_after_the_end_of_input() -> None:
    hooks = Hooks(era="modern")
    hooks.driver.close()
    hooks.driver.close()  # once is enough
    with pytest.raises(ConnectionClosedError):
        hooks.driver.call("tools/list", None)


def test_unlinked_legacy_requests() -> None:
    """A server request while two calls are in flight belongs to neither: a callback that
    fails answers it -32603, a rejection with its error; no call is touched."""
    hooks = Hooks()
    hooks.open_legacy()
    one = hooks.driver.call("tools/call", {"name": "a"})
    two = hooks.driver.call("tools/call", {"name": "b"})
    hooks.sent()
    hooks.feed(ask(100), ask(101))
    first, second = hooks.started
    assert first.call is None
    assert second.call is None
    hooks.driver.fail(first, RuntimeError("bug"))
    hooks.driver.fail(second, InputRejectedError(m.JsonRpcError(-1, "No thanks")))
    assert hooks.sent() == [
        {"jsonrpc": "2.0", "id": 100, "error": {"code": -32603, "message": "Internal error"}},
        {"jsonrpc": "2.0", "id": 101, "error": {"code": -1, "message": "No thanks"}},
    ]
    assert hooks.settled == []
    assert hooks.driver.cancel(one)
    assert hooks.driver.cancel(two)


def test_late_answers_are_ignored() -> None:
    """The server withdrew its request: the callback is stopped, and what it returns (or
    raises) afterwards goes nowhere."""
    hooks = Hooks()
    hooks.open_legacy()
    call = hooks.driver.call("tools/call", {"name": "a"})
    hooks.sent()
    hooks.feed(ask(5), ask(6))
    first, second = hooks.started
    withdraw = {"requestId": 6}
    hooks.feed(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": withdraw},
    )
    assert hooks.stopped == [second]
    hooks.driver.answer(second, {"action": "accept", "content": {}})
    hooks.driver.fail(second, RuntimeError("too late"))
    assert hooks.sent() == []
    hooks.feed({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "gone"}})
    assert hooks.settled == [call]
    assert hooks.stopped == [second, first]  # the call ended: its last input is void
    with pytest.raises(CallFailedError) as failed:
        hooks.driver.take(call)
    assert not failed.value.local
    hooks.driver.answer(first, {"action": "decline"})
    assert hooks.sent() == []


def test_events_the_application_does_not_handle_are_logged() -> None:
    hooks = Hooks(era="modern")
    hooks.feed(
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}},
        {"jsonrpc": "2.0", "id": 42, "result": {}},
    )
    assert hooks.settled == []
    assert hooks.sent() == []


def test_a_failing_trace_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    """The bytes still go out and come in; each failure is logged."""
    hooks = Hooks(era="modern")

    def broken(direction: str, data: bytes) -> None:
        raise RuntimeError("trace")

    hooks.driver._trace = broken
    call = hooks.driver.call("tools/list", None)
    assert hooks.driver.data_to_send().count(b"\n") == 1
    hooks.feed({"jsonrpc": "2.0", "id": 0, "result": {"tools": []}})
    assert hooks.driver.take(call) == {"tools": []}
    assert [r.getMessage() for r in caplog.records] == ["a client hook failed"] * 2
