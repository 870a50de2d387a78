"""The asyncio and trio server adapters, each scenario run under both over in-memory streams.

Every message the server writes is checked against the official schema of its era and
compared whole with the expected one.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import threading
import time
from typing import Any

import pytest
from stream_harness import (
    ADA,
    HARNESSES,
    INTERNAL,
    SERVER,
    TIMED_OUT,
    TIMEOUT,
    BlockingPeer,
    Harness,
    Peer,
    Probe,
    ask_name,
    cancelled,
    chatty_call,
    chatty_transcript,
    envelope,
    error,
    leg,
    leg_cancelled,
    legacy_call,
    modern_call,
    open_legacy,
    request,
    result,
    text,
)

from mrtr_sansio import ErrorCode, Limits, ServerConfig

pytestmark = pytest.mark.parametrize("lib", HARNESSES, ids=lambda h: h.name)


def test_modern_mrtr_exchange(lib: Harness) -> None:
    """input_required -> retry with a new id, the answers and the echoed state -> complete."""
    probe = Probe(lib.event)

    async def body(peer: Peer) -> None:
        await peer.send(modern_call(1, "greet"))
        assert await peer.recv() == ask_name(1)
        await peer.send(modern_call(2, "greet", inputResponses={"name": ADA}, requestState="s1"))
        assert await peer.recv() == result(2, text("Hello, Ada!"))

    lib.serve(probe, body)
    assert [(c.request_id, c.request_state) for c in probe.calls] == [(1, None), (2, "s1")]


def test_legacy_exchange_through_the_shim(lib: Harness) -> None:
    """initialize, then a tools/call whose handler needs input: the connection asks with a
    real elicitation/create, replays the handler with the answer, and sends the result."""
    probe = Probe(lib.event)

    async def body(peer: Peer) -> None:
        await open_legacy(peer)
        await peer.send(legacy_call(1, "greet"))
        assert await peer.recv() == leg(0)
        await peer.send({"jsonrpc": "2.0", "id": 0, "result": ADA})
        assert await peer.recv() == result(1, text("Hello, Ada!"), peer.transcript.era)

    lib.serve(probe, body)
    assert [c.round for c in probe.calls] == [1, 2]
    assert probe.calls[1].input_response("name") == ADA


def test_slow_handler_does_not_block_a_fast_one(lib: Harness) -> None:
    probe = Probe(lib.event)

    async def body(peer: Peer) -> None:
        await peer.send(modern_call(1, "slow"), modern_call(2, "fast"))
        assert await peer.recv() == result(2, text("fast"))
        assert not probe.gate.is_set()
        probe.gate.set()
        assert await peer.recv() == result(1, text("slow"))

    lib.serve(probe, body)


def test_cancelled_request_gets_no_answer(lib: Harness) -> None:
    probe = Probe(lib.event)

    async def body(peer: Peer) -> None:
        await peer.send(modern_call(1, "hang"))
        await lib.wait(probe.started)
        await peer.send(cancelled(1))
        await lib.wait(probe.cancelled)
        # The next thing on the wire is the answer to the next request, nothing for 1.
        await peer.send(modern_call(2, "fast"))
        assert await peer.recv() == result(2, text("fast"))

    lib.serve(probe, body)


def test_cancel_before_the_handler_starts(lib: Harness) -> None:
    """A request and its cancellation in one read: the handler never runs."""
    probe = Probe(lib.event)

    async def body(peer: Peer) -> None:
        await peer.send(modern_call(1, "hang"), cancelled(1), modern_call(2, "fast"))
        assert await peer.recv() == result(2, text("fast"))

    lib.serve(probe, body)
    assert not probe.started.is_set()


def test_legacy_cancel_while_the_shim_waits(lib: Harness) -> None:
    """No handler runs while the client is asked; cancelling withdraws the question."""
    probe = Probe(lib.event)

    async def body(peer: Peer) -> None:
        await open_legacy(peer)
        await peer.send(legacy_call(1, "greet"))
        assert await peer.recv() == leg(0)
        await peer.send(cancelled(1), legacy_call(2, "fast"))
        assert await peer.recv() == leg_cancelled(0, "The original request was cancelled")
        assert await peer.recv() == result(2, text("fast"), peer.transcript.era)

    lib.serve(probe, body)


def test_handler_that_raises_gets_internal_error(
    lib: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    probe = Probe(lib.event)

    async def body(peer: Peer) -> None:
        await peer.send(modern_call(1, "boom"))
        assert await peer.recv() == error(1, ErrorCode.INTERNAL_ERROR, INTERNAL)
        await peer.send(modern_call(2, "fast"))
        assert await peer.recv() == result(2, text("fast"))

    with caplog.at_level(logging.ERROR, "mrtr_sansio.adapters"):
        lib.serve(probe, body)
    assert "handler failed for tools/call 1" in caplog.text
    assert "RuntimeError: boom" in caplog.text


def test_invalid_answer_gets_internal_error(lib: Harness, caplog: pytest.LogCaptureFixture) -> None:
    """A result that is not JSON, and input_required where the method forbids it."""
    probe = Probe(lib.event)

    async def body(peer: Peer) -> None:
        await peer.send(modern_call(1, "bad"))
        assert await peer.recv() == error(1, ErrorCode.INTERNAL_ERROR, INTERNAL)
        await peer.send(request(2, "tools/list", {"_meta": envelope()}))
        assert await peer.recv() == error(2, ErrorCode.INTERNAL_ERROR, INTERNAL)
        await peer.send(modern_call(3, "fast"))
        assert await peer.recv() == result(3, text("fast"))

    with caplog.at_level(logging.ERROR, "mrtr_sansio.adapters"):
        lib.serve(probe, body)
    assert "returned an invalid answer" in caplog.text


def test_progress_and_logs_reach_the_wire_before_the_result(lib: Harness) -> None:
    probe = Probe(lib.event)

    async def body(peer: Peer) -> None:
        await peer.send(chatty_call(1))
        assert [await peer.recv() for _ in range(4)] == chatty_transcript(1)

    lib.serve(probe, body)


def test_legacy_logs_follow_set_level(lib: Harness) -> None:
    """On the legacy wire the session's logging/setLevel decides (no level set: all go)."""
    probe = Probe(lib.event)

    async def body(peer: Peer) -> None:
        await open_legacy(peer)
        await peer.send(legacy_call(1, "chatty"))
        assert [(await peer.recv()).get("params", {}).get("data") for _ in range(3)] == [
            "hidden",
            "shown",
            None,
        ]
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "logging/setLevel",
                "params": {"level": "error"},
            }
        )
        assert await peer.recv() == {"jsonrpc": "2.0", "id": 2, "result": {}}
        await peer.send(legacy_call(3, "chatty"))
        assert await peer.recv() == result(3, text("chatted"), peer.transcript.era)

    lib.serve(probe, body)


def test_garbage_lines_get_errors_and_serving_goes_on(lib: Harness) -> None:
    probe = Probe(lib.event)

    async def body(peer: Peer) -> None:
        await peer.send_raw(b"this is not json\n")
        assert await peer.recv() == error(None, ErrorCode.PARSE_ERROR, "Parse error: Invalid JSON")
        await peer.send_raw(b"\xff\xfe\n[1, 2]\n")
        assert (await peer.recv())["error"]["code"] == ErrorCode.PARSE_ERROR
        msg = await peer.recv()
        assert msg["error"]["code"] == ErrorCode.INVALID_REQUEST
        # A request split across writes, with garbage around it.
        line = peer.transcript.encode(modern_call(1, "fast"))
        await peer.send_raw(b"{oops\n" + line[:10])
        assert (await peer.recv())["error"]["code"] == ErrorCode.PARSE_ERROR
        await peer.send_raw(line[10:])
        assert await peer.recv() == result(1, text("fast"))

    lib.serve(probe, body)


def test_oversized_line_is_refused(lib: Harness) -> None:
    probe = Probe(lib.event)
    config = ServerConfig(
        server_info=SERVER,
        capabilities={"tools": {}},
        limits=Limits(max_message_bytes=1000),
    )

    async def body(peer: Peer) -> None:
        await peer.send_raw(b'{"x": "' + b"a" * 5000 + b'"}\n')
        assert await peer.recv() == error(
            None, ErrorCode.INVALID_REQUEST, "Message exceeds the 1000-byte limit"
        )
        await peer.send(modern_call(1, "fast"))
        assert await peer.recv() == result(1, text("fast"))

    lib.serve(probe, body, config)


def test_eof_mid_request_cancels_handlers_and_leaves_no_task(lib: Harness) -> None:
    probe = Probe(lib.event)

    async def body(peer: Peer) -> None:
        await peer.send(modern_call(1, "hang"), modern_call(2, "slow"))
        await lib.wait(probe.started)
        await peer.close_input()
        await peer.wait_closed()
        assert probe.cancelled.is_set()

    # (the session checks that serve() returned and no task is left)

    lib.serve(probe, body)
    assert not probe.gate.is_set()


def test_client_vanishing_mid_request_ends_serve(lib: Harness) -> None:
    """The client closes the connection with our answers unread (a reset on a socket)."""
    probe = Probe(lib.event)

    async def body(peer: Peer) -> None:
        await peer.send(modern_call(1, "hang"), modern_call(2, "fast"))
        await lib.wait(probe.started)
        await peer.vanish()
        await peer.wait_closed()
        assert probe.cancelled.is_set()

    lib.serve(probe, body)


def test_eof_with_unanswered_legacy_legs(lib: Harness) -> None:
    probe = Probe(lib.event)

    async def body(peer: Peer) -> None:
        await open_legacy(peer)
        await peer.send(legacy_call(1, "greet"))
        assert await peer.recv() == leg(0)
        await peer.close_input()
        await peer.wait_closed()

    lib.serve(probe, body)


def test_answers_before_eof_are_written(lib: Harness) -> None:
    """Input that ends right after a request: what was answered still goes out."""
    probe = Probe(lib.event)

    async def body(peer: Peer) -> None:
        await peer.send(modern_call(1, "fast"))
        assert await peer.recv() == result(1, text("fast"))
        await peer.send_raw(b"not json")  # no newline: the end of input completes it
        await peer.close_input()
        assert await peer.recv() == error(None, ErrorCode.PARSE_ERROR, "Parse error: Invalid JSON")
        await peer.wait_closed()

    lib.serve(probe, body)


def test_legacy_leg_timeout_fires_through_the_adapter_timer(lib: Harness) -> None:
    """A real (short) timer: the unanswered leg is withdrawn and the request fails.

    The connection's clock is offset far from the loop's: the adapter must compute its delay
    on the connection's clock (a loop-clock deadline would be hours away).
    """
    probe = Probe(lib.event)
    offset = 10_000.0
    config = ServerConfig(
        server_info=SERVER,
        capabilities={"tools": {}},
        legacy_leg_timeout=0.05,
        clock=lambda: time.time() + offset,
    )

    async def body(peer: Peer) -> None:
        await open_legacy(peer)
        started = time.monotonic()
        await peer.send(legacy_call(1, "greet"))
        assert await peer.recv() == leg(0)
        assert await peer.recv() == leg_cancelled(0, TIMED_OUT)
        assert await peer.recv() == error(
            1,
            ErrorCode.INTERNAL_ERROR,
            "Timed out waiting for the client's answer to an input request "
            "(legacy_leg_timeout=0.05s)",
        )
        assert time.monotonic() - started >= 0.04
        # A late answer is ignored and serving goes on.
        await peer.send({"jsonrpc": "2.0", "id": 0, "result": ADA}, legacy_call(2, "fast"))
        assert await peer.recv() == result(2, text("fast"), peer.transcript.era)

    lib.serve(probe, body, config)


def test_timer_that_fires_early_is_rearmed(lib: Harness) -> None:
    """The connection's clock runs at half speed: the loop timer goes off before the leg is
    due on that clock, nothing expires, and the adapter must arm its timer again."""
    probe = Probe(lib.event)
    start = time.time()
    config = ServerConfig(
        server_info=SERVER,
        capabilities={"tools": {}},
        legacy_leg_timeout=0.03,
        clock=lambda: start + (time.time() - start) / 2,
    )

    async def body(peer: Peer) -> None:
        await open_legacy(peer)
        began = time.monotonic()
        await peer.send(legacy_call(1, "greet"))
        assert await peer.recv() == leg(0)
        assert await peer.recv() == leg_cancelled(0, TIMED_OUT)
        assert (await peer.recv())["error"]["code"] == ErrorCode.INTERNAL_ERROR
        assert time.monotonic() - began >= 0.05  # 0.03 s on a half-speed clock

    lib.serve(probe, body, config)


def test_timer_rearms_when_a_new_leg_is_sent(lib: Harness) -> None:
    """A second shimmed request while the first waits: both time out, each on its deadline."""
    probe = Probe(lib.event)
    config = ServerConfig(server_info=SERVER, capabilities={"tools": {}}, legacy_leg_timeout=0.05)

    async def body(peer: Peer) -> None:
        await open_legacy(peer)
        await peer.send(legacy_call(1, "greet"))
        assert await peer.recv() == leg(0)
        await peer.send(legacy_call(2, "greet"))
        assert await peer.recv() == leg(1)
        got = [await peer.recv() for _ in range(4)]
        assert [m.get("id", m.get("params", {}).get("requestId")) for m in got] == [0, 1, 1, 2]

    lib.serve(probe, body, config)


def test_context_sleep(lib: Harness) -> None:
    probe = Probe(lib.event)

    async def body(peer: Peer) -> None:
        await peer.send(modern_call(1, "nap"))
        assert await peer.recv() == result(1, text("rested"))

    lib.serve(probe, body)


def test_many_concurrent_requests(lib: Harness) -> None:
    probe = Probe(lib.event)

    async def body(peer: Peer) -> None:
        await peer.send(*[modern_call(i, "slow") for i in range(50)])
        await peer.send(modern_call(50, "fast"))
        assert await peer.recv() == result(50, text("fast"))
        probe.gate.set()
        got = sorted([(await peer.recv())["id"] for _ in range(50)])
        assert got == list(range(50))

    lib.serve(probe, body)


def test_serve_stdio_uses_the_process_streams_and_guards_stdout(
    lib: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """serve_stdio on this process's (pipe) stdin/stdout: a print() in a handler goes to
    stderr, and the descriptors are left open and blocking as they were."""
    probe = Probe(lib.event)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    stderr = io.StringIO()
    peer = BlockingPeer(in_w, out_r)
    answers: list[dict[str, Any]] = []

    def client() -> None:
        peer.send(modern_call(1, "print"), modern_call(2, "fast"))
        answers.extend(peer.recv() for _ in range(2))
        peer.close_input()

    with open(in_r, encoding="utf-8") as stdin, open(out_w, "w", encoding="utf-8") as stdout:
        monkeypatch.setattr(sys, "stdin", stdin)
        monkeypatch.setattr(sys, "stdout", stdout)
        monkeypatch.setattr(sys, "stderr", stderr)
        thread = threading.Thread(target=client)
        thread.start()
        try:
            lib.run_stdio(probe.handler())
        finally:
            thread.join(TIMEOUT)
        assert not stdin.closed
        assert not stdout.closed
        assert os.get_blocking(in_r)
        assert os.get_blocking(out_w)
        monkeypatch.undo()
    assert sorted(answers, key=lambda m: m["id"]) == [
        result(1, text("printed")),
        result(2, text("fast")),
    ]
    peer.recv_eof()  # nothing else was written, and closing stdout ended the stream
    peer.close()
    assert stderr.getvalue() == "stray output\n"
