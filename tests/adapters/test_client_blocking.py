"""The blocking client (``adapters.stdio.Client``): over real subprocess pipes against the
example servers (both eras and ``auto``), and against the blocking stdio server served in a
thread over OS pipes, where the test controls the handler (timeouts, interrupts, timers)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest
from stream_harness import (
    BOOKED,
    CONFIG,
    DIES,
    ESCALATIONS,
    EXAMPLES,
    LISBON,
    TIMEOUT,
    Answers,
    EraName,
    Wire,
    answer_plain,
    check_retries,
    text,
)

import mrtr_sansio as m
from mrtr_sansio.adapters import (
    BlockingRequestContext,
    CallFailedError,
    ConnectionClosedError,
    HandlerResult,
    HandshakeFailedError,
)
from mrtr_sansio.adapters.stdio import Client, HandlerCancelled, serve


@pytest.mark.parametrize("server", ["asyncio", "trio"])
@pytest.mark.parametrize("era", ["modern", "legacy", "auto"])
def test_book_trip_against_the_example_servers(server: str, era: EraName) -> None:
    answers = Answers()
    wire = Wire()
    command = [sys.executable, str(EXAMPLES / server / "server.py")]
    options = answers.blocking_options()
    options["trace"] = wire
    with Client.connect_stdio(command, m.ClientConfig(era=era), **options) as client:
        assert client.era is (m.Era.LEGACY if era == "legacy" else m.Era.MODERN)
        result = client.call_tool("book_trip", LISBON, timeout=TIMEOUT)
        assert result["content"] == [{"type": "text", "text": BOOKED}]
        assert client.get_prompt("test_simple_prompt", timeout=TIMEOUT)["messages"]
        assert client.read_resource("test://static-text", timeout=TIMEOUT)["contents"]
        assert client.list_tools(timeout=TIMEOUT)["tools"]
        assert client.list_prompts(timeout=TIMEOUT)["prompts"]
        assert client.list_resources(timeout=TIMEOUT)["resources"]
        assert client.list_resource_templates(timeout=TIMEOUT)["resourceTemplates"]
    assert client.process is not None
    assert client.process.returncode == 0
    assert len(answers.asked) == 3
    if era != "legacy":
        check_retries(wire, wire.legs("book_trip"))


def test_server_dies_mid_call() -> None:
    with Client.connect_stdio([sys.executable, "-c", DIES], m.ClientConfig(era="modern")) as client:
        with pytest.raises(ConnectionClosedError):
            client.call_tool("anything", timeout=TIMEOUT)
        with pytest.raises(ConnectionClosedError):
            client.list_tools()


def test_server_gone_before_the_call() -> None:
    """Writing to a server that has exited fails quietly; the end of its output fails the
    call."""
    with Client.connect_stdio(
        [sys.executable, "-c", "pass"], m.ClientConfig(era="modern")
    ) as client:
        assert client.process is not None
        client.process.wait(TIMEOUT)
        with pytest.raises(ConnectionClosedError):
            client.call_tool("anything", timeout=TIMEOUT)


@ESCALATIONS
def test_shutdown_escalates(script: str, signum: int) -> None:
    """Real timers: SIGTERM ``shutdown_timeout`` after the end of input, then SIGKILL."""
    start = time.monotonic()
    with Client.connect_stdio(
        [sys.executable, "-c", script],
        m.ClientConfig(era="modern"),
        stderr=subprocess.PIPE,
        shutdown_timeout=0.3,
    ) as client:
        assert client.process is not None
        assert client.process.stderr is not None
        assert client.process.stderr.read(5) == b"ready"  # its SIGTERM handler is set
    assert client.process is not None
    assert client.process.returncode == -signum
    assert time.monotonic() - start < 5


# --- against the blocking server in a thread ------------------------------------------------


class Handler:
    """``answer_plain``'s tools (``greet``, ``fast``, ``boom``, ``chatty``), plus ``hang``
    (sleeps until cancelled) and ``state_once`` (a state-only round first)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.cancelled = threading.Event()

    def __call__(self, request: m.RequestReceived, ctx: BlockingRequestContext) -> HandlerResult:
        if request.name == "hang":
            self.started.set()
            try:
                ctx.sleep(TIMEOUT * 10)
            except HandlerCancelled:
                self.cancelled.set()
                raise
        if request.name == "state_once":
            if request.request_state is None:
                return m.InputRequiredResult(None, "wait-1")
            return text(f"waited ({request.request_state})")
        plain = answer_plain(request, ctx)
        assert plain is not None
        return plain


@contextmanager
def session(
    era: EraName,
    handler: Handler | None = None,
    server: m.ServerConfig = CONFIG,
    **options: Any,
) -> Iterator[tuple[Client, Wire]]:
    """The blocking server in a thread on fresh pipes, and a client connected to it."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    failures: list[BaseException] = []

    def run() -> None:
        with os.fdopen(in_r, "rb", buffering=0) as stdin, os.fdopen(out_w, "wb") as stdout:
            try:
                serve(handler or Handler(), server, stdin=stdin, stdout=stdout)
            except BaseException as exc:  # reported by the test thread
                failures.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    wire = Wire()
    settings = {k: options.pop(k) for k in list(options) if k in ("retry_backoff", "max_rounds")}
    config = m.ClientConfig(era=era, **settings)
    with (
        os.fdopen(out_r, "rb", buffering=0) as reader,
        os.fdopen(in_w, "wb", buffering=0) as writer,
    ):
        try:
            with Client.connect(
                reader, writer, config, shutdown_timeout=TIMEOUT, trace=wire, **options
            ) as client:
                yield client, wire
        finally:
            writer.close()
            thread.join(TIMEOUT)
    assert not thread.is_alive(), "serve() did not return at the end of input"
    assert not failures, failures


def ada(need: m.InputNeeded) -> Mapping[str, Any]:
    return {"action": "accept", "content": {"name": "Ada"}}


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_greet_and_notifications(era: EraName) -> None:
    seen: list[str] = []
    with session(era, elicitation=ada, on_notification=lambda method, _: seen.append(method)) as (
        client,
        wire,
    ):
        assert client.call_tool("greet")["content"] == [{"type": "text", "text": "Hello, Ada!"}]
        meta = {"progressToken": "p1"}
        if era == "modern":
            meta[m.protocol.LOG_LEVEL] = "warning"
        else:
            client.request("logging/setLevel", {"level": "warning"})
        assert client.call_tool("chatty", meta=meta)["content"][0]["text"] == "chatted"
        assert seen == [
            "notifications/progress",
            "notifications/message",
            "notifications/progress",
        ]
        with pytest.raises(CallFailedError) as failed:
            client.call_tool("boom")
        assert failed.value.code == m.ErrorCode.INTERNAL_ERROR
        if era == "modern":
            legs = wire.legs("greet")
            check_retries(wire, legs)
            assert legs[1]["params"]["requestState"] == "s1"


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_timeout_cancels_the_request(era: EraName) -> None:
    handler = Handler()
    with session(era, handler) as (client, wire):
        with pytest.raises(TimeoutError):
            client.call_tool("hang", timeout=0.2)
        assert handler.cancelled.wait(TIMEOUT)
        (leg,) = wire.legs("hang")
        (cancel,) = wire.sent("notifications/cancelled")
        assert cancel["params"] == {"requestId": leg["id"], "reason": "Timed out"}
        assert client.call_tool("fast")["content"][0]["text"] == "fast"


def test_interrupt_in_a_callback_cancels_the_call() -> None:
    """A ``KeyboardInterrupt`` while the legacy server waits for an answer: our call is
    cancelled on the wire, the interrupt propagates, and the client can go on."""

    def interrupted(need: m.InputNeeded) -> Mapping[str, Any]:
        raise KeyboardInterrupt

    with session("legacy", elicitation=interrupted) as (client, wire):
        with pytest.raises(KeyboardInterrupt):
            client.call_tool("greet")
        (leg,) = wire.legs("greet")
        (cancel,) = wire.sent("notifications/cancelled")
        assert cancel["params"]["requestId"] == leg["id"]
        assert client.call_tool("fast")["content"][0]["text"] == "fast"


def test_failing_callback_fails_its_call() -> None:
    def broken(need: m.InputNeeded) -> Mapping[str, Any]:
        raise ValueError("no")

    with session("modern", elicitation=broken) as (client, wire):
        with pytest.raises(ValueError, match="no"):
            client.call_tool("greet")
        assert not wire.sent("notifications/cancelled")  # nothing was in flight


def test_state_only_round_waits_for_the_backoff() -> None:
    """A real timer in the blocking loop: the state-only retry goes out after the backoff."""
    with session("modern", retry_backoff=0.05) as (client, wire):
        start = time.monotonic()
        result = client.call_tool("state_once")
        assert time.monotonic() - start >= 0.05
        assert result["content"][0]["text"] == "waited (wait-1)"
        check_retries(wire, wire.legs("state_once"))


def test_handshake_failure() -> None:
    modern_only = m.ServerConfig(capabilities={"tools": {}}, legacy_versions=())
    with (
        pytest.raises(HandshakeFailedError) as failed,
        session("legacy", server=modern_only),
    ):
        raise AssertionError("connected")
    assert failed.value.call is None
