"""What the replay checker reports: the properties, a failure with its shrunk transcript, and
the summary of a clean run (see :mod:`._replay`)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ._replay_run import Outcome, canonical, error_text

__all__ = [
    "REPLAY_CHECKS",
    "ReplayReport",
    "ReplayRound",
    "ReplayViolationError",
    "describe_answer",
    "describe_question",
    "first_difference",
    "plural",
    "unwrap",
    "wrap",
]

#: Every property the replay checker checks, with the rule it enforces.
REPLAY_CHECKS: dict[str, str] = {
    "determinism": "the same request, answers and state give the same questions, state, "
    "result and effects when the round runs again; with the clock and random ids varied, a "
    "round that asks asks under the same keys",
    "convergence": "answered in full, the handler completes within the round cap: a round "
    "that only asks questions never asked before (or returns state alone) counts against it",
    "reasked-key": "an answered question is not asked again as though no answer had come "
    "(neither the answer given nor a plain valid one changes what the round does)",
    "effect-before-ask": "no effect (ctx.effect or a watched function) in a round that then "
    "asks for input: the round runs again when the answers come, and so would the effect",
    "stable-keys": "a question keeps its key from round to round: asked again under a new "
    "key, its answer under the old one is lost",
    "bounded-state": "the state a round writes stays within the limit set (max_state_bytes, "
    "as compact JSON)",
    "actions-handled": "every answer a client may give (accept with content that fits the "
    "form, decline, cancel, a sampled message, a roots list) ends in a question, a result or "
    "a clean JSON-RPC error: never an exception, never the declined question again",
}


#: Report lines are folded to this width (terminals, and code blocks in the docs).
WIDTH = 96


def wrap(line: str) -> str:
    """``line`` folded to :data:`WIDTH`, continued 4 spaces deeper than it starts."""
    indent = " " * (len(line) - len(line.lstrip(" ")))
    return textwrap.fill(
        line,
        WIDTH,
        subsequent_indent=indent + "    ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def unwrap(text: str) -> str:
    """A report with each folded line joined again (what :func:`wrap` folded)."""
    out: list[str] = []
    depth = -1
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if out and indent == depth + 4:
            out[-1] += " " + line.lstrip(" ")
        else:
            out.append(line)
            depth = indent
    return "\n".join(out)


def plural(n: int, what: str) -> str:
    """``1 flow``, ``2 flows``."""
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else canonical(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_question(key: str, question: Mapping[str, Any]) -> str:
    """``'dates' (form "Dates for Lisbon?")``: a question in a few words."""
    params = question.get("params")
    params = params if isinstance(params, Mapping) else {}
    method = question.get("method")
    if method == "elicitation/create":
        mode = params.get("mode", "form")
        return f"{key!r} ({mode} {_short(params.get('message', ''), 50)!r})"
    if method == "sampling/createMessage":
        messages = params.get("messages") or [{}]
        content = messages[0].get("content") if isinstance(messages[0], Mapping) else None
        text = content.get("text", "") if isinstance(content, Mapping) else ""
        return f"{key!r} (sampling {_short(text, 50)!r})"
    return f"{key!r} (roots)"


def describe_answer(key: str, answer: Mapping[str, Any]) -> str:
    """``'dates' accept {"check_in":...}``: an answer in a few words."""
    if "action" in answer:
        content = answer.get("content")
        shown = "" if content is None else f" {_short(content, 50)}"
        return f"{key!r} {answer['action']}{shown}"
    if "roots" in answer:
        uris = [r.get("uri") for r in answer["roots"] if isinstance(r, Mapping)]
        return f"{key!r} roots [{', '.join(map(str, uris))}]"
    content = answer.get("content")
    text = content.get("text", "") if isinstance(content, Mapping) else ""
    return f"{key!r} sampled {_short(text, 40)!r}"


def first_difference(a: Any, b: Any, path: str = "") -> str:
    """Where two JSON-like values first differ: ``at params.message: 'x' then 'y'``."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in sorted(set(a) | set(b), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in a:
                return f"{sub} appears ({_short(b[key], 40)})"
            if key not in b:
                return f"{sub} disappears (was {_short(a[key], 40)})"
            if canonical(a[key]) != canonical(b[key]):
                return first_difference(a[key], b[key], sub)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if canonical(x) != canonical(y):
                return first_difference(x, y, f"{path}[{i}]")
    where = f"at {path}: " if path else ""
    return f"{where}{_shown(a)} then {_shown(b)}"


def _shown(value: Any) -> str:
    return repr(_short(value, 50)) if isinstance(value, str) else _short(value, 50)


@attrs.frozen
class ReplayRound:
    """One round of a flow: what the client sent and what the handler did with it."""

    number: int
    answers: Mapping[str, Any]
    state_echoed: bool
    outcome: Outcome

    def lines(self) -> list[str]:
        """The round as transcript lines."""
        sent = "; ".join(describe_answer(k, v) for k, v in self.answers.items()) or "none"
        head = f"round {self.number}: answers {sent}"
        out = [head + ("; state echoed" if self.state_echoed else "")]
        o = self.outcome
        if o.effects:
            out.append(f"  effects: {', '.join(o.effects)}")
        if o.kind == "ask":
            asks = ", ".join(describe_question(k, q) for k, q in o.questions.items())
            out.append(f"  asks for {asks}" if asks else "  asks for nothing (state only)")
            if o.state_bytes is not None:
                out.append(f"  state {_short(o.state, 50)} ({o.state_bytes} bytes)")
        elif o.kind == "result":
            out.append(f"  completes: {_short(o.payload, 70)}")
        elif o.kind == "error":
            out.append(f"  error {error_text(o.payload)}")
        else:
            out.append(f"  raises {o.payload}")
        return out


class ReplayViolationError(AssertionError):
    """A handler broke the replay property ``check`` (a key of :data:`REPLAY_CHECKS`) in
    ``round`` of ``operation``, about ``key`` when one question is to blame; ``transcript``
    is the flow up to that round, as hypothesis shrank it."""

    def __init__(
        self,
        check: str,
        operation: str,
        round: int,
        key: str | None,
        detail: str,
        transcript: Sequence[ReplayRound],
    ) -> None:
        self.check = check
        self.operation = operation
        self.round = round
        self.key = key
        self.detail = detail
        self.transcript = tuple(transcript)
        where = f"round {round}" + (f", key {key!r}" if key is not None else "")
        lines = [
            f"[{check}] {operation}, {where}: {detail}",
            f"  rule: {REPLAY_CHECKS[check]}",
            "  transcript:",
        ]
        for entry in self.transcript:
            lines.extend(f"    {line}" for line in entry.lines())
        super().__init__("\n".join(wrap(line) for line in lines))


@attrs.frozen
class ReplayReport:
    """A clean run of the checker: what it drove, and the largest state seen per round."""

    operations: tuple[str, ...]
    #: Flows driven (hypothesis examples, fewer when the answers run out of variety).
    flows: int
    #: The most rounds one flow took.
    rounds: int
    #: (round, largest state in bytes) for each round that wrote a state.
    largest_state: tuple[tuple[int, int], ...]
    #: Flows the checker's client ended because the handler kept asking again what had been
    #: answered: it refused those answers (a validation loop), which is no replay problem.
    gave_up: int = 0

    def text(self) -> str:
        """The report as the ``mrtr-check replay`` command prints it."""
        states = ", ".join(f"round {r}: {n} B" for r, n in self.largest_state) or "none"
        lines = [
            f"OK: {plural(len(self.operations), 'operation')}, "
            f"{plural(self.flows, 'flow')}, no replay problem found "
            f"({len(REPLAY_CHECKS)} properties checked)",
            f"  longest flow: {self.rounds} rounds",
            f"  largest state per round: {states}",
            f"  flows ended with answers refused again and again: {self.gave_up}",
        ]
        return "\n".join(wrap(line) for line in lines)
