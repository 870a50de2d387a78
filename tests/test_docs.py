"""The documentation's moving parts: the build hook that generates pages from the code, the
examples the pages include, and the tables the pages state that the code must agree with.

The site itself is built by ``scripts/docs.sh`` (``mkdocs build --strict``, in CI); these tests
need no docs install.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import pytest

import mrtr_sansio as m
from mrtr_sansio.adapters import anyio as anyio_adapter
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.adapters.serve import ServeOptions

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _load_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "hooks" / "generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hook = _load_hook()
PAGES = sorted(DOCS.glob("**/*.md"))


def _page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def _prose(name: str) -> str:
    """A page with its line breaks folded, for phrases that wrap."""
    return " ".join(_page(name).split())


# --- the embedding examples ---------------------------------------------------------------------


@pytest.mark.parametrize("era", ["modern", "legacy", "auto"])
def test_the_embedding_loops_talk_to_each_other_in_every_era(era: Any) -> None:
    from embed.client_loop import greet

    assert greet(era, "Grace") == "Hello, Grace!"


def test_the_embedded_handler_re_asks_and_takes_declines() -> None:
    from embed.server_loop import handle

    def request(responses: Any = None) -> m.RequestReceived:
        params: dict[str, Any] = {"name": "greet", "arguments": {}}
        if responses is not None:
            params["inputResponses"] = responses
        return m.RequestReceived(1, "tools/call", params)

    assert isinstance(handle(request()), m.InputRequiredResult)
    wrong = {"name": {"action": "accept", "content": {"name": 7}}}
    assert isinstance(handle(request(wrong)), m.InputRequiredResult)
    declined = handle(request({"name": {"action": "decline"}}))
    assert declined == {"content": [{"type": "text", "text": "Hello, stranger!"}]}
    assert handle(m.RequestReceived(2, "tools/list", {}))["tools"][0]["name"] == "greet"
    assert handle(m.RequestReceived(3, "prompts/list", {})).code == m.ErrorCode.METHOD_NOT_FOUND
    other = m.RequestReceived(4, "tools/call", {"name": "other", "arguments": {}})
    assert handle(other).code == m.ErrorCode.INVALID_PARAMS


# --- the hook -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(hook.DRAWN))
def test_lifecycle_markers_give_the_diagram_and_every_transition(name: str) -> None:
    lifecycle = hook.DRAWN[name]
    text = hook.expand("lifecycle", name)
    numbered, left_to_right = hook.layout(lifecycle)
    assert numbered is (len(lifecycle.table) > hook.SPELT_OUT_TRANSITIONS)
    diagram = lifecycle.mermaid(numbered=numbered, left_to_right=left_to_right)
    assert text.startswith("```mermaid\n" + diagram + "\n```\n")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == len(lifecycle.table) + 1  # the header
    for row, ((state, trigger), target) in enumerate(lifecycle.table.items(), start=1):
        assert f"| {row} | {state.value} | {trigger.value} | {target.value} |" in rows


def test_large_lifecycles_are_drawn_with_row_numbers_and_small_ones_spelt_out() -> None:
    assert "<br>" not in hook.expand("lifecycle", "legacy-shim")
    assert "RUNNING --> FAILED : 4, 7" in hook.expand("lifecycle", "legacy-shim")
    assert "rows of the table below" in hook.expand("lifecycle", "client-call")
    small = hook.expand("lifecycle", "modern-request")
    assert "RECEIVED --> COMPLETE : result sent" in small
    assert "rows of the table below" not in small


def test_each_spelt_out_trigger_is_its_own_arrow_and_loops_are_written_in_the_box() -> None:
    """Two triggers on one arrow ran together into one label, and Mermaid hid a loop's label
    behind another arrow's (seen in headless Chromium): neither is drawn that way."""
    small = hook.expand("lifecycle", "modern-request")
    assert "<br>" not in small
    assert "RECEIVED --> ERROR : error sent\n" in small
    assert "RECEIVED --> ERROR : input_required beyond the declared capabilities" in small
    task = hook.expand("lifecycle", "task")
    assert "WORKING --> WORKING" not in task
    assert "    WORKING : ↺ 2\n" in task
    assert "direction LR" not in task  # few states: top to bottom
    assert "direction LR" in hook.expand("lifecycle", "client-call")  # many: left to right
    assert "After ↺ in a state's box, the rows that leave it where it is." in task


def test_mermaid_labels_hold_no_character_that_breaks_the_diagram() -> None:
    for lifecycle in hook.DRAWN.values():
        states = {state for state, _ in lifecycle.table} | set(lifecycle.table.values())
        spelt_out = len(lifecycle.table) <= hook.SPELT_OUT_TRANSITIONS
        triggers = [trigger for _, trigger in lifecycle.table] if spelt_out else []
        for member in [*states, *triggers]:
            assert not set(member.value) & set(':;#"{}<>'), member


@pytest.mark.parametrize("cls", [m.Limits, m.ServerConfig, m.ClientConfig, ServeOptions])
def test_config_markers_list_every_field_with_its_default_and_meaning(cls: type) -> None:
    text = hook.expand("config", cls.__name__)
    rows = text.splitlines()[2:]
    fields = attrs.fields(cls)
    assert len(rows) == len(fields)
    for row, field in zip(rows, fields, strict=True):
        name, default, meaning = (cell.strip() for cell in row.strip("|").split(" | "))
        assert name == f"`{field.name}`"
        assert default == hook.default_text(field.default)
        assert meaning, f"{cls.__name__}.{field.name} has no #: comment"


def test_defaults_read_as_a_reader_expects() -> None:
    limits = hook.expand("config", "Limits")
    assert "| `max_message_bytes` | 4 MiB (`4194304`) | Largest message" in limits
    assert "| `max_request_state_bytes` | 64 KiB (`65536`) |" in limits
    server = hook.expand("config", "ServerConfig")
    assert "| `limits` | `Limits()` |" in server
    assert "| `capabilities` | `{}` |" in server
    assert "| `clock` | `time.time` |" in server
    assert "| `legacy_max_rounds` | `8` |" in server
    assert "| `extra_result_types` | `frozenset()` |" in hook.expand("config", "ClientConfig")
    assert hook.default_text(attrs.NOTHING) == "required"
    assert hook.default_text(m.Era.MODERN) == "`'modern'`"


def test_unknown_markers_fail_the_build() -> None:
    with pytest.raises(KeyError, match="unknown lifecycle"):
        hook.expand("lifecycle", "nope")
    with pytest.raises(KeyError, match="unknown configuration class"):
        hook.expand("config", "RequestReceived")
    with pytest.raises(FileNotFoundError, match="not an example script"):
        hook.expand("output", "scripts/test.sh")
    with pytest.raises(FileNotFoundError, match="not an example script"):
        hook.expand("output", "examples/../src/mrtr_sansio/__init__.py")


def test_output_markers_run_the_example_and_fail_with_it(tmp_path: Path) -> None:
    text = hook.expand("output", "examples/transcript.py")
    assert text.startswith("```text\n== modern wire (2026-07-28)")
    assert text.endswith("\n```")
    page = "before\n<!-- lifecycle: client-call -->\n<!-- config: Limits -->\nafter\n"
    rendered = hook.on_page_markdown(page, page=None, config={}, files=None)
    assert "```mermaid" in rendered
    assert "`max_in_flight`" in rendered
    assert "<!--" not in rendered
    failing = ROOT / "examples" / "_failing_for_test.py"
    failing.write_text("raise SystemExit(3)\n", encoding="utf-8")
    try:
        with pytest.raises(RuntimeError, match=r"failed \(3\)"):
            hook.expand("output", "examples/_failing_for_test.py")
    finally:
        failing.unlink()


def test_every_marker_in_the_pages_names_something_real() -> None:
    found = 0
    for page in PAGES:
        for kind, name in hook.MARKER.findall(page.read_text(encoding="utf-8")):
            found += 1
            if kind == "output":
                assert (ROOT / name.split()[0]).is_file(), (page, name)
            else:
                assert hook.expand(kind, name), (page, name)
    assert found >= 10


def test_a_chart_draws_the_figures_the_page_quotes() -> None:
    page = (
        "<!-- chart: Times faster | ratio sdk/ours: engine; ratio sdk/ours: asgi as HTTP app;"
        " ratios: asyncio/ts as stdio -->\n"
        "```text\nratio sdk/ours: engine=13.0 asgi=6.8\nratio sdk/ours: engine=99 asgi=99\n"
        "ratios: asyncio/ts=3.93 trio/asyncio=1.00\n```\n"
    )
    rendered = hook.on_page_markdown(page, page=None, config={}, files=None)
    chart = rendered.split("```mermaid\n", 1)[1].split("```", 1)[0].splitlines()
    assert chart[0] == hook.CHART_INIT
    assert chart[1] == "xychart-beta horizontal"
    assert chart[2] == '    title "Times faster"'
    assert chart[3] == '    x-axis ["engine", "HTTP app", "stdio"]'
    assert chart[-1] == "    bar [13, 6.8, 3.93]"  # the first quoted line of each prefix
    assert "<!--" not in rendered


def test_a_chart_fails_the_build_when_its_figure_is_gone() -> None:
    with pytest.raises(KeyError, match="no client= on the page"):
        hook.chart_markdown("t", "ratio sdk/ours: client", "ratio sdk/ours: engine=1\n")
    with pytest.raises(KeyError, match="quotes no line starting with 'ratios'"):
        hook.chart_markdown("t", "ratios: x", "nothing here\n")
    with pytest.raises(ValueError, match="PREFIX: KEY"):
        hook.chart_markdown("t", "no colon", "")


def test_every_chart_in_the_pages_draws() -> None:
    charts = 0
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for title, bars in hook.CHART.findall(text):
            charts += 1
            assert "xychart-beta" in hook.chart_markdown(title, bars, text), (page, title)
    assert charts >= 1


def test_every_snippet_the_pages_include_exists() -> None:
    snippet = re.compile(r'^--8<-- "([^":]+)(?::(\w+))?"$', re.MULTILINE)
    for page in PAGES:
        for path, section in snippet.findall(page.read_text(encoding="utf-8")):
            text = (ROOT / path).read_text(encoding="utf-8")
            if section:
                assert f"# --8<-- [start:{section}]" in text, (page, path, section)
                assert f"# --8<-- [end:{section}]" in text, (page, path, section)


# --- what the pages state must be what the code does --------------------------------------------

CODES = {code.name: int(code) for code in m.ErrorCode}


def test_the_error_page_explains_every_error_code() -> None:
    page = _page("errors.md")
    assert len(CODES) == 8
    for name, code in CODES.items():
        assert re.search(rf"^\| `{code}` \| `{name}` \|", page, re.MULTILINE), name


def test_the_error_page_explains_every_state_rejection_reason() -> None:
    table = _page("errors.md").split("## Why a `requestState` was refused", 1)[1]
    listed = set(re.findall(r"`([a-z_]+)`", "".join(re.findall(r"^\| ([^|]+) \|", table, re.M))))
    assert listed == m.sealing.REQUEST_STATE_REASONS


def _default_rows(page: str) -> list[tuple[str, str, str]]:
    """(owner, parameter, default literal) of the rows stating a default in backquotes."""
    rows = []
    for owner, param, literal in re.findall(
        r"^\| `(\w+)\((\w+)=\.\.\.\)` \| [^|]+ \| `([^`]+)` \|$", page, re.MULTILINE
    ):
        rows.append((owner, param, literal))
    return rows


def _same(default: Any, literal: str) -> bool:
    try:
        return bool(ast.literal_eval(literal) == default)
    except ValueError:  # a dotted name: the very object (os.urandom's module is posix)
        module, _, name = literal.rpartition(".")
        return getattr(importlib.import_module(module), name, None) is default


def test_defaults_stated_in_the_limits_page_are_the_code_s() -> None:
    owners: dict[str, Any] = {
        "RequestStateSecurity": m.sealing.RequestStateSecurity,
        "MemoryReplayGuard": m.sealing.MemoryReplayGuard,
        "McpHttpApp": McpHttpApp,
        "serve": anyio_adapter.serve,
    }
    rows = _default_rows(_page("limits.md"))
    assert len(rows) == 5
    for owner, param, literal in rows:
        default = inspect.signature(owners[owner]).parameters[param].default
        assert _same(default, literal), (owner, param, literal, default)


def test_defaults_stated_in_the_sealing_options_are_the_code_s() -> None:
    options = _page("sealing.md").split("## Options", 1)[1]
    rows = re.findall(r"^\| `(\w+)` \| `([^`]+)`", options, re.MULTILINE)
    parameters = inspect.signature(m.sealing.RequestStateSecurity).parameters
    assert {name for name, _ in rows} == set(parameters) - {"keys"}
    for name, literal in rows:
        assert _same(parameters[name].default, literal), (name, literal)


def test_the_shim_page_states_the_shim_defaults() -> None:
    page = _prose("legacy-shim.md")
    config = m.ServerConfig()
    assert f"(**{config.legacy_max_rounds}** by default)" in page
    assert f"at most {config.legacy_max_rounds + 1} times" in page
    assert f"(**{config.legacy_leg_timeout:g}** by default)" in page
    limits = m.Limits()
    assert f"| `Limits.max_shimmed_requests` | {limits.max_shimmed_requests} |" in page
    assert f"| `Limits.max_pending_legs` | {limits.max_pending_legs} (" in page


def test_every_page_is_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:", 1)[1]
    listed = set(re.findall(r"([\w/-]+\.md)", nav))
    assert listed == {str(page.relative_to(DOCS)) for page in PAGES}


def test_the_readme_keeps_its_two_commands_and_points_to_the_docs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert block[0].startswith("bash scripts/demo.sh")
    assert block[1].startswith("bash scripts/test.sh")
    assert "bash scripts/docs.sh" in readme


def test_the_trace_picture_draws_every_span_of_the_example_nested_and_linked() -> None:
    lines = hook.run_example("examples/otel_trace.py").splitlines()
    spans = [json.loads(line) for line in lines]
    assert len({s["trace"] for s in spans}) == 1
    svg = hook.trace_svg(spans)
    labels = re.findall(r'<text x="[\d.]+" y="[\d.]+" fill="currentColor">([^<]+)</text>', svg)
    # the page's text colour: a fixed dark grey vanished on the dark scheme (headless Chromium)
    assert not re.search(r'<text[^>]* fill="#', svg)
    assert labels[0] == "client: tools/call book · 3 requests"
    assert sum("server-" in label and "↺" in label for label in labels) == 2
    assert svg.count("<rect") == len(spans) + len({s["process"] for s in spans})
    with pytest.raises(ValueError, match="no spans"):
        hook.trace_svg([])


#: What a development log leaves in a page: an internal issue number, the time of day of a run
#: or a merge, a branch or a tree that only the developers had.
DEVELOPMENT_LOG = re.compile(
    r"\b[Ii]ssue \d+\b|\b\d{1,2}:\d{2}(?:[\u2013-]\d{1,2}:\d{2})? UTC\b"
    r"|\bthis branch\b|\bmerged tree\b|\bprevious session\b|\bround three\b"
)


@pytest.mark.parametrize(
    "page", [p for p in PAGES if p.name != "changelog.md"], ids=lambda p: str(p.relative_to(DOCS))
)
def test_the_pages_speak_to_users_not_of_their_development(page: Path) -> None:
    found = DEVELOPMENT_LOG.findall(page.read_text(encoding="utf-8"))
    assert not found, found
