"""Griffe extension for the API reference: the source's own conventions, made Markdown.

* Attributes documented with ``#:`` comments above them (the Sphinx convention the package
  uses for fields and constants) get those comments as their docstring.
* Sphinx roles in docstrings (``:class:`X```, ``:meth:`X.y```, ``:data:`X```...) become
  cross-references when they name something the reference renders, else code spans.
* reST literal-block markers become Markdown: a paragraph that is only ``::`` goes, and a
  paragraph ending in ``::`` ends in ``:`` (the indented block after it is code either way).
"""

from __future__ import annotations

import ast
import re
from typing import Any

from griffe import Attribute, Docstring, Extension, Object

ROLE = re.compile(r":(?:class|meth|func|data|attr|mod|exc):`~?([\w.]+)`")
#: A line that is only ``::``, and a ``::`` ending a line of text (reST literal-block markers).
BARE_LITERAL_MARKER = re.compile(r"^[ \t]*::[ \t]*\n", re.MULTILINE)
TRAILING_LITERAL_MARKER = re.compile(r"(\S)::[ \t]*$", re.MULTILINE)
#: The namespaces the API reference renders; a role naming one of their members links there.
RENDERED = ("mrtr_sansio", "mrtr_sansio.adapters")


class SourceConventions(Extension):
    """Read ``#:`` comments as attribute docstrings and turn Sphinx roles into Markdown."""

    def on_attribute_instance(self, *, node: Any, attr: Attribute, agent: Any, **_: Any) -> None:
        if attr.docstring is not None or not isinstance(node, ast.AST):
            return
        lines = getattr(agent, "code", "").splitlines()
        index = getattr(node, "lineno", 0) - 2
        comment: list[str] = []
        while 0 <= index < len(lines) and lines[index].strip().startswith("#:"):
            comment.insert(0, lines[index].strip()[2:].strip())
            index -= 1
        if comment:
            attr.docstring = Docstring(" ".join(comment), lineno=index + 2, parent=attr)

    def on_object(self, *, obj: Object, **_: Any) -> None:
        docstring = obj.docstring
        if docstring is not None and ":`" in docstring.value:
            docstring.value = ROLE.sub(lambda m: self._link(m.group(1)), docstring.value)
        if docstring is not None and "::" in docstring.value:
            docstring.value = literal_markers_to_markdown(docstring.value)

    def _link(self, name: str) -> str:
        short = name.rsplit(".", 1)[-1] if name.startswith("._") else name
        for namespace in RENDERED:
            head = short.split(".", 1)[0]
            if head in _exported(namespace):
                return f"[`{short}`][{namespace}.{short}]"
        return f"`{short}`"


def literal_markers_to_markdown(text: str) -> str:
    """``text`` without reST's ``::`` literal-block markers, which Markdown would print."""
    return TRAILING_LITERAL_MARKER.sub(r"\1:", BARE_LITERAL_MARKER.sub("", text))


def _exported(namespace: str) -> frozenset[str]:
    import importlib

    module = importlib.import_module(namespace)
    return frozenset(getattr(module, "__all__", ()))
