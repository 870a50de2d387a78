"""What the connections report to an observer: typed facts, stamped with the injected clock.

An MRTR call is several requests (modern rounds, possibly on several processes), one request
with server-to-client legs (the legacy shim), or a task's creation, polls and updates. The
machines tell an :class:`Observer` what happened as frozen facts, and ask it, only when one
is configured, for the trace context to carry onward: into the sealed ``requestState`` (server,
so the next round links to this one wherever it is answered) and into a request's ``_meta``
(client, W3C ``traceparent``/``tracestate``/``baggage``), and into the ``_meta`` of the
server-to-client requests the legacy shim sends (server, asked with a :class:`LegKey`). The
core keeps no memory for it; an observer that needs memory (open spans) keeps its own, keyed
by the ids the facts carry.

With ``observer=None`` (the default of :class:`~mrtr_sansio.ServerConfig` and
:class:`~mrtr_sansio.ClientConfig`) nothing is built and nothing is called.
:mod:`mrtr_sansio.otel` turns facts into OpenTelemetry spans and metrics.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any, Protocol

import attrs

__all__ = [
    "CARRY_MAX_BYTES",
    "TRACE_KEYS",
    "CallFinished",
    "CallRoundAnswered",
    "CallRoundSent",
    "CallRoundUnsent",
    "CallStarted",
    "ErrorSent",
    "Fact",
    "LegAnswered",
    "LegKey",
    "LegReceived",
    "LegReplied",
    "LegSent",
    "LegTimedOut",
    "Observer",
    "RequestAbandoned",
    "RequestAnswered",
    "RequestRefused",
    "RequestStarted",
    "SessionEnded",
    "SessionStarted",
    "TaskKey",
    "TaskStatusChanged",
    "Transport",
    "connection_key",
    "trace_of",
]

#: The ``_meta`` keys the 2026-07-28 spec reserves for trace context (W3C formats).
TRACE_KEYS = ("traceparent", "tracestate", "baggage")
#: Bound on what :meth:`Observer.carry` may seal into a ``requestState`` (its JSON, in bytes);
#: a larger carry is dropped (the next round then starts a new link).
CARRY_MAX_BYTES = 512


@attrs.frozen
class Transport:
    """What an adapter knows of the wire a connection's messages travel (for observers).

    ``network`` is the transport protocol (``tcp``, ``pipe`` for stdio, ``unix``, ``quic``);
    ``protocol``/``protocol_version`` the application protocol over it (``http``, ``1.1``);
    ``address``/``port`` the server's, as a client dialled it; ``client_address``/
    ``client_port`` the peer's, as a server accepted it (an HTTP server knows it, stdio does
    not). Set on a connection's ``transport`` attribute by the adapter; None (the default)
    reports none of it.
    """

    network: str
    protocol: str | None = None
    protocol_version: str | None = None
    address: str | None = None
    port: int | None = None
    client_address: str | None = None
    client_port: int | None = None


@attrs.frozen
class Fact:
    """Base of every fact; ``at`` is the connection's clock when it happened, ``connection``
    the :func:`connection_key` of the connection that saw it (request and call ids are only
    unique within one connection)."""

    at: float
    connection: int


# --- server ------------------------------------------------------------------------------


@attrs.frozen
class RequestStarted(Fact):
    """A request reached the handler (a modern round, or a legacy request's first run).

    ``trace`` holds the ``_meta`` trace context keys the client sent (:data:`TRACE_KEYS`);
    ``carried`` what the previous round's :meth:`Observer.carry` sealed into the echoed
    ``requestState`` (None on a first round, or when state is not sealed).
    """

    request_id: Any
    method: str
    target: str | None
    round: int | None
    legacy: bool
    protocol_version: str | None
    session_id: str | None
    principal: str | None
    trace: Mapping[str, str]
    carried: Mapping[str, str] | None
    transport: Transport | None = None


@attrs.frozen
class RequestRefused(Fact):
    """A request was refused with a JSON-RPC error before any handler saw it (a bad envelope
    or header, -32020, -32021, -32022, -32602 such as a tampered ``requestState``, a size
    limit, a task it may not read, an unknown session). What could be read of it is given:
    ``method`` is None when the message could not be read as a request at all (unreadable
    JSON, an oversized message). An HTTP server that refuses a POST at its edge, before
    reading a message (413, 415, 406, a bad ``Origin``...), reports it too: ``http_status``
    is the status it answered, and ``code`` is None when the answer holds no JSON-RPC error."""

    request_id: Any
    method: str | None
    target: str | None
    code: int | None
    message: str
    legacy: bool
    protocol_version: str | None
    session_id: str | None
    trace: Mapping[str, str]
    transport: Transport | None = None
    http_status: int | None = None


@attrs.frozen
class RequestAnswered(Fact):
    """A request was answered with a result: ``complete``, ``input_required`` (the keys of
    its ``inputRequests``) or ``task``; ``is_error`` when it is a tool result with
    ``isError: true``; ``task_status`` the status a ``tasks/*`` answer reports."""

    request_id: Any
    result_type: str
    input_keys: tuple[str, ...] = ()
    is_error: bool = False
    task_status: str | None = None


@attrs.frozen
class ErrorSent(Fact):
    """A request in flight was answered with a JSON-RPC error (-32021 included)."""

    request_id: Any
    code: int
    message: str


@attrs.frozen
class RequestAbandoned(Fact):
    """A request in flight ended without an answer: ``reason`` is ``cancelled`` (the client
    cancelled it) or ``closed`` (the stream closed while it waited for the client)."""

    request_id: Any
    reason: str


@attrs.frozen
class LegSent(Fact):
    """The legacy shim wrote a server-to-client request (``leg_id``) for ``request_id``, in
    the shim's ``round`` (1 first)."""

    request_id: Any
    leg_id: int
    key: str
    method: str
    round: int = 1


@attrs.frozen
class LegKey:
    """What :meth:`Observer.carry` is asked with for a shim leg (right after its
    :class:`LegSent`): the leg's id, wrapped so it never equals a client's request id. The
    :data:`TRACE_KEYS` of the answer go into the leg's ``params._meta``, so the client's
    span for it can be a child of the server's leg span."""

    leg_id: int


@attrs.frozen
class TaskKey:
    """What :meth:`Observer.carry` is asked with when a request is about to become a task
    (right before the task is stored): the creating request's id, wrapped. The answer's
    :data:`TRACE_KEYS` are stored in the task's record (``Task.trace``), so that every
    process that later reads or moves the task can link its spans to the task's trace."""

    request_id: Any


@attrs.frozen
class LegAnswered(Fact):
    """The client answered a shim leg (``error``: with a JSON-RPC error or a non-object)."""

    request_id: Any
    leg_id: int
    key: str
    error: bool


@attrs.frozen
class LegTimedOut(Fact):
    """A shim leg passed ``legacy_leg_timeout``; its request fails next."""

    request_id: Any
    leg_id: int
    key: str


@attrs.frozen
class TaskStatusChanged(Fact):
    """A task was created (by the request ``request_id``) or moved to ``status`` (a
    :class:`~mrtr_sansio.tasks.TaskStatus` value; ``request_id`` None), on whichever process
    did it. ``trace`` is the trace context stored with the task at its creation (see
    :class:`TaskKey`), None when none was."""

    task_id: str
    status: str
    round: int
    request_id: Any = None
    trace: Mapping[str, str] | None = None


@attrs.frozen
class SessionStarted(Fact):
    """A legacy session began (``role`` ``server``: ``initialize`` answered; ``client``: the
    handshake done), at ``protocol_version``; the modern wire has no sessions."""

    role: str
    protocol_version: str
    transport: Transport | None = None


@attrs.frozen
class SessionEnded(Fact):
    """The legacy session of this connection ended (the stream closed, or the adapter
    ended it); ``error`` names what ended it when that was a failure."""

    error: str | None = None


# --- client ------------------------------------------------------------------------------


@attrs.frozen
class CallStarted(Fact):
    """The application started a call (``target``: the tool or prompt name, resource URI)."""

    call_id: int
    method: str
    target: str | None
    transport: Transport | None = None


@attrs.frozen
class CallRoundSent(Fact):
    """A request of the call went out (``round`` 1 first; a retry is the next round), at
    ``protocol_version``, in the legacy session ``session_id`` (the adapter's name for it)."""

    call_id: int
    request_id: Any
    method: str
    round: int
    protocol_version: str | None = None
    session_id: str | None = None


@attrs.frozen
class CallRoundUnsent(Fact):
    """The request :class:`CallRoundSent` reported could not be encoded (an answer that is
    not JSON, say) and never went out; ``reason`` says why. The call goes on: the
    application may answer again, and that request is reported as sent anew."""

    call_id: int
    request_id: Any
    reason: str


@attrs.frozen
class CallRoundAnswered(Fact):
    """The server answered a request of the call (``result_type`` as on the wire, or
    ``error`` with its ``error_code`` and ``error_message``), with the keys of the input it
    asked for; ``is_error`` for a tool result with ``isError: true``."""

    call_id: int
    request_id: Any
    result_type: str
    input_keys: tuple[str, ...] = ()
    error_code: int | None = None
    error_message: str | None = None
    is_error: bool = False


@attrs.frozen
class CallFinished(Fact):
    """The call ended: ``outcome`` is the name of its last event (``CallCompleted``,
    ``CallFailed``, ``RoundsExhausted``, ``CallCancelled``...); ``rounds`` as counted."""

    call_id: int
    outcome: str
    rounds: int
    error_code: int | None = None


@attrs.frozen
class LegReceived(Fact):
    """Legacy wire: the server sent a request the client is to answer (``elicitation/create``,
    ``sampling/createMessage``, ``roots/list``), reported to the application as
    :class:`~mrtr_sansio.InputNeeded`; ``call_id`` is the call it belongs to (None: none).
    ``trace`` holds the :data:`TRACE_KEYS` of the request's ``params._meta`` (what the
    server's observer carried for the leg; empty when it sent none); ``session_id`` and
    ``protocol_version`` those of the legacy session."""

    call_id: int | None
    request_id: Any
    method: str
    round: int
    trace: Mapping[str, str] = attrs.field(factory=dict)
    session_id: str | None = None
    protocol_version: str | None = None


@attrs.frozen
class LegReplied(Fact):
    """A :class:`LegReceived` request ended: ``outcome`` is ``answered`` (a result went back),
    ``error`` (an error went back, :meth:`~mrtr_sansio.ClientConnection.reject`) or
    ``withdrawn`` (the server cancelled it, or the stream closed). A request of a call that
    ends is dropped with it: the :class:`CallFinished` of ``call_id`` says so."""

    request_id: Any
    outcome: str


class Observer(Protocol):
    """Receives the facts of a connection, and supplies trace context to carry onward.

    Both methods are called synchronously from the connection and must not raise; keep them
    cheap. ``carry`` is asked right after the fact that opened ``request_id``'s round: on a
    server for what to seal in the ``input_required`` state (string keys and values, at
    most :data:`CARRY_MAX_BYTES`), on a client for ``_meta`` trace keys to send. A server
    with a legacy shim also asks it right after each :class:`LegSent`, with a
    :class:`LegKey` as ``request_id``, for the trace keys to put in that leg's ``_meta``.
    """

    def observe(self, fact: Fact) -> None:
        """Record ``fact``."""
        ...

    def carry(self, connection: int, request_id: Any) -> Mapping[str, str] | None:
        """Trace context for ``request_id`` of ``connection`` to carry onward, or None."""
        ...


_keys = itertools.count(1)


def connection_key() -> int:
    """A number no other connection of this process has: what facts say they came from.
    Only drawn by connections that have an observer."""
    return next(_keys)


def trace_of(meta: Mapping[str, Any] | None) -> Mapping[str, str]:
    """The trace context keys of a request's ``_meta`` (string values only)."""
    if not meta:
        return {}
    return {k: v for k in TRACE_KEYS if type(v := meta.get(k)) is str}
