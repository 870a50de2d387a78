"""The strategies draw what they promise: valid values pass the official 2026-07-28 schema
(and our own receiver), invalid values are refused by both."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

import mrtr_sansio as m
from helpers import (
    SCHEMA_SKIP_REASON,
    check,
    spec_dir,
)
from mrtr_sansio.testing import strategies as s
from mrtr_sansio.testing._checks import check_response

needs_schema = pytest.mark.skipif(spec_dir() is None, reason=SCHEMA_SKIP_REASON)
V = "2026-07-28"
KIND_RESULT = {
    "elicitation/create": "ElicitResult",
    "sampling/createMessage": "CreateMessageResult",
    "roots/list": "ListRootsResult",
}
QUICK = settings(
    max_examples=40,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def invalid_for(definition: str, value: Any) -> bool:
    try:
        check(V, definition, value)
    except AssertionError:
        return True
    return False


def serve(message: dict[str, Any], config: m.ServerConfig | None = None) -> dict[str, Any]:
    """Our server's answer to one message (no handler: requests that survive stay open)."""
    conn = m.ServerConnection(config)
    conn.receive_message(json.dumps(message))
    out = conn.outgoing()
    return dict(out[0].message) if out else {}


# --- valid values ----------------------------------------------------------------------------


@needs_schema
@QUICK
@given(s.client_capabilities())
def test_capabilities_are_schema_valid(caps: dict[str, Any]) -> None:
    check(V, "ClientCapabilities", caps)


@needs_schema
@QUICK
@given(s.modern_envelopes())
def test_envelopes_are_schema_valid(meta: dict[str, Any]) -> None:
    check(V, "RequestMetaObject", meta)


@needs_schema
@QUICK
@given(s.input_requests_maps(max_size=3))
def test_input_requests_are_schema_valid(requests: dict[str, Any]) -> None:
    check(V, "InputRequests", requests)
    for request in requests.values():
        assert request["method"] in m.protocol.EMBEDDABLE_METHODS
        m.InputRequest.coerce(request)  # our own value type takes them too


@needs_schema
@QUICK
@given(st.data())
def test_answers_fit_their_requests(data: st.DataObject) -> None:
    requests = data.draw(s.input_requests_maps(max_size=3))
    answers = data.draw(s.input_responses_for(requests, extra_keys=True))
    assert set(requests) <= set(answers)
    check(V, "InputResponses", answers)
    for key, request in requests.items():
        check(V, KIND_RESULT[request["method"]], answers[key])


@QUICK
@given(st.data())
def test_form_content_satisfies_the_requested_schema(data: st.DataObject) -> None:
    schema = data.draw(s.form_schemas())
    content = data.draw(s.content_for_schema(schema))
    Draft202012Validator(schema).validate(content)
    assert set(schema.get("required", [])) <= set(content)


@QUICK
@given(st.data())
def test_accept_only_answers_accept(data: st.DataObject) -> None:
    request = data.draw(st.one_of(s.elicit_form_requests(), s.elicit_url_requests()))
    answer = data.draw(s.input_response_for(request, accept_only=True))
    assert answer["action"] == "accept"


@QUICK
@given(st.data())
def test_allowed_requests_need_only_declared_capabilities(data: st.DataObject) -> None:
    caps = data.draw(s.client_capabilities())
    requests = data.draw(s.input_requests_maps(min_size=0, max_size=3, allowed_by=caps))
    for request in requests.values():
        needs = m.protocol.required_capabilities(request["method"], request.get("params"))
        assert not m.protocol.missing_capabilities(needs, caps)


def test_no_capabilities_allow_no_requests() -> None:
    assert s.input_requests(allowed_by={}).is_empty
    assert not s.input_requests(allowed_by={"sampling": {}}).is_empty


@needs_schema
@QUICK
@given(s.input_required_results())
def test_input_required_results_pass_the_model(result: dict[str, Any]) -> None:
    check(V, "InputRequiredResult", result)
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}
    response = {"jsonrpc": "2.0", "id": 1, "result": result}
    check_response(request, response, s.FULL_CAPABILITIES)


@needs_schema
@QUICK
@given(s.modern_requests())
def test_modern_requests_are_schema_valid_and_served(request: dict[str, Any]) -> None:
    check(V, "CallToolRequest", request)
    conn = m.ServerConnection()
    conn.receive_message(json.dumps(request))
    assert [type(e).__name__ for e in conn.events()] == ["RequestReceived"]


@QUICK
@given(s.request_ids(), s.request_states(), s.json_values())
def test_ids_states_and_values_round_trip(rid: Any, state: str, value: Any) -> None:
    assert m.config.StdlibJsonCodec().loads(
        m.config.StdlibJsonCodec().dumps([rid, state, value])
    ) == [
        rid,
        state,
        value,
    ]
    assert type(rid) in (int, str)
    assert state


@QUICK
@given(st.data())
def test_tampered_states_always_differ(data: st.DataObject) -> None:
    state = data.draw(st.one_of(s.request_states(), st.just(""), st.just("A"), st.just("AB")))
    assert data.draw(s.tampered_states(state)) != state


# --- invalid values --------------------------------------------------------------------------


@needs_schema
@QUICK
@given(st.data())
def test_invalid_answers_are_not_results_of_their_kind(data: st.DataObject) -> None:
    request = data.draw(s.input_requests())
    answer = data.draw(s.invalid_input_response_for(request))
    assert invalid_for(KIND_RESULT[request["method"]], answer)


def test_invalid_answer_for_a_non_embeddable_method_is_refused() -> None:
    with pytest.raises(ValueError, match="not an embedded"):
        s.invalid_input_response_for({"method": "tools/call"})
    with pytest.raises(ValueError, match="not an embedded"):
        s.input_response_for({"method": "tools/call"})


@needs_schema
@QUICK
@given(s.invalid_input_requests())
def test_invalid_input_requests_are_not_input_requests(request: Any) -> None:
    assert invalid_for("InputRequest", request)


@QUICK
@given(s.invalid_input_required_results())
def test_invalid_input_required_results_fail_the_model(result: Any) -> None:
    # Too many requests is a client's limit, not a rule the server breaks.
    assume(not isinstance(result.get("inputRequests"), dict) or len(result["inputRequests"]) < 2)
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}
    response = {"jsonrpc": "2.0", "id": 1, "result": result}
    with pytest.raises(AssertionError):
        check_response(request, response, s.FULL_CAPABILITIES)


@needs_schema
@QUICK
@given(s.invalid_client_capabilities())
def test_invalid_capabilities_are_not_capabilities(caps: Any) -> None:
    assert invalid_for("ClientCapabilities", caps)


def _call(rid: Any, **params: Any) -> dict[str, Any]:
    base = {
        "name": "t",
        "_meta": {m.protocol.PROTOCOL_VERSION_KEY: V, m.protocol.CLIENT_CAPABILITIES: {}},
    }
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {**base, **params}}


@QUICK
@given(s.invalid_envelopes())
def test_invalid_envelopes_are_refused(meta: Any) -> None:
    reply = serve(_call(1, _meta=meta))
    assert reply["error"]["code"] in (
        m.ErrorCode.INVALID_PARAMS,
        m.ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
    )


@QUICK
@given(s.invalid_request_ids())
def test_invalid_ids_are_refused(rid: Any) -> None:
    reply = serve(_call(rid))
    assert reply["error"]["code"] == m.ErrorCode.INVALID_REQUEST
    assert "id" not in reply


@QUICK
@given(s.invalid_request_states(max_bytes=64))
def test_invalid_states_are_refused(state: Any) -> None:
    config = m.ServerConfig(limits=m.Limits(max_request_state_bytes=64))
    assert (
        serve(_call(1, requestState=state), config)["error"]["code"] == m.ErrorCode.INVALID_PARAMS
    )


@QUICK
@given(s.invalid_input_responses(max_entries=4))
def test_invalid_input_responses_are_refused(answers: Any) -> None:
    config = m.ServerConfig(limits=m.Limits(max_input_responses=4))
    assert (
        serve(_call(1, inputResponses=answers), config)["error"]["code"]
        == m.ErrorCode.INVALID_PARAMS
    )


# --- hostile input ---------------------------------------------------------------------------


@QUICK
@given(st.data())
def test_wrong_type_variants_change_one_member_type(data: st.DataObject) -> None:
    message = data.draw(s.modern_requests())
    variant = data.draw(s.wrong_type_variants(message))
    assert json.dumps(variant) != json.dumps(message)  # (True == 1 in Python, not in JSON)


@QUICK
@given(s.wrong_type_variants({}))
def test_wrong_type_variants_of_an_empty_object(variant: dict[str, Any]) -> None:
    assert variant == {}


@QUICK
@given(st.binary(max_size=200), st.data())
def test_chunkings_join_back(data_: bytes, data: st.DataObject) -> None:
    chunks = data.draw(s.chunked(data_))
    assert b"".join(chunks) == data_
    assert all(chunks)


@QUICK
@given(s.hostile_messages(max_string=64), s.hostile_json_texts(max_bytes=64))
def test_hostile_values_are_json_or_bytes(message: dict[str, Any], text: bytes) -> None:
    assert isinstance(message, dict)
    assert isinstance(text, bytes)


@QUICK
@given(st.data())
def test_content_for_odd_schemas(data: st.DataObject) -> None:
    schema = {
        "type": "object",
        "properties": {
            "odd": 5,
            "free_list": {"type": "array"},
            "bounded": {"type": "number", "minimum": 3.5, "maximum": True},
            "titled": {"type": "string", "oneOf": [{"const": "a", "title": "A"}, "junk"]},
        },
        "required": ["odd", "free_list", "bounded", "titled", 7],
    }
    content = data.draw(s.content_for_schema(schema))
    assert isinstance(content["odd"], str)
    assert isinstance(content["free_list"], list)
    assert 3 <= content["bounded"] <= 1000
    assert content["titled"] == "a"
    assert data.draw(s.content_for_schema({"properties": []})) == {}


@QUICK
@given(s.modern_envelopes(extra_keys=False))
def test_envelopes_without_extra_keys(meta: dict[str, Any]) -> None:
    assert set(meta) <= {
        m.protocol.PROTOCOL_VERSION_KEY,
        m.protocol.CLIENT_CAPABILITIES,
        m.protocol.CLIENT_INFO,
        "progressToken",
    }


@QUICK
@given(s.wrong_type_variants({"a": True, "b": None, "c": 1.5, "d": [1], "e": {"f": "g"}}))
def test_wrong_type_variants_of_every_kind(variant: dict[str, Any]) -> None:
    original = {"a": True, "b": None, "c": 1.5, "d": [1], "e": {"f": "g"}}
    assert json.dumps(variant) != json.dumps(original)


@QUICK
@given(s.hostile_messages(st.just({"jsonrpc": "2.0", "id": 1, "method": "x", "params": 5})))
def test_hostile_messages_of_messages_without_params_objects(message: dict[str, Any]) -> None:
    assert isinstance(message, dict)


@pytest.mark.parametrize(
    ("fmt", "pattern"),
    [
        ("email", r"^[^@]+@[^@]+\.example$"),
        ("uri", r"^https://example\.com/"),
        ("date", r"^\d{4}-\d{2}-\d{2}$"),
        ("date-time", r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$"),
    ],
)
@QUICK
@given(data=st.data())
def test_string_formats_are_honoured(fmt: str, pattern: str, data: st.DataObject) -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string", "format": fmt}}}
    content = data.draw(s.content_for_schema({**schema, "required": ["x"]}))
    assert re.match(pattern, content["x"]), content


@QUICK
@given(s.invalid_input_required_results(max_requests=4))
def test_invalid_input_required_results_fail_our_client(result: Any) -> None:
    client = m.ClientConnection(
        m.ClientConfig(capabilities=s.FULL_CAPABILITIES, limits=m.Limits(max_input_requests=4))
    )
    call = client.call("tools/call", {"name": "t"})
    (request,) = client.outgoing()
    client.receive_message({"jsonrpc": "2.0", "id": request.message["id"], "result": result})
    kinds = [type(e).__name__ for e in client.events()]
    assert kinds == ["CallFailed"], kinds
    assert call not in client.in_flight
