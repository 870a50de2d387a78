"""ServerModel: it passes a correct server and finds each seeded bug, naming the broken rule.

Every run is derandomized (the same examples on every machine), so these tests are
deterministic; the seeded-bug runs stop at the first failure hypothesis reports.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

import mrtr_sansio as m
from helpers import (
    MODEL_KEYS,
    MODEL_OPERATIONS,
    accepts_tampered_state,
    check_message,
    correct_server,
    errors_on_missing_answer,
    input_required_on_list,
    model_config,
    model_handler,
    no_result_type,
    undeclared_elicitation,
)
from mrtr_sansio.testing import (
    CHECKS,
    ModelConfig,
    Operation,
    Server,
    ServerModel,
    SpecViolationError,
    check_server,
    in_process_server,
    tool,
)

#: ``MRTR_MODEL_EXAMPLES=<n>``: run the correct-server check with ``n`` random examples (the
#: long profile, ``fuzz/run.py --model n``).
LONG_MODEL = int(os.environ.get("MRTR_MODEL_EXAMPLES", "0"))


def fast(
    examples: int = 20, steps: int = 20, *, shrink: bool = False, derandomize: bool = True
) -> settings:
    """Deterministic settings for a model run in the normal test suite."""
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        derandomize=derandomize,
        database=None,
        deadline=None,
        phases=phases,
        report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


def schema_valid(response: Mapping[str, Any], method: str) -> None:
    check_message(response, m.Era.MODERN, method=method)


def violation(server: Server, *, examples: int = 80, **options: Any) -> str:
    """Run the model against ``server`` and return the check it reports."""
    options.setdefault("operations", MODEL_OPERATIONS)
    with pytest.raises(SpecViolationError) as caught:
        check_server(server, settings=fast(examples), **options)
    assert caught.value.check in CHECKS
    return caught.value.check


# --- the correct server --------------------------------------------------------------------


def test_correct_server_passes_every_check() -> None:
    bound = ServerModel.against(
        correct_server(),
        ModelConfig(MODEL_OPERATIONS, validate=schema_valid, reject_foreign_state=True),
    )
    runs: list[int] = []

    class Counted(bound):  # type: ignore[valid-type,misc]
        def teardown(self) -> None:
            runs.append(1)

    examples = LONG_MODEL or 25
    run_state_machine_as_test(
        Counted, settings=fast(examples, shrink=bool(LONG_MODEL), derandomize=not LONG_MODEL)
    )
    print(f"ServerModel: {len(runs)} passing examples")  # read by fuzz/run.py
    assert len(runs) >= examples


def test_model_drives_every_rule_against_the_correct_server() -> None:
    """The run above is not vacuous: rounds complete, states are tampered with, answers
    withheld and invalid answers refused, on every operation."""
    seen: dict[str, int] = {}
    inner = correct_server()

    def server(request: dict[str, Any]) -> Mapping[str, Any] | None:
        response = inner(request)
        params = request["params"]
        retry = "inputResponses" in params or "requestState" in params
        assert response is not None
        if "error" in response:
            kind = f"error {response['error']['code']}"
        else:
            kind = response["result"]["resultType"]
        key = f"{request['method']} {'retry' if retry else 'first'} {kind}"
        seen[key] = seen.get(key, 0) + 1
        return response

    check_server(
        server, ModelConfig(MODEL_OPERATIONS, reject_foreign_state=True), settings=fast(15)
    )
    for expected in [
        "tools/call first input_required",
        "tools/call retry complete",
        "tools/call retry input_required",
        "tools/call retry error -32602",  # tampered or foreign state, non-object answers
        "tools/call first error -32021",  # capabilities the tool needs were not declared
        "prompts/get retry complete",
        "resources/read retry complete",
        "tools/list first complete",
    ]:
        assert seen.get(expected, 0) > 0, (expected, sorted(seen.items()))


# --- the seeded bugs -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "check"),
    [
        (no_result_type, "result-type"),
        (input_required_on_list, "input-required-methods"),
        (accepts_tampered_state, "tampered-state"),
        (undeclared_elicitation, "capabilities"),
        (errors_on_missing_answer, "missing-answers"),
    ],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_seeded_bug_is_found(make: Callable[[], Server], check: str) -> None:
    assert violation(make()) == check


def test_failures_are_shrunk_to_a_small_exchange() -> None:
    with pytest.raises(SpecViolationError) as caught:
        check_server(
            no_result_type(), ModelConfig(MODEL_OPERATIONS), settings=fast(20, shrink=True)
        )
    error = caught.value
    assert error.check == "result-type"
    assert error.request is not None
    assert error.response is not None
    assert "resultType" not in error.response["result"]
    assert "[result-type]" in str(error)
    assert CHECKS["result-type"] in str(error)


# --- the configurable rules ------------------------------------------------------------------


def _wrapped(change: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]) -> Server:
    inner = correct_server()

    def server(request: dict[str, Any]) -> Mapping[str, Any] | None:
        response = inner(request)
        assert response is not None
        return change(request, response)

    return server


def _error(request: dict[str, Any], code: int = -32602) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request["id"], "error": {"code": code, "message": "no"}}


def test_mrtr_operation_must_ask_when_configured_so() -> None:
    ops = (tool("echo", {"text": "hi"}, mrtr=True),)
    assert violation(correct_server(), operations=ops) == "mrtr-operation"


def test_non_mrtr_operation_must_never_ask() -> None:
    ops = (tool("greet", mrtr=False),)
    assert violation(correct_server(), operations=ops) == "mrtr-operation"


def test_unknown_meta_keys_must_not_change_the_outcome() -> None:
    def strict(request: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
        unknown = set(request["params"]["_meta"]) - {
            m.protocol.PROTOCOL_VERSION_KEY,
            m.protocol.CLIENT_CAPABILITIES,
        }
        return _error(request) if unknown - {m.protocol.CLIENT_INFO} else response

    assert violation(_wrapped(strict)) == "unknown-keys"
    check_server(
        _wrapped(strict), settings=fast(8), operations=MODEL_OPERATIONS, ignore_unknown_keys=False
    )


def test_unknown_input_response_keys_must_be_ignored() -> None:
    known = {"user_name", "date", "confirm", "capital", "client_roots", "who", "think"}
    known |= {"where", "login", "user_context"}

    def strict(request: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
        answers = request["params"].get("inputResponses") or {}
        return _error(request) if set(answers) - known - {"wrong_key"} else response

    assert violation(_wrapped(strict)) == "unknown-keys"


def test_valid_answers_must_be_accepted_unless_configured() -> None:
    def refuse_sampling(request: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
        answers = request["params"].get("inputResponses") or {}
        return _error(request, -32603) if "capital" in answers else response

    ops = (tool("capital", mrtr=True),)
    assert violation(_wrapped(refuse_sampling), operations=ops) == "answers-accepted"
    check_server(
        _wrapped(refuse_sampling),
        settings=fast(8),
        operations=ops,
        accept_valid_answers=False,
        reject_invalid_answers=False,
    )


def test_invalid_answers_must_not_complete() -> None:
    def lax(request: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
        if request["params"].get("inputResponses"):
            result = {"resultType": "complete", "content": []}
            return {"jsonrpc": "2.0", "id": request["id"], "result": result}
        return response

    ops = (tool("capital", mrtr=True),)
    assert violation(_wrapped(lax), operations=ops) == "invalid-answers"


class _UnboundState:
    """Seals and verifies, but binds every state to the same request: any operation takes it."""

    def __init__(self) -> None:
        self._inner = m.sealing.RequestStateSecurity(MODEL_KEYS)
        self._anything = m.sealing.StateBinding("tools/call", None, None, None)

    def seal(self, state: Any, binding: m.sealing.StateBinding, round: int, now: float) -> str:
        return self._inner.seal(state, self._anything, round, now)

    def unseal(
        self, token: str, binding: m.sealing.StateBinding, now: float
    ) -> m.sealing.OpenedState:
        return self._inner.unseal(token, self._anything, now)


def test_foreign_state_is_found_when_binding_is_required() -> None:
    server = in_process_server(model_handler, m.ServerConfig(request_state=_UnboundState()))
    assert violation(server, reject_foreign_state=True) == "foreign-state"
    check_server(server, settings=fast(8), operations=MODEL_OPERATIONS)


def test_replayed_state_is_found_when_single_use_is_required() -> None:
    assert violation(correct_server(), single_use_state=True) == "replayed-state"


def test_single_use_server_passes_when_declared_single_use() -> None:
    server = in_process_server(model_handler, model_config(single_use=True), principal="alice")
    check_server(server, settings=fast(10), operations=MODEL_OPERATIONS, single_use_state=True)


def test_tampering_is_not_checked_when_not_required() -> None:
    check_server(
        accepts_tampered_state(),
        settings=fast(8),
        operations=MODEL_OPERATIONS,
        reject_tampered_state=False,
    )


def test_missing_answers_may_be_errors_when_configured() -> None:
    check_server(
        errors_on_missing_answer(),
        settings=fast(8),
        operations=MODEL_OPERATIONS,
        reask_missing=False,
    )


# --- plumbing --------------------------------------------------------------------------------


def test_unbound_model_refuses_to_run() -> None:
    with pytest.raises(TypeError, match="bind the model"):
        ServerModel()


def test_against_merges_options_into_a_config() -> None:
    base = ModelConfig(MODEL_OPERATIONS)
    bound = ServerModel.against(correct_server(), base, max_rounds=3)
    assert bound.config.max_rounds == 3
    assert bound.config.operations == MODEL_OPERATIONS
    assert ServerModel.against(correct_server(), base).config is base
    assert issubclass(bound, ServerModel)


def test_operations_are_validated() -> None:
    with pytest.raises(ValueError, match="method"):
        Operation("tools/list", "x")
    with pytest.raises(ValueError, match="at least one"):
        ModelConfig(())


def test_arguments_may_be_drawn_from_a_strategy() -> None:
    seen: list[Any] = []
    inner = correct_server()

    def server(request: dict[str, Any]) -> Mapping[str, Any] | None:
        seen.append(request["params"].get("arguments"))
        return inner(request)

    args = st.fixed_dictionaries({"text": st.sampled_from(["a", "b"])})
    ops = (tool("echo", args, mrtr=False), m_resource())
    check_server(server, settings=fast(10), operations=ops, other_methods=())
    assert {"text": "a"} in seen or {"text": "b"} in seen
    assert None in seen  # resources/read carries no arguments


def m_resource() -> Operation:
    from mrtr_sansio.testing import resource

    return resource("file:///secret.txt")


def test_capabilities_strategy_can_be_fixed() -> None:
    declared: list[Any] = []
    inner = correct_server()

    def server(request: dict[str, Any]) -> Mapping[str, Any] | None:
        declared.append(request["params"]["_meta"][m.protocol.CLIENT_CAPABILITIES])
        return inner(request)

    check_server(
        server, settings=fast(5), operations=MODEL_OPERATIONS, capabilities=st.just({"roots": {}})
    )
    assert declared
    assert all(caps == {"roots": {}} for caps in declared)


def test_model_config_defaults_follow_the_spec_and_the_suite() -> None:
    cfg = ModelConfig(MODEL_OPERATIONS)
    assert cfg.reject_tampered_state
    assert cfg.reask_missing
    assert cfg.reject_invalid_answers
    assert cfg.ignore_unknown_keys
    assert cfg.accept_valid_answers
    assert not cfg.reject_foreign_state
    assert not cfg.single_use_state
    assert cfg.protocol_version == "2026-07-28"
    assert "tools/list" in cfg.other_methods


def test_config_helper_is_sealed() -> None:
    assert isinstance(model_config().request_state, m.sealing.RequestStateSecurity)
    assert model_config(sealed=False).request_state is m.UNSEALED


def test_decoy_keys_never_collide_with_requested_ones() -> None:
    """A server whose key is the model's decoy name still gets a genuinely unknown key."""
    seen: list[set[str]] = []

    def ask(request: m.RequestReceived, ctx: Any) -> Any:
        answers = request.input_responses
        seen.append(set(answers))
        if answers.accepted_content("wrong_key") is None:
            schema = {"type": "object", "properties": {}}
            return m.InputRequiredResult({"wrong_key": m.elicit_form("?", schema)})
        return {"content": []}

    server = in_process_server(ask)
    check_server(server, settings=fast(10), operations=(tool("t", mrtr=True),), client_info=None)
    assert any("wrong_key_" in keys for keys in seen)
