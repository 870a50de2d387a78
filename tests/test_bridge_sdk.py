"""The official Python SDK 1.x client (2025-11-25) through the bridge to our modern-only
server, over real HTTP. It needs ``mcp<2``, which conflicts with the ``mcp`` 2.x of the test
venv, so it runs in a venv of its own: ``.venv-sdk1``, made by
``bash tests/interop/sdk1_peer/install.sh`` (``MRTR_SDK1_PYTHON`` may name another
interpreter). Without it the test skips, unless ``MRTR_INTEROP_REQUIRED=1`` (CI) makes that a
failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from helpers import require_peer
from test_bridge import bridged

HERE = Path(__file__).resolve().parent / "interop" / "sdk1_peer"
VENV = Path(__file__).resolve().parents[1] / ".venv-sdk1"
PYTHON = Path(os.environ.get("MRTR_SDK1_PYTHON", VENV / "bin" / "python"))

require_peer(
    PYTHON.is_file(), "the mcp<2 venv is missing (bash tests/interop/sdk1_peer/install.sh)"
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_sdk1_client_through_the_bridge_to_a_modern_only_server() -> None:
    async with bridged(legacy_upstream=False) as (url, bridge, seen):
        with anyio.fail_after(60):
            script = str(HERE / "sdk1_bridge_client.py")
            done = await anyio.run_process([str(PYTHON), script, url], check=False)
        assert done.returncode == 0, done.stderr.decode()[-3000:]
        lines = done.stdout.decode().splitlines()
        assert lines[0] == "server mrtr-sansio-everything 2025-11-25"
        assert lines[1].startswith("tools ")
        assert lines[2:5] == [
            "call test_input_required_result_elicitation Hello, Ada!",
            "call test_input_required_result_multiple_inputs Paris Ada; roots: file:///work",
            "call test_input_required_result_request_state Confirmed (state-ok).",
        ]
        assert lines[5].startswith("call test_input_required_result_multi_round ")
        assert "Ada" in lines[5]
        assert "teal" in lines[5]
        assert bridge.held == 0
    assert not any(msg.get("method") == "initialize" for msg in seen)  # the upstream: modern only
