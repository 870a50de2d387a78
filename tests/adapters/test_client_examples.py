"""The example clients (``examples/{asyncio,trio}/client.py``) as a user runs them: against the
example stdio servers, on each era, printing the booking flow's wire transcript."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from stream_harness import (
    BOOKED,
    EXAMPLES,
    TIMEOUT,
    EraName,
)

LAST_LINES = [f"=> {line}" for line in BOOKED.splitlines()]


def run_example(client: str, server: str, *args: str) -> list[str]:
    command = [sys.executable, str(EXAMPLES / server / "server.py")]
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / client / "client.py"), *args, "--", *command],
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 3,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout.splitlines()


def messages(lines: list[str], arrow: str) -> list[dict[str, object]]:
    return [json.loads(line[4:]) for line in lines if line.startswith(arrow)]


@pytest.mark.parametrize(("client", "server"), [("asyncio", "trio"), ("trio", "asyncio")])
@pytest.mark.parametrize("era", ["modern", "legacy", "auto"])
def test_example_client_prints_the_booking_transcript(
    client: str, server: str, era: EraName
) -> None:
    lines = run_example(client, server, "--era", era, "--full")
    assert lines[0].startswith(f"== {client} client, era={era}: ")
    assert lines[-3:] == LAST_LINES
    sent = messages(lines, "C→S")
    received = messages(lines, "S→C")
    calls = [msg for msg in sent if msg.get("method") == "tools/call"]
    callbacks = [line.split()[0] for line in lines if "callback answers" in line]
    assert sorted(callbacks) == ["elicitation", "roots", "sampling"]
    if era == "legacy":
        assert sent[0]["method"] == "initialize"
        assert len(calls) == 1
        asked = [msg for msg in received if "method" in msg]
        answered = [msg for msg in sent if "result" in msg]
        assert sorted(str(msg["id"]) for msg in asked) == sorted(str(msg["id"]) for msg in answered)
    else:
        # Three legs: each retry echoes the state the previous answer carried, whole.
        assert len(calls) == 3
        results = [msg["result"] for msg in received if "result" in msg]
        states = [r["requestState"] for r in results if isinstance(r, dict) and "requestState" in r]
        assert [c["params"]["requestState"] for c in calls[1:]] == states  # type: ignore[index]


def test_abbreviated_transcript() -> None:
    lines = run_example("asyncio", "asyncio", "--era", "modern")
    assert lines[1] == "   (strings over 48 characters are cut, a repeated _meta is shown as …)"
    assert lines[2] == (
        "-- modern wire, protocol 2026-07-28 (no handshake: every request carries its own _meta)"
    )
    retries = [line for line in lines if line.startswith("C→S") and '"id":1' in line]
    assert '"_meta":"…"' in retries[0]
    assert "chars)" in retries[0]  # the sealed state, cut
    assert lines[-3:] == LAST_LINES
