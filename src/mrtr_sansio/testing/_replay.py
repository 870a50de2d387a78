"""The replay checker: drives a handler round by round as a client would and checks that
running it again, round after round, is safe.

A flow calls one operation, then answers each embedded request with generated values (form
content that fits the requested schema, accept / decline / cancel, sampled messages, roots
lists) and retries with the sealed ``requestState`` echoed, until the handler completes. Every
round runs again with the same inputs (and once more with the clock and random ids moved) on a
fresh :class:`~mrtr_sansio.ServerConnection`; the properties of :data:`REPLAY_CHECKS` are
checked on each round, and hypothesis shrinks a failure to a short transcript.
"""

from __future__ import annotations

import datetime
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky

from mrtr_sansio import ServerConfig
from mrtr_sansio.protocol import (
    CLIENT_CAPABILITIES,
    CLIENT_INFO,
    LATEST_MODERN_VERSION,
    PROTOCOL_VERSION_KEY,
)

from ._embedded import input_response_for
from ._operations import NAME_FIELD, Operation
from ._replay_report import (
    ReplayReport,
    ReplayRound,
    ReplayViolationError,
    describe_answer,
    describe_question,
    first_difference,
)
from ._replay_run import Outcome, Runner, canonical
from ._values import FULL_CAPABILITIES

__all__ = ["check_replay", "plain_answer"]

#: The checker's clock: round n runs at BASE + n * STEP; the varied run moves it by SHIFT.
_BASE, _STEP, _SHIFT = 1_800_000_000.0, 61.5, 3 * 86400 + 3599.75
#: Rounds in a row that only ask again what was answered before the client gives up: the
#: handler refused those answers (a validation loop), which is not a replay problem.
_PATIENCE = 3
_CLIENT_INFO = {"name": "mrtr-sansio-replay-checker", "version": "1"}


def plain_answer(question: Mapping[str, Any]) -> dict[str, Any]:
    """An unremarkable valid answer to ``question``: accepted form content with every field
    filled in plainly (non-blank strings, values inside their bounds, the first option), a
    sampled sentence, one root. The checker tries it before saying an answer was ignored."""
    params = question.get("params")
    params = params if isinstance(params, Mapping) else {}
    method = question.get("method")
    if method == "sampling/createMessage":
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "A plain sampled answer."},
            "model": "replay-checker",
        }
    if method == "roots/list":
        return {"roots": [{"uri": "file:///workspace", "name": "workspace"}]}
    if params.get("mode") == "url":
        return {"action": "accept"}
    schema = params.get("requestedSchema")
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    props = props if isinstance(props, Mapping) else {}
    return {"action": "accept", "content": {k: _plain_value(v) for k, v in props.items()}}


def _options(schema: Mapping[str, Any]) -> list[Any]:
    if isinstance(schema.get("enum"), list):
        return list(schema["enum"])
    for key in ("oneOf", "anyOf"):
        if isinstance(schema.get(key), list):
            return [o["const"] for o in schema[key] if isinstance(o, Mapping) and "const" in o]
    return []


def _plain_value(schema: Any) -> Any:
    schema = schema if isinstance(schema, Mapping) else {}
    kind = schema.get("type")
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        lo, hi = schema.get("minimum"), schema.get("maximum")
        value = lo if isinstance(lo, (int, float)) else (min(1, hi) if isinstance(hi, int) else 1)
        return int(value) if kind == "integer" else value
    if kind == "array":
        items = schema.get("items")
        options = _options(items) if isinstance(items, Mapping) else []
        return options[:1] if options else ["item"]
    options = _options(schema)
    if options:
        return options[0]
    today = datetime.date(2030, 6, 15)
    formats = {
        "email": "user@example.com",
        "uri": "https://example.com/",
        "date": today.isoformat(),
        "date-time": f"{today.isoformat()}T12:00:00Z",
    }
    text = formats.get(str(schema.get("format")), "plain text answer")
    lo, hi = schema.get("minLength"), schema.get("maxLength")
    if isinstance(lo, int) and len(text) < lo:
        text = text + "x" * (lo - len(text))
    if isinstance(hi, int) and len(text) > hi:
        text = text[: max(hi, 1)]
    return text


def _request(
    op_params: Mapping[str, Any],
    method: str,
    caps: Mapping[str, Any],
    n: int,
    answers: Mapping[str, Any],
    token: str | None,
) -> dict[str, Any]:
    params: dict[str, Any] = dict(op_params)
    params["_meta"] = {
        PROTOCOL_VERSION_KEY: LATEST_MODERN_VERSION,
        CLIENT_CAPABILITIES: dict(caps),
        CLIENT_INFO: _CLIENT_INFO,
    }
    if answers:
        params["inputResponses"] = dict(answers)
    if token is not None:
        params["requestState"] = token
    return {"jsonrpc": "2.0", "id": f"replay-{n}", "method": method, "params": params}


class _Flow:
    """One flow of one operation: the rounds so far, and the checks between them."""

    def __init__(self, runner: Runner, op: Operation, params: Mapping[str, Any]) -> None:
        self.runner = runner
        self.op = op
        self.params = params
        self.rounds: list[ReplayRound] = []
        target = params.get(NAME_FIELD[op.method])
        args = params.get("arguments")
        self.name = f"{op.method} {target}" + (f" {canonical(args)}" if args else "")

    def fail(self, check: str, n: int, key: str | None, detail: str) -> ReplayViolationError:
        return ReplayViolationError(check, self.name, n, key, detail, self.rounds)

    def check_round(
        self, n: int, message: dict[str, Any], out: Outcome, answers: Mapping[str, Any]
    ) -> None:
        """Every property of one round that needs only the round itself."""
        clock = _BASE + n * _STEP
        if out.kind == "exception":
            acts = [k for k, a in answers.items() if a.get("action") in ("decline", "cancel")]
            blamed = acts or list(answers)
            given_ = "; ".join(describe_answer(k, answers[k]) for k in blamed)
            after = f" after the answer{'s' if len(blamed) > 1 else ''} {given_}" if blamed else ""
            what = out.payload if out.refused else f"the handler raised {out.payload}"
            raise self.fail(
                "actions-handled",
                n,
                acts[0] if acts else None,
                f"{what}{after}; the client gets -32603 instead of a result or a clean error",
            )
        again = self.runner.run(message, clock, 0)
        if again.fingerprint() != out.fingerprint():
            raise self.fail("determinism", n, None, _differs("run again unchanged", out, again))
        moved = self.runner.run(message, clock + _SHIFT, 1)
        # Only two runs that both ask can disagree on keys: a flow may well expire in 3 days.
        if out.kind == moved.kind == "ask" and moved.asked() != out.asked():
            raise self.fail(
                "determinism",
                n,
                None,
                _differs(
                    "run again with the clock moved by 3 days and other random ids",
                    out,
                    moved,
                    keys_only=True,
                ),
            )
        if out.kind == "ask" and out.effects:
            keys = ", ".join(map(repr, out.questions)) or "nothing (state only)"
            raise self.fail(
                "effect-before-ask",
                n,
                next(iter(out.questions), None),
                f"the round made the effect {', '.join(out.effects)} and then asks for {keys}; "
                "it runs again when the answers come, and so does the effect",
            )

    def check_follow_up(
        self,
        n: int,
        message: dict[str, Any],
        out: Outcome,
        previous: Outcome,
        answers: Mapping[str, Any],
    ) -> None:
        """The properties that relate a round to the one before it."""
        for key, question in out.questions.items():
            if key in previous.questions:
                continue
            for old_key, old in previous.questions.items():
                if old_key not in out.questions and canonical(old) == canonical(question):
                    raise self.fail(
                        "stable-keys",
                        n,
                        key,
                        f"the question round {n - 1} asked as {old_key!r} is asked again as "
                        f"{key!r}; the answer given under {old_key!r} is lost",
                    )
        clock = _BASE + n * _STEP
        for key in out.questions:
            if key not in answers:
                continue
            without = {k: v for k, v in answers.items() if k != key}
            if not self._same(message, without, clock, out):
                continue
            answer = answers[key]
            if answer.get("action") in ("decline", "cancel"):
                raise self.fail(
                    "actions-handled",
                    n,
                    key,
                    f"{describe_question(key, out.questions[key])} is asked again after the "
                    f"answer {describe_answer(key, answer)}, as if it had not been answered: "
                    "a user who says no is asked forever",
                )
            plain = {**answers, key: plain_answer(previous.questions[key])}
            if self._same(message, plain, clock, out):
                raise self.fail(
                    "reasked-key",
                    n,
                    key,
                    f"{key!r} was answered in round {n - 1} ({describe_answer(key, answer)}) "
                    "and is asked again as if it had not been: neither that answer nor a "
                    f"plain one ({describe_answer(key, plain[key])}) changes the round",
                )

    def _same(
        self, message: dict[str, Any], answers: Mapping[str, Any], clock: float, out: Outcome
    ) -> bool:
        params = {k: v for k, v in message["params"].items() if k != "inputResponses"}
        if answers:
            params["inputResponses"] = dict(answers)
        other = self.runner.run({**message, "params": params}, clock, 0)
        return other.fingerprint() == out.fingerprint()


def _differs(how: str, first: Outcome, second: Outcome, *, keys_only: bool = False) -> str:
    if keys_only or first.kind != second.kind:
        return f"{how}, the round {_what(second)} (the first run {_what(first)})"
    for field in ("questions", "state", "payload", "effects"):
        x, y = getattr(first, field), getattr(second, field)
        if canonical(x) != canonical(y):
            name = {"payload": "the result", "effects": "the effects"}.get(field, f"the {field}")
            return f"{how}, {name} differ: {first_difference(x, y)}"
    return how  # pragma: no cover - fingerprints differ, so some field does


def _what(out: Outcome) -> str:
    if out.kind == "ask":
        return "asks for " + (", ".join(map(repr, out.questions)) or "nothing (state only)")
    return {"result": "completes", "error": "fails", "exception": "raises"}[out.kind]


class _Stats:
    def __init__(self) -> None:
        self.flows = 0
        self.rounds = 0
        self.gave_up = 0
        self.state: dict[int, int] = {}


def _drive(
    data: st.DataObject,
    runner: Runner,
    op: Operation,
    caps: Mapping[str, Any],
    max_rounds: int,
    max_state_bytes: int | None,
    stats: _Stats,
) -> None:
    flow = _Flow(runner, op, op.draw_params(data))
    answers: dict[str, Any] = {}
    token: str | None = None
    previous: Outcome | None = None
    asked: set[str] = set()
    fresh = stale = 0
    for n in range(1, 2 * max_rounds + 2):
        message = _request(flow.params, op.method, caps, n, answers, token)
        out = runner.run(message, _BASE + n * _STEP, 0)
        flow.rounds.append(ReplayRound(n, answers, token is not None, out))
        stats.rounds = max(stats.rounds, n)
        flow.check_round(n, message, out, answers)
        if out.state_bytes is not None:
            stats.state[n] = max(stats.state.get(n, 0), out.state_bytes)
            if max_state_bytes is not None and out.state_bytes > max_state_bytes:
                raise flow.fail(
                    "bounded-state",
                    n,
                    None,
                    f"the state is {out.state_bytes} bytes, over the limit of "
                    f"{max_state_bytes} (largest so far per round: "
                    f"{', '.join(f'{r}: {b}' for r, b in sorted(stats.state.items()))})",
                )
        if previous is not None:
            flow.check_follow_up(n, message, out, previous, answers)
        if out.kind != "ask":
            return
        if not out.questions or not set(out.questions) <= asked:
            fresh, stale = fresh + 1, 0
        else:
            stale += 1
            if stale > _PATIENCE:  # answers refused again and again: the client gives up
                stats.gave_up += 1
                return
        if fresh > max_rounds:
            raise flow.fail(
                "convergence",
                n,
                None,
                f"every question was answered, yet the handler still asks after {n} rounds, "
                f"{fresh} of them new questions or state alone (the cap is {max_rounds})",
            )
        asked.update(out.questions)
        answers = {
            key: data.draw(_answers(canonical(q)), label=f"round {n} answer to {key!r}")
            for key, q in out.questions.items()
        }
        token, previous = out.token, out


@functools.lru_cache(maxsize=256)
def _answers(question: str) -> st.SearchStrategy[dict[str, Any]]:
    """The answers to a question (given as canonical JSON), built once per question."""
    return input_response_for(json.loads(question))


#: Hypothesis' phases without "explain", which re-runs whole flows many times to say which
#: draws did not matter: the transcript says it better, and flows are costly.
PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)


def _default_settings() -> hypothesis_settings:
    return hypothesis_settings(
        max_examples=50,
        phases=PHASES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def check_replay(
    handler: Callable[..., Any],
    operations: Operation | Sequence[Operation],
    *,
    config: ServerConfig | None = None,
    capabilities: Mapping[str, Any] | st.SearchStrategy[Mapping[str, Any]] | None = None,
    max_rounds: int = 8,
    max_state_bytes: int | None = None,
    watch: Sequence[str] = (),
    sealed: bool = True,
    principal: str | None = None,
    settings: hypothesis_settings | None = None,
) -> ReplayReport:
    """Check that ``handler`` is safe to re-run, round after round, on ``operations``.

    ``handler`` has the adapters' signature (``async def handler(request, ctx)``, or a plain
    ``def`` taking a blocking context) and must answer without waiting on an event loop.
    ``config`` is its :class:`~mrtr_sansio.ServerConfig` (its ``request_state`` is replaced:
    the checker seals with a key of its own, or passes string state through with
    ``sealed=False``). ``capabilities`` are declared by the client (default: every kind).
    ``max_rounds`` is the round cap (8, the legacy shim's); ``max_state_bytes`` fails a state
    larger than that; ``watch`` names functions (``package.module:function``) whose calls
    count as effects, like ``ctx.effect``. ``settings`` are hypothesis' (default: 50 flows,
    derandomized). Raises :class:`ReplayViolationError` with the shrunk transcript; returns a
    :class:`ReplayReport` when every property held.
    """
    ops = (operations,) if isinstance(operations, Operation) else tuple(operations)
    if not ops:
        raise ValueError("operations: name at least one tool, prompt or resource")
    if type(max_rounds) is not int or max_rounds < 1:
        raise ValueError(f"max_rounds must be a positive integer, got {max_rounds!r}")
    runner = Runner(handler, config, sealed=sealed, watch=watch, principal=principal)
    if capabilities is None:
        caps: st.SearchStrategy[Mapping[str, Any]] = st.just(FULL_CAPABILITIES)
    elif isinstance(capabilities, st.SearchStrategy):
        caps = capabilities
    else:
        caps = st.just(dict(capabilities))
    stats = _Stats()

    @given(st.data())
    def flows(data: st.DataObject) -> None:
        op = data.draw(st.sampled_from(ops), label="operation")
        stats.flows += 1
        _drive(
            data,
            runner,
            op,
            data.draw(caps, label="capabilities"),
            max_rounds,
            max_state_bytes,
            stats,
        )

    run = hypothesis_settings(settings or _default_settings(), report_multiple_bugs=False)(flows)
    try:
        run()
    except Flaky as exc:  # the handler failed once and not when hypothesis tried again
        found = [e for e in getattr(exc, "exceptions", ()) if isinstance(e, ReplayViolationError)]
        if found:
            raise found[0] from exc
        raise  # pragma: no cover - a flaky failure of hypothesis' own
    names = tuple(f"{op.method} {op.target}" for op in ops)
    states = tuple(sorted(stats.state.items()))
    return ReplayReport(names, stats.flows, stats.rounds, states, stats.gave_up)
