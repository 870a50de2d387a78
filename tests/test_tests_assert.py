"""Every test asserts something: an ``assert``, a ``pytest.raises``/``fail``/``warns``, or a call
to a helper (of its own module or a test helper module it imports) that asserts in turn, or to
one of the checkers of ``mrtr_sansio.testing`` that raise on a violation.

A test that asserts nothing cannot fail, so its name claims what nothing checks. This reads the
tests' source (``ast``), resolving names per module rather than by name across the tree, so a
helper that asserts in one module does not vouch for a namesake elsewhere.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

TESTS = Path(__file__).resolve().parent

#: Callables outside the tests that raise when what they check does not hold.
CHECKERS = frozenset(
    {
        "raises",  # pytest.raises
        "fail",  # pytest.fail
        "warns",  # pytest.warns
        "check_server",  # mrtr_sansio.testing: raises SpecViolationError
        "check_replay",  # mrtr_sansio.testing: raises ReplayViolationError
        "check_response",  # mrtr_sansio.testing._checks: raises SpecViolationError
        "run_state_machine_as_test",  # hypothesis: raises on a failing rule or invariant
    }
)

Function = ast.FunctionDef | ast.AsyncFunctionDef


def _modules() -> dict[str, Path]:
    """Test modules by the names tests import them under (``helpers``, ``stream_harness``,
    ``adapters.stream_harness``)."""
    out: dict[str, Path] = {}
    for path in TESTS.rglob("*.py"):
        if ".venv" in path.parts:
            continue
        rel = path.relative_to(TESTS).with_suffix("")
        out[".".join(rel.parts)] = path
        out.setdefault(rel.name, path)
    return out


MODULES = _modules()


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


@cache
def _scope(path: Path) -> tuple[dict[str, list[Function]], dict[str, tuple[Path, str]]]:
    """The module's functions and methods by name, and what it imports from test modules."""
    functions: dict[str, list[Function]] = {}
    imported: dict[str, tuple[Path, str]] = {}
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.ImportFrom) and node.module in MODULES and node.level == 0:
            for alias in node.names:
                imported[alias.asname or alias.name] = (MODULES[node.module], alias.name)
    return functions, imported


def _called(node: ast.AST) -> set[str]:
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            if isinstance(sub.func, ast.Name):
                names.add(sub.func.id)
            elif isinstance(sub.func, ast.Attribute):
                names.add(sub.func.attr)
    return names


def _asserts_directly(node: ast.AST) -> bool:
    return any(isinstance(sub, ast.Assert | ast.Raise) for sub in ast.walk(node))


def asserts(path: Path, name: str, _seen: frozenset[tuple[Path, str]] = frozenset()) -> bool:
    """Whether calling ``name`` as seen from module ``path`` asserts something."""
    if name in CHECKERS:
        return True
    key = (path, name)
    if key in _seen:
        return False
    seen = _seen | {key}
    functions, imported = _scope(path)
    if name in imported:
        source, original = imported[name]
        return asserts(source, original, seen)
    for node in functions.get(name, []):
        if _asserts_directly(node):
            return True
        if any(asserts(path, called, seen) for called in _called(node)):
            return True
    # A method of an object built by an imported helper class (``peer.initialize()``).
    return any(
        asserts(source, name, seen)
        for source in {source for source, _ in imported.values()}
        if source != path and name in _scope(source)[0]
    )


def _tests(path: Path) -> list[Function]:
    tree = _tree(path)
    scopes: list[ast.Module | ast.ClassDef] = [tree]
    scopes += [node for node in tree.body if isinstance(node, ast.ClassDef)]
    return [
        node
        for scope in scopes
        for node in scope.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    ]


def silent_tests() -> list[str]:
    """``path:line name`` of every test that asserts nothing."""
    out = []
    for path in sorted(set(MODULES.values())):
        for test in _tests(path):
            if _asserts_directly(test):
                continue
            if any(asserts(path, called) for called in _called(test)):
                continue
            out.append(f"{path.relative_to(TESTS)}:{test.lineno} {test.name}")
    return out


def test_every_test_asserts_something() -> None:
    assert silent_tests() == []


def test_the_audit_finds_a_test_that_asserts_nothing(tmp_path: Path) -> None:
    module = tmp_path / "test_sample.py"
    module.write_text(
        "def helper(x):\n    assert x\n\n"
        "def quiet(x):\n    return x\n\n"
        "def test_checked():\n    helper(1)\n\n"
        "def test_silent():\n    quiet(1)\n",
        encoding="utf-8",
    )
    names = {test.name: test for test in _tests(module)}
    assert asserts(module, "helper")
    assert not asserts(module, "quiet")
    assert not _asserts_directly(names["test_silent"])
    assert [asserts(module, c) for c in sorted(_called(names["test_silent"]))] == [False]
    assert [asserts(module, c) for c in sorted(_called(names["test_checked"]))] == [True]
