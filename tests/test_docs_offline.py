"""The documentation site works opened from disk with no network: the build's offline check
(``docs/hooks/offline.py``), the pages that must not show where they were built, and the reST
markers the API reference must not print. The site itself is built by ``scripts/docs.sh``,
whose build runs the offline check over every page (in CI)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
HOOKS = ROOT / "docs" / "hooks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_{name}", HOOKS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


offline = _load("offline")
generate = _load("generate")
griffe_docs = _load("griffe_docs")

PAGE = """<html><head><link rel="stylesheet" href="assets/extra.css">
<script src="assets/vendor/iframe-worker-shim.js"></script></head>
<body><a href="https://example.org/">a link the reader may follow</a>
<pre class="mermaid"><code>stateDiagram-v2</code></pre>
<script src="assets/vendor/mermaid.min.js"></script></body></html>"""


def _site(tmp_path: Path, page: str = PAGE, skip: tuple[Path, ...] = ()) -> Path:
    site = tmp_path / "site"
    (site / "api").mkdir(parents=True)
    (site / "index.html").write_text(page, encoding="utf-8")
    (site / "api" / "core.html").write_text("<p>no diagram here</p>", encoding="utf-8")
    for asset in (offline.MERMAID_SCRIPT, offline.WORKER_SHIM, offline.SEARCH_SCRIPT):
        if asset not in skip:
            (site / asset).parent.mkdir(parents=True, exist_ok=True)
            (site / asset).write_text("// vendored", encoding="utf-8")
    return site


def test_a_site_that_loads_nothing_remote_passes(tmp_path: Path) -> None:
    assert offline.offline_problems(_site(tmp_path)) == []


@pytest.mark.parametrize(
    ("tag", "problem"),
    [
        ('<script src="https://unpkg.com/mermaid@11/dist/mermaid.min.js">', "names the CDN unpkg"),
        ('<script src="https://example.org/x.js">', "loads '<script src=\"https://'"),
        ("<link rel=stylesheet href=//fonts.googleapis.com/css>", "fonts.googleapis.com"),
        ('<link rel="preconnect" href="https://example.org">', "loads '<link"),
        ('<img alt="" src="http://example.org/a.png">', "loads '<img"),
    ],
)
def test_a_page_that_loads_from_another_host_fails(tmp_path: Path, tag: str, problem: str) -> None:
    site = _site(tmp_path, PAGE.replace("</head>", tag + "</head>"))
    problems = offline.offline_problems(site)
    assert problems
    assert all(p.startswith("index.html: ") for p in problems)
    assert any(problem in p for p in problems), problems


@pytest.mark.parametrize(
    "missing", [offline.MERMAID_SCRIPT, offline.WORKER_SHIM, offline.SEARCH_SCRIPT]
)
def test_a_site_without_a_vendored_script_fails(tmp_path: Path, missing: Path) -> None:
    problems = offline.offline_problems(_site(tmp_path, skip=(missing,)))
    assert len(problems) == 1
    assert missing.as_posix() in problems[0]


def test_a_site_without_diagrams_needs_no_mermaid(tmp_path: Path) -> None:
    page = PAGE.replace('class="mermaid"', 'class="language-text"')
    assert offline.offline_problems(_site(tmp_path, page, skip=(offline.MERMAID_SCRIPT,))) == []


def test_the_post_build_step_fails_the_build_and_runs_after_the_offline_plugin(
    tmp_path: Path,
) -> None:
    site = _site(tmp_path, skip=(offline.SEARCH_SCRIPT,))
    with pytest.raises(SystemExit, match=r"would not work offline:\n  search/search_index.js"):
        offline.on_post_build({"site_dir": str(site)})
    offline.on_post_build({"site_dir": str(_site(tmp_path / "clean"))})
    assert offline.on_post_build.mkdocs_priority < -100  # the offline plugin's own step


def test_the_configuration_ships_what_the_check_requires() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "  font: false" in config
    assert "\n  - offline\n" in config
    assert f"    - {offline.WORKER_SHIM.as_posix()}\n" in config
    assert f"  - {offline.MERMAID_SCRIPT.as_posix()}\n" in config
    assert "  - docs/hooks/offline.py" in config
    script = (ROOT / "scripts" / "docs.sh").read_text(encoding="utf-8")
    for asset in (offline.MERMAID_SCRIPT, offline.WORKER_SHIM):
        assert f" {asset.name}\n" in script


def test_generated_output_shows_no_path_of_the_build_machine() -> None:
    raw = f"== client: {sys.executable} {ROOT}/examples/server.py in {ROOT}"
    assert generate.machine_neutral(raw) == "== client: python examples/server.py in ."
    command = "examples/asyncio/client.py --era modern -- {python} examples/asyncio/server.py"
    text = generate.expand("output", command)
    assert "python examples/asyncio/server.py" in text
    assert str(ROOT) not in text
    assert sys.executable not in text


def test_rest_literal_markers_become_markdown() -> None:
    text = "Serve it::\n\n    serve(handler)\n\nor so:\n\n::\n\n    run(handler)\n\nkeep a::b\n"
    assert griffe_docs.literal_markers_to_markdown(text) == (
        "Serve it:\n\n    serve(handler)\n\nor so:\n\n\n    run(handler)\n\nkeep a::b\n"
    )
