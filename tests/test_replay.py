"""The replay checker: a handler written right passes, and each replay mistake is caught with
the report it prints (the handlers are in ``replay_handlers.py``)."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
import replay_handlers as h
from hypothesis import settings
from hypothesis import strategies as st

import mrtr_sansio as m
from helpers import (
    MODEL_OPERATIONS,
)
from helpers import (
    model_config as sealed_config,
)
from helpers import (
    model_handler as model_test_handler,
)
from mrtr_sansio.adapters import BlockingRequestContext, RequestContext
from mrtr_sansio.testing import (
    REPLAY_CHECKS,
    ReplayViolationError,
    check_replay,
    plain_answer,
    strategies,
    tool,
)
from mrtr_sansio.testing._replay_report import WIDTH, unwrap

BOOK = tool("book_vm", {"size": "small"})
HEAD = '[{check}] tools/call book_vm {{"size":"small"}}, {where}: '


def caught(handler: Any, **options: Any) -> ReplayViolationError:
    with pytest.raises(ReplayViolationError) as info:
        check_replay(handler, BOOK, **options)
    return info.value


def line_of(text: str) -> int:
    """The line of ``replay_handlers.py`` holding ``text`` (for reports naming a line)."""
    lines = Path(h.__file__).read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_a_correct_handler_passes_and_reports_its_state_per_round() -> None:
    report = check_replay(h.good, BOOK)
    assert report.operations == ("tools/call book_vm",)
    assert report.flows > 10
    # name, confirm, done: three rounds, and a name refused (blank) makes a few more.
    assert report.rounds >= 3
    rounds = dict(report.largest_state)
    assert rounds[1] == len('{"asked_at":1800000061.5}')
    assert rounds[2] > rounds[1]  # the name joined the state
    text = unwrap(report.text()).splitlines()
    flows = report.flows
    assert (
        text[0] == f"OK: 1 operation, {flows} flows, no replay problem found (7 properties checked)"
    )
    assert text[2].startswith("  largest state per round: round 1: 25 B, round 2: ")


def test_the_model_servers_handler_passes_too() -> None:
    report = check_replay(
        model_test_handler,
        [op for op in MODEL_OPERATIONS if op.target != "pause"],
        config=sealed_config(),
        settings=settings(max_examples=30, deadline=None, database=None, derandomize=True),
    )
    assert len(report.operations) == len(MODEL_OPERATIONS) - 1


def test_determinism_a_random_id_in_a_question() -> None:
    error = caught(h.random_question)
    assert (error.check, error.round, error.key) == ("determinism", 1, None)
    first = unwrap(str(error)).splitlines()[0]
    pattern = re.escape(HEAD.format(check="determinism", where="round 1")) + (
        r"run again unchanged, the questions differ: at confirm\.params\.message: "
        r"'Create VM \(order [0-9a-f]{8}\)\?' then 'Create VM \(order [0-9a-f]{8}\)\?'"
    )
    assert re.fullmatch(pattern, first), first


def test_determinism_a_key_made_from_the_clock() -> None:
    error = caught(h.clock_key)
    assert unwrap(str(error)) == "\n".join(
        [
            HEAD.format(check="determinism", where="round 1")
            + "run again with the clock moved by 3 days and other random ids, the round asks "
            "for 'confirm-1800262861' (the first run asks for 'confirm-1800000061')",
            f"  rule: {REPLAY_CHECKS['determinism']}",
            "  transcript:",
            "    round 1: answers none",
            "      asks for 'confirm-1800000061' (form 'Create the VM?')",
        ]
    )


def test_convergence_a_new_question_every_round() -> None:
    error = caught(h.endless, max_rounds=3)
    assert max(len(line) for line in str(error).splitlines()) <= WIDTH  # folded
    assert unwrap(str(error)) == "\n".join(
        [
            HEAD.format(check="convergence", where="round 4")
            + "every question was answered, yet the handler still asks after 4 rounds, 4 of "
            "them new questions or state alone (the cap is 3)",
            f"  rule: {REPLAY_CHECKS['convergence']}",
            "  transcript:",
            "    round 1: answers none",
            "      asks for 'q1' (form 'Question 1: anything else?')",
            '      state {"step":1} (10 bytes)',
            '    round 2: answers \'q1\' accept {"name":""}; state echoed',
            "      asks for 'q2' (form 'Question 2: anything else?')",
            '      state {"step":2} (10 bytes)',
            '    round 3: answers \'q2\' accept {"name":""}; state echoed',
            "      asks for 'q3' (form 'Question 3: anything else?')",
            '      state {"step":3} (10 bytes)',
            '    round 4: answers \'q3\' accept {"name":""}; state echoed',
            "      asks for 'q4' (form 'Question 4: anything else?')",
            '      state {"step":4} (10 bytes)',
        ]
    )


def test_convergence_the_default_cap_is_the_legacy_shims() -> None:
    assert caught(h.endless).round == 9  # eight rounds of input, then one too many


def test_convergence_an_answered_key_asked_again() -> None:
    error = caught(h.wrong_key)
    assert unwrap(str(error)) == "\n".join(
        [
            HEAD.format(check="reasked-key", where="round 2, key 'name'")
            + "'name' was answered in round 1 ('name' accept {\"name\":\"\"}) and is asked "
            "again as if it had not been: neither that answer nor a plain one ('name' accept "
            '{"name":"plain text answer"}) changes the round',
            f"  rule: {REPLAY_CHECKS['reasked-key']}",
            "  transcript:",
            "    round 1: answers none",
            "      asks for 'name' (form 'Name the VM')",
            '    round 2: answers \'name\' accept {"name":""}',
            "      asks for 'name' (form 'Name the VM')",
        ]
    )


def test_effects_a_declared_effect_before_the_last_ask() -> None:
    error = caught(h.effect_first)
    assert unwrap(str(error)) == "\n".join(
        [
            HEAD.format(check="effect-before-ask", where="round 1, key 'name'")
            + "the round made the effect create_vm(size=small) and then asks for 'name'; it "
            "runs again when the answers come, and so does the effect",
            f"  rule: {REPLAY_CHECKS['effect-before-ask']}",
            "  transcript:",
            "    round 1: answers none",
            "      effects: create_vm(size=small)",
            "      asks for 'name' (form 'Name the VM')",
        ]
    )


def test_effects_a_watched_function_before_the_last_ask() -> None:
    original = h.send_mail
    check_replay(h.mail_first, BOOK)  # not watched: nothing to see
    del h.OUTBOX[:]
    error = caught(h.mail_first, watch=["replay_handlers:send_mail"])
    assert unwrap(str(error)).splitlines()[0] == (
        HEAD.format(check="effect-before-ask", where="round 1, key 'confirm'")
        + "the round made the effect replay_handlers:send_mail(arg0=ops@example.com) and then "
        "asks for 'confirm'; it runs again when the answers come, and so does the effect"
    )
    assert (
        unwrap(str(error)).splitlines()[4]
        == "      effects: replay_handlers:send_mail(arg0=ops@example.com)"
    )
    assert h.send_mail is original  # put back after each run
    assert h.OUTBOX  # the real function still ran
    assert set(h.OUTBOX) == {"ops@example.com"}


def test_stable_keys_a_key_that_counts_rounds() -> None:
    error = caught(h.round_key)
    assert unwrap(str(error)) == "\n".join(
        [
            HEAD.format(check="stable-keys", where="round 2, key 'name-2'")
            + "the question round 1 asked as 'name-1' is asked again as 'name-2'; the answer "
            "given under 'name-1' is lost",
            f"  rule: {REPLAY_CHECKS['stable-keys']}",
            "  transcript:",
            "    round 1: answers none",
            "      asks for 'name-1' (form 'Name the VM')",
            "      state asked (7 bytes)",
            '    round 2: answers \'name-1\' accept {"name":""}; state echoed',
            "      asks for 'name-2' (form 'Name the VM')",
            "      state asked (7 bytes)",
        ]
    )


def test_bounded_state_at_and_past_the_limit() -> None:
    report = check_replay(h.growing_state, BOOK)
    largest = max(size for _, size in report.largest_state)
    assert [r for r, _ in report.largest_state] == [1, 2, 3]
    check_replay(h.growing_state, BOOK, max_state_bytes=largest)  # at the limit: passes
    error = caught(h.growing_state, max_state_bytes=largest - 1)
    assert (error.check, error.round) == ("bounded-state", 3)
    sizes = dict(report.largest_state)
    assert unwrap(str(error)).splitlines()[0] == HEAD.format(
        check="bounded-state", where="round 3"
    ) + (
        f"the state is {largest} bytes, over the limit of {largest - 1} (largest so far per "
        f"round: 1: {sizes[1]}, 2: {sizes[2]}, 3: {largest})"
    )


def test_actions_an_exception_on_decline() -> None:
    error = caught(h.decline_crash)
    line = line_of('content["ok"]')
    where = f"replay_handlers.py:{line}"
    assert unwrap(str(error)) == "\n".join(
        [
            HEAD.format(check="actions-handled", where="round 2, key 'confirm'")
            + f"the handler raised TypeError: 'NoneType' object is not subscriptable ({where}) "
            "after the answer 'confirm' decline; the client gets -32603 instead of a result "
            "or a clean error",
            f"  rule: {REPLAY_CHECKS['actions-handled']}",
            "  transcript:",
            "    round 1: answers none",
            "      asks for 'confirm' (form 'Create the VM?')",
            "    round 2: answers 'confirm' decline",
            f"      raises TypeError: 'NoneType' object is not subscriptable ({where})",
        ]
    )


def test_actions_a_declined_question_asked_again() -> None:
    error = caught(h.decline_again)
    assert unwrap(str(error)).splitlines()[0] == HEAD.format(
        check="actions-handled", where="round 2, key 'confirm'"
    ) + (
        "'confirm' (form 'Create the VM?') is asked again after the answer 'confirm' decline, "
        "as if it had not been answered: a user who says no is asked forever"
    )


def test_every_check_has_a_handler_that_breaks_it() -> None:
    found = {
        caught(handler, **options).check
        for handler, options in [
            (h.random_question, {}),
            (h.endless, {"max_rounds": 2}),
            (h.wrong_key, {}),
            (h.effect_first, {}),
            (h.round_key, {}),
            (h.growing_state, {"max_state_bytes": 100}),
            (h.decline_crash, {}),
        ]
    }
    assert found == set(REPLAY_CHECKS)


def test_an_answer_the_connection_refuses_is_reported() -> None:
    # Unsealed, the state must be a string: a dict is refused by the server connection.
    error = caught(h.good, sealed=False)
    assert error.check == "actions-handled"
    # (the connection's own words come between: not this test's to pin)
    assert error.detail.startswith("the server connection refused the answer: request_state")
    assert error.detail.endswith("; the client gets -32603 instead of a result or a clean error")


def blocking_good(request: m.RequestReceived, ctx: BlockingRequestContext) -> Any:
    """A plain-function handler: the blocking context, with sleep and effects."""
    ctx.sleep(1.0)
    if request.input_responses.elicitation_action("confirm") is None:
        return m.InputRequiredResult({"confirm": h.CONFIRM})
    ctx.effect("create_vm")
    return h.done("ok")


def blocking_effect_first(request: m.RequestReceived, ctx: BlockingRequestContext) -> Any:
    ctx.effect("create_vm")
    return blocking_good(request, ctx)


def test_blocking_handlers_are_checked_too() -> None:
    assert check_replay(blocking_good, BOOK).rounds == 2
    assert caught(blocking_effect_first).check == "effect-before-ask"


async def sleepy(request: m.RequestReceived, ctx: RequestContext) -> Any:
    await ctx.sleep(5.0)  # time does not pass under the checker
    return h.done("slept")


def test_sleeping_handlers_and_plain_operations_complete_at_once() -> None:
    report = check_replay(sleepy, [BOOK, tool("other")])
    assert (report.rounds, report.largest_state) == (1, ())


def test_capabilities_restrict_what_the_handler_may_ask() -> None:
    # Without elicitation the connection answers -32021: a clean error, no problem.
    assert check_replay(h.good, BOOK, capabilities={}).rounds == 1
    varied = st.sampled_from([{}, strategies.FULL_CAPABILITIES])
    assert check_replay(h.good, BOOK, capabilities=varied).rounds >= 3


def test_arguments_are_validated() -> None:
    with pytest.raises(ValueError, match="operations"):
        check_replay(h.good, [])
    with pytest.raises(ValueError, match="max_rounds"):
        check_replay(h.good, BOOK, max_rounds=0)
    with pytest.raises(ValueError, match=r"expected package\.module:name"):
        check_replay(h.good, BOOK, watch=["send_mail"])
    with pytest.raises(ValueError, match="not found"):
        check_replay(h.good, BOOK, watch=["replay_handlers:nobody"])


calls: list[int] = []


async def fails_once(request: m.RequestReceived, ctx: RequestContext) -> Any:
    calls.append(1)
    if len(calls) == 1:
        raise RuntimeError("only the first time")
    return h.done("fine")


def test_a_failure_that_does_not_happen_again_is_still_reported() -> None:
    del calls[:]
    error = caught(fails_once)
    assert error.check == "actions-handled"
    assert "RuntimeError: only the first time" in error.detail


# --- the context's clock, randomness and effects when served ---------------------------------


def served_context() -> RequestContext:
    config = m.ServerConfig(clock=lambda: 42.5, token_hex=lambda n: "ab" * n)
    conn = m.ServerConnection(config)
    request = m.RequestReceived("r1", "tools/call", {"name": "x"})

    async def no_sleep(_s: float) -> None:
        return None

    return RequestContext(conn, request, lambda: None, no_sleep)


def test_served_context_reads_the_servers_clock_and_randomness() -> None:
    ctx = served_context()
    assert ctx.now() == 42.5
    assert ctx.token_hex(3) == "ababab"
    assert ctx.token_hex() == "ab" * 16


def test_served_context_logs_effects(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="mrtr_sansio.adapters"):
        served_context().effect("create_vm", name="web-1")
    assert "effect create_vm {'name': 'web-1'} for r1" in caplog.text


# --- the plain answer tried before an answer is called ignored --------------------------------


def test_plain_answers_fit_their_questions() -> None:
    form = {
        "type": "object",
        "properties": {
            "long": {"type": "string", "minLength": 30},
            "short": {"type": "string", "maxLength": 3},
            "when": {"type": "string", "format": "date"},
            "at": {"type": "string", "format": "date-time"},
            "mail": {"type": "string", "format": "email"},
            "site": {"type": "string", "format": "uri"},
            "pick": {"type": "string", "oneOf": [{"const": "b", "title": "B"}]},
            "n": {"type": "integer", "minimum": 5},
            "below": {"type": "integer", "maximum": -3},
            "x": {"type": "number"},
            "flag": {"type": "boolean"},
            "many": {"type": "array", "items": {"type": "string", "enum": ["p", "q"]}},
            "free": {"type": "array"},
        },
    }
    # Built by hand: a free-form array is no valid form for elicit_form, but a peer may send one.
    answer = plain_answer(
        {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": form}}
    )
    content = answer["content"]
    assert answer["action"] == "accept"
    assert (len(content["long"]), len(content["short"])) == (30, 3)
    assert (content["when"], content["at"]) == ("2030-06-15", "2030-06-15T12:00:00Z")
    assert (content["mail"], content["site"]) == ("user@example.com", "https://example.com/")
    assert (content["pick"], content["n"], content["below"], content["x"]) == ("b", 5, -3, 1)
    assert (content["flag"], content["many"], content["free"]) == (True, ["p"], ["item"])
    assert plain_answer(m.elicit_url("Open", "https://example.com/x").to_wire()) == {
        "action": "accept"
    }
    assert plain_answer(m.sample("Hi?", 10).to_wire())["content"]["type"] == "text"
    assert plain_answer(m.list_roots().to_wire())["roots"][0]["uri"] == "file:///workspace"


# --- the other answers a round may give, and the report's words for them --------------------


async def random_key(request: m.RequestReceived, ctx: RequestContext) -> Any:
    key = f"confirm-{ctx.token_hex(4)}"
    if request.input_responses.accepted_content(key) is None:
        return m.InputRequiredResult({key: h.CONFIRM})
    return h.done("ok")


def test_determinism_a_key_made_from_the_contexts_randomness() -> None:
    error = caught(random_key)
    assert error.check == "determinism"
    assert "with the clock moved by 3 days and other random ids" in error.detail


async def wire_form(request: m.RequestReceived, ctx: RequestContext) -> Any:
    """Asks with a plain input_required mapping; an unknown tool is a clean error."""
    if request.name != "book_vm":
        return request.unknown()
    roots = request.input_responses.root_uris("where")
    if roots is None:
        return {
            "resultType": "input_required",
            "inputRequests": {"where": m.list_roots().to_wire()},
            "requestState": "asked",
        }
    return h.done(f"{len(roots)} roots")


def test_mapping_answers_and_clean_errors_pass() -> None:
    report = check_replay(wire_form, [BOOK, tool("other")])
    assert report.rounds == 2
    assert dict(report.largest_state) == {1: len('"asked"')}


def test_a_state_the_server_refuses_ends_the_flow_cleanly() -> None:
    # Past Limits.max_request_state_bytes the connection answers the retry with an error.
    config = m.ServerConfig(limits=m.Limits(max_request_state_bytes=300))
    report = check_replay(h.growing_state, BOOK, config=config)
    assert report.rounds == 2


def test_a_plain_function_returning_a_coroutine_is_awaited() -> None:
    def plain(request: m.RequestReceived, ctx: Any) -> Any:
        return h.good(request, ctx)  # a coroutine, from a plain def

    assert check_replay(plain, BOOK).rounds >= 3


def test_rounds_read_as_a_transcript() -> None:
    from mrtr_sansio.testing import ReplayRound
    from mrtr_sansio.testing._replay_run import Outcome

    questions = {
        "pitch": m.sample("Pitch it", 20).to_wire(),
        "where": m.list_roots().to_wire(),
        "pay": m.elicit_url("Pay here", "https://example.com/pay").to_wire(),
    }
    answers = {
        "pitch": {"role": "assistant", "content": {"type": "text", "text": "Go"}, "model": "x"},
        "where": {"roots": [{"uri": "file:///a"}, {"uri": "file:///b"}]},
        "pay": {"action": "accept"},
    }
    asking = ReplayRound(2, answers, True, Outcome("ask", questions=questions))
    assert asking.lines() == [
        "round 2: answers 'pitch' sampled 'Go'; 'where' roots [file:///a, file:///b]; "
        "'pay' accept; state echoed",
        "  asks for 'pitch' (sampling 'Pitch it'), 'where' (roots), 'pay' (url 'Pay here')",
    ]
    assert ReplayRound(1, {}, False, Outcome("ask")).lines()[1] == (
        "  asks for nothing (state only)"
    )
    failing = Outcome("error", payload={"code": -32602, "message": "Bad"})
    assert ReplayRound(1, {}, False, failing).lines()[1] == "  error -32602 Bad"


def test_first_difference_names_the_path() -> None:
    from mrtr_sansio.testing._replay_report import first_difference

    assert first_difference({"a": 1}, {"a": 1, "b": 2}) == "b appears (2)"
    assert first_difference({"a": 1, "b": 2}, {"a": 1}) == "b disappears (was 2)"
    assert first_difference({"a": [1, "x"]}, {"a": [1, "y"]}) == "at a[1]: 'x' then 'y'"
    assert first_difference([1], [1, 2]) == "[1] then [1,2]"


async def expiring(request: m.RequestReceived, ctx: RequestContext) -> Any:
    """Asks for a name, then a confirmation; a retry a day after the first round is refused."""
    state = request.request_state if isinstance(request.request_state, dict) else None
    if state is None:
        return m.InputRequiredResult({"name": h.NAME}, {"asked_at": ctx.now()})
    if ctx.now() - state["asked_at"] > 86400:
        return m.JsonRpcError.invalid_params("this booking expired")
    if request.input_responses.elicitation_action("confirm") is None:
        return m.InputRequiredResult({"confirm": h.CONFIRM}, state)
    return h.done("ok")


def test_a_flow_may_expire_when_the_clock_moves() -> None:
    # Round 2 asks; moved three days on, it fails instead: not a determinism problem.
    assert check_replay(expiring, BOOK).rounds == 3
