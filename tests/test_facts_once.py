"""Each protocol fact is stated in one module; this test names that module and fails on a second.

A fact here is a string or a small table a maintainer would otherwise change in several places:
the ``resultType`` values, MCP's HTTP header names, the tasks extension's id, the MRTR request
methods, the retry fields, the decode errors, the error-code-to-status mapping. The scan reads
every module of ``src/mrtr_sansio`` with :mod:`ast` (docstrings skipped, so prose may name
them) and reports each literal outside its home. ``test_the_scan_finds_a_second_statement``
shows the scan catches one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "mrtr_sansio"

#: fact -> (its home module, the literals that state it, modules where the same spelling means
#: something else, each with why).
FACTS: dict[str, tuple[str, frozenset[str], dict[str, str]]] = {
    "resultType values": (
        "_mcp/mrtr_fields.py",
        frozenset({"complete", "input_required", "task"}),
        {
            "_lifecycle.py": "phase names of the request and call tables",
            "tasks/_table.py": "the task status input_required and the table's name",
            "otel/_server.py": "the span link label 'task'",
            "bridge/_tasks.py": "the field 'task' of a 2025-11-25 CreateTaskResult",
        },
    ),
    "HTTP header names": (
        "http/_names.py",
        frozenset(
            {
                "mcp-session-id",
                "mcp-protocol-version",
                "mcp-method",
                "mcp-name",
                "mcp-param-",
                "last-event-id",
                "MCP-Protocol-Version",
                "Mcp-Method",
                "Mcp-Name",
                "Mcp-Param-",
            }
        ),
        {},
    ),
    "tasks extension id": (
        "_mcp/capabilities.py",
        frozenset({"io.modelcontextprotocol/tasks"}),
        {},
    ),
    "MRTR methods and their name fields": (
        "_mcp/methods.py",
        frozenset({"prompts/get", "resources/read"}),
        {
            "otel/_attributes.py": "the OpenTelemetry conventions' attribute for each method",
            "sealing/_envelope.py": "the sealed envelope's byte code for each method",
            "adapters/_client_common.py": "the client API sends these requests",
            "adapters/_stdio_client.py": "the client API sends these requests",
            "testing/_operations.py": "the model's operations send these requests",
        },
    ),
}


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        yield path.relative_to(SRC).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def _docstrings(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def statements(tree: ast.Module, literals: frozenset[str]) -> list[str]:
    """The literals of ``literals`` that ``tree`` spells outside its docstrings."""
    skip = _docstrings(tree)
    return [
        f"{node.value!r} line {node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in literals
        and id(node) not in skip
    ]


def _tuple_of(tree: ast.Module, wanted: set[str]) -> list[int]:
    """Lines of tuple/set/list displays holding every name or string of ``wanted``."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.Set, ast.List)):
            items = {
                e.value if isinstance(e, ast.Constant) else getattr(e, "id", None)
                for e in node.elts
            }
            if wanted <= items:
                lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("fact", sorted(FACTS))
def test_a_fact_is_stated_in_its_home_only(fact: str) -> None:
    home, literals, elsewhere = FACTS[fact]
    found = {}
    homed = False
    for name, tree in _modules():
        hits = statements(tree, literals)
        if name == home:
            homed = bool(hits)
        elif hits and name not in elsewhere:
            found[name] = hits
    assert homed, f"{fact}: {home} no longer states it; update FACTS"
    assert found == {}, f"{fact} lives in {home}; stated again in {found}"


@pytest.mark.parametrize(
    ("fact", "home", "wanted"),
    [
        ("the retry fields", "_mcp/mrtr_fields.py", {"inputResponses", "requestState"}),
        ("the decode errors", "_connection.py", {"UnicodeDecodeError", "RecursionError"}),
    ],
)
def test_a_tuple_is_written_once(fact: str, home: str, wanted: set[str]) -> None:
    where = {name: lines for name, tree in _modules() if (lines := _tuple_of(tree, wanted))}
    assert list(where) == [home], f"{fact} lives in {home}; found in {where}"


def test_only_http_names_maps_an_error_code_to_a_status() -> None:
    """``return 404`` / ``return 400`` is the status mapping; it lives in ``http/_names.py``."""
    where = {}
    for name, tree in _modules():
        returns = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Return)
            and isinstance(node.value, ast.Constant)
            and node.value.value in (400, 404)
        ]
        if returns:
            where[name] = returns
    assert list(where) == ["http/_names.py"], where


def test_the_scan_finds_a_second_statement() -> None:
    """The scan is not vacuous: a module spelling a header name or the decode errors is found,
    a docstring naming them is not."""
    tree = ast.parse(
        '"""Sets Mcp-Name."""\nH = {"Mcp-Name": 1}\nE = (RecursionError, UnicodeDecodeError)\n'
    )
    assert statements(tree, FACTS["HTTP header names"][1]) == ["'Mcp-Name' line 2"]
    assert _tuple_of(tree, {"UnicodeDecodeError", "RecursionError"}) == [3]
    assert statements(ast.parse('"""Mcp-Name"""\n'), FACTS["HTTP header names"][1]) == []
