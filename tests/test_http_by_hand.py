"""``docs/http-by-hand.md`` works as printed: its shell blocks, run in order in one shell
against a real example server, print the outputs the page shows.

The page's first block starts the server (``python examples/http/server.py --port 8000``):
the test starts that script itself, on a free port, and points the page's ``MCP=`` line at it.
Every other block runs as printed, from a scratch directory; a ``text`` block right after a
block is what that block prints, where ``…`` stands for any run of characters other than
``"`` and a newline (a sealed state, an id, a time).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from scale import cluster

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "http-by-hand.md"
#: The marker on each block of the page: the snippet test leaves them to this one.
BY_HAND = (
    "<!-- snippet: not run: by hand, against the example server (tests/test_http_by_hand.py) -->"
)
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
START = "python examples/http/server.py --port 8000\n"
ADDRESS = "MCP=http://127.0.0.1:8000/mcp\n"
SEPARATOR = "----- next block -----"


def blocks() -> list[tuple[str, str | None]]:
    """Each shell block of the page with the output shown after it (None if none is)."""
    source = PAGE.read_text(encoding="utf-8")
    fences = list(FENCE.finditer(source))
    found: list[tuple[str, str | None]] = []
    for at, fence in enumerate(fences):
        if fence.group(1) != "sh":
            continue
        assert source[: fence.start()].endswith(BY_HAND + "\n"), f"unmarked block: {fence[2]}"
        after = fences[at + 1] if at + 1 < len(fences) else None
        shown = None
        if (
            after is not None
            and after.group(1) == "text"
            and not source[fence.end() : after.start()].strip()
        ):
            shown = after.group(2)
        found.append((fence.group(2), shown))
    return found


def pattern(shown: str) -> re.Pattern[str]:
    return re.compile(
        "".join(r'[^"\n]*' if p == "…" else re.escape(p) for p in re.split("(…)", shown))
    )


def test_the_page_starts_the_server_then_names_its_address() -> None:
    found = blocks()
    assert found[0] == (START, None)
    assert found[1] == (ADDRESS, None)
    assert len(found) > 10


@pytest.mark.skipif(
    shutil.which("curl") is None or shutil.which("jq") is None, reason="needs curl and jq"
)
def test_every_block_prints_what_the_page_shows(tmp_path: Path) -> None:
    pytest.importorskip("uvicorn")
    found = blocks()[1:]
    server = cluster.start_server(tmp_path, "server", keys_file=None, ttl=60.0)
    try:
        script = f"\necho '{SEPARATOR}'\n".join(
            text.replace(ADDRESS, f"MCP=http://127.0.0.1:{server.port}/mcp\n") for text, _ in found
        )
        env = dict(os.environ)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        run = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        cluster.stop(server.proc)
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    outputs = run.stdout.split(SEPARATOR + "\n")
    assert len(outputs) == len(found)
    checked = 0
    for (text, shown), output in zip(found, outputs, strict=True):
        if shown is None:
            continue
        checked += 1
        assert pattern(shown.rstrip("\n")).fullmatch(output.rstrip("\n")), (
            f"{text}\nprinted:\n{output}\nthe page shows:\n{shown}"
        )
    assert checked >= 10
