"""Every code block of README.md and docs/*.md runs as printed.

Each fenced ``python`` block is run as a program of its own, in a fresh interpreter (this one),
from the repository root; it passes if it exits 0. A block may use top-level ``await`` (it then
runs as in ``python -m asyncio``). Each ``sh`` block is run with ``bash -eu`` from the repository
root, with this interpreter's ``bin`` first on ``PATH`` (as in an activated venv holding the
package). Both get no standard input (a stdio server in a block reads the end of its input and
returns). A block that includes part of an example file (``--8<-- "examples/x.py:part"``) shows
that part; the file is checked to compile (the example tests run it), and a later block that
continues it runs after the part.

A page marks a block on the line just before its fence, with an HTML comment (not rendered):

* ``<!-- snippet: continues -->``: the block runs after the page's blocks before it, in the same
  program (a page that builds one program step by step);
* ``<!-- snippet: not run: REASON -->``: the block is not run, for the reason given (it
  installs packages, runs for minutes, or needs a service of the reader's). Those blocks are
  listed below in ``NOT_RUN``, so that adding one is a visible change to this file. The
  blocks of ``docs/http-by-hand.md`` talk to a running example server: they are marked not run
  for the reason ``BY_HAND`` and ``tests/test_http_by_hand.py`` runs them all against one.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```$", re.MULTILINE | re.DOTALL)
MARK = re.compile(r"<!-- snippet: (continues|not run: (.+?)) -->\n\Z")
INCLUDE = re.compile(r'^--8<-- "([^":]+)(?::(\w+))?"$')
RUN_AS_MAIN = """\
import ast, asyncio, inspect, sys
path = sys.argv[1]
code = compile(open(path, encoding="utf-8").read(), path, "exec",
               flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
namespace = {"__name__": "__main__"}
if code.co_flags & inspect.CO_COROUTINE:
    asyncio.run(eval(code, namespace))
else:
    exec(code, namespace)
"""

#: The reason on the blocks ``tests/test_http_by_hand.py`` runs against an example server.
BY_HAND = "by hand, against the example server (tests/test_http_by_hand.py)"
BY_HAND_PAGE = "docs/http-by-hand.md"

#: Blocks that are not run: (page, first line of the block). Keep this short: a block a reader
#: may copy should run.
NOT_RUN = {
    (
        "README.md",
        "bash scripts/demo.sh   # set up and run the demo: a client books a trip on a std",
    ),
    (
        "README.md",
        "bash scripts/docs.sh   # set up and build the site into site/ (mkdocs build --st",
    ),
    ("docs/adapters.md", "from mrtr_sansio.adapters.http import HttpClient"),
    (
        "docs/index.md",
        "bash scripts/demo.sh   # set up and run the demo: one MRTR handler on both wires",
    ),
    ("docs/migration.md", "python scripts/migrate_imports.py src/ tests/"),
    (
        "docs/performance.md",
        "pip install -e . --group bench  # the official SDK at the version measured (mcp ",
    ),
    ("docs/performance.md", "python bench/server_exchange.py"),
    (
        "docs/performance.md",
        "apt-get install wrk                   # Debian's compiled load generator",
    ),
    ("docs/performance.md", "apt-get install wrk nginx"),
    (
        "docs/performance.md",
        "python bench/stdio_e2e.py             # about a minute; --quick for a smoke run",
    ),
    ("docs/performance.md", "npm install --prefix bench/ts        # once, for the ts row"),
    (
        "docs/performance.md",
        "python bench/instructions.py      # needs valgrind; about a minute per path",
    ),
    ("docs/performance.md", "python bench/sealing.py"),
    (
        "docs/performance.md",
        "python bench/tasks.py          # all three stores, minutes; --quick: a smoke run",
    ),
    (
        "docs/performance.md",
        "python bench/tasks.py --stores none   # the runners only; the default runs the s",
    ),
    ("docs/observability.md", "pip install 'mrtr-sansio[otel]' opentelemetry-sdk"),
    (
        "docs/quickstart.md",
        "bash scripts/demo.sh   # set up and run the demo: a client books a trip on a std",
    ),
    ("docs/quickstart.md", "pip install -e .                 # the core: attrs only"),
    ("docs/quickstart.md", "pip install 'dist/mrtr_sansio-0.1.0.dev0-py3-none-any.whl[testing]'"),
    ("docs/quickstart.md", "pip install -e '.[server]'"),
    (
        "docs/replay.md",
        "pip install -e '.[testing]'    # from a checkout; or a built wheel: see Install",
    ),
    (
        "docs/testing.md",
        "pip install -e '.[testing]'    # from a checkout; or a built wheel: see Install",
    ),
    ("docs/testing.md", "# Any Streamable HTTP endpoint, e.g. the example server:"),
    (
        "docs/testing.md",
        "python fuzz/run.py                              # 10**6 examples over the five p",
    ),
}


@attrs.frozen
class Block:
    """One fenced code block of a page: its language, text, line and how it is marked."""

    page: str
    line: int
    lang: str
    text: str
    mark: str | None
    reason: str | None

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}:{self.lang}"

    @property
    def first_line(self) -> str:
        return self.text.splitlines()[0][:80]


def _blocks(page: Path) -> list[Block]:
    source = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(source):
        before = source[: match.start()]
        mark = MARK.search(before)
        found.append(
            Block(
                page=str(page.relative_to(ROOT)),
                line=before.count("\n") + 1,
                lang=match.group(1),
                text=match.group(2),
                mark=mark.group(1).split(":")[0] if mark else None,
                reason=mark.group(2) if mark else None,
            )
        )
    return found


BLOCKS = [block for page in PAGES for block in _blocks(page)]
RUNNABLE = [b for b in BLOCKS if b.lang in ("python", "sh") and b.mark != "not run"]


def _program(block: Block) -> str:
    """The block's text, after the blocks it continues."""
    page = [b for b in BLOCKS if b.page == block.page and b.lang == block.lang]
    at = page.index(block)
    start = at
    while start > 0 and page[start].mark == "continues":
        start -= 1
    return "\n".join(_text(b) for b in page[start : at + 1])


def _text(block: Block) -> str:
    """What the page shows for the block: an included part of a file is that part."""
    include = INCLUDE.match(block.text.strip())
    if not include:
        return block.text
    path, part = include.groups()
    text = (ROOT / path).read_text(encoding="utf-8")
    if part:
        text = text.split(f"# --8<-- [start:{part}]\n", 1)[1].split(f"# --8<-- [end:{part}]", 1)[0]
    return text


def _env(lang: str) -> dict[str, str]:
    env = dict(os.environ)
    if lang == "sh":  # as in an activated venv; a python block must name its interpreter itself
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONSTARTUP", None)
    return env


#: Blocks on pages another change owns that fail today (strict: passing fails, to be removed).
FAILING_ELSEWHERE: set[str] = set()


def _params() -> list[object]:
    return [
        pytest.param(
            b,
            id=b.id,
            marks=[pytest.mark.xfail(strict=True, reason="known failure")]
            if b.id in FAILING_ELSEWHERE
            else [],
        )
        for b in RUNNABLE
    ]


@pytest.mark.parametrize("block", _params())
def test_the_block_runs_as_printed(block: Block, tmp_path: Path) -> None:
    include = INCLUDE.match(block.text.strip())
    if include:
        path, _part = include.groups()
        ast.parse((ROOT / path).read_text(encoding="utf-8"), filename=path)
        return
    program = _program(block)
    if block.lang == "python":
        script = tmp_path / "snippet.py"
        script.write_text(program, encoding="utf-8")
        command = [sys.executable, "-c", RUN_AS_MAIN, str(script)]
    else:
        command = ["bash", "-euo", "pipefail", "-c", program]
    run = subprocess.run(
        command,
        cwd=ROOT,
        env=_env(block.lang),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, (
        f"{block.id} failed ({run.returncode}):\n{textwrap.indent(program, '    ')}\n"
        f"stdout:\n{run.stdout[-3000:]}\nstderr:\n{run.stderr[-3000:]}"
    )


def test_the_blocks_not_run_are_few_and_listed() -> None:
    skipped = {
        (b.page, b.first_line) for b in BLOCKS if b.mark == "not run" and b.reason != BY_HAND
    }
    assert skipped == NOT_RUN
    assert all(b.reason for b in BLOCKS if b.mark == "not run")


def test_only_the_by_hand_page_leaves_its_blocks_to_a_test_of_their_own() -> None:
    by_hand = [b for b in BLOCKS if b.reason == BY_HAND]
    assert {b.page for b in by_hand} == {BY_HAND_PAGE}
    assert [b.lang for b in by_hand] == ["sh"] * len(by_hand)
    assert [b for b in BLOCKS if b.page == BY_HAND_PAGE and b.lang == "sh"] == by_hand


def test_every_block_has_a_language_the_test_knows() -> None:
    known = {"python", "sh", "text", "mermaid", "nginx", "json", "http", ""}
    assert {b.lang for b in BLOCKS} <= known, {b.id: b.lang for b in BLOCKS if b.lang not in known}


def test_a_continuing_block_follows_a_block_of_its_language() -> None:
    for block in BLOCKS:
        if block.mark == "continues":
            page = [b for b in BLOCKS if b.page == block.page and b.lang == block.lang]
            assert page.index(block) > 0, block.id


def test_the_wheel_the_pages_name_is_this_version() -> None:
    import mrtr_sansio

    named = {
        version
        for page in PAGES
        for version in re.findall(r"mrtr_sansio-([\w.]+)-py3", page.read_text(encoding="utf-8"))
    }
    assert named == {mrtr_sansio.__version__}
