"""MRTR flows over HTTP for the scale-out demo and the load test, and what each leg went through.

A flow is one ``book_trip`` call (``examples/fixtures.py``) on the 2026-07-28 wire: the first
request gets ``input_required`` (dates by form elicitation, a workspace by roots) with a sealed
``requestState``; the retry gets ``input_required`` again (a summary by sampling) with a new
state; the second retry completes. Every flow books its own trip, so the final text proves that
what round 1 learnt came back to the handler through the sealed state, wherever it ran.

Our HTTP client (:class:`~mrtr_sansio.adapters.http.HttpClient`, on httpx) does the work: its
callbacks play the user and the model, and its connection sends the retries with the
``requestState`` echoed. This module only watches: which process answered each request (the
``X-Upstream`` header the demo's nginx adds, through an httpx response hook) and the state each
answer handed out (through the client's trace).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import ssl
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from typing import Any

import anyio
import attrs
import httpx

import mrtr_sansio as m
from mrtr_sansio.adapters import CallFailedError, ClientError
from mrtr_sansio.adapters.http import HttpClient
from mrtr_sansio.observe import Observer

__all__ = [
    "UPSTREAM_HEADER",
    "Leg",
    "Outcome",
    "Tally",
    "Trip",
    "book_trip",
    "http_clients",
]

CLIENT_INFO = {"name": "mrtr-sansio-scale-demo", "version": m.__version__}
#: Set by the load balancer on every answer: the address of the process that answered.
UPSTREAM_HEADER = "x-upstream"
_FIRST_DAY = datetime.date(2026, 9, 1)


@attrs.frozen
class Leg:
    """One HTTP request of a flow and its answer."""

    #: The process that answered (the balancer's header), None when there is no balancer.
    upstream: str | None
    status: int
    #: True when the request carried a ``requestState`` (a retry).
    retry: bool
    #: The ``requestState`` of the answer, if it was ``input_required``.
    state: str | None = None
    #: ``(code, message)`` when the answer was a JSON-RPC error.
    error: tuple[int, str] | None = None


@attrs.frozen
class Outcome:
    """How one flow ended: completed, a protocol error from the server, or a problem."""

    flow: int
    legs: tuple[Leg, ...]
    #: The JSON-RPC error the server ended the flow with.
    error: m.JsonRpcError | None = None
    #: Anything else that went wrong (transport, an unexpected answer or result).
    problem: str | None = None

    @property
    def completed(self) -> bool:
        return self.error is None and self.problem is None

    def crossings(self) -> list[tuple[Leg, bool]]:
        """Each retry with whether it reached another process than the leg that sealed the
        state it carried (unknown upstreams count as not crossing)."""
        legs = self.legs
        return [
            (leg, leg.upstream is not None and legs[i - 1].upstream not in (None, leg.upstream))
            for i, leg in enumerate(legs)
            if i and leg.retry
        ]


@attrs.frozen
class Trip:
    """What flow ``n`` books and answers, all derived from ``n``."""

    n: int

    @property
    def arguments(self) -> dict[str, Any]:
        return {"destination": f"City {self.n}", "guests": 1 + self.n % 4}

    @property
    def dates(self) -> tuple[str, str]:
        check_in = _FIRST_DAY + datetime.timedelta(days=self.n % 365)
        check_out = check_in + datetime.timedelta(days=1 + self.n % 7)
        return check_in.isoformat(), check_out.isoformat()

    def answer(self, event: m.InputNeeded) -> dict[str, Any]:
        """The client's answer to one embedded request (a user and a model, simulated)."""
        if event.method == "elicitation/create":
            check_in, check_out = self.dates
            return {"action": "accept", "content": {"check_in": check_in, "check_out": check_out}}
        if event.method == "roots/list":
            return {"roots": [{"uri": f"file:///trips/{self.n}", "name": "trips"}]}
        if event.method == "sampling/createMessage":
            return {
                "role": "assistant",
                "content": {"type": "text", "text": f"Trip {self.n}: sun and sea."},
                "model": "scale-demo",
                "stopReason": "endTurn",
            }
        raise ValueError(f"book_trip does not ask for {event.method}")

    def expected(self) -> str:
        """The text book_trip answers with once both rounds went through."""
        args, (check_in, check_out) = self.arguments, self.dates
        return (
            f"Booked {args['destination']} for {args['guests']}: {check_in} to {check_out}.\n"
            f"Workspace: file:///trips/{self.n}\n"
            f"Summary: Trip {self.n}: sun and sea."
        )


@contextlib.asynccontextmanager
async def http_clients(count: int, timeout: float = 60.0) -> AsyncIterator[list[httpx.AsyncClient]]:
    """``count`` HTTP clients, one for each flow running at a time, as separate users would
    have. (One shared client would queue the requests in its connection pool, whose cost
    grows with the square of the queue: it, not the servers, would be measured.)

    An idle connection is dropped after 2 s, before uvicorn closes it (5 s): at equal
    timeouts a request sent on a connection as the server closes it fails (a reset), and a
    POST is never resent.
    """
    tls = ssl.create_default_context()  # never used on http://, but else built per client
    limits = httpx.Limits(keepalive_expiry=2.0)
    clients = [httpx.AsyncClient(verify=tls, timeout=timeout, limits=limits) for _ in range(count)]
    try:
        yield clients
    finally:
        with anyio.CancelScope(shield=True):  # also when a deadline cancelled the flows
            for http in clients:
                await http.aclose()


async def book_trip(
    http: httpx.AsyncClient, url: str, n: int, *, observer: Observer | None = None
) -> Outcome:
    """Run flow ``n`` to its end with :class:`HttpClient` over ``http`` (one flow at a time
    per ``http``: the flow puts its own response hook on it); never raises for what the server
    or the network does. ``observer`` watches the client's connection (``trace.py``)."""
    trip = Trip(n)
    wire = _Wire()
    http.event_hooks = {"request": [], "response": [wire.on_response]}

    async def answer(event: m.InputNeeded) -> dict[str, Any]:
        return trip.answer(event)

    problem = None
    error = None
    try:
        async with HttpClient.connect(
            url,
            m.ClientConfig(client_info=CLIENT_INFO, observer=observer),
            http=http,
            listen=False,
            elicitation=answer,
            sampling=answer,
            roots=answer,
            trace=wire.trace,
        ) as client:
            result = await client.call_tool("book_trip", trip.arguments)
    except CallFailedError as exc:
        if exc.local:  # the transport or the connection gave up, the server did not answer
            problem = exc.error.message
        else:
            error = exc.error
    except ClientError as exc:
        problem = str(exc)
    else:
        texts = [b.get("text") for b in result.get("content", ())]
        if texts != [trip.expected()]:
            problem = f"unexpected result {texts!r}"
    return Outcome(n, wire.legs(), error=error, problem=problem)


class _Wire:
    """What one flow's requests met, from the response hook (who answered) and the client's
    trace (what was sent and received). A flow has one request in flight at a time, so the
    three line up in order."""

    __slots__ = ("answered", "received", "sent")

    def __init__(self) -> None:
        #: For each request sent: whether it carried a ``requestState``.
        self.sent: list[bool] = []
        #: For each HTTP response: (the process that answered, the status).
        self.answered: list[tuple[str | None, int]] = []
        #: For each JSON-RPC answer: (its ``requestState``, its error as (code, message)).
        self.received: list[tuple[str | None, tuple[int, str] | None]] = []

    async def on_response(self, response: httpx.Response) -> None:
        self.answered.append((response.headers.get(UPSTREAM_HEADER), response.status_code))

    def trace(self, direction: str, data: bytes) -> None:
        try:
            message = json.loads(data)
        except ValueError:  # what the server sent is not JSON: the client reports it
            message = None
        if not isinstance(message, dict):
            message = {}
        if direction == "send":
            self.sent.append("requestState" in message.get("params", {}))
            return
        state = error = None
        result, failure = message.get("result"), message.get("error")
        if isinstance(result, dict) and isinstance(result.get("requestState"), str):
            state = result["requestState"]
        if isinstance(failure, dict):
            error = (failure.get("code", 0), str(failure.get("message")))
        self.received.append((state, error))

    def legs(self) -> tuple[Leg, ...]:
        """A leg for each request that got an HTTP response."""
        # A request whose answer was not a JSON-RPC message has a response but nothing received.
        received = self.received + [(None, None)] * (len(self.answered) - len(self.received))
        return tuple(
            Leg(upstream, status, retry, state, error)
            for (upstream, status), retry, (state, error) in zip(
                self.answered, self.sent, received, strict=False
            )
        )


@attrs.define
class Tally:
    """Counts over many outcomes."""

    flows: int = 0
    completed: int = 0
    #: ``(code, message)`` of the protocol errors flows ended with.
    errors: Counter[tuple[int, str]] = attrs.field(factory=Counter)
    #: Other failures, by description.
    problems: Counter[str] = attrs.field(factory=Counter)
    legs: int = 0
    retries: int = 0
    #: Retries answered by another process than the one that sealed their state.
    cross: int = 0
    #: Of those, retries answered with an error (the server refused the state).
    cross_refused: int = 0
    #: Retries that reached the process that sealed their state, and of those, refused.
    same: int = 0
    same_refused: int = 0
    #: Legs answered, by process.
    by_upstream: Counter[str] = attrs.field(factory=Counter)

    def add(self, outcome: Outcome) -> None:
        self.flows += 1
        if outcome.completed:
            self.completed += 1
        elif outcome.error is not None:
            self.errors[outcome.error.code, outcome.error.message] += 1
        else:
            self.problems[outcome.problem or "?"] += 1
        self.legs += len(outcome.legs)
        for leg in outcome.legs:
            if leg.upstream is not None:
                self.by_upstream[leg.upstream] += 1
        for leg, crossed in outcome.crossings():
            self.retries += 1
            refused = leg.error is not None
            if crossed:
                self.cross += 1
                self.cross_refused += refused
            else:
                self.same += 1
                self.same_refused += refused

    def extend(self, outcomes: Iterable[Outcome]) -> Tally:
        for outcome in outcomes:
            self.add(outcome)
        return self

    @property
    def failed(self) -> int:
        return self.flows - self.completed

    def summary(self) -> list[str]:
        """Report lines."""
        lines = [
            f"flows: {self.flows}  completed: {self.completed}  failed: {self.failed}",
            f"legs (HTTP requests): {self.legs}  retries carrying requestState: {self.retries}",
            f"cross-process retries: {self.cross} (refused: {self.cross_refused})  "
            f"same-process retries: {self.same} (refused: {self.same_refused})",
        ]
        if self.by_upstream:
            shares = ", ".join(f"{k} {v}" for k, v in sorted(self.by_upstream.items()))
            lines.append(f"legs answered per process: {shares}")
        return lines + self.failures()

    def failures(self) -> list[str]:
        """A line for each way flows failed, with how many did."""
        lines = [
            f"failed with {code} {message!r}: {count}"
            for (code, message), count in self.errors.most_common()
        ]
        lines.extend(f"failed otherwise ({p}): {n}" for p, n in self.problems.most_common())
        return lines
