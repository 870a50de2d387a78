"""The official TS client (``@modelcontextprotocol/client`` 2.4.0, pinned to 2026-07-28) through
``mrtr-bridge`` to a legacy-only server on the official Python SDK 1.x (``mcp==1.30.0``), every
peer a real process: the bridge runs the SDK server as its stdio upstream, the TS client speaks
Streamable HTTP to the bridge.

The upstream is a stdio command rather than a URL so the bridge owns the server's lifetime: one
process group to start and to check empty afterwards, no second port, and the ``-- COMMAND``
path of the command meets a real legacy server (the HTTP upstream is covered by
``test_bridge_command.py`` and ``test_bridge.py``).

Peers: ``bash tests/interop/bridge_peers/install.sh`` (npm, from its lock) and
``bash tests/interop/sdk1_peer/install.sh`` (``.venv-sdk1``); without them the module skips,
unless ``MRTR_INTEROP_REQUIRED=1`` (CI) makes that a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import check_message, require_peer
from mrtr_sansio import Era

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "tests" / "interop" / "bridge_peers"
SERVER = ROOT / "tests" / "interop" / "sdk1_peer" / "sdk1_legacy_server.py"
PYTHON = Path(os.environ.get("MRTR_SDK1_PYTHON", ROOT / ".venv-sdk1" / "bin" / "python"))
NODE = shutil.which("node")
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
ANNOUNCED = re.compile(r"mrtr-bridge: listening on (http://\S+)")

require_peer(
    PYTHON.is_file(), "the mcp<2 venv is missing (bash tests/interop/sdk1_peer/install.sh)"
)
require_peer(
    NODE is not None and (PEERS / "node_modules" / "@modelcontextprotocol" / "client").is_dir(),
    "the TS client is missing (Node.js 20+, then bash tests/interop/bridge_peers/install.sh)",
)


def group_members(pgid: int) -> list[str]:
    """The live (not zombie) processes of one process group, as ``pid command`` lines."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # the process ended while we looked
            continue
        state, _ppid, group = text[text.rindex(")") + 2 :].split()[:3]
        if int(group) == pgid and state != "Z":
            found.append(f"{stat.parent.name} {text[text.index('(') : text.rindex(')') + 1]}")
    return found


@pytest.fixture
def bridge_url(tmp_path: Path) -> Iterator[str]:
    """``mrtr-bridge`` on a free port in front of the SDK 1.x server; its announced URL. The
    bridge leads a process group of its own, and after a SIGTERM to the bridge alone that group
    must be empty: the bridge takes its upstream down with it."""
    log = tmp_path / "bridge.log"
    command = [sys.executable, "-m", "mrtr_sansio.adapters.bridge"]
    command += ["--listen", "http://127.0.0.1:0/mcp", "--", str(PYTHON), str(SERVER)]
    with log.open("wb") as err:
        proc = subprocess.Popen(
            command, env=ENV, stdin=subprocess.DEVNULL, stderr=err, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 30
        while (found := ANNOUNCED.search(log.read_text())) is None:
            assert proc.poll() is None, f"the bridge ended: {log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "the bridge did not announce its URL in time"
            time.sleep(0.1)
        yield found[1]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        deadline = time.monotonic() + 10
        while (left := group_members(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        if left:
            os.killpg(proc.pid, signal.SIGKILL)
        assert not left, f"left behind after the bridge ended: {left}"


def drive(url: str) -> list[dict[str, Any]]:
    """The TS client's driver against ``url``: its JSON lines."""
    assert NODE is not None
    done = subprocess.run(
        [NODE, str(PEERS / "driver.mjs"), url],
        cwd=PEERS,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0, (lines, done.stderr[-3000:])
    return lines


def test_the_ts_client_through_the_bridge_to_a_legacy_sdk1_server(bridge_url: str) -> None:
    lines = drive(bridge_url)
    steps = {line["step"]: line for line in lines if line["step"] != "call"}
    assert steps["connected"] == {
        "step": "connected",
        "protocolVersion": "2026-07-28",
        "era": "modern",
        "server": {"name": "sdk1-legacy-peer", "version": "1.30.0"},
    }
    assert steps["tools"]["names"] == ["add", "ask_name", "ask_twice"]
    *calls, error = [
        (c["tool"], c["answers"], c["text"], c["isError"], c["asked"])
        for c in lines
        if c["step"] == "call" and c["label"] == "one by one"
    ]
    name, book = "What is your name?", ["Who is the table for?", "Book a table for Ada?"]
    accept = ["accept", "accept"]
    assert calls == [
        ("add", accept, "5", False, []),
        ("ask_name", accept, "Hello, Ada!", False, [name]),
        ("ask_twice", accept, "Table for Ada: booked", False, book),
        ("ask_name", ["decline"], "No name (decline)", False, [name]),
        ("ask_twice", ["accept", "decline"], "Table for Ada: not booked", False, book),
        ("ask_name", ["cancel"], "No name (cancel)", False, [name]),
    ]
    # the SDK's own refusal of a bad argument, a tool error relayed as it is
    tool, answers, text, is_error, asked = error
    assert (tool, answers, is_error, asked) == ("add", ["cancel"], True, [])
    assert text.startswith("Error executing tool add: 1 validation error for addArguments")
    assert "Input should be a valid integer" in text
    # One client walks away from its question (its call stays held, the SDK server waiting);
    # then three clients at once, each with the answer to its own question, none held up.
    assert steps["walked away"]["error"] == "the user walked away"
    away = [s for s in steps["wire"]["sent"] if s["label"] == "walked away"]
    assert [s["method"] for s in away] == ["server/discover", "tools/call"]  # no retry
    at_once = [c for c in lines if c["step"] == "call" and c["label"] == "at once"]
    assert sorted(c["name"] for c in at_once) == ["Ada", "Grace", "Linus"]
    for c in at_once:
        assert (c["text"], c["isError"], c["asked"]) == (f"Hello, {c['name']}!", False, [name])
    wire = steps["wire"]
    for seen in wire["received"]:
        check_message(seen["message"], Era.MODERN, method=seen["method"])
    # Each question is one round: the call, then one retry per answer, each retry echoing the
    # requestState of the input_required result before it.
    sent = [s for s in wire["sent"] if (s["label"], s["method"]) == ("one by one", "tools/call")]
    assert [s["params"]["name"] for s in sent] == [
        "add",
        *["ask_name"] * 2,
        *["ask_twice"] * 3,
        *["ask_name"] * 2,
        *["ask_twice"] * 3,
        *["ask_name"] * 2,
        "add",
    ]
    answers = [
        r["message"]["result"]
        for r in wire["received"]
        if (r["label"], r["method"]) == ("one by one", "tools/call")
    ]
    assert len(answers) == len(sent)
    for asked, answer, retry in zip(sent, answers, sent[1:], strict=False):
        if answer["resultType"] == "input_required":
            assert retry["params"]["name"] == asked["params"]["name"]
            assert retry["params"]["requestState"] == answer["requestState"]
            (key,) = answer["inputRequests"]
            assert list(retry["params"]["inputResponses"]) == [key]
            assert answer["inputRequests"][key]["method"] == "elicitation/create"
        else:
            assert answer["resultType"] == "complete"
            assert "requestState" not in retry["params"]
