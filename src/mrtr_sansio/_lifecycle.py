"""Lifecycle tables: the states a request or call goes through, and the only ways to move.

Each lifecycle is a :class:`Lifecycle`: its states and triggers (enums) and a table
``(state, trigger) -> state``. The legacy shim's runs, the client's calls and the tasks
(extension) change state only through the table (:meth:`Lifecycle.step`, or the per-trigger
maps of :meth:`Lifecycle.moves` on hot paths), which refuses a transition it does not declare.
The modern server request is the hot path and keeps no state object: a request in flight is
``RECEIVED``, and the server sends for its answer the item of the state the table moves it to
(:data:`ANSWER_CARRIER`); the tests read the state back off what the connection emits
(:func:`modern_trigger`). The documentation draws its state diagrams from these tables
(:meth:`Lifecycle.mermaid`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any, Generic, NoReturn, TypeVar

from ._errors import ErrorCode, LocalProtocolError
from ._events import (
    Outgoing,
    OutgoingError,
    OutgoingInputRequired,
    OutgoingResult,
    RequestCancelled,
)

__all__ = [
    "ANSWER_CARRIER",
    "CLIENT_CALL",
    "LEGACY_SHIM",
    "LIFECYCLES",
    "MODERN_REQUEST",
    "TASK",
    "CallPhase",
    "CallTrigger",
    "Lifecycle",
    "Member",
    "RequestPhase",
    "RequestTrigger",
    "ShimPhase",
    "ShimTrigger",
    "TaskStatus",
    "TaskTrigger",
    "modern_trigger",
]


class Member(enum.Enum):
    """An enum whose members hash by identity, as the tables' keys."""

    __hash__ = object.__hash__


S = TypeVar("S", bound=Member)
T = TypeVar("T", bound=Member)


class _Moves(dict[Any, Any]):
    """What one trigger does: state -> next state. A state it does not declare is a bug."""

    __slots__ = ("_lifecycle", "_trigger")

    def __init__(self, lifecycle: Lifecycle[Any, Any], trigger: Any) -> None:
        super().__init__()
        self._lifecycle = lifecycle
        self._trigger = trigger

    def __missing__(self, state: Any) -> NoReturn:
        self._lifecycle._missed(state, self._trigger)


class Lifecycle(Generic[S, T]):
    """One state machine: ``initial``, the ``terminal`` states and the declared ``table``.

    Construction checks the table is a proper lifecycle: every state is reachable from
    ``initial``, every state that is not terminal can move on, and terminal states cannot.
    """

    __slots__ = ("_moves", "initial", "name", "table", "terminal", "title")

    def __init__(
        self,
        name: str,
        title: str,
        initial: S,
        terminal: Iterable[S],
        table: Mapping[tuple[S, T], S],
    ) -> None:
        self.name = name
        self.title = title
        self.initial = initial
        self.terminal = frozenset(terminal)
        self.table = dict(table)
        states = set(type(initial))
        sources = {state for state, _ in self.table}
        if sources & self.terminal:
            raise ValueError(f"{name}: a terminal state has transitions")
        if states - self.terminal - sources:
            raise ValueError(f"{name}: a state that is not terminal has no transition")
        reached = {initial}
        frontier = [initial]
        while frontier:
            here = frontier.pop()
            for (state, _), target in self.table.items():
                if state is here and target not in reached:
                    reached.add(target)
                    frontier.append(target)
        if reached != states:
            unreached = sorted(s.name for s in states - reached)
            raise ValueError(f"{name}: unreachable states {unreached}")
        triggers = {trigger for _, trigger in self.table}
        self._moves: dict[T, _Moves] = {t: _Moves(self, t) for t in type(next(iter(triggers)))}
        for (state, trigger), target in self.table.items():
            self._moves[trigger][state] = target

    def step(self, state: S, trigger: T) -> S:
        """The state after ``trigger`` in ``state``; an undeclared transition is a bug in this
        package and raises :class:`LocalProtocolError`."""
        target: S = self._moves[trigger][state]
        return target

    def allows(self, state: S, trigger: T) -> bool:
        """Whether the table declares ``trigger`` in ``state`` (a machine asks before an act
        that is legal only in some states, instead of keeping a second record of them)."""
        return (state, trigger) in self.table

    def moves(self, trigger: T) -> Mapping[S, S]:
        """``trigger``'s transitions, state -> next state, for hot paths to bind once: a
        lookup is then one dict access (and an undeclared state raises as :meth:`step` does)."""
        return self._moves[trigger]

    def _missed(self, state: S, trigger: T) -> NoReturn:
        """A lookup a :meth:`moves` map does not hold: the table does not declare it."""
        raise LocalProtocolError(
            f"internal error: the {self.name} lifecycle declares no transition from "
            f"{state.name} on {trigger.name}"
        )

    def mermaid(self, *, numbered: bool = False, left_to_right: bool = False) -> str:
        """The table as a Mermaid ``stateDiagram-v2``.

        Spelt out, each declared transition is its own arrow labelled with its trigger; with
        ``numbered``, one arrow per pair of states is labelled with its transitions' 1-based
        rows in :attr:`table` (a large diagram shrunk to a page's width keeps its labels
        legible that way; the table spells them out). A transition that stays in its state is
        written in that state's box after ``↺``, not drawn as a loop: Mermaid puts a loop's
        label where another arrow's label may hide it."""
        lines = ["stateDiagram-v2"]
        if left_to_right:
            lines.append("    direction LR")
        for state in type(self.initial):
            lines.append(f'    state "{state.value}" as {state.name}')
        lines.append(f"    [*] --> {self.initial.name}")
        arrows: dict[tuple[S, S], list[str]] = {}
        for row, ((state, trigger), target) in enumerate(self.table.items(), start=1):
            arrows.setdefault((state, target), []).append(str(row) if numbered else trigger.value)
        for (state, target), labels in arrows.items():
            for label in [", ".join(labels)] if numbered else labels:
                if state is target:
                    lines.append(f"    {state.name} : ↺ {label}")
                else:
                    lines.append(f"    {state.name} --> {target.name} : {label}")
        for state in type(self.initial):
            if state in self.terminal:
                lines.append(f"    {state.name} --> [*]")
        return "\n".join(lines)


# --- the modern server request ----------------------------------------------------------------


class RequestPhase(Member):
    """Where a modern request stands on the server (no object holds it: see the module)."""

    RECEIVED = "received"
    COMPLETE = "complete"
    INPUT_REQUIRED = "input_required"
    ERROR = "error"
    CANCELLED = "cancelled"


class RequestTrigger(Member):
    """What ends a modern request, as the connection emits it."""

    RESULT = "result sent"
    INPUT_REQUIRED = "input_required result sent"
    MISSING_CAPABILITY = "input_required beyond the declared capabilities, -32021 sent"
    ERROR = "error sent"
    CANCELLED = "cancelled, nothing sent"


MODERN_REQUEST: Lifecycle[RequestPhase, RequestTrigger] = Lifecycle(
    "modern server request",
    "Server request, 2026-07-28 wire",
    RequestPhase.RECEIVED,
    (
        RequestPhase.COMPLETE,
        RequestPhase.INPUT_REQUIRED,
        RequestPhase.ERROR,
        RequestPhase.CANCELLED,
    ),
    {
        (RequestPhase.RECEIVED, RequestTrigger.RESULT): RequestPhase.COMPLETE,
        (RequestPhase.RECEIVED, RequestTrigger.INPUT_REQUIRED): RequestPhase.INPUT_REQUIRED,
        (RequestPhase.RECEIVED, RequestTrigger.MISSING_CAPABILITY): RequestPhase.ERROR,
        (RequestPhase.RECEIVED, RequestTrigger.ERROR): RequestPhase.ERROR,
        (RequestPhase.RECEIVED, RequestTrigger.CANCELLED): RequestPhase.CANCELLED,
    },
)

#: What carries each way a request ends on the wire (a cancelled one sends nothing).
_CARRIERS: dict[RequestPhase, type[Outgoing]] = {
    RequestPhase.COMPLETE: OutgoingResult,
    RequestPhase.INPUT_REQUIRED: OutgoingInputRequired,
    RequestPhase.ERROR: OutgoingError,
}
#: How the server answers a request in flight: the trigger its answer is -> the outgoing item
#: of the state the table moves it to. Read from :data:`MODERN_REQUEST` (a trigger it does not
#: declare from ``RECEIVED`` has no entry), so the table decides what each answer sends.
ANSWER_CARRIER: dict[RequestTrigger, type[Outgoing]] = {
    trigger: _CARRIERS[target]
    for (state, trigger), target in MODERN_REQUEST.table.items()
    if state is RequestPhase.RECEIVED and target in _CARRIERS
}

_ANSWER_TRIGGERS: dict[type, RequestTrigger] = {
    OutgoingResult: RequestTrigger.RESULT,
    OutgoingInputRequired: RequestTrigger.INPUT_REQUIRED,
    RequestCancelled: RequestTrigger.CANCELLED,
}


def modern_trigger(item: Any) -> RequestTrigger | None:
    """The trigger an outgoing item or a :class:`RequestCancelled` event is for the request it
    concerns, or None when it changes no request's state (a notification, a request)."""
    kind = type(item)
    if kind is OutgoingError:
        if item.error.code == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY:
            return RequestTrigger.MISSING_CAPABILITY
        return RequestTrigger.ERROR
    return _ANSWER_TRIGGERS.get(kind)


# --- the legacy shim run ----------------------------------------------------------------------


class ShimPhase(Member):
    """Where a legacy request stands once its handler asked for input (a shim *run*)."""

    RUNNING = "handler running"
    HELD = "legs held until initialized"
    AWAITING_INPUT = "legs sent, awaiting answers"
    COMPLETE = "complete"
    FAILED = "failed (-32603)"
    ROUNDS_EXHAUSTED = "rounds exhausted (-32603)"
    CANCELLED = "cancelled, nothing sent"


class ShimTrigger(Member):
    """What moves a shim run."""

    LEGS_SENT = "input_required, legs sent"
    LEGS_HELD = "input_required before notifications/initialized"
    STATE_ONLY = "state-only input_required, replay at once"
    REFUSED = "input_required refused (undeclared capability, a limit)"
    ROUND_CAP = "input_required after legacy_max_rounds rounds"
    INITIALIZED = "notifications/initialized, legs sent"
    LEG_ANSWERED = "a leg answered, more pending"
    ALL_ANSWERED = "last leg answered, replay"
    LEG_FAILED = "a leg answered with an error or a non-object"
    LEG_TIMEOUT = "legacy_leg_timeout passed"
    RESULT = "handler returns a result"
    ERROR = "handler returns an error"
    CANCELLED = "client cancels the request"
    CLOSED = "stream closed"


_SHIM_ENDINGS = {
    ShimTrigger.CANCELLED: ShimPhase.CANCELLED,
    ShimTrigger.CLOSED: ShimPhase.CANCELLED,
}

LEGACY_SHIM: Lifecycle[ShimPhase, ShimTrigger] = Lifecycle(
    "legacy shim run",
    "Server request, 2025-11-25 wire, through the legacy shim",
    ShimPhase.RUNNING,
    (ShimPhase.COMPLETE, ShimPhase.FAILED, ShimPhase.ROUNDS_EXHAUSTED, ShimPhase.CANCELLED),
    {
        (ShimPhase.RUNNING, ShimTrigger.LEGS_SENT): ShimPhase.AWAITING_INPUT,
        (ShimPhase.RUNNING, ShimTrigger.LEGS_HELD): ShimPhase.HELD,
        (ShimPhase.RUNNING, ShimTrigger.STATE_ONLY): ShimPhase.RUNNING,
        (ShimPhase.RUNNING, ShimTrigger.REFUSED): ShimPhase.FAILED,
        (ShimPhase.RUNNING, ShimTrigger.ROUND_CAP): ShimPhase.ROUNDS_EXHAUSTED,
        (ShimPhase.RUNNING, ShimTrigger.RESULT): ShimPhase.COMPLETE,
        (ShimPhase.RUNNING, ShimTrigger.ERROR): ShimPhase.FAILED,
        **{(ShimPhase.RUNNING, t): end for t, end in _SHIM_ENDINGS.items()},
        (ShimPhase.HELD, ShimTrigger.INITIALIZED): ShimPhase.AWAITING_INPUT,
        (ShimPhase.HELD, ShimTrigger.LEG_TIMEOUT): ShimPhase.FAILED,
        **{(ShimPhase.HELD, t): end for t, end in _SHIM_ENDINGS.items()},
        (ShimPhase.AWAITING_INPUT, ShimTrigger.LEG_ANSWERED): ShimPhase.AWAITING_INPUT,
        (ShimPhase.AWAITING_INPUT, ShimTrigger.ALL_ANSWERED): ShimPhase.RUNNING,
        (ShimPhase.AWAITING_INPUT, ShimTrigger.LEG_FAILED): ShimPhase.FAILED,
        (ShimPhase.AWAITING_INPUT, ShimTrigger.LEG_TIMEOUT): ShimPhase.FAILED,
        **{(ShimPhase.AWAITING_INPUT, t): end for t, end in _SHIM_ENDINGS.items()},
    },
)


# --- the client call --------------------------------------------------------------------------


class CallPhase(Member):
    """Where one client call stands, across all its rounds."""

    SENDING = "call() made"
    QUEUED = "queued until the era is known"
    AWAITING_ANSWER = "request in flight"
    GATHERING_INPUT = "modern, answering inputRequests"
    BACKING_OFF = "modern, state-only backoff"
    ANSWERING_SERVER = "legacy, answering server requests"
    TASK_WAITING = "task, waiting to poll tasks/get"
    TASK_POLLING = "task, tasks/get in flight"
    TASK_INPUT = "task, answering its inputRequests"
    TASK_UPDATING = "task, tasks/update in flight"
    COMPLETE = "complete"
    FAILED = "failed"
    ROUNDS_EXHAUSTED = "rounds exhausted"
    CANCELLED = "cancelled"


class CallTrigger(Member):
    """What moves a client call."""

    SENT = "request sent"
    QUEUED = "era not known yet"
    HANDSHAKE_FAILED = "handshake failed"
    COMPLETE = "final result"
    ERROR = "JSON-RPC error"
    INVALID = "invalid response"
    LOST = "request lost by the transport"
    INPUT_REQUESTS = "input_required with inputRequests"
    STATE_ONLY = "input_required with requestState only"
    ROUND_CAP = "a round past max_rounds"
    ANSWERED = "one answer given, more to give"
    RETRY = "retry sent"
    SERVER_REQUEST = "server request"
    LAST_ANSWERED = "last server request answered or withdrawn"
    CANCELLED = "cancel(call)"
    CLOSED = "stream closed"
    TASK_CREATED = "CreateTaskResult"
    POLL = "tasks/get sent"
    TASK_WORKING = "task working, or tasks/update acknowledged"
    TASK_INPUT_REQUESTS = "task input_required with new inputRequests"
    TASK_UPDATE = "tasks/update sent"


_CALL_ENDINGS = {
    CallTrigger.CANCELLED: CallPhase.CANCELLED,
    CallTrigger.CLOSED: CallPhase.FAILED,
}
#: How a request in flight ends.
_CALL_OUTCOMES = {
    CallTrigger.COMPLETE: CallPhase.COMPLETE,
    CallTrigger.ERROR: CallPhase.FAILED,
    CallTrigger.INVALID: CallPhase.FAILED,
    CallTrigger.LOST: CallPhase.FAILED,
}

CLIENT_CALL: Lifecycle[CallPhase, CallTrigger] = Lifecycle(
    "client call",
    "Client call, both wires",
    CallPhase.SENDING,
    (CallPhase.COMPLETE, CallPhase.FAILED, CallPhase.ROUNDS_EXHAUSTED, CallPhase.CANCELLED),
    {
        (CallPhase.SENDING, CallTrigger.SENT): CallPhase.AWAITING_ANSWER,
        (CallPhase.SENDING, CallTrigger.QUEUED): CallPhase.QUEUED,
        (CallPhase.QUEUED, CallTrigger.SENT): CallPhase.AWAITING_ANSWER,
        (CallPhase.QUEUED, CallTrigger.HANDSHAKE_FAILED): CallPhase.FAILED,
        **{(CallPhase.QUEUED, t): end for t, end in _CALL_ENDINGS.items()},
        **{(CallPhase.AWAITING_ANSWER, t): end for t, end in _CALL_OUTCOMES.items()},
        (CallPhase.AWAITING_ANSWER, CallTrigger.INPUT_REQUESTS): CallPhase.GATHERING_INPUT,
        (CallPhase.AWAITING_ANSWER, CallTrigger.STATE_ONLY): CallPhase.BACKING_OFF,
        (CallPhase.AWAITING_ANSWER, CallTrigger.ROUND_CAP): CallPhase.ROUNDS_EXHAUSTED,
        (CallPhase.AWAITING_ANSWER, CallTrigger.SERVER_REQUEST): CallPhase.ANSWERING_SERVER,
        **{(CallPhase.AWAITING_ANSWER, t): end for t, end in _CALL_ENDINGS.items()},
        (CallPhase.GATHERING_INPUT, CallTrigger.ANSWERED): CallPhase.GATHERING_INPUT,
        (CallPhase.GATHERING_INPUT, CallTrigger.RETRY): CallPhase.AWAITING_ANSWER,
        **{(CallPhase.GATHERING_INPUT, t): end for t, end in _CALL_ENDINGS.items()},
        (CallPhase.BACKING_OFF, CallTrigger.RETRY): CallPhase.AWAITING_ANSWER,
        **{(CallPhase.BACKING_OFF, t): end for t, end in _CALL_ENDINGS.items()},
        (CallPhase.ANSWERING_SERVER, CallTrigger.SERVER_REQUEST): CallPhase.ANSWERING_SERVER,
        (CallPhase.ANSWERING_SERVER, CallTrigger.ANSWERED): CallPhase.ANSWERING_SERVER,
        (CallPhase.ANSWERING_SERVER, CallTrigger.LAST_ANSWERED): CallPhase.AWAITING_ANSWER,
        **{(CallPhase.ANSWERING_SERVER, t): end for t, end in _CALL_OUTCOMES.items()},
        **{(CallPhase.ANSWERING_SERVER, t): end for t, end in _CALL_ENDINGS.items()},
        # The tasks extension: a tools/call answered CreateTaskResult (or resume_task), then
        # polled with tasks/get and answered with tasks/update.
        (CallPhase.SENDING, CallTrigger.POLL): CallPhase.TASK_POLLING,
        (CallPhase.AWAITING_ANSWER, CallTrigger.TASK_CREATED): CallPhase.TASK_WAITING,
        (CallPhase.TASK_WAITING, CallTrigger.POLL): CallPhase.TASK_POLLING,
        **{(CallPhase.TASK_WAITING, t): end for t, end in _CALL_ENDINGS.items()},
        **{(CallPhase.TASK_POLLING, t): end for t, end in _CALL_OUTCOMES.items()},
        (CallPhase.TASK_POLLING, CallTrigger.TASK_WORKING): CallPhase.TASK_WAITING,
        (CallPhase.TASK_POLLING, CallTrigger.TASK_INPUT_REQUESTS): CallPhase.TASK_INPUT,
        (CallPhase.TASK_POLLING, CallTrigger.ROUND_CAP): CallPhase.ROUNDS_EXHAUSTED,
        **{(CallPhase.TASK_POLLING, t): end for t, end in _CALL_ENDINGS.items()},
        (CallPhase.TASK_INPUT, CallTrigger.ANSWERED): CallPhase.TASK_INPUT,
        (CallPhase.TASK_INPUT, CallTrigger.TASK_UPDATE): CallPhase.TASK_UPDATING,
        **{(CallPhase.TASK_INPUT, t): end for t, end in _CALL_ENDINGS.items()},
        (CallPhase.TASK_UPDATING, CallTrigger.TASK_WORKING): CallPhase.TASK_WAITING,
        # tasks/update is acknowledged (or fails): the task's outcome comes with a tasks/get
        **{
            (CallPhase.TASK_UPDATING, t): end
            for t, end in _CALL_OUTCOMES.items()
            if t is not CallTrigger.COMPLETE
        },
        **{(CallPhase.TASK_UPDATING, t): end for t, end in _CALL_ENDINGS.items()},
    },
)

# --- the task (tasks extension) ------------------------------------------------------------
# ``working -> input_required -> working -> completed | failed | cancelled``. The task machine
# checks :attr:`Lifecycle.terminal` before the table (a late result, a cancel of a finished
# task), so such an event changes nothing instead of reaching it.


class TaskStatus(Member):
    """A task's ``status`` on the wire."""

    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class TaskTrigger(Member):
    """What moves a task."""

    ASKED = "the handler asked for input"
    RERUN = "the handler returned state only: run again"
    ANSWERED_SOME = "tasks/update answered some of the outstanding requests"
    ANSWERED = "tasks/update answered the last outstanding request"
    RESULT = "the handler returned a result (isError included)"
    ERROR = "the handler returned a JSON-RPC error"
    CANCEL = "tasks/cancel"
    LEASE_EXPIRED = "the worker's lease ran out"


_TASK_ENDINGS = {
    TaskTrigger.CANCEL: TaskStatus.CANCELLED,
    TaskTrigger.LEASE_EXPIRED: TaskStatus.FAILED,
}

#: The task status table.
TASK: Lifecycle[TaskStatus, TaskTrigger] = Lifecycle(
    "task",
    "Task (tasks extension, SEP-2663)",
    TaskStatus.WORKING,
    (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED),
    {
        (TaskStatus.WORKING, TaskTrigger.ASKED): TaskStatus.INPUT_REQUIRED,
        (TaskStatus.WORKING, TaskTrigger.RERUN): TaskStatus.WORKING,
        (TaskStatus.WORKING, TaskTrigger.RESULT): TaskStatus.COMPLETED,
        (TaskStatus.WORKING, TaskTrigger.ERROR): TaskStatus.FAILED,
        **{(TaskStatus.WORKING, t): end for t, end in _TASK_ENDINGS.items()},
        (TaskStatus.INPUT_REQUIRED, TaskTrigger.ANSWERED_SOME): TaskStatus.INPUT_REQUIRED,
        (TaskStatus.INPUT_REQUIRED, TaskTrigger.ANSWERED): TaskStatus.WORKING,
        **{(TaskStatus.INPUT_REQUIRED, t): end for t, end in _TASK_ENDINGS.items()},
    },
)

#: Every lifecycle, by the name the documentation uses for its diagram.
LIFECYCLES: dict[str, Lifecycle[Any, Any]] = {
    "modern-request": MODERN_REQUEST,
    "legacy-shim": LEGACY_SHIM,
    "client-call": CLIENT_CALL,
    "task": TASK,
}
