"""The official tasks client (``@modelcontextprotocol/ext-tasks`` 0.2.2 on
``@modelcontextprotocol/client`` 2.4.0, from npm) against ``examples/http/server.py`` as a real
process: a tool completes as a task, a tool asks for input as a task and is answered through
``tasks/update``, a task is cancelled. ``ext_tasks/driver.mjs`` is the client; it prints what
it saw as one JSON line.

The packages are installed by ``bash tests/interop/ext_tasks/install.sh`` (``npm ci`` from the
committed lock file); without them these tests skip, unless ``MRTR_INTEROP_REQUIRED=1`` (CI)
makes that a failure.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from servers import HTTP_SERVER, http_server

from helpers import require_peer

HERE = Path(__file__).resolve().parent / "ext_tasks"
INSTALLED = (HERE / "node_modules" / "@modelcontextprotocol" / "ext-tasks").is_dir()
NODE = shutil.which("node")

require_peer(
    bool(INSTALLED and NODE),
    "the ext-tasks client is not installed (bash tests/interop/ext_tasks/install.sh)",
)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with http_server(HTTP_SERVER, "--log-level", "error") as (address, _):
        yield address


def drive(url: str, scenario: str) -> dict[str, Any]:
    assert NODE is not None
    done = subprocess.run(
        [NODE, "driver.mjs", url, scenario],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, f"the driver printed nothing: {done.stderr}"
    out: dict[str, Any] = json.loads(lines[-1])
    assert "error" not in out, out["error"]
    assert done.returncode == 0, done.stderr
    assert out["era"] == "modern"
    # Every tasks/* request named its task in Mcp-Name (the package sets it itself).
    for sent in out["checks"]:
        if sent["method"].startswith("tasks/"):
            assert sent["name"] == out["taskId"], sent
    return out


def test_a_tool_completes_as_a_task(url: str) -> None:
    out = drive(url, "complete")
    assert out["kind"] == "task"
    assert out["outcome"] == "completed"
    # The package validates the inlined result as a CallToolResult: resultType included.
    assert out["result"] == {
        "resultType": "complete",
        "content": [{"type": "text", "text": "Computed ext in 0.3s."}],
    }
    assert out["sent"][0] == "tools/call"
    assert set(out["sent"][1:]) == {"tasks/get"}


def test_a_task_asks_for_input_and_is_answered_through_tasks_update(url: str) -> None:
    out = drive(url, "input")
    assert out["kind"] == "task"
    assert out["asked"] == [{"kind": "elicitation", "message": "Delete ext.txt?"}]
    assert out["outcome"] == "completed"
    assert out["result"]["content"] == [{"type": "text", "text": "Deleted ext.txt."}]
    assert "tasks/update" in out["sent"]
    assert out["sent"][-1] == "tasks/get"


def test_a_task_is_cancelled(url: str) -> None:
    out = drive(url, "cancel")
    assert out["kind"] == "task"
    assert out["sent"][:2] == ["tools/call", "tasks/cancel"]
    assert out["status"] == "cancelled"
    assert out["statusMessage"] == "Cancelled by the client"
    assert out["outcome"] == "cancelled"
