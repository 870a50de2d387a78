"""Public errors name the public module they are documented under.

An exception defined in a private module (``adapters._client_errors``) and exported by a
public one (``mrtr_sansio.adapters``) would show its private home in tracebacks and in the API
reference; each public package calls :func:`publish_errors` on what it exports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["publish_errors"]


def publish_errors(namespace: Mapping[str, Any], module: str) -> None:
    """Set ``__module__`` to ``module`` on each exception class of ``namespace["__all__"]``
    still named after a private module (one first published elsewhere keeps that name).
    Names the package loads on first use (a module ``__getattr__``) are not errors: skipped."""
    for name in namespace["__all__"]:
        value = namespace.get(name)
        private = "._" in getattr(value, "__module__", "")
        if isinstance(value, type) and issubclass(value, BaseException) and private:
            value.__module__ = module
