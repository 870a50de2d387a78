"""The blocking stdio adapter, served in a thread over OS pipes (stdin and stdout of ``serve``).

Handlers run one at a time; ``ctx.sleep`` keeps reading, so cancellation, end of input and the
connection's timers reach a sleeping handler.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from stream_harness import (
    ADA,
    CONFIG,
    INITIALIZED,
    INTERNAL,
    SERVER,
    TIMED_OUT,
    TIMEOUT,
    BlockingPeer,
    answer_plain,
    ask_name,
    cancelled,
    chatty_call,
    chatty_transcript,
    envelope,
    error,
    initialize,
    initialize_result,
    leg,
    leg_cancelled,
    legacy_call,
    modern_call,
    request,
    result,
    text,
)

from mrtr_sansio import ErrorCode, RequestReceived, ServerConfig
from mrtr_sansio.adapters import BlockingRequestContext, HandlerResult
from mrtr_sansio.adapters import _stdio_io as stdio_io
from mrtr_sansio.adapters.stdio import HandlerCancelled, serve
from mrtr_sansio.protocol import SUBSCRIPTION_ID


class Probe:
    """The blocking test handler and what it saw."""

    def __init__(self) -> None:
        self.started = threading.Event()  # "hang" is sleeping
        self.cancelled = threading.Event()  # "hang" got HandlerCancelled
        self.calls: list[RequestReceived] = []

    def handler(self, request: RequestReceived, ctx: BlockingRequestContext) -> HandlerResult:
        self.calls.append(request)
        plain = answer_plain(request, ctx)
        if plain is not None:
            return plain
        if request.name == "hang":
            self.started.set()
            try:
                ctx.sleep(TIMEOUT * 10)
            except HandlerCancelled:
                self.cancelled.set()
                raise
            return text("woke up")
        if request.name == "nap":
            assert request.request_id in ctx.connection.in_flight
            ctx.sleep(0.01)
            return text("rested")
        return request.unknown()


def open_legacy(peer: BlockingPeer) -> None:
    """Start a legacy session: ``initialize`` (id 0), answered, then ``initialized``."""
    peer.send(initialize(0))
    assert peer.recv() == initialize_result(0)
    peer.send(INITIALIZED)


def wait(event: threading.Event) -> None:
    assert event.wait(TIMEOUT), "timed out"


@contextmanager
def session(probe: Probe, config: ServerConfig = CONFIG) -> Iterator[BlockingPeer]:
    """``serve`` in a thread on fresh pipes; on exit, end its input and join it."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    failures: list[BaseException] = []

    def run() -> None:
        with os.fdopen(in_r, "rb", buffering=0) as stdin, os.fdopen(out_w, "wb") as stdout:
            try:
                serve(probe.handler, config, stdin=stdin, stdout=stdout)
            except BaseException as exc:  # reported by the test thread
                failures.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    peer = BlockingPeer(in_w, out_r)
    try:
        yield peer
        peer.close_input()
        thread.join(TIMEOUT)
        assert not thread.is_alive(), "serve() did not return at the end of input"
        peer.recv_eof()
    finally:
        peer.close()
        thread.join(TIMEOUT)
    assert not failures, failures


def test_modern_mrtr_exchange() -> None:
    probe = Probe()
    with session(probe) as peer:
        peer.send(modern_call(1, "greet"))
        assert peer.recv() == ask_name(1)
        peer.send(modern_call(2, "greet", inputResponses={"name": ADA}, requestState="s1"))
        assert peer.recv() == result(2, text("Hello, Ada!"))
    assert [(c.request_id, c.request_state) for c in probe.calls] == [(1, None), (2, "s1")]


def test_legacy_exchange_through_the_shim() -> None:
    probe = Probe()
    with session(probe) as peer:
        open_legacy(peer)
        peer.send(legacy_call(1, "greet"))
        assert peer.recv() == leg(0)
        peer.send({"jsonrpc": "2.0", "id": 0, "result": ADA})
        assert peer.recv() == result(1, text("Hello, Ada!"), peer.transcript.era)
    assert [c.round for c in probe.calls] == [1, 2]


def test_requests_run_one_at_a_time_in_order() -> None:
    probe = Probe()
    with session(probe) as peer:
        peer.send(modern_call(1, "fast"), modern_call(2, "greet"), modern_call(3, "fast"))
        assert [peer.recv()["id"] for _ in range(3)] == [1, 2, 3]


def test_cancel_wakes_a_sleeping_handler_and_nothing_is_answered() -> None:
    probe = Probe()
    with session(probe) as peer:
        peer.send(modern_call(1, "hang"))
        wait(probe.started)
        # Input that arrives while the handler sleeps is taken in and queued.
        peer.send(modern_call(2, "fast"))
        peer.send(cancelled(1))
        wait(probe.cancelled)
        assert peer.recv() == result(2, text("fast"))


def test_cancel_before_the_handler_starts() -> None:
    probe = Probe()
    with session(probe) as peer:
        peer.send(modern_call(1, "hang"), cancelled(1), modern_call(2, "fast"))
        assert peer.recv() == result(2, text("fast"))
    assert not probe.started.is_set()
    assert [c.request_id for c in probe.calls] == [2]


def test_cancel_of_a_finished_request_is_ignored() -> None:
    probe = Probe()
    with session(probe) as peer:
        peer.send(modern_call(1, "fast"))
        assert peer.recv() == result(1, text("fast"))
        peer.send(cancelled(1), modern_call(2, "fast"))
        assert peer.recv() == result(2, text("fast"))


def test_legacy_cancel_while_the_shim_waits() -> None:
    probe = Probe()
    with session(probe) as peer:
        open_legacy(peer)
        peer.send(legacy_call(1, "greet"))
        assert peer.recv() == leg(0)
        peer.send(cancelled(1), legacy_call(2, "fast"))
        assert peer.recv() == leg_cancelled(0, "The original request was cancelled")
        assert peer.recv() == result(2, text("fast"), peer.transcript.era)


@pytest.mark.parametrize("params", [b'"1"', b"[1]", b"7", b"null"])
def test_a_malformed_cancellation_is_never_answered(params: bytes) -> None:
    """A notifications/cancelled whose params is not an object is still a notification: no
    answer goes out for it, and nothing is cancelled (issue 15, finding 10)."""
    probe = Probe()
    with session(probe) as peer:
        peer.send(modern_call(1, "hang"))
        wait(probe.started)
        bad = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":' + params + b"}\n"
        peer.send_raw(bad)
        peer.send(modern_call(2, "fast"), cancelled(1))
        wait(probe.cancelled)
        # The first line out answers request 2: nothing was written for the notification.
        assert peer.recv() == result(2, text("fast"))


def test_handler_that_raises_gets_internal_error(caplog: pytest.LogCaptureFixture) -> None:
    probe = Probe()
    with caplog.at_level(logging.ERROR, "mrtr_sansio.adapters"), session(probe) as peer:
        peer.send(modern_call(1, "boom"), modern_call(2, "bad"), modern_call(3, "fast"))
        assert peer.recv() == error(1, ErrorCode.INTERNAL_ERROR, INTERNAL)
        assert peer.recv() == error(2, ErrorCode.INTERNAL_ERROR, INTERNAL)
        assert peer.recv() == result(3, text("fast"))
    assert "RuntimeError: boom" in caplog.text
    assert "returned an invalid answer" in caplog.text


def test_progress_and_logs_reach_the_wire_before_the_result() -> None:
    probe = Probe()
    with session(probe) as peer:
        peer.send(chatty_call(1))
        assert [peer.recv() for _ in range(4)] == chatty_transcript(1)


def test_garbage_lines_get_errors_and_serving_goes_on() -> None:
    probe = Probe()
    with session(probe) as peer:
        peer.send_raw(b"this is not json\n[]\n")
        assert peer.recv() == error(None, ErrorCode.PARSE_ERROR, "Parse error: Invalid JSON")
        assert peer.recv()["error"]["code"] == -32600
        peer.send(modern_call(1, "nap"))
        assert peer.recv() == result(1, text("rested"))


def test_eof_mid_request_wakes_the_handler_and_ends_serve() -> None:
    probe = Probe()
    with session(probe) as peer:
        peer.send(modern_call(1, "hang"), modern_call(2, "fast"))
        wait(probe.started)
        peer.close_input()
        wait(probe.cancelled)
    # "fast" was queued behind the sleeping handler: the client is gone, so it never ran.
    assert [c.request_id for c in probe.calls] == [1]


def test_eof_drops_requests_not_yet_started() -> None:
    probe = Probe()
    with session(probe) as peer:
        peer.send_raw(peer.transcript.encode(modern_call(1, "fast"))[:-1])  # no newline
        peer.close_input()
    assert probe.calls == []


def test_legacy_leg_timeout_fires_while_waiting_for_input() -> None:
    """A real (short) timer; the connection's clock is far from the monotonic one."""
    probe = Probe()
    config = ServerConfig(
        server_info=SERVER,
        capabilities={"tools": {}},
        legacy_leg_timeout=0.05,
        clock=lambda: time.time() + 10_000.0,
    )
    with session(probe, config) as peer:
        open_legacy(peer)
        started = time.monotonic()
        peer.send(legacy_call(1, "greet"))
        assert peer.recv() == leg(0)
        assert peer.recv() == leg_cancelled(0, TIMED_OUT)
        assert peer.recv()["error"]["code"] == ErrorCode.INTERNAL_ERROR
        assert time.monotonic() - started >= 0.04


def test_legacy_leg_timeout_fires_while_a_handler_sleeps() -> None:
    probe = Probe()
    config = ServerConfig(server_info=SERVER, capabilities={"tools": {}}, legacy_leg_timeout=0.05)
    with session(probe, config) as peer:
        open_legacy(peer)
        peer.send(legacy_call(1, "greet"))
        assert peer.recv() == leg(0)
        peer.send(legacy_call(2, "hang"))
        wait(probe.started)
        assert peer.recv() == leg_cancelled(0, TIMED_OUT)
        assert peer.recv()["error"]["code"] == ErrorCode.INTERNAL_ERROR
        assert not probe.cancelled.is_set()
        peer.send(cancelled(2))
        wait(probe.cancelled)


def test_broken_output_ends_serve() -> None:
    """The client stops reading (closes our stdout's other end) but keeps our input open:
    serve must notice and return."""
    probe = Probe()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    os.close(out_r)
    returned = threading.Event()

    def run() -> None:
        with os.fdopen(in_r, "rb", buffering=0) as stdin, os.fdopen(out_w, "wb") as stdout:
            serve(probe.handler, CONFIG, stdin=stdin, stdout=stdout)  # EPIPE ends it
        returned.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        os.write(in_w, b"not json\n")
        wait(returned)
    finally:
        os.close(in_w)
        thread.join(TIMEOUT)


def test_without_select_reads_block_and_sleep_is_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where select cannot wait on pipes (Windows), reads block and timers wait for input."""
    monkeypatch.setattr(stdio_io, "CAN_SELECT", False)
    probe = Probe()
    with session(probe) as peer:
        peer.send(modern_call(1, "nap"), modern_call(2, "greet"))
        assert peer.recv() == result(1, text("rested"))
        assert peer.recv() == ask_name(2)


def test_defaults_to_process_stdio_and_guards_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no streams given it serves sys.stdin/sys.stdout; print() goes to stderr."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()

    def printing(request: RequestReceived, ctx: BlockingRequestContext) -> HandlerResult:
        print("stray output")
        return text("printed")

    with os.fdopen(in_r, "rb", buffering=0) as stdin, os.fdopen(out_w, "wb") as stdout:
        fake_in = io.TextIOWrapper(stdin)
        fake_out = io.TextIOWrapper(stdout)
        fake_err = io.StringIO()
        monkeypatch.setattr(sys, "stdin", fake_in)
        monkeypatch.setattr(sys, "stdout", fake_out)
        monkeypatch.setattr(sys, "stderr", fake_err)
        peer = BlockingPeer(in_w, out_r)
        peer.send(modern_call(1, "p"))
        peer.close_input()
        serve(printing, CONFIG)
        monkeypatch.undo()
        fake_in.detach()
        fake_out.detach()
    assert peer.recv() == result(1, text("printed"))
    peer.recv_eof()
    peer.close()
    assert fake_err.getvalue() == "stray output\n"


def test_a_stdio_server_does_not_warn_about_its_per_process_key(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One process per client: the default per-process requestState key is right for stdio, so
    nothing is printed into the client's terminal (HTTP warns: test_newcomer_api)."""
    from mrtr_sansio.adapters import _common

    monkeypatch.setattr(_common, "_announced", [])
    config = ServerConfig(server_info=SERVER, capabilities={"tools": {}})
    assert config.seals_with_process_key
    probe = Probe()
    with caplog.at_level(logging.WARNING, logger="mrtr_sansio"), session(probe, config) as peer:
        peer.send(modern_call(1, "greet"))
        state = peer.recv()["result"]["requestState"]
        peer.send(modern_call(2, "greet", inputResponses={"name": ADA}, requestState=state))
        assert peer.recv() == result(2, text("Hello, Ada!"))
    assert [r.getMessage() for r in caplog.records] == []
    assert _common._announced == []


def test_a_legacy_client_that_skips_initialize_is_told_to_initialize() -> None:
    probe = Probe()
    with session(probe) as peer:
        peer.send(legacy_call(1, "greet"))
        reply = peer.recv()
        assert reply["error"]["code"] == ErrorCode.INVALID_PARAMS
        assert reply["error"]["message"].startswith("Not initialized: send initialize first")
        open_legacy(peer)  # the client does as told and is served
    assert probe.calls == []


def test_a_cancelled_listen_stream_of_a_blocking_handler_ends_and_frees_the_loop() -> None:
    """The blocking adapter has no ``SubscriptionHub`` (it needs anyio): a blocking handler
    serving ``subscriptions/listen`` keeps its stream open with ``ctx.sleep``, and the
    client's ``notifications/cancelled`` naming it raises :class:`HandlerCancelled` there:
    nothing is answered and the next stream is served. Its writes block, so nothing waits
    in memory for a slow reader."""
    ended: list[object] = []

    class Listening(Probe):
        def handler(self, request: RequestReceived, ctx: BlockingRequestContext) -> HandlerResult:
            if request.method != "subscriptions/listen":
                return super().handler(request, ctx)
            ctx.connection.acknowledge(request.request_id)
            ctx.flush()
            try:
                ctx.sleep(TIMEOUT * 10)
            except HandlerCancelled:
                ended.append(request.request_id)
                raise
            return {}

    def listen(rid: int) -> dict[str, object]:
        params = {"notifications": {"toolsListChanged": True}, "_meta": envelope()}
        return request(rid, "subscriptions/listen", params)

    with session(Listening()) as peer:
        for rid in (1, 2):
            peer.send(listen(rid))
            ack = peer.recv()
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"]["_meta"][SUBSCRIPTION_ID] == rid
            peer.send(cancelled(rid))
        peer.send(modern_call(3, "fast"))
        assert peer.recv()["id"] == 3  # nothing was answered for the cancelled streams
        assert ended == [1, 2]
