"""One client call across its rounds (pure): its state, and the params of each request it sends.

:class:`CallState` is what the :class:`~mrtr_sansio.ClientConnection` keeps per call; its
``phase`` moves only through the :data:`~mrtr_sansio._lifecycle.CLIENT_CALL` table and
decides what the connection does next (the phase a leg leads to names its request:
:data:`TASK_LEGS`); :meth:`CallState.enter` does what a phase that goes on opens (a round, a
backoff, a poll). The functions build the params of a call's legs: the first request and each
retry (the call's params, the envelope on the modern wire, this round's ``inputResponses`` and
the echoed ``requestState``), and the ``notifications/cancelled`` of a leg; those of a call
that became a task are ``task_follow.py``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from mrtr_sansio._config import ClientConfig
from mrtr_sansio._errors import LocalProtocolError
from mrtr_sansio._events import Call, Event, InputNeeded
from mrtr_sansio._lifecycle import CallPhase, CallTrigger
from mrtr_sansio._mcp.envelope import LOG_LEVEL, Era
from mrtr_sansio._wire.jsonrpc import notification_message
from mrtr_sansio.tasks._client import TaskView
from mrtr_sansio.tasks._values import TaskStarted

__all__ = [
    "IN_FLIGHT",
    "PROGRESS_TOKEN",
    "TASK_LEGS",
    "TASK_PHASES",
    "CallState",
    "cancelled_message",
    "leg_params",
    "unsendable",
]

PROGRESS_TOKEN = "progressToken"
#: The phases with a request of the call awaiting the server's answer.
IN_FLIGHT = frozenset(
    {
        CallPhase.AWAITING_ANSWER,
        CallPhase.ANSWERING_SERVER,
        CallPhase.TASK_POLLING,
        CallPhase.TASK_UPDATING,
    }
)
#: The phases of a call that became a task (tasks extension).
TASK_PHASES = frozenset(
    {
        CallPhase.TASK_WAITING,
        CallPhase.TASK_POLLING,
        CallPhase.TASK_INPUT,
        CallPhase.TASK_UPDATING,
    }
)

#: The request a leg of a call that became a task sends, by the phase the leg moves it to; any
#: other leg sends the call's own request.
TASK_LEGS = {CallPhase.TASK_POLLING: "tasks/get", CallPhase.TASK_UPDATING: "tasks/update"}

# Bound once: an enum member's lookup costs more than a global's.
_SENDING, _GATHERING, _BACKING_OFF = (
    CallPhase.SENDING,
    CallPhase.GATHERING_INPUT,
    CallPhase.BACKING_OFF,
)
_TASK_INPUT = CallPhase.TASK_INPUT


class CallState:
    """One call across its rounds: the leg in flight, or the round being answered."""

    __slots__ = (
        "answers",
        "asked",
        "backoff",
        "call",
        "leg",
        "params",
        "phase",
        "round",
        "state",
        "task_id",
        "task_poll",
        "task_seen",
    )

    def __init__(self, call: Call, backoff: float) -> None:
        self.call = call
        self.phase = _SENDING
        #: Params of every leg before the MRTR fields (envelope merged on the modern wire).
        self.params: dict[str, Any] | None = None
        self.leg: int | None = None  # id of the request in flight
        self.round = 0  # input_required results acted on (legacy: rounds of server requests)
        self.asked: dict[str, InputNeeded] = {}  # this round's events, by key
        self.answers: dict[str, Any] = {}  # this round's answers so far
        self.state: str | None = None  # requestState of this round, echoed on the retry
        self.backoff = backoff  # delay before the next state-only retry
        self.task_id: str | None = None  # tasks extension: the task this call became
        self.task_poll: int | None = None  # the server's last pollIntervalMs
        self.task_seen: set[str] = set()  # task inputRequests keys already surfaced

    def ask(
        self, requests: Iterable[tuple[str, str, Mapping[str, Any]]], state: str | None = None
    ) -> list[InputNeeded]:
        """Open the next round of input: ``requests`` as ``(key, method, params)``, with
        ``state`` to echo on the retry; return its events, in order."""
        self.round += 1
        self.state = state
        self.answers = {}
        asked: dict[str, InputNeeded] = {}
        self.asked = asked
        call, round_ = self.call, self.round
        for key, method, params in requests:
            asked[key] = InputNeeded(call, key, method, params, round_)
        return list(asked.values())

    def awaits(self, event: InputNeeded) -> bool:
        """Whether this round still awaits ``event``'s answer."""
        key = event.key
        return self.asked.get(key) is event and key not in self.answers  # type: ignore[arg-type]

    def answer(self, event: InputNeeded, answer: Any) -> bool:
        """Record this round's answer to ``event``; whether every key is now answered."""
        self.answers[event.key] = answer  # type: ignore[index]
        return len(self.answers) == len(self.asked)

    def enter(
        self, trigger: CallTrigger, detail: Any, config: ClientConfig
    ) -> tuple[Sequence[Event], float | None]:
        """The call was moved by ``trigger`` into a phase that goes on (not terminal), with the
        reading's ``detail`` (``results.py`` says what it is): do what that phase opens.
        Returns the events to report and the delay until the call's timer is due (None: it
        sets none): a state-only retry after the backoff, which doubles (up to
        ``max_retry_backoff``) for the next; a task's next poll after its last
        ``pollIntervalMs``, else ``task_poll_interval``, never past ``max_task_poll_interval``.
        """
        phase = self.phase
        if phase is _GATHERING:
            requests, state = detail
            self.backoff = config.retry_backoff
            return self.ask(requests, state), None
        if phase is _BACKING_OFF:
            self.ask((), detail)
            delay = self.backoff
            self.backoff = min(delay * 2, config.max_retry_backoff)
            return [], delay
        events: Sequence[Event] = ()
        if phase is _TASK_INPUT:  # keys are unique for the task's lifetime: never asked again
            requests, poll_ms = detail
            self.task_seen.update(key for key, _, _ in requests)
            events = self.ask(requests)
        elif trigger is CallTrigger.TASK_CREATED:  # follow the task the answer names
            view: TaskView = detail
            self.task_id, poll_ms = view.task_id, view.poll_interval_ms
            events = [TaskStarted(self.call, view.task_id)]
        else:  # a task's poll or update, answered: the task works on (TASK_WORKING)
            poll_ms = detail
        if poll_ms is not None:
            self.task_poll = poll_ms
        if phase is _TASK_INPUT:
            return events, None
        ms = self.task_poll
        delay = config.task_poll_interval if ms is None else ms / 1000
        return events, min(delay, config.max_task_poll_interval)


def leg_params(
    st: CallState, era: Era | None, envelope: dict[str, Any], config: ClientConfig
) -> dict[str, Any] | None:
    """The params of the call's next request: the first one, or a retry with this round's
    fields (legacy: None for a call without params)."""
    params: dict[str, Any] | None = st.params
    if params is None:
        params = st.params = _base_params(st, era, envelope, config)
    if st.answers or st.state is not None:
        params = dict(params)
        if st.answers:
            params["inputResponses"] = st.answers
        if st.state is not None:
            params["requestState"] = st.state
    elif not params and era is Era.LEGACY:
        params = None
    return params


def _base_params(
    st: CallState, era: Era | None, envelope: dict[str, Any], config: ClientConfig
) -> dict[str, Any]:
    params = dict(st.call.params)
    meta = params.get("_meta")
    if config.log_level is not None or config.progress:
        # the _meta defaults of ClientConfig.log_level (modern; legacy asks once per session)
        # and ClientConfig.progress (the call's id as its token); the call's own _meta wins
        asked: dict[str, Any] = {}
        if config.log_level is not None and era is Era.MODERN:
            asked[LOG_LEVEL] = config.log_level
        if config.progress:
            asked[PROGRESS_TOKEN] = st.call.call_id
        if asked:
            meta = asked if meta is None else {**asked, **meta}
    if era is Era.MODERN:
        params["_meta"] = dict(envelope) if meta is None else {**meta, **envelope}
    elif meta is not None:
        params["_meta"] = meta
    return params


def cancelled_message(st: CallState, reason: str | None) -> dict[str, Any]:
    """The ``notifications/cancelled`` of the call's request in flight."""
    params: dict[str, Any] = {"requestId": st.leg}
    if reason is not None:
        params["reason"] = reason
    return notification_message("notifications/cancelled", params)


def unsendable(st: CallState, encode: Callable[[Any], bytes]) -> list[str]:
    """The keys of this round's answers ``encode`` refuses; they are taken back (their events
    are pending again)."""
    answers = st.answers
    bad = []
    for key, answer in answers.items():
        try:
            encode(answer)
        except LocalProtocolError:
            bad.append(key)
    for key in bad:
        del answers[key]
    return bad
