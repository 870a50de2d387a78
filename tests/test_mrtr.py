"""MRTR values: InputRequest, InputRequiredResult, the builders, and the InputResponses readers."""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs
import pytest

from helpers import (
    FORM_SCHEMA,
    check,
    spec_dir,
)
from mrtr_sansio import (
    InputRequest,
    InputRequiredResult,
    InputResponses,
    elicit_form,
    elicit_url,
    list_roots,
    sample,
)
from mrtr_sansio.protocol import EMBEDDABLE_METHODS, MRTR_METHODS

E = "elicitation/create"
S = "sampling/createMessage"
R = "roots/list"


class Key(str, enum.Enum):
    """A str-mixin enum (what ``enum.StrEnum`` is on 3.11+); ``str()`` of it is ``Key.WHO``."""

    WHO = "who"
    WHERE = "where"


class Tagged(str):
    def __str__(self) -> str:
        return "tagged!"


def test_method_sets() -> None:
    assert frozenset({"tools/call", "prompts/get", "resources/read"}) == MRTR_METHODS
    assert frozenset({E, S, R}) == EMBEDDABLE_METHODS


# --- InputRequest -----------------------------------------------------------------------------


def test_input_request_values() -> None:
    req = InputRequest(E, {"message": "m", "requestedSchema": FORM_SCHEMA})
    assert req.to_wire() == {
        "method": E,
        "params": {"message": "m", "requestedSchema": FORM_SCHEMA},
    }
    assert InputRequest(R).to_wire() == {"method": R}
    assert InputRequest(R, {}).to_wire() == {"method": R, "params": {}}
    assert req.required_capabilities() == {"elicitation": {"form": {}}}
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        req.method = S  # type: ignore[misc]


def test_input_request_params_mapping_is_copied_to_a_plain_dict() -> None:
    wire = InputRequest(R, MappingProxyType({"_meta": {}})).to_wire()
    assert type(wire["params"]) is dict
    json.dumps(wire)


@pytest.mark.parametrize(
    ("method", "params", "exc", "field"),
    [
        ("tools/call", {}, ValueError, "method"),
        ("", {}, ValueError, "method"),
        (5, {}, TypeError, "method"),
        (["x"], {}, TypeError, "method"),
        (E, None, TypeError, "params"),
        (S, None, TypeError, "params"),
        (E, [1], TypeError, "params"),
        (R, "x", TypeError, "params"),
        (E, {"mode": "bogus", "message": "m"}, ValueError, "params.mode"),
        (E, {"mode": None, "message": "m"}, ValueError, "params.mode"),
    ],
)
def test_input_request_errors_name_the_field(
    method: Any, params: Any, exc: type[Exception], field: str
) -> None:
    with pytest.raises(exc) as info:
        InputRequest(method, params)
    assert str(info.value).startswith(f"{field}:")


def test_input_request_coerce() -> None:
    req = InputRequest(R)
    assert InputRequest.coerce(req) is req
    assert InputRequest.coerce({"method": R}) == req
    assert InputRequest.coerce({"method": S, "params": {"maxTokens": 1}}) == InputRequest(
        S, {"maxTokens": 1}
    )
    with pytest.raises(TypeError, match=r"^method: must be a string"):
        InputRequest.coerce({"params": {}})
    with pytest.raises(TypeError, match="InputRequest or a mapping"):
        InputRequest.coerce([R])  # type: ignore[arg-type]


# --- InputRequiredResult ----------------------------------------------------------------------


def test_needs_requests_or_state() -> None:
    with pytest.raises(ValueError, match=r"^input_requests or request_state"):
        InputRequiredResult()
    with pytest.raises(ValueError, match=r"^input_requests or request_state"):
        InputRequiredResult(None, None)


def test_to_wire_omits_absent_fields() -> None:
    only_state = InputRequiredResult(request_state="s1")
    assert only_state.to_wire() == {"resultType": "input_required", "requestState": "s1"}
    assert only_state.allowed_by({})  # nothing embedded: no capability needed
    only_requests = InputRequiredResult({"r": list_roots()})
    assert only_requests.to_wire() == {
        "resultType": "input_required",
        "inputRequests": {"r": {"method": R, "params": {}}},
    }
    both = InputRequiredResult({"r": InputRequest(R)}, "")
    assert both.to_wire() == {
        "resultType": "input_required",
        "inputRequests": {"r": {"method": R}},
        "requestState": "",
    }
    assert both.to_wire("sealed") == {
        "resultType": "input_required",
        "inputRequests": {"r": {"method": R}},
        "requestState": "sealed",
    }
    assert only_requests.to_wire("sealed")["requestState"] == "sealed"


def test_request_state_may_be_any_value_until_sent() -> None:
    state = {"step": 2, "seen": ["a"]}
    result = InputRequiredResult(request_state=state)
    assert result.request_state == state
    assert result.required_capabilities() == {}


def test_keys_are_normalized_to_plain_strings() -> None:
    result = InputRequiredResult(
        {Key.WHO: list_roots(), Tagged("t"): list_roots(), "plain": list_roots()}
    )
    assert result.input_requests is not None
    keys = list(result.input_requests)
    assert keys == ["who", "t", "plain"]
    assert all(type(k) is str for k in keys)
    assert json.dumps(result.to_wire()["inputRequests"]).startswith('{"who"')


@pytest.mark.parametrize(
    ("requests", "exc", "prefix"),
    [
        ({"": list_roots()}, ValueError, "input_requests: keys must be non-empty strings"),
        ({5: list_roots()}, TypeError, "input_requests: keys must be strings"),
        ({b"k": list_roots()}, TypeError, "input_requests: keys must be strings"),
        ([list_roots()], TypeError, "input_requests: must be a mapping"),
        ("who", TypeError, "input_requests: must be a mapping"),
        ({"k": {"method": "tools/call", "params": {}}}, ValueError, "input_requests['k'].method:"),
        ({"k": {"method": 5}}, TypeError, "input_requests['k'].method:"),
        ({"k": {"method": E}}, TypeError, "input_requests['k'].params:"),
        ({"k": 7}, TypeError, "input_requests['k']:"),
    ],
)
def test_construction_errors_name_the_field(
    requests: Any, exc: type[Exception], prefix: str
) -> None:
    with pytest.raises(exc) as info:
        InputRequiredResult(requests)
    assert str(info.value).startswith(prefix), str(info.value)


def test_frozen_and_requests_are_coerced() -> None:
    result = InputRequiredResult({"r": {"method": R}})
    assert result.input_requests == {"r": InputRequest(R)}
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        result.request_state = "x"  # type: ignore[misc]


def test_required_capabilities_are_merged() -> None:
    result = InputRequiredResult(
        {
            "a": elicit_form("m", FORM_SCHEMA),
            "b": elicit_url("m", "https://x"),
            "c": sample("hi", 5, tools=[{"name": "t", "inputSchema": {"type": "object"}}]),
            "d": list_roots(),
        }
    )
    assert result.required_capabilities() == {
        "elicitation": {"form": {}, "url": {}},
        "sampling": {"tools": {}},
        "roots": {},
    }


def test_from_wire() -> None:
    wire = {
        "resultType": "input_required",
        "inputRequests": {"k": {"method": R}},
        "requestState": "abc",
    }
    result = InputRequiredResult.from_wire(wire)
    assert result == InputRequiredResult({"k": InputRequest(R)}, "abc")
    assert result.to_wire() == wire
    with pytest.raises(TypeError, match=r"^requestState: must be a string"):
        InputRequiredResult.from_wire({"requestState": 5})
    with pytest.raises(ValueError, match="at least one"):
        InputRequiredResult.from_wire({"resultType": "input_required"})


@pytest.mark.skipif(spec_dir() is None, reason="official spec examples not found")
@pytest.mark.parametrize(
    "name",
    [
        "input-required-result-with-elicitation-and-sampling-and-request-state",
        "input-required-result-with-request-state-only",
    ],
)
def test_spec_examples_round_trip(name: str) -> None:
    folder = spec_dir()
    assert folder is not None
    wire = json.loads(
        (folder / "examples" / f"InputRequiredResult_{name}.json").read_text(encoding="utf-8")
    )
    assert InputRequiredResult.from_wire(wire).to_wire() == wire


# --- builders ---------------------------------------------------------------------------------


def test_elicit_form() -> None:
    req = elicit_form("Your name?", FORM_SCHEMA)
    assert req.to_wire() == {
        "method": E,
        "params": {"message": "Your name?", "requestedSchema": FORM_SCHEMA},
    }
    extra = elicit_form("m", FORM_SCHEMA, mode="form", _meta={"k": 1})
    assert extra.params == {
        "message": "m",
        "requestedSchema": FORM_SCHEMA,
        "mode": "form",
        "_meta": {"k": 1},
    }
    with pytest.raises(TypeError, match=r"^message:"):
        elicit_form(5, FORM_SCHEMA)  # type: ignore[arg-type]
    for mode in ("url", "bogus", ""):  # a url request needs elicit_url's fields
        with pytest.raises(ValueError, match=r"^mode: elicit_form builds form mode"):
            elicit_form("m", FORM_SCHEMA, mode=mode)
    assert "mode" not in elicit_form("m", FORM_SCHEMA, mode=None).to_wire()["params"]  # left out
    with pytest.raises(TypeError, match=r"^requested_schema:"):
        elicit_form("m", [])  # type: ignore[arg-type]


def test_elicit_url() -> None:
    req = elicit_url("Sign in", "https://example.com/login")
    assert req.to_wire() == {
        "method": E,
        "params": {"mode": "url", "message": "Sign in", "url": "https://example.com/login"},
    }
    assert req.required_capabilities() == {"elicitation": {"url": {}}}
    with_id = elicit_url("m", "https://x", elicitation_id="e-1")
    assert with_id.params is not None
    assert with_id.params["elicitationId"] == "e-1"
    with pytest.raises(TypeError, match=r"^message:"):
        elicit_url(None, "https://x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^url:"):
        elicit_url("m", 5)  # type: ignore[arg-type]


def test_sample() -> None:
    text = {"role": "user", "content": {"type": "text", "text": "2+2?"}}
    assert sample("2+2?", 10).to_wire() == {
        "method": S,
        "params": {"messages": [text], "maxTokens": 10},
    }
    tool = {"name": "calc", "inputSchema": {"type": "object"}}
    full = sample(
        [text],
        100,
        system_prompt="Be brief",
        tools=[tool],
        tool_choice={"mode": "auto"},
        temperature=0.5,
    )
    assert full.params == {
        "messages": [text],
        "maxTokens": 100,
        "temperature": 0.5,
        "systemPrompt": "Be brief",
        "tools": [tool],
        "toolChoice": {"mode": "auto"},
    }
    assert full.required_capabilities() == {"sampling": {"tools": {}}}
    assert sample("x", 1, includeContext="allServers").required_capabilities() == {
        "sampling": {"context": {}}
    }
    for bad in (0, -1, 1.5, True, "10"):
        with pytest.raises(ValueError, match=r"^max_tokens:"):
            sample("x", bad)  # type: ignore[arg-type]


def test_list_roots() -> None:
    assert list_roots() == InputRequest(R, {})
    assert list_roots().required_capabilities() == {"roots": {}}


@pytest.mark.skipif(spec_dir() is None, reason="official schema not found")
def test_builders_produce_schema_valid_requests() -> None:
    requests = {
        "a": elicit_form("m", FORM_SCHEMA),
        "b": elicit_url("m", "https://x"),
        "c": sample("hi", 5, tools=[{"name": "t", "inputSchema": {"type": "object"}}]),
        "d": list_roots(),
    }
    check("2026-07-28", "InputRequiredResult", InputRequiredResult(requests, "s").to_wire())
    for req in requests.values():
        wire = req.to_wire()
        definition = {E: "ElicitRequest", S: "CreateMessageRequest", R: "ListRootsRequest"}
        check("2026-07-28", definition[req.method], wire)


# --- InputResponses ---------------------------------------------------------------------------

RESPONSES: dict[str, Any] = {
    "who": {"action": "accept", "content": {"name": "octocat"}},
    "url": {"action": "accept"},
    "no": {"action": "decline"},
    "stop": {"action": "cancel"},
    "odd": {"action": "maybe", "content": {"x": 1}},
    "badcontent": {"action": "accept", "content": "text"},
    "llm": {
        "role": "assistant",
        "content": {"type": "text", "text": "Paris"},
        "model": "m",
        "stopReason": "endTurn",
    },
    "llm2": {
        "role": "assistant",
        "model": "m",
        "content": [
            {"type": "text", "text": "a"},
            {"type": "tool_use", "id": "1", "name": "t", "input": {}},
            {"type": "text", "text": "b"},
            {"type": "text", "text": 5},
            "junk",
        ],
    },
    "image": {"role": "assistant", "content": {"type": "image", "data": "", "mimeType": "x"}},
    "roots": {"roots": [{"uri": "file:///a", "name": "A"}, {"uri": "file:///b"}]},
    # Malformed answers read as None, so that the handler asks again (S11).
    "junkroots": {"roots": [{"uri": "file:///a"}, {"uri": 5}, "junk"]},
    "nomodel": {"role": "assistant", "content": {"type": "text", "text": "Paris"}},
    "noroots": {"roots": "none"},
    "scalar": 5,
}


def test_input_responses_mapping() -> None:
    responses = InputResponses(RESPONSES)
    assert len(responses) == len(RESPONSES)
    assert list(responses) == list(RESPONSES)
    assert responses["who"] == RESPONSES["who"]
    assert responses[Key.WHO] == RESPONSES["who"]
    assert Key.WHO in responses
    assert Tagged("who") in responses
    assert 5 not in responses  # type: ignore[comparison-overlap]
    assert "missing" not in responses
    assert responses.get("missing") is None
    assert responses.get(5) is None  # type: ignore[call-overload]
    with pytest.raises(KeyError):
        responses["missing"]
    assert repr(InputResponses({"a": {}})) == "InputResponses({'a': {}})"
    assert len(InputResponses()) == 0
    assert len(InputResponses(None)) == 0


def test_accepted_content() -> None:
    responses = InputResponses(RESPONSES)
    assert responses.accepted_content("who") == {"name": "octocat"}
    assert responses.accepted_content(Key.WHO) == {"name": "octocat"}
    assert responses.accepted_content("url") == {}
    for key in ("no", "stop", "odd", "badcontent", "llm", "missing", "scalar"):
        assert responses.accepted_content(key) is None, key


def test_elicitation_action() -> None:
    responses = InputResponses(RESPONSES)
    assert [responses.elicitation_action(k) for k in ("who", "no", "stop", "odd", "scalar")] == [
        "accept",
        "decline",
        "cancel",
        None,
        None,
    ]


def test_sampled_text() -> None:
    responses = InputResponses(RESPONSES)
    assert responses.sampled_text("llm") == "Paris"
    assert responses.sampled_text("llm2") == "ab"
    for key in ("image", "who", "missing", "scalar", "nomodel"):
        assert responses.sampled_text(key) is None, key


def test_root_uris() -> None:
    responses = InputResponses(RESPONSES)
    assert responses.root_uris("roots") == ["file:///a", "file:///b"]
    assert InputResponses({"r": {"roots": []}}).root_uris("r") == []
    for key in ("noroots", "who", "missing", "scalar", "junkroots"):
        assert responses.root_uris(key) is None, key


def test_get_response() -> None:
    responses = InputResponses(RESPONSES)
    assert responses.get_response("who") == RESPONSES["who"]
    assert responses.get_response("scalar") is None
    assert responses.get_response("missing") is None
    assert responses.get_response(5) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("junk", [5, "text", [1, 2], True])
def test_input_responses_tolerate_junk(junk: Any) -> None:
    responses = InputResponses(junk)
    assert len(responses) == 0
    assert list(responses) == []
    assert "a" not in responses
    assert responses.accepted_content("a") is None
    assert responses.sampled_text("a") is None
    assert responses.root_uris("a") is None


def test_input_responses_accept_any_mapping() -> None:
    raw: Mapping[str, Any] = MappingProxyType({"k": {"action": "accept", "content": {}}})
    assert InputResponses(raw).accepted_content("k") == {}


@pytest.mark.skipif(not hasattr(enum, "StrEnum"), reason="enum.StrEnum needs Python 3.11")
def test_str_enum_keys() -> None:
    keys = enum.StrEnum("Keys", {"WHO": "who"})  # type: ignore[attr-defined]
    result = InputRequiredResult({keys.WHO: list_roots()})
    assert result.input_requests is not None
    assert [type(k) for k in result.input_requests] == [str]
    assert InputResponses({"who": {"roots": []}}).root_uris(keys.WHO) == []
