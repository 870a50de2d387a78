"""Every event a connection reports, the client's call handle, every outgoing item.

Three families, all frozen attrs classes:

* **events** (``next_event()``): what the peer did, as the application needs to see it;
* **handles** (:class:`Call`): what a client operation is known by across its rounds;
* **outgoing** (``outgoing()``): what must be written, serialized, with routing facts.

The application answers through the connection's methods (``respond``, ``notify``, ...).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from ._errors import ErrorCode, JsonRpcError
from ._mcp.capabilities import declares_tasks
from ._mcp.envelope import CLIENT_CAPABILITIES, CLIENT_INFO, PROTOCOL_VERSION_KEY, Era
from ._mcp.methods import RESOURCE_METHOD, TARGET_KINDS, TASK_METHOD
from ._mcp.session import LegacySession
from ._mcp.values import NO_RESPONSES, InputResponses
from .http._names import http_status

__all__ = [
    "NEED_DATA",
    "Call",
    "CallCompleted",
    "CallFailed",
    "ConnectionClosed",
    "EraDetected",
    "Event",
    "FulfilRequest",
    "HandshakeFailed",
    "InputNeeded",
    "InputWithdrawn",
    "InvalidMessage",
    "NotificationReceived",
    "Outgoing",
    "OutgoingError",
    "OutgoingInputRequired",
    "OutgoingNotification",
    "OutgoingRequest",
    "OutgoingResponse",
    "OutgoingResult",
    "PingAnswered",
    "RequestCancelled",
    "RequestReceived",
    "RequestStateRejected",
    "RoundsExhausted",
    "Sentinel",
    "SessionInitialized",
    "UnexpectedResponse",
]


class Sentinel(enum.Enum):
    NEED_DATA = "NEED_DATA"

    def __repr__(self) -> str:
        return self.value


#: Returned by ``next_event()`` when nothing more can happen until more data arrives.
NEED_DATA: Literal[Sentinel.NEED_DATA] = Sentinel.NEED_DATA


class Event:
    """Base class of everything ``next_event()`` returns."""

    __slots__ = ()


# --- server-side events -----------------------------------------------------------------------


@attrs.frozen(eq=False, slots=False, init=False)
class RequestReceived(Event):
    """A request for the application to answer with ``respond(request_id, ...)``.

    ``session`` is the legacy session the request arrived in, or None on the modern wire; the
    envelope facts (``era``, ``protocol_version``, ``client_capabilities``, ``client_info``)
    come from this request's own ``_meta`` on the modern wire and from ``initialize`` on the
    legacy one. ``request_state`` is the state the handler wrote (unsealed when the server seals
    state); ``round`` counts attempts at the same operation, starting at 1, and is None when it
    cannot be known (a modern retry whose state does not carry it). ``principal`` is the
    authenticated caller the transport or application supplied. ``task_id`` is set when the
    handler runs as a task (tasks extension): answer it with ``ServerConnection.settle_task``.
    """

    request_id: str | int
    method: str
    params: Mapping[str, Any]
    session: LegacySession | None = None
    request_state: Any = None
    round: int | None = 1
    principal: str | None = None
    task_id: str | None = None

    def __init__(
        self,
        request_id: str | int,
        method: str,
        params: Mapping[str, Any],
        session: LegacySession | None = None,
        request_state: Any = None,
        round: int | None = 1,
        principal: str | None = None,
        task_id: str | None = None,
    ) -> None:
        # Written out, as attrs would, without its per-call setattr binding: docs/performance.md.
        fields = self.__dict__
        fields["request_id"] = request_id
        fields["method"] = method
        fields["params"] = params
        fields["session"] = session
        fields["request_state"] = request_state
        fields["round"] = round
        fields["principal"] = principal
        fields["task_id"] = task_id

    @property
    def era(self) -> Era:
        """The wire this request arrived on."""
        return Era.MODERN if self.session is None else Era.LEGACY

    @property
    def protocol_version(self) -> str:
        """The request's protocol version (modern) or the session's negotiated one (legacy)."""
        session = self.session
        if session is None:
            version: str = self.params["_meta"][PROTOCOL_VERSION_KEY]
            return version
        return session.protocol_version

    @property
    def client_capabilities(self) -> Mapping[str, Any]:
        """What the client declared: in this request's envelope, or in ``initialize``."""
        session = self.session
        if session is None:
            caps: Mapping[str, Any] = self.params["_meta"][CLIENT_CAPABILITIES]
            return caps
        return session.client_capabilities

    @property
    def tasks_declared(self) -> bool:
        """Whether this request's client capabilities carry the tasks extension."""
        return declares_tasks(self.client_capabilities)

    @property
    def can_create_task(self) -> bool:
        """Whether the handler may answer :class:`~mrtr_sansio.tasks.RunAsTask`: a modern
        ``tools/call`` whose client declared the tasks extension, not already a task's run."""
        return (
            self.task_id is None
            and self.session is None
            and self.method == TASK_METHOD
            and self.tasks_declared
        )

    @property
    def client_info(self) -> Mapping[str, Any] | None:
        """The client's self-reported name and version, if it sent them."""
        session = self.session
        if session is None:
            info: Mapping[str, Any] | None = self.params["_meta"].get(CLIENT_INFO)
            return info
        return session.client_info

    @property
    def input_responses(self) -> InputResponses:
        """The client's answers to the previous round's input requests (may be empty)."""
        raw = self.params.get("inputResponses")
        return NO_RESPONSES if raw is None else InputResponses(raw)

    def input_response(self, key: str) -> Mapping[str, Any] | None:
        """The answer under ``key`` (any str-like key), or None."""
        return self.input_responses.get_response(key)

    @property
    def arguments(self) -> Mapping[str, Any]:
        """``params.arguments`` (tools/call, prompts/get), or an empty mapping."""
        args = self.params.get("arguments")
        return args if isinstance(args, Mapping) else {}

    @property
    def name(self) -> str | None:
        """``params.name`` (tool or prompt name), or None."""
        name = self.params.get("name")
        return name if isinstance(name, str) else None

    @property
    def uri(self) -> str | None:
        """``params.uri`` (resources/read), or None."""
        uri = self.params.get("uri")
        return uri if isinstance(uri, str) else None

    @property
    def meta(self) -> Mapping[str, Any]:
        """``params._meta`` (progress token, trace context, envelope), or an empty mapping."""
        meta = self.params.get("_meta")
        return meta if isinstance(meta, Mapping) else {}

    def missing_capability(
        self, required: Mapping[str, Any], message: str | None = None
    ) -> JsonRpcError:
        """The -32021 error to answer with when the handler needs an undeclared capability.

        On the legacy wire -32021 does not exist; the same facts go out as -32603.
        """
        error = JsonRpcError.missing_capability(required, message)
        if self.era is Era.LEGACY:
            return JsonRpcError.internal(error.message, error.data)
        return error

    def unknown(self, what: str = "") -> JsonRpcError:
        """-32602 for an unknown tool, prompt or resource (``data.uri`` for resources)."""
        if self.method == RESOURCE_METHOD:
            return JsonRpcError(
                ErrorCode.INVALID_PARAMS, f"Resource not found: {self.uri}", {"uri": self.uri}
            )
        label = TARGET_KINDS.get(self.method, "target")
        return JsonRpcError(ErrorCode.INVALID_PARAMS, f"Unknown {label}: {what or self.name}")

    def method_not_found(self) -> JsonRpcError:
        """-32601 for a method this server does not implement."""
        return JsonRpcError(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {self.method}")


@attrs.frozen
class NotificationReceived(Event):
    """A notification from the peer that the connection does not consume itself."""

    method: str
    params: Mapping[str, Any] | None


@attrs.frozen
class RequestCancelled(Event):
    """The peer cancelled one of its requests; nothing will be sent for it any more."""

    request_id: str | int
    reason: str | None


@attrs.frozen
class SessionInitialized(Event):
    """A legacy ``initialize`` was answered: the session's version and client facts."""

    protocol_version: str
    client_capabilities: Mapping[str, Any]
    client_info: Mapping[str, Any] | None


@attrs.frozen
class UnexpectedResponse(Event):
    """A response whose id matches nothing we are waiting for (late, duplicate or bogus)."""

    response_id: Any
    message: Mapping[str, Any]


@attrs.frozen
class InvalidMessage(Event):
    """The peer sent something invalid; ``answered`` says whether an error reply went out."""

    error: JsonRpcError
    request_id: Any
    answered: bool


@attrs.frozen
class RequestStateRejected(Event):
    """A ``requestState`` failed verification. ``reason`` never goes on the wire."""

    request_id: str | int
    method: str
    reason: str


@attrs.frozen
class RoundsExhausted(Event):
    """A multi round-trip operation hit its round cap and was ended.

    Server (legacy shim): ``call`` is the original :class:`RequestReceived`. Client: ``call`` is
    the :class:`Call`. ``last_result`` is the last ``input_required`` result, as wire JSON (a
    legacy client: the server request that would have started one round too many).
    ``asked_again`` (client, modern wire): the ``inputRequests`` keys of the last result that
    the client had just answered, the answers that did not satisfy the server.
    """

    call: Any
    rounds: int
    last_result: Mapping[str, Any]
    asked_again: tuple[str, ...] = ()


@attrs.frozen
class PingAnswered(Event):
    """The peer answered our ``ping`` (``ok`` is False if it answered with an error)."""

    request_id: int
    ok: bool


@attrs.frozen
class ConnectionClosed(Event):
    """The peer closed the stream (``receive_data(b"")``)."""


# --- client-side events -----------------------------------------------------------------------


@attrs.frozen(eq=False)
class Call:
    """Handle of one logical client operation, stable across all its rounds and retries."""

    call_id: int
    method: str
    params: Mapping[str, Any]


@attrs.frozen
class InputNeeded(Event):
    """The server needs one piece of input for ``call``; answer it with ``fulfil``.

    ``key`` is the ``inputRequests`` key (modern) or the server's request id (legacy).
    ``call`` is None for a legacy server request that could not be tied to one call.
    """

    call: Call | None
    key: str | int
    method: str
    params: Mapping[str, Any]
    round: int


@attrs.frozen
class InputWithdrawn(Event):
    """The server cancelled a pending legacy request; its :class:`InputNeeded` is void."""

    call: Call | None
    key: str | int


@attrs.frozen
class CallCompleted(Event):
    """The operation ended with a final result (``resultType`` complete, or absent)."""

    call: Call
    result: Mapping[str, Any]


@attrs.frozen
class CallFailed(Event):
    """The operation ended with an error: a JSON-RPC error, or an invalid server response.

    ``local`` is True when the connection made the error itself (the server's response broke
    a rule, or the stream closed); the message says why. Such errors carry -32603 and are
    for logs, not users.
    """

    call: Call
    error: JsonRpcError
    local: bool = False

    @property
    def required_capabilities(self) -> Mapping[str, Any] | None:
        """For -32021: the capabilities the server said it needs."""
        data = self.error.data
        if isinstance(data, Mapping) and isinstance(data.get("requiredCapabilities"), Mapping):
            caps: Mapping[str, Any] = data["requiredCapabilities"]
            return caps
        return None

    @property
    def supported_versions(self) -> list[str] | None:
        """For -32022: the protocol versions the server serves."""
        data = self.error.data
        if isinstance(data, Mapping) and isinstance(data.get("supported"), list):
            return [v for v in data["supported"] if isinstance(v, str)]
        return None


@attrs.frozen
class EraDetected(Event):
    """The client knows which wire the server speaks: ``initialize`` was answered (legacy), or
    the ``server/discover`` probe settled on a modern version (``era="auto"``).

    ``capabilities``, ``server_info`` and ``instructions`` are the server's, when the answer
    carried them (a probe answered with a modern error carries none).
    """

    era: Era
    protocol_version: str
    capabilities: Mapping[str, Any] | None
    server_info: Mapping[str, Any] | None
    instructions: str | None


@attrs.frozen
class HandshakeFailed(Event):
    """The client could not agree on a protocol with the server; every queued call failed
    and no call can be made any more. ``local`` as in :class:`CallFailed`."""

    error: JsonRpcError
    local: bool = False


# --- outgoing ---------------------------------------------------------------------------------


@attrs.frozen
class Outgoing:
    """One message to write: ``data`` (UTF-8 JSON, no newline) and the decoded ``message``.

    ``related_request_id`` is the id of the peer request this message belongs to, so that
    transports can route it (the HTTP response or SSE stream of that request); None for
    messages that belong to no request, and for the refusal of a message whose id is already
    taken by an open request (it answers the message just received, not the open request:
    write it where that message came from).
    """

    data: bytes
    message: Mapping[str, Any]
    related_request_id: str | int | None


@attrs.frozen
class OutgoingResponse(Outgoing):
    """A response that ends a peer request (the transport may close its stream)."""


@attrs.frozen
class OutgoingResult(OutgoingResponse):
    """A final (complete) result: it ends the request, and with it the operation."""


@attrs.frozen
class OutgoingInputRequired(OutgoingResponse):
    """An ``input_required`` result (modern wire): ends this request, not the operation."""


@attrs.frozen
class OutgoingError(OutgoingResponse):
    """An error response; ``error`` is what it says, :attr:`http_status` the status a
    Streamable HTTP transport answers it with."""

    error: JsonRpcError

    @property
    def http_status(self) -> int:
        """The HTTP status the modern Streamable HTTP transport prescribes for this error."""
        return http_status(self.error.code)


@attrs.frozen
class OutgoingNotification(Outgoing):
    """A notification: progress, a log message, a subscription's news, a cancellation.

    ``related_request_id`` names the request whose stream it belongs to, if any.
    """


@attrs.frozen
class OutgoingRequest(Outgoing):
    """A request we send (client requests; server ``ping``)."""

    request_id: str | int


@attrs.frozen
class FulfilRequest(OutgoingRequest):
    """A legacy shim leg: an embedded input request sent as a real server-to-client request.

    ``related_request_id`` is the client request it serves (SEP-2260); ``key`` the
    ``inputRequests`` key it answers.
    """

    key: str
