"""Client capabilities for embedded requests: DIGEST §3.2, merge, and the missing set."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from helpers import (
    CAPS,
    spec_dir,
)
from mrtr_sansio import InputRequest, InputRequiredResult
from mrtr_sansio.protocol import merge_capabilities, missing_capabilities, required_capabilities

E = "elicitation/create"
S = "sampling/createMessage"
R = "roots/list"
MSG = [{"role": "user", "content": {"type": "text", "text": "hi"}}]


# --- the table of DIGEST §3.2 -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params", "required"),
    [
        (E, {"message": "m", "requestedSchema": {}}, {"elicitation": {"form": {}}}),
        (E, {"mode": "form", "message": "m", "requestedSchema": {}}, {"elicitation": {"form": {}}}),
        (E, {"mode": "url", "message": "m", "url": "https://x"}, {"elicitation": {"url": {}}}),
        (E, None, {"elicitation": {"form": {}}}),
        (S, {"messages": MSG, "maxTokens": 5}, {"sampling": {}}),
        (S, {"messages": MSG, "maxTokens": 5, "tools": []}, {"sampling": {"tools": {}}}),
        (
            S,
            {"messages": MSG, "maxTokens": 5, "toolChoice": {"mode": "auto"}},
            {"sampling": {"tools": {}}},
        ),
        (
            S,
            {"messages": MSG, "maxTokens": 5, "includeContext": "thisServer"},
            {"sampling": {"context": {}}},
        ),
        (
            S,
            {"messages": MSG, "maxTokens": 5, "includeContext": "allServers", "tools": []},
            {"sampling": {"tools": {}, "context": {}}},
        ),
        (S, {"messages": MSG, "maxTokens": 5, "includeContext": "none"}, {"sampling": {}}),
        (S, None, {"sampling": {}}),
        (R, None, {"roots": {}}),
        (R, {}, {"roots": {}}),
    ],
)
def test_required_capabilities_table(
    method: str, params: dict[str, Any] | None, required: dict[str, Any]
) -> None:
    assert required_capabilities(method, params) == required


def test_only_embeddable_methods_have_requirements() -> None:
    with pytest.raises(ValueError, match="tools/call"):
        required_capabilities("tools/call", {})


@pytest.mark.parametrize(
    ("required", "declared", "missing"),
    [
        # form: explicit, or bare elicitation {}
        ({"elicitation": {"form": {}}}, {"elicitation": {"form": {}}}, {}),
        ({"elicitation": {"form": {}}}, {"elicitation": {}}, {}),
        (
            {"elicitation": {"form": {}}},
            {"elicitation": {"url": {}}},
            {"elicitation": {"form": {}}},
        ),
        ({"elicitation": {"form": {}}}, {}, {"elicitation": {"form": {}}}),
        (
            {"elicitation": {"form": {}}},
            {"elicitation": {"form": True}},
            {"elicitation": {"form": {}}},
        ),
        # url: only explicit
        ({"elicitation": {"url": {}}}, {"elicitation": {}}, {"elicitation": {"url": {}}}),
        ({"elicitation": {"url": {}}}, {"elicitation": {"form": {}}}, {"elicitation": {"url": {}}}),
        ({"elicitation": {"url": {}}}, {"elicitation": {"url": {}}}, {}),
        (
            {"elicitation": {"form": {}, "url": {}}},
            {"elicitation": {}},
            {"elicitation": {"url": {}}},
        ),
        # sampling
        ({"sampling": {}}, {"sampling": {}}, {}),
        ({"sampling": {}}, {}, {"sampling": {}}),
        ({"sampling": {}}, {"sampling": None}, {"sampling": {}}),
        ({"sampling": {}}, {"sampling": True}, {"sampling": {}}),
        ({"sampling": {"tools": {}}}, {"sampling": {}}, {"sampling": {"tools": {}}}),
        ({"sampling": {"tools": {}}}, {"sampling": {"tools": {}}}, {}),
        ({"sampling": {"tools": {}}}, {}, {"sampling": {"tools": {}}}),
        ({"sampling": {"context": {}}}, {"sampling": {"tools": {}}}, {"sampling": {"context": {}}}),
        (
            {"sampling": {"tools": {}, "context": {}}},
            {"sampling": {"context": {}}},
            {"sampling": {"tools": {}}},
        ),
        # roots
        ({"roots": {}}, {"roots": {}}, {}),
        ({"roots": {}}, {"roots": {"listChanged": True}}, {}),
        ({"roots": {}}, {"elicitation": {}}, {"roots": {}}),
        # several at once
        (
            {"elicitation": {"form": {}}, "sampling": {}, "roots": {}},
            {"elicitation": {}},
            {"sampling": {}, "roots": {}},
        ),
        ({}, {}, {}),
    ],
)
def test_missing_capabilities(
    required: dict[str, Any], declared: dict[str, Any], missing: dict[str, Any]
) -> None:
    assert missing_capabilities(required, declared) == missing


def test_everything_is_granted_by_the_full_set() -> None:
    required = merge_capabilities(
        [
            required_capabilities(E, {"mode": "url"}),
            required_capabilities(E, {}),
            required_capabilities(S, {"tools": [], "includeContext": "allServers"}),
            required_capabilities(R, None),
        ]
    )
    assert missing_capabilities(required, CAPS) == {}


def test_missing_tolerates_odd_required_values() -> None:
    assert missing_capabilities({"roots": None}, {}) == {"roots": {}}
    assert missing_capabilities({"roots": None}, {"roots": {}}) == {}


def test_missing_compares_keys_as_strings() -> None:
    class Name(str):
        pass

    declared: dict[str, Any] = {Name("elicitation"): {Name("url"): {}}}
    assert missing_capabilities({"elicitation": {"url": {}}}, declared) == {}
    assert missing_capabilities({Name("roots"): {}}, {"roots": {}}) == {}


def test_missing_does_not_alias_the_requirement() -> None:
    required: dict[str, Any] = {"sampling": {"tools": {}}}
    missing = missing_capabilities(required, {})
    missing["sampling"]["x"] = {}
    assert required == {"sampling": {"tools": {}}}


# --- merge ------------------------------------------------------------------------------------


def test_merge_is_a_union() -> None:
    assert merge_capabilities([]) == {}
    assert merge_capabilities(
        [
            {"elicitation": {"form": {}}},
            {"elicitation": {"url": {}}},
            {"sampling": {}},
            {"sampling": {"tools": {}}},
            {"sampling": {"context": {}}},
            {"roots": {}},
            {"roots": {}},
        ]
    ) == {
        "elicitation": {"form": {}, "url": {}},
        "sampling": {"tools": {}, "context": {}},
        "roots": {},
    }


def test_merge_ignores_non_object_values_and_keeps_the_name() -> None:
    assert merge_capabilities([{"roots": True}, {"sampling": {"tools": {}}}]) == {
        "roots": {},
        "sampling": {"tools": {}},
    }


def test_merge_does_not_mutate_its_inputs() -> None:
    a: dict[str, Any] = {"elicitation": {"form": {}}}
    b: dict[str, Any] = {"elicitation": {"url": {}}}
    merge_capabilities([a, b])
    assert a == {"elicitation": {"form": {}}}
    assert b == {"elicitation": {"url": {}}}


# --- the spec's capability examples ---------------------------------------------------------


@pytest.mark.skipif(spec_dir() is None, reason="official spec examples not found")
@pytest.mark.parametrize(
    ("example", "grants"),
    [
        ("elicitation-form-only-implicit", {"form"}),
        ("elicitation-form-and-url-mode-support", {"form", "url"}),
        ("sampling-minimum-baseline-support", {"sampling"}),
        ("sampling-tool-use-support", {"sampling", "tools"}),
        ("sampling-context-inclusion-support-deprecated", {"sampling", "context"}),
        ("roots-minimum-baseline-support", {"roots"}),
    ],
)
def test_spec_capability_examples(example: str, grants: set[str]) -> None:
    folder = spec_dir()
    assert folder is not None
    declared = json.loads(
        (folder / "examples" / f"ClientCapabilities_{example}.json").read_text(encoding="utf-8")
    )
    probes = {
        "form": InputRequest(E, {"message": "m", "requestedSchema": {}}),
        "url": InputRequest(E, {"mode": "url", "message": "m", "url": "https://x"}),
        "sampling": InputRequest(S, {"messages": MSG, "maxTokens": 1}),
        "tools": InputRequest(S, {"messages": MSG, "maxTokens": 1, "tools": []}),
        "context": InputRequest(
            S, {"messages": MSG, "maxTokens": 1, "includeContext": "thisServer"}
        ),
        "roots": InputRequest(R),
    }
    granted = {
        name
        for name, probe in probes.items()
        if not missing_capabilities(probe.required_capabilities(), declared)
    }
    assert granted == grants


class _Caps(Mapping[str, Any]):
    """A declaration that is a Mapping but not a dict (the checks accept any Mapping)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


#: Declarations at the edges of the grant rule: bare, non-object and non-dict values.
ODD_DECLARATIONS: list[dict[str, Any] | _Caps] = [
    {},
    {"elicitation": {}},
    {"elicitation": {"url": {}}},
    {"elicitation": {"form": True}},
    {"elicitation": None, "sampling": [], "roots": "yes"},
    {"elicitation": _Caps({}), "roots": _Caps({})},
    {"elicitation": _Caps({"url": _Caps({})})},
    {"sampling": {"tools": {}}},
    {"sampling": {"tools": None, "context": {}}},
    _Caps({"sampling": {"tools": {}, "context": {}}, "roots": {}}),
    CAPS,
]
REQUESTS: list[tuple[str, dict[str, Any] | None]] = [
    (E, {"message": "m", "requestedSchema": {}}),
    (E, {"mode": "url", "message": "m", "url": "https://x"}),
    (S, {"messages": MSG, "maxTokens": 5}),
    (S, {"messages": MSG, "maxTokens": 5, "tools": [], "includeContext": "allServers"}),
    (S, {"messages": MSG, "maxTokens": 5, "includeContext": "thisServer"}),
    (R, None),
]


@pytest.mark.parametrize("declared", ODD_DECLARATIONS)
@pytest.mark.parametrize(("method", "params"), REQUESTS)
def test_the_fast_check_and_the_missing_set_are_one_rule(
    method: str, params: dict[str, Any] | None, declared: Mapping[str, Any]
) -> None:
    # allowed_by (the server's fast check) and missing_capabilities (the diagnosis) agree on
    # every edge of the grant rule, and the missing part is itself required.
    request = InputRequest(method, params)
    required = required_capabilities(method, params)
    missing = missing_capabilities(required, declared)
    assert InputRequiredResult({"k": request}).allowed_by(declared) == (not missing)
    for name, subs in missing.items():
        assert name in required
        assert set(subs) <= set(required[name])
