"""The core is Sans-IO: no module outside adapters/ may import an IO module or read the
environment, and importing the package must not import any adapter.

(``threading`` is not checked after import: ``attrs`` itself imports it.)"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import mrtr_sansio

PACKAGE = Path(mrtr_sansio.__file__).parent
IO_MODULES = {
    "asyncio",
    "trio",
    "anyio",
    "socket",
    "select",
    "selectors",
    "ssl",
    "threading",
    "subprocess",
    "multiprocessing",
    "io",
    "os",
    "pathlib",
    "shutil",
    "tempfile",
    "urllib",
    "http",
    "httpx",
    "uvicorn",
}
#: Modules that do IO by design, besides the adapters: the testing package's HTTP client
#: (it POSTs to the server under test) and its command, mrtr-check (it prints its reports,
#: and its one-line hint when the extra is missing); nothing in the core imports them.
IO_ALLOWED = {
    Path("testing", "http.py"),
    Path("testing", "cli.py"),
    Path("testing", "_command_hint.py"),
}
CORE_MODULES = sorted(
    p
    for p in PACKAGE.rglob("*.py")
    if "adapters" not in p.relative_to(PACKAGE).parts and p.relative_to(PACKAGE) not in IO_ALLOWED
)


def _imported_roots(source: str) -> set[str]:
    tree = ast.parse(source)
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def _calls_open_or_environ(source: str) -> list[str]:
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"open", "input", "print"}
        ):
            found.append(node.func.id)
        if isinstance(node, ast.Attribute) and node.attr in {"environ", "getenv"}:
            found.append(node.attr)
    return found


def test_core_modules_found() -> None:
    names = {p.relative_to(PACKAGE).as_posix() for p in CORE_MODULES}
    assert {"_server/connection.py", "_wire/jsonrpc.py", "_wire/framing.py", "__init__.py"} <= names


@pytest.mark.parametrize("path", CORE_MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_core_module_does_no_io(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert not (_imported_roots(source) & IO_MODULES)
    assert not _calls_open_or_environ(source)


def test_scanner_detects_io() -> None:
    source = "import socket\nfrom asyncio import sleep\nimport os.path\nx = os.environ\nopen('f')\n"
    assert _imported_roots(source) & IO_MODULES == {"socket", "asyncio", "os"}
    assert sorted(_calls_open_or_environ(source)) == ["environ", "open"]


def _loaded_by_import(condition: str) -> str:
    """The modules (comma-separated) that ``import mrtr_sansio`` adds to ``sys.modules`` beyond
    what ``import attrs`` (its one dependency) loads and that ``condition`` (an expression over
    ``m``) picks, in a fresh interpreter. (On Python 3.10 ``attrs`` loads ``platform``, which
    loads ``subprocess`` and ``selectors``: not ours to answer for.)"""
    code = (
        "import sys, attrs; before = set(sys.modules); import mrtr_sansio; "
        f"print(','.join(m for m in sys.modules if m not in before and ({condition})))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def test_import_does_not_load_adapters_or_io() -> None:
    assert (
        _loaded_by_import(
            "m.startswith('mrtr_sansio.adapters') "
            "or m in ('asyncio', 'trio', 'socket', 'ssl', 'selectors', 'subprocess')"
        )
        == ""
    )


def test_the_core_never_imports_the_testing_package() -> None:
    assert _loaded_by_import("m.startswith(('mrtr_sansio.testing', 'hypothesis'))") == ""
