"""Handlers for the replay checker's guide and tests: one written right, and one for each
replay mistake (``docs/replay.md`` shows what ``mrtr-check replay`` says about each;
``examples/testing/replay_mistakes.py`` prints it).

Every handler serves one tool, ``book_vm`` (arguments ``{"size": ...}``): it asks the user to
confirm, then "creates a VM" (an effect) and completes.
"""

from __future__ import annotations

import uuid
from typing import Any

import mrtr_sansio as m
from mrtr_sansio.adapters import HandlerResult, RequestContext

OK_FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
CONFIRM = m.elicit_form("Create the VM?", OK_FORM)
NAME = m.elicit_form("Name the VM", NAME_FORM)
#: What the watched-function test sees: every mail "sent".
OUTBOX: list[str] = []


def done(text: str) -> dict[str, Any]:
    """A tool result with one text block."""
    return {"content": [{"type": "text", "text": text}]}


def send_mail(to: str) -> None:
    """A side effect the handler does not declare; the checker is told to watch it."""
    OUTBOX.append(to)


def _answered_name(request: m.RequestReceived, key: str = "name") -> str | None:
    content = request.input_responses.accepted_content(key)
    name = content.get("name") if content is not None else None
    return name if isinstance(name, str) and name.strip() else None


# --8<-- [start:good]
async def good(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
    """Asks for a name, then for confirmation; creates the VM only once both are in."""
    if request.input_responses.elicitation_action("name") in ("decline", "cancel"):
        return done("No name, no VM.")
    if request.input_responses.elicitation_action("confirm") in ("decline", "cancel"):
        return done("Not created.")
    state = request.request_state if isinstance(request.request_state, dict) else {}
    # The time is read once, in the first round, and travels in the (sealed) state.
    trip = {"asked_at": state.get("asked_at", ctx.now())}
    name = state.get("name") or _answered_name(request)
    if name is None:
        return m.InputRequiredResult({"name": NAME}, trip)
    confirm = request.input_responses.accepted_content("confirm")
    if confirm is None:
        return m.InputRequiredResult({"confirm": CONFIRM}, {**trip, "name": name})
    if confirm.get("ok") is not True:
        return done("Not created.")
    ctx.effect("create_vm", name=name, size=request.arguments.get("size"))
    return done(f"Created {name}.")


# --8<-- [end:good]


# --8<-- [start:random_question]
async def random_question(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
    """A fresh order number in the question: every run of the round asks something else."""
    if request.input_responses.accepted_content("confirm") is None:
        ask = m.elicit_form(f"Create VM (order {uuid.uuid4().hex[:8]})?", OK_FORM)
        return m.InputRequiredResult({"confirm": ask})
    return done("Created.")


# --8<-- [end:random_question]


# --8<-- [start:clock_key]
async def clock_key(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
    """The key is made from the clock: the answer comes back under a key no longer asked."""
    key = f"confirm-{int(ctx.now())}"
    if request.input_responses.accepted_content(key) is None:
        return m.InputRequiredResult({key: CONFIRM})
    return done("Created.")


# --8<-- [end:clock_key]


# --8<-- [start:endless]
async def endless(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
    """Always one more question: the flow never ends."""
    step = request.request_state.get("step", 0) if isinstance(request.request_state, dict) else 0
    ask = m.elicit_form(f"Question {step + 1}: anything else?", NAME_FORM)
    return m.InputRequiredResult({f"q{step + 1}": ask}, {"step": step + 1})


# --8<-- [end:endless]


# --8<-- [start:wrong_key]
async def wrong_key(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
    """Asks under ``name`` and reads ``vm_name``: the answer is never seen."""
    if request.input_responses.elicitation_action("name") in ("decline", "cancel"):
        return done("No VM.")
    name = _answered_name(request, "vm_name")
    if name is None:
        return m.InputRequiredResult({"name": NAME})
    return done(f"Created {name}.")


# --8<-- [end:wrong_key]


# --8<-- [start:effect_first]
async def effect_first(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
    """Creates the VM, then asks for its name: every round creates another VM."""
    ctx.effect("create_vm", size=request.arguments.get("size"))
    if request.input_responses.elicitation_action("name") in ("decline", "cancel"):
        return done("Created, unnamed.")
    name = _answered_name(request)
    if name is None:
        return m.InputRequiredResult({"name": NAME})
    return done(f"Created {name}.")


# --8<-- [end:effect_first]


async def mail_first(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
    """Sends a mail (an undeclared effect, seen by watching ``send_mail``), then asks."""
    send_mail("ops@example.com")
    if request.input_responses.elicitation_action("confirm") is None:
        return m.InputRequiredResult({"confirm": CONFIRM})
    return done("Done.")


# --8<-- [start:round_key]
async def round_key(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
    """The key counts rounds: the same question is asked again under a new key."""
    key = f"name-{request.round}"
    name = _answered_name(request, key)
    if name is None:
        return m.InputRequiredResult({key: NAME}, "asked")
    return done(f"Created {name}.")


# --8<-- [end:round_key]


# --8<-- [start:growing_state]
async def growing_state(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
    """Keeps every round's whole request in its state: the state grows each round."""
    state = request.request_state if isinstance(request.request_state, dict) else {"log": []}
    log = [*state["log"], dict(request.params)]
    if len(log) < 4:
        ask = m.elicit_form(f"Step {len(log)}: go on?", OK_FORM)
        return m.InputRequiredResult({f"step{len(log)}": ask}, {"log": log})
    return done("Done.")


# --8<-- [end:growing_state]


# --8<-- [start:decline_crash]
async def decline_crash(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
    """Assumes the form was accepted: a decline raises."""
    if request.input_responses.elicitation_action("confirm") is None:
        return m.InputRequiredResult({"confirm": CONFIRM})
    content = request.input_responses.accepted_content("confirm")
    return done("Created." if content["ok"] else "Not created.")  # type: ignore[index]


# --8<-- [end:decline_crash]


# --8<-- [start:decline_again]
async def decline_again(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
    """Treats a decline as no answer: a user who says no is asked again, forever."""
    content = request.input_responses.accepted_content("confirm")
    if content is None:
        return m.InputRequiredResult({"confirm": CONFIRM})
    return done("Created." if content.get("ok") else "Not created.")


# --8<-- [end:decline_again]
