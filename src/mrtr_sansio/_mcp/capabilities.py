"""Which client capabilities an embedded request needs, and which of those a client lacks.

The rules (spec 2026-07-28, client/elicitation, client/sampling, client/roots):

* ``elicitation/create`` in form mode (``mode`` absent or ``"form"``) needs ``elicitation.form``;
  a bare ``elicitation: {}`` counts as form, but ``{"url": {}}`` alone does not.
* ``elicitation/create`` in url mode needs ``elicitation.url``.
* ``sampling/createMessage`` needs ``sampling``; with ``tools`` or ``toolChoice`` it needs
  ``sampling.tools``; with ``includeContext`` ``thisServer``/``allServers`` it needs
  ``sampling.context``.
* ``roots/list`` needs ``roots``.

Capabilities are plain JSON objects (``dict[str, dict]``); requirements use the same shape, at the
finest granularity that matters, e.g. ``{"elicitation": {"url": {}}}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "Need",
    "grants",
    "merge_capabilities",
    "missing_capabilities",
    "needs_of",
    "required_capabilities",
]

ELICIT = "elicitation/create"
SAMPLE = "sampling/createMessage"
ROOTS = "roots/list"


def required_capabilities(method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The client capabilities one embedded request needs.

    Raises ``ValueError`` for a method that cannot be embedded.
    """
    if method == ELICIT:
        mode = params.get("mode", "form") if params is not None else "form"
        return {"elicitation": {"url": {}}} if mode == "url" else {"elicitation": {"form": {}}}
    if method == SAMPLE:
        sampling: dict[str, Any] = {}
        if params is not None:
            if "tools" in params or "toolChoice" in params:
                sampling["tools"] = {}
            if params.get("includeContext") in ("thisServer", "allServers"):
                sampling["context"] = {}
        return {"sampling": sampling}
    if method == ROOTS:
        return {"roots": {}}
    raise ValueError(f"{method!r} cannot be an embedded input request")


#: One capability an embedded request needs: ``(name, sub-capability or None)``.
Need = tuple[str, "str | None"]

_FORM: tuple[Need, ...] = (("elicitation", "form"),)
_URL: tuple[Need, ...] = (("elicitation", "url"),)
_ROOTS: tuple[Need, ...] = (("roots", None),)


def needs_of(method: str, params: Mapping[str, Any] | None) -> tuple[Need, ...]:
    """The same facts as :func:`required_capabilities`, as a flat tuple for fast checks."""
    if method == ELICIT:
        return _URL if params is not None and params.get("mode") == "url" else _FORM
    if method == ROOTS:
        return _ROOTS
    return tuple(
        (name, sub or None)
        for name, subs in required_capabilities(method, params).items()
        for sub in (subs or {None: None})
    )


def grants(declared: Mapping[str, Any], needs: tuple[Need, ...]) -> bool:
    """True when ``declared`` grants every need: the hot-path twin of
    ``not missing_capabilities(required, declared)``."""
    for name, sub in needs:
        have = declared.get(name)
        if type(have) is not dict and not isinstance(have, Mapping):
            return False
        if sub is None:
            continue
        value = have.get(sub)
        if type(value) is dict or isinstance(value, Mapping):
            continue
        if not (sub == "form" and name == "elicitation" and not have):
            return False
    return True


def merge_capabilities(requirements: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Union of several requirement objects (two levels deep, which is all capabilities use)."""
    merged: dict[str, Any] = {}
    for req in requirements:
        for name, sub in req.items():
            into = merged.setdefault(name, {})
            if isinstance(sub, Mapping):
                for key, value in sub.items():
                    into.setdefault(key, value)
    return merged


def _has(declared: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    """The declared sub-object for ``name``, or None when absent or not an object."""
    sub = declared.get(name)
    return sub if isinstance(sub, Mapping) else None


def missing_capabilities(
    required: Mapping[str, Any], declared: Mapping[str, Any]
) -> dict[str, Any]:
    """The part of ``required`` that ``declared`` does not grant (empty when all are granted).

    Keys are compared as strings; a declared capability whose value is not an object is treated
    as absent, since the schema defines every capability as an object.
    """
    missing: dict[str, Any] = {}
    for name, needs in required.items():
        have = _has(declared, name)
        if have is None:
            missing[name] = dict(needs) if isinstance(needs, Mapping) else {}
            continue
        if not isinstance(needs, Mapping) or not needs:
            continue
        lacking: dict[str, Any] = {}
        for sub, value in needs.items():
            if sub in have and isinstance(have[sub], Mapping):
                continue
            if name == "elicitation" and sub == "form" and not have:
                continue  # a bare ``elicitation: {}`` means form mode
            lacking[sub] = value
        if lacking:
            missing[name] = lacking
    return missing
