"""Every public name is documented, and the API reference renders every one of them.

Public names are those in ``__all__`` of ``mrtr_sansio``, ``mrtr_sansio.adapters``,
``mrtr_sansio.otel`` and each adapter module (and of ``mrtr_sansio.testing`` when it exists).
A class or a function needs a docstring of its own; so does every public method and property
of a public class, including those it inherits from the package's private bases. A constant or
a type alias needs the ``#:`` comment above its assignment, which the API reference shows as
its docstring.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
NAMESPACES = [
    "mrtr_sansio",
    "mrtr_sansio.sealing",
    "mrtr_sansio.http",
    "mrtr_sansio.events",
    "mrtr_sansio.errors",
    "mrtr_sansio.config",
    "mrtr_sansio.protocol",
    "mrtr_sansio.adapters",
    "mrtr_sansio.adapters.stdio",
    "mrtr_sansio.adapters.anyio",
    "mrtr_sansio.adapters.asyncio",
    "mrtr_sansio.adapters.trio",
    "mrtr_sansio.adapters.asgi",
    "mrtr_sansio.adapters.serve",
    "mrtr_sansio.adapters.http",
    "mrtr_sansio.adapters.stores",
    "mrtr_sansio.adapters.keyfile",
    "mrtr_sansio.tasks",
    "mrtr_sansio.otel",
    "mrtr_sansio.testing",
]
#: Names whose documentation is the package's own (``__version__`` is a version string).
EXEMPT = {"__version__"}


def _namespaces() -> list[ModuleType]:
    modules = []
    for name in NAMESPACES:
        try:
            modules.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            if exc.name != name:  # a missing dependency, not a missing module: a real failure
                raise
    return modules


def _public() -> list[tuple[str, str, Any]]:
    return [
        (module.__name__, name, getattr(module, name))
        for module in _namespaces()
        for name in module.__all__
        if name not in EXEMPT
    ]


def _own_doc(obj: Any) -> str | None:
    doc = obj.__dict__.get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    return doc.strip() if isinstance(doc, str) and doc.strip() else None


def _comment_above(name: str) -> bool:
    """Whether some module of the package assigns ``name`` at top level under a ``#:``."""
    for path in SRC.rglob("*.py"):
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.parse("\n".join(lines)).body:
            target = None
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                target = node.target.id
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                target = name if name in names else None
            if target == name and lines[node.lineno - 2].strip().startswith("#:"):
                return True
    return False


def _members(cls: type) -> list[tuple[str, Any]]:
    """Public methods and properties of ``cls``, from the package's own classes in its MRO."""
    seen: dict[str, Any] = {}
    for klass in cls.__mro__:
        if not klass.__module__.startswith("mrtr_sansio"):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            member = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if inspect.isfunction(member) or isinstance(member, property):
                seen[name] = member
    return sorted(seen.items())


@pytest.mark.parametrize(("namespace", "name", "obj"), _public(), ids=lambda v: str(v)[:40])
def test_public_name_is_documented(namespace: str, name: str, obj: Any) -> None:
    if isinstance(obj, ModuleType):
        assert _own_doc(obj), f"{namespace}.{name}: module without a docstring"
    elif isinstance(obj, type) or inspect.isfunction(obj):
        assert _own_doc(obj), f"{namespace}.{name}: no docstring of its own"
    else:
        assert _comment_above(name), f"{namespace}.{name}: no #: comment above its assignment"


@pytest.mark.parametrize(
    ("namespace", "name", "cls"),
    [entry for entry in _public() if isinstance(entry[2], type)],
    ids=lambda v: str(v)[:40],
)
def test_public_methods_and_properties_are_documented(namespace: str, name: str, cls: type) -> None:
    missing = [member for member, value in _members(cls) if not _own_doc(value)]
    assert missing == [], f"{namespace}.{name}: undocumented {missing}"


def _rendered() -> set[str]:
    """The paths the API pages render with their members (``members: false`` renders only a
    module's docstring, so it does not count for the module's names)."""
    rendered: set[str] = set()
    for page in (ROOT / "docs" / "api").glob("*.md"):
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"^::: ([\w.]+)\n((?:    .*\n)*)", text, re.M):
            if "members: false" not in match.group(2):
                rendered.add(match.group(1))
    return rendered


def _object(path: str) -> Any:
    """The object a rendered ``::: a.b.C`` names (a module, or a name of one)."""
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError:
        module, _, name = path.rpartition(".")
        return getattr(importlib.import_module(module), name)


def test_every_public_name_is_in_the_api_reference() -> None:
    """Each public name is rendered under its own path, or (a re-export, e.g. a front-door name
    listed again in ``mrtr_sansio.events``) the same object is rendered under another path."""
    rendered = _rendered()
    objects = [_object(path) for path in sorted(rendered)]
    missing = []
    for namespace, name, obj in _public():
        if f"{namespace}.{name}" in rendered:
            continue
        if isinstance(obj, ModuleType) and obj.__name__ in rendered:
            continue
        if namespace != "mrtr_sansio" and namespace in rendered:
            continue  # a module rendered whole renders its __all__
        if any(other is obj for other in objects) and not isinstance(obj, (str, int, tuple)):
            continue
        missing.append(f"{namespace}.{name}")
    assert missing == []
