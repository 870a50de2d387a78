"""ServerDriver, the IO-free half every stream adapter shares: event routing, answers, timer."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from stream_harness import (
    ADA,
    INITIALIZED,
    NAME_SCHEMA,
    SERVER,
    TIMED_OUT,
    cancelled,
    error,
    initialize,
    leg,
    leg_cancelled,
    legacy_call,
    modern_call,
    result,
    text,
)

import mrtr_sansio as m
from helpers import (
    Clock,
    drain,
)
from mrtr_sansio import (
    Era,
    InputRequiredResult,
    JsonRpcError,
    Limits,
    RequestReceived,
    ServerConfig,
    ServerConnection,
    elicit_form,
)
from mrtr_sansio.adapters import ServerDriver, answer
from mrtr_sansio.adapters._loop import Route, route_of
from mrtr_sansio.tasks import TaskCancelled

ASK = elicit_form("What is your name?", NAME_SCHEMA)


class Recorder:
    """A ServerDriver whose ``start``/``cancel`` only record what they were asked."""

    def __init__(self, **config: Any) -> None:
        self.clock = Clock(1000.0)
        config.setdefault("server_info", SERVER)
        self.conn = ServerConnection(ServerConfig(clock=self.clock, **config))
        self.started: list[RequestReceived] = []
        self.cancelled: list[str | int] = []
        self.driver = ServerDriver(self.conn, self.started.append, self.cancelled.append)

    def feed(self, *messages: dict[str, Any]) -> None:
        self.driver.receive(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    def out(self, era: Era = Era.MODERN) -> list[Any]:
        return [item.message for item in drain(self.conn, era)]


def test_requests_start_and_cancellations_cancel() -> None:
    rec = Recorder()
    rec.feed(modern_call(1, "a"), modern_call(2, "b"), cancelled(1))
    assert [r.request_id for r in rec.started] == [1, 2]
    assert rec.cancelled == [1]
    rec.driver.answer(rec.started[0], text("late"))  # cancelled meanwhile: dropped
    rec.driver.answer(rec.started[1], text("b"))
    assert rec.out() == [result(2, text("b"))]


def test_end_of_input_closes_and_later_input_is_ignored() -> None:
    rec = Recorder()
    rec.feed(modern_call(1, "a"))
    assert not rec.driver.closed
    rec.driver.receive(b"")
    assert rec.driver.closed
    rec.driver.receive(b"more")  # nothing happens (the connection would refuse it)
    rec.driver.receive(b"")
    assert [r.request_id for r in rec.started] == [1]


@pytest.mark.parametrize(
    "bad",
    [
        InputRequiredResult(None, "s"),  # input_required where the method forbids it
        {"content": [{"type": "text", "text": {1, 2}}]},  # not JSON
        ["not", "a", "result"],  # not a result at all
    ],
    ids=["input-required-on-tools-list", "not-json", "wrong-type"],
)
def test_invalid_answers_become_internal_errors(bad: Any, caplog: pytest.LogCaptureFixture) -> None:
    rec = Recorder()
    rec.feed(modern_call(1, "a") | {"method": "tools/list"})
    with caplog.at_level(logging.ERROR, "mrtr_sansio.adapters"):
        rec.driver.answer(rec.started[0], bad)
    assert rec.out() == [error(1, -32603, "Internal error")]
    assert "tools/list 1 returned an invalid answer" in caplog.text


def test_state_only_round_on_the_legacy_wire_replays_at_once() -> None:
    rec = Recorder()
    rec.feed(initialize(0), INITIALIZED, legacy_call(1, "count"))
    assert rec.out(Era.LEGACY)[0]["id"] == 0
    rec.driver.answer(rec.started[0], InputRequiredResult(None, "step"))
    assert [(r.request_id, r.round, r.request_state) for r in rec.started] == [
        (1, 1, None),
        (1, 2, "step"),
    ]
    rec.driver.answer(rec.started[1], text("done"))
    assert rec.out(Era.LEGACY) == [result(1, text("done"), Era.LEGACY)]


def test_rounds_exhausted_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    rec = Recorder(legacy_max_rounds=2)
    rec.feed(initialize(0), INITIALIZED, legacy_call(1, "count"))
    with caplog.at_level(logging.WARNING, "mrtr_sansio.adapters"):
        for _ in range(3):
            rec.driver.answer(rec.started[-1], InputRequiredResult(None, "again"))
    assert len(rec.started) == 3
    assert rec.out(Era.LEGACY)[-1]["error"]["code"] == -32603
    assert "tools/call 1 still needed input after 2 rounds" in caplog.text


def test_rejected_state_and_invalid_messages_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    rec = Recorder(limits=Limits(max_request_state_bytes=8))
    with caplog.at_level(logging.DEBUG, "mrtr_sansio.adapters"):
        rec.feed(modern_call(1, "a", requestState="x" * 100))
        rec.driver.receive(b"nonsense\n")
        rec.feed({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert rec.started == []
    assert [m["error"]["code"] for m in rec.out()] == [-32602, -32700]
    assert "requestState rejected for tools/call 1: oversized" in caplog.text
    assert "invalid message from the client: Parse error: Invalid JSON" in caplog.text
    assert "NotificationReceived(method='notifications/initialized'" in caplog.text


def test_timer_follows_the_connection_deadline_on_its_clock() -> None:
    rec = Recorder(legacy_leg_timeout=30.0)
    driver = rec.driver
    assert not driver.refresh_timer()
    assert driver.timer_delay() is None
    rec.feed(initialize(0), INITIALIZED, legacy_call(1, "greet"))
    driver.answer(rec.started[0], InputRequiredResult({"name": ASK}))
    assert rec.out(Era.LEGACY)[1:] == [leg(0)]
    assert driver.refresh_timer()
    assert not driver.refresh_timer()  # unchanged
    rec.clock.now += 10
    assert driver.timer_delay() == 20.0
    driver.fire_timer()  # early: nothing is due yet
    assert rec.out(Era.LEGACY) == []
    assert not driver.refresh_timer()
    rec.clock.now += 25
    assert driver.timer_delay() == 0.0  # overdue, never negative
    driver.fire_timer()
    out = rec.out(Era.LEGACY)
    assert out[0] == leg_cancelled(0, TIMED_OUT)
    assert out[1]["error"]["code"] == -32603
    assert driver.refresh_timer()
    assert driver.timer_delay() is None


def test_answers_to_legs_replay_through_start() -> None:
    rec = Recorder()
    rec.feed(initialize(0), INITIALIZED, legacy_call(1, "greet"))
    rec.driver.answer(rec.started[0], InputRequiredResult({"name": ASK}))
    rec.out(Era.LEGACY)
    rec.feed({"jsonrpc": "2.0", "id": 0, "result": ADA})
    assert rec.started[1].input_response("name") == ADA
    rec.driver.answer(rec.started[1], JsonRpcError(-32602, "Unknown tool: greet"))
    assert rec.out(Era.LEGACY) == [error(1, -32602, "Unknown tool: greet")]


def test_answer_path_without_a_stream_server_ends_a_legacy_request() -> None:
    """``answer`` alone (as the ASGI app uses it): a value that is no answer at all becomes
    -32603 on the legacy wire too, and the request is no longer in flight."""
    rec = Recorder()
    rec.feed(initialize(0), INITIALIZED, legacy_call(1, "a"))
    rec.out(Era.LEGACY)  # the initialize result
    (request,) = rec.started
    answer(rec.conn, request, ["not", "a", "result"])  # type: ignore[arg-type]
    assert rec.out(Era.LEGACY) == [error(1, -32603, "Internal error")]
    assert not rec.conn.in_flight
    answer(rec.conn, request, text("again"))  # it awaits no answer now: dropped
    assert rec.out(Era.LEGACY) == []


@pytest.mark.parametrize(
    ("event", "route"),
    [
        (m.RequestReceived(1, "tools/call", {}), Route.HANDLER),
        (m.RequestReceived("t1", "tools/call", {}, task_id="t1"), Route.TASK_RUN),
        (m.RequestCancelled(1, None), Route.CANCEL),
        (TaskCancelled("t1"), Route.TASK_CANCEL),
        (m.ConnectionClosed(), Route.CLOSED),
        (m.NEED_DATA, Route.WAIT),
        (m.NotificationReceived("notifications/initialized", None), Route.LOG),
    ],
)
def test_every_server_event_has_one_route(event: object, route: Route) -> None:
    assert route_of(event) is route


def test_no_server_adapter_routes_connection_events_on_its_own() -> None:
    """The one routing decision is route_of: the adapters branch on its Route, not on types."""
    adapters = Path(__file__).parents[2] / "src" / "mrtr_sansio" / "adapters"
    for name in ("stdio.py", "_anyio_server.py", "_asgi_peer.py", "asgi.py", "_asgi_serve.py"):
        source = (adapters / name).read_text()
        assert "type(event) is" not in source, name
        assert "isinstance(event, RequestCancelled)" not in source.replace("assert isinstance", "")
    for name in ("stdio.py", "_anyio_server.py"):
        assert "ServerDriver(" in (adapters / name).read_text(), name
    assert "route_of(event)" in (adapters / "_asgi_peer.py").read_text()
