"""MkDocs hook: the parts of the documentation that are generated from the code at build time.

A page asks for them with a marker on a line of its own:

* ``<!-- lifecycle: NAME -->`` — the state diagram (Mermaid ``stateDiagram-v2``) and the
  transition table of the lifecycle ``DRAWN[NAME]`` (``mrtr_sansio._lifecycle.LIFECYCLES``,
  the tasks extension's status table ``task`` included);
* ``<!-- config: CLASS -->`` — the fields of ``mrtr_sansio.CLASS`` (``Limits``,
  ``ServerConfig``, ``ClientConfig``; ``ServeOptions`` from ``mrtr_sansio.adapters.serve``,
  ``TaskSettings`` from ``mrtr_sansio.tasks``, ``TaskRunOptions`` from
  ``mrtr_sansio.adapters.asgi``)
  with their defaults and the ``#:`` comments above them;
* ``<!-- output: PATH ARGS... -->`` — what the example script at ``PATH`` (from the repository
  root) prints, run with this interpreter and ``ARGS`` (``{python}`` in them is this
  interpreter too); the examples only talk to processes they start. The page shows this
  interpreter as ``python`` and paths relative to the repository, not the build machine's;
* ``<!-- trace: PATH -->`` — a timeline (inline SVG) of the spans the example at ``PATH``
  exports, one JSON object per line (``examples/otel_trace.py``): a picture of a real trace;
* ``<!-- chart: TITLE | PREFIX: KEY [as LABEL]; ... -->`` — a bar chart (Mermaid
  ``xychart-beta``) of figures a benchmark printed: the page's first line that starts with
  ``PREFIX:`` (a bench's own ``name: key=value ...`` line, quoted in a text block of the same
  page) gives each ``KEY``'s value; several ``PREFIX: KEY`` parts may read several lines. The
  chart is drawn from the quoted run, so it cannot disagree with it.

An unknown name or a failing script fails the build, so a page cannot silently lose its table.
The functions are plain (no MkDocs import) so that ``tests/test_docs.py`` checks them without a
docs install.
"""

from __future__ import annotations

import ast
import enum
import importlib
import inspect
import json
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import attrs

import mrtr_sansio
from mrtr_sansio._lifecycle import LIFECYCLES, Lifecycle

MARKER = re.compile(r"^<!-- (lifecycle|config|output|trace): (\S.*?) -->$", re.MULTILINE)
ROOT = Path(__file__).resolve().parents[2]
CONFIG_CLASSES = (
    "Limits",
    "ServerConfig",
    "ClientConfig",
    "ServeOptions",
    "TaskSettings",
    "TaskRunOptions",
)
#: Configuration classes that live in a submodule rather than the front door.
ADAPTER_CONFIG = {
    "ServeOptions": "mrtr_sansio.adapters.serve",
    "TaskSettings": "mrtr_sansio.tasks",
    "TaskRunOptions": "mrtr_sansio.adapters.asgi",
}
#: The lifecycles a page may draw.
DRAWN: dict[str, Lifecycle[Any, Any]] = LIFECYCLES


#: A chart marker: its title, then the bars (see the module docstring).
CHART = re.compile(r"^<!-- chart: ([^|]+?) \| (\S.*?) -->$", re.MULTILINE)
#: Bars across the page with their values written on them, in the trace pictures' blue: upright
#: bars squeezed their labels into each other at the page's width (seen in headless Chromium).
CHART_INIT = (
    '%%{init: {"xyChart": {"showDataLabel": true}, '
    '"themeVariables": {"xyChart": {"plotColorPalette": "#3f6fb5"}}}}%%'
)
#: One bar of a chart marker: ``PREFIX: KEY`` and an optional `` as LABEL``.
BAR = re.compile(r"^(?P<prefix>[^:]+): (?P<key>\S+)(?: as (?P<label>.+))?$")


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replace every marker of a page by what it names."""
    markdown = CHART.sub(lambda m: chart_markdown(m.group(1), m.group(2), markdown), markdown)
    return MARKER.sub(lambda m: expand(m.group(1), m.group(2)), markdown)


def chart_markdown(title: str, bars: str, page: str) -> str:
    """A Mermaid bar chart of the figures ``bars`` names, read off the lines ``page`` quotes;
    raises when a line or a key is missing, so a chart cannot outlive its figures."""
    labels, values = [], []
    for part in bars.split(";"):
        bar = BAR.match(part.strip())
        if bar is None:
            raise ValueError(f"a chart bar is 'PREFIX: KEY [as LABEL]', not {part.strip()!r}")
        values.append(quoted_figure(page, bar["prefix"], bar["key"]))
        labels.append(bar["label"] or bar["key"])
    top = max(values)
    lines = [
        "```mermaid",
        CHART_INIT,
        "xychart-beta horizontal",
        f'    title "{title}"',
        "    x-axis [" + ", ".join(f'"{label}"' for label in labels) + "]",
        f"    y-axis 0 --> {top * 1.1:.3g}",
        "    bar [" + ", ".join(f"{value:g}" for value in values) + "]",
        "```",
    ]
    return "\n".join(lines)


def quoted_figure(page: str, prefix: str, key: str) -> float:
    """``key``'s value on the first line of ``page`` that starts with ``prefix:``."""
    for line in page.splitlines():
        if line.startswith(f"{prefix}:"):
            figures = dict(
                pair.split("=", 1) for pair in line[len(prefix) + 1 :].split() if "=" in pair
            )
            if key not in figures:
                raise KeyError(f"no {key}= on the page's {prefix!r} line: {line}")
            return float(figures[key].rstrip("x,;"))
    raise KeyError(f"the page quotes no line starting with {prefix!r}")


def expand(kind: str, name: str) -> str:
    """The Markdown a marker stands for; raises for an unknown name or a failing script."""
    if kind == "lifecycle":
        return lifecycle_markdown(name)
    if kind == "config":
        return config_markdown(name)
    if kind == "trace":
        return trace_svg([json.loads(line) for line in run_example(name).splitlines()])
    return output_markdown(name)


def output_markdown(command: str) -> str:
    """What an example prints, as a text block; raises if it fails or is not an example."""
    return f"```text\n{machine_neutral(run_example(command).rstrip())}\n```"


def run_example(command: str) -> str:
    """What the example script ``command`` names prints; raises if it fails or is not one."""
    path, *args = shlex.split(command)
    script = (ROOT / path).resolve()
    if ROOT / "examples" not in script.parents or not script.is_file():
        raise FileNotFoundError(f"not an example script: {path}")
    argv = [sys.executable, str(script), *(a.replace("{python}", sys.executable) for a in args)]
    run = subprocess.run(argv, check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        raise RuntimeError(f"{command} failed ({run.returncode}):\n{run.stderr}")
    return run.stdout


def machine_neutral(text: str) -> str:
    """``text`` with this interpreter written ``python`` and the repository's absolute path
    dropped, so that a page does not show where it was built."""
    return text.replace(sys.executable, "python").replace(f"{ROOT}/", "").replace(str(ROOT), ".")


#: A lifecycle with more transitions than this is drawn with row numbers for labels: spelt out,
#: its labels would be shrunk past reading to fit the page (the shim's and the client's).
SPELT_OUT_TRANSITIONS = 8
#: A numbered lifecycle with more states than this runs left to right: top to bottom, its many
#: end states share one rank, and the rank's width shrinks the diagram past reading (the
#: client's; seen in headless Chromium at the page's width).
TOP_TO_BOTTOM_STATES = 8


def layout(lifecycle: Lifecycle[Any, Any]) -> tuple[bool, bool]:
    """``(numbered, left_to_right)`` for drawing ``lifecycle`` on a page."""
    numbered = len(lifecycle.table) > SPELT_OUT_TRANSITIONS
    return numbered, not numbered or len(type(lifecycle.initial)) > TOP_TO_BOTTOM_STATES


def lifecycle_markdown(name: str) -> str:
    """The diagram of one lifecycle, then its transitions as a numbered table (readable offline).

    A small diagram runs left to right with its triggers spelt out; a large one has row
    numbers on its arrows, which keeps it legible at the page's width, and runs top to bottom
    unless it has many states (:func:`layout`)."""
    if name not in DRAWN:
        raise KeyError(f"unknown lifecycle {name!r}: one of {', '.join(DRAWN)}")
    lifecycle = DRAWN[name]
    numbered, left_to_right = layout(lifecycle)
    rows = [
        f"| {row} | {state.value} | {trigger.value} | {target.value} |"
        for row, ((state, trigger), target) in enumerate(lifecycle.table.items(), start=1)
    ]
    terminal = ", ".join(s.value for s in type(lifecycle.initial) if s in lifecycle.terminal)
    legend = " Each arrow is labelled with the rows of the table below that take it." * numbered
    if any(state is target for (state, _), target in lifecycle.table.items()):
        stays = "the rows" if numbered else "the triggers"
        legend += f" After ↺ in a state's box, {stays} that leave it where it is."
    return "\n".join(
        [
            "```mermaid",
            lifecycle.mermaid(numbered=numbered, left_to_right=left_to_right),
            "```",
            "",
            f"Starts in **{lifecycle.initial.value}**; ends in {terminal}.{legend}",
            "",
            "| # | from | on | to |",
            "| --: | --- | --- | --- |",
            *rows,
        ]
    )


def config_markdown(name: str) -> str:
    """A table of the fields of a configuration class: name, default, what it means."""
    if name not in CONFIG_CLASSES:
        raise KeyError(f"unknown configuration class {name!r}: one of {', '.join(CONFIG_CLASSES)}")
    module = ADAPTER_CONFIG.get(name)
    cls = getattr(mrtr_sansio if module is None else importlib.import_module(module), name)
    docs = field_comments(cls)
    rows = []
    for field in attrs.fields(cls):
        doc = " ".join(docs.get(field.name, [])).replace("|", "\\|")
        rows.append(f"| `{field.name}` | {default_text(field.default)} | {doc} |")
    return "\n".join(["| field | default | meaning |", "| --- | --- | --- |", *rows])


def field_comments(cls: type) -> dict[str, list[str]]:
    """The ``#:`` comment lines right above each annotated field of ``cls``, by field name."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    (node,) = ast.parse(source).body
    assert isinstance(node, ast.ClassDef)
    out: dict[str, list[str]] = {}
    for statement in node.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            comment: list[str] = []
            index = statement.lineno - 2
            while index >= 0 and lines[index].strip().startswith("#:"):
                comment.insert(0, lines[index].strip()[2:].strip())
                index -= 1
            out[statement.target.id] = comment
    return out


def default_text(default: Any) -> str:
    """A default as a reader wants to see it: sizes in KiB/MiB, factories as calls."""
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        if default.takes_self:  # computed from the other fields: the meaning says how
            return "see meaning"
        factory = default.factory
        if factory in (dict, list, tuple, frozenset):
            return f"`{factory()!r}`"
        return f"`{factory.__name__}()`"
    if default is attrs.NOTHING:
        return "required"
    if isinstance(default, enum.Enum):
        return f"`{default.value!r}`"
    if callable(default):
        return f"`{default.__module__}.{default.__name__}`"
    if type(default) is int and default >= 1024 and default % 1024 == 0:
        for unit, size in (("MiB", 1024 * 1024), ("KiB", 1024)):
            if default % size == 0:
                return f"{default // size} {unit} (`{default}`)"
    return f"`{default!r}`"


#: Bar colours of the trace timeline, by the process that exported the span.
TRACE_COLOURS = ("#3f6fb5", "#d9822b", "#2f9e6e", "#a4508b")


#: The secondary text of the trace picture: the page's own text colour (light or dark scheme),
#: faded.
FAINT = 'fill="currentColor" fill-opacity="0.6"'


def trace_svg(spans: list[dict[str, Any]]) -> str:
    """A timeline of ``spans`` (dicts with process, name, kind, span, parent, links, start,
    end, round): one row per span, nested under its parent, a bar per span on a shared time
    axis, coloured by process; a span that links to another says so in its label."""
    if not spans:
        raise ValueError("the trace has no spans")
    by_id = {s["span"]: s for s in spans}
    children: dict[Any, list[dict[str, Any]]] = {}
    for span in spans:
        parent = span["parent"] if span["parent"] in by_id else None
        children.setdefault(parent, []).append(span)
    rows: list[tuple[int, dict[str, Any]]] = []

    def walk(parent: Any, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: (s["start"], -s["end"])):
            rows.append((depth, span))
            walk(span["span"], depth + 1)

    walk(None, 0)
    start = min(s["start"] for s in spans)
    total = max(s["end"] for s in spans) - start or 1.0
    processes = sorted({s["process"] for s in spans})
    colour = {p: TRACE_COLOURS[i % len(TRACE_COLOURS)] for i, p in enumerate(processes)}
    label_w, bar_w, row_h, top = 330, 420, 22, 28
    height = top + row_h * len(rows) + 34
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {label_w + bar_w + 20} {height}" '
        f'role="img" aria-label="trace timeline" style="max-width:100%;font:12px sans-serif">'
    ]
    for tick in range(6):
        x = label_w + bar_w * tick / 5
        out.append(
            f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{height - 30}" '
            f'stroke="#ccc" stroke-dasharray="2,3"/>'
            f'<text x="{x:.1f}" y="{top - 10}" text-anchor="middle" {FAINT}>'
            f"{total * tick / 5:.1f} s</text>"
        )
    for i, (depth, span) in enumerate(rows):
        y = top + i * row_h
        x = label_w + bar_w * (span["start"] - start) / total
        w = max(bar_w * (span["end"] - span["start"]) / total, 2.0)
        name = span["name"]
        if span.get("round") is not None:  # a call span counts its requests
            name += f" · {span['round']} requests" if depth == 0 else f" · round {span['round']}"
        if span.get("links"):
            name += " ↺"
        label = f"{span['process']}: {name}"
        ms = (span["end"] - span["start"]) * 1000
        out.append(
            f'<text x="{6 + 14 * depth}" y="{y + 15}" fill="currentColor">{_xml(label)}</text>'
            f'<rect x="{x:.1f}" y="{y + 4}" width="{w:.1f}" height="{row_h - 8}" rx="2" '
            f'fill="{colour[span["process"]]}"><title>{_xml(label)}: {ms:.0f} ms</title></rect>'
        )
    legend_y = height - 12
    for i, process in enumerate(processes):
        x = label_w + i * 110
        out.append(
            f'<rect x="{x}" y="{legend_y - 10}" width="12" height="12" fill="{colour[process]}"/>'
            f'<text x="{x + 16}" y="{legend_y}" fill="currentColor">{_xml(process)}</text>'
        )
    out.append(f'<text x="6" y="{legend_y}" {FAINT}>↺ links to the previous round</text></svg>')
    return "".join(out)


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
