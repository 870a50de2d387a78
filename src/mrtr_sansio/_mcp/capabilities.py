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
    "TASKS_EXTENSION",
    "Need",
    "capability_paths",
    "declares_tasks",
    "grants",
    "merge_capabilities",
    "missing_capabilities",
    "needs_of",
    "required_capabilities",
]

ELICIT = "elicitation/create"
SAMPLE = "sampling/createMessage"
ROOTS = "roots/list"


#: One capability an embedded request needs: ``(name, sub-capability or None)``.
Need = tuple[str, "str | None"]

_FORM: tuple[Need, ...] = (("elicitation", "form"),)
_URL: tuple[Need, ...] = (("elicitation", "url"),)
_ROOTS: tuple[Need, ...] = (("roots", None),)
_SAMPLING: tuple[Need, ...] = (("sampling", None),)


def needs_of(method: str, params: Mapping[str, Any] | None) -> tuple[Need, ...]:
    """The client capabilities one embedded request needs, as a flat tuple (the statement of
    the rules above; :func:`required_capabilities` is its JSON form).

    Raises ``ValueError`` for a method that cannot be embedded.
    """
    if method == ELICIT:
        return _URL if params is not None and params.get("mode") == "url" else _FORM
    if method == ROOTS:
        return _ROOTS
    if method == SAMPLE:
        if params is None:
            return _SAMPLING
        needs: list[Need] = []
        if "tools" in params or "toolChoice" in params:
            needs.append(("sampling", "tools"))
        if params.get("includeContext") in ("thisServer", "allServers"):
            needs.append(("sampling", "context"))
        return tuple(needs) if needs else _SAMPLING
    raise ValueError(f"{method!r} cannot be an embedded input request")


def required_capabilities(method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The client capabilities one embedded request needs, as a requirement object
    (:func:`needs_of` in the capabilities' own shape, e.g. ``{"elicitation": {"url": {}}}``).

    Raises ``ValueError`` for a method that cannot be embedded.
    """
    required: dict[str, Any] = {}
    for name, sub in needs_of(method, params):
        into = required.setdefault(name, {})
        if sub is not None:
            into[sub] = {}
    return required


def grants(declared: Mapping[str, Any], needs: tuple[Need, ...]) -> bool:
    """True when ``declared`` grants every need: the one statement of what a declaration
    grants (:func:`missing_capabilities` asks it need by need).

    A capability whose declared value is not an object is absent; a sub-capability is granted
    when declared as an object, and a bare ``elicitation: {}`` grants form mode.
    """
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


def missing_capabilities(
    required: Mapping[str, Any], declared: Mapping[str, Any]
) -> dict[str, Any]:
    """The part of ``required`` that ``declared`` does not grant (empty when all are granted).

    Keys are compared as strings; a declared capability whose value is not an object is treated
    as absent, since the schema defines every capability as an object.
    """
    missing: dict[str, Any] = {}
    for name, needs in required.items():
        if not grants(declared, ((name, None),)):
            missing[name] = dict(needs) if isinstance(needs, Mapping) else {}
            continue
        if not isinstance(needs, Mapping) or not needs:
            continue
        # (a ``None`` key is no sub-capability a JSON declaration can grant)
        lacking = {
            sub: value
            for sub, value in needs.items()
            if sub is None or not grants(declared, ((name, sub),))
        }
        if lacking:
            missing[name] = lacking
    return missing


#: The tasks extension's identifier (SEP-2663).
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"


def declares_tasks(capabilities: Any) -> bool:
    """Whether client capabilities carry ``extensions["io.modelcontextprotocol/tasks"]``."""
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions


def capability_paths(caps: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted leaf names of a capabilities object, e.g. ``["elicitation.url", "roots"]``."""
    out: list[str] = []
    for key, value in caps.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.extend(capability_paths(value, path + "."))
        else:
            out.append(path)
    return out
