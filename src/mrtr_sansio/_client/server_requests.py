"""The legacy half of the client: requests a 2025-11-25 server sends us, and ``initialize``.

A legacy server asks for input with real JSON-RPC requests (``elicitation/create``,
``sampling/createMessage``, ``roots/list``) while one of our requests is in flight (SEP-2260).
Each becomes the same :class:`InputNeeded` event the modern wire produces, keyed by the server's
request id and linked to our call when exactly one is in flight; the application's answer goes
back as the JSON-RPC response. A request with no call of ours in flight, an unusable one, or one
beyond our declared capabilities is answered with the error DIGEST §5.6 prescribes. (The
``initialize`` handshake lives in ``era.py``.)

Association on a stream is by timing alone, so it is kept sound: only ``tools/call``,
``prompts/get`` and ``resources/read`` can originate server requests (the scope SEP-2260 and
MRTR share), and a request we cancelled while it was in flight stays a possible origin until
the server answers a request we sent after the cancellation, which proves it read the
cancellation first (a stream is ordered). A request whose origin is not certain is unlinked.
Over Streamable HTTP the association is positional instead: a request arriving on the response
stream of one of our requests belongs to that request's call.

:class:`ServerRequests` is a pure part of the :class:`~mrtr_sansio.ClientConnection` that owns
it: it keeps the open server requests and the association rule, and tells the connection what
to do with each request (:class:`Reply`, :class:`Refuse`, :class:`Accept`); the connection
keeps the calls and their rounds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from mrtr_sansio._config import ClientConfig
from mrtr_sansio._errors import ErrorCode, JsonRpcError, RemoteProtocolError
from mrtr_sansio._events import InputNeeded, OutgoingError, OutgoingResult
from mrtr_sansio._mcp.envelope import Era
from mrtr_sansio._mcp.methods import MRTR_METHODS
from mrtr_sansio._mcp.values import EMBEDDABLE_METHODS
from mrtr_sansio._pending import Pending
from mrtr_sansio._wire.jsonrpc import error_message, is_valid_id, result_message

from .checks import check_server_request

__all__ = ["Accept", "Refuse", "Reply", "ServerRequests", "Verdict"]


@attrs.frozen
class Reply:
    """Send ``message``, a response to a server request (``error`` set when it is one)."""

    message: dict[str, Any]
    error: JsonRpcError | None = None

    def entry(self, encode: Callable[[Mapping[str, Any]], bytes]) -> Pending:
        """The outgoing-queue entry of this response, written with ``encode`` (which raises
        :class:`~mrtr_sansio.LocalProtocolError` for an answer it cannot write)."""
        msg, error = self.message, self.error
        if error is None:
            return OutgoingResult, encode(msg), msg, msg["id"], ()
        return OutgoingError, encode(msg), msg, msg["id"], (error,)


@attrs.frozen
class Refuse:
    """The request is not acceptable: report ``exc`` (answering it when ``answer``)."""

    exc: RemoteProtocolError
    answer: bool


@attrs.frozen
class Accept:
    """Surface the request to the application, linked to the call whose request ``origin``
    (one of our request ids) is in flight, or unlinked (None) when the origin is not certain.
    Give the event made of it to :meth:`ServerRequests.opened`."""

    origin: Any
    request_id: Any
    method: str
    params: dict[str, Any]


#: What :meth:`ServerRequests.on_request` decides.
Verdict = Reply | Refuse | Accept


class ServerRequests:
    """The legacy server's requests awaiting the application's answers, by server id."""

    __slots__ = ("_config", "_mark", "_open", "_unsettled")

    def __init__(self, config: ClientConfig) -> None:
        self._config = config
        self._open: dict[Any, InputNeeded] = {}
        self._unsettled = 0  # requests cancelled in flight the server may still be serving
        self._mark = 0  # the first request id sent after the latest such cancellation

    def cancelled(self, method: str, next_id: int) -> None:
        """One of our requests was cancelled in flight; ``next_id`` is the id to come next."""
        if method in MRTR_METHODS:
            self._unsettled += 1
            self._mark = next_id

    def answered(self, rid: Any) -> None:
        """The server answered our request ``rid``: if it was sent after the latest
        cancellation, the server has read every cancellation and no longer serves them."""
        if self._unsettled and type(rid) is int and rid >= self._mark:
            self._unsettled = 0

    def on_request(
        self, msg: dict[str, Any], related: Any, era: Era | None, legs: Mapping[Any, str]
    ) -> Verdict:
        """A request from the server: answer it here, refuse it, or accept it.

        ``legs`` maps each of our requests in flight to its method. ``related`` is the id of
        our request whose HTTP response stream carried it, if any: then that request is its
        only possible origin.
        """
        rid = msg["id"]
        method: str = msg["method"]
        params = msg.get("params")
        if era is Era.MODERN:
            # Modern servers never send requests, and modern clients never send responses.
            error = JsonRpcError(
                ErrorCode.INVALID_REQUEST, "A 2026-07-28 server must not send requests"
            )
            return Refuse(RemoteProtocolError(error, rid), answer=False)
        if method == "ping":
            return Reply(result_message(rid, {}))
        if related is None:
            origins = [leg for leg, m in legs.items() if m in MRTR_METHODS]
            certain = len(origins) == 1 and not self._unsettled
        else:
            origins = [related] if legs.get(related) in MRTR_METHODS else []
            certain = True
        if method not in EMBEDDABLE_METHODS:
            error = JsonRpcError.method_not_found(method)
        elif rid in self._open:
            error = JsonRpcError(ErrorCode.INVALID_REQUEST, "Invalid Request: id is already in use")
        elif len(self._open) >= self._config.limits.max_in_flight:
            error = JsonRpcError(ErrorCode.INTERNAL_ERROR, "Too many requests in flight")
        elif not origins:
            error = JsonRpcError(
                ErrorCode.INVALID_PARAMS,
                f"Invalid params: {method} must be sent while a tools/call, prompts/get or "
                "resources/read of this client is in flight (SEP-2260)",
            )
        else:
            error = check_server_request(method, params, self._config.capabilities)  # type: ignore[assignment]
        if error is not None:
            return Refuse(RemoteProtocolError(error, rid), answer=True)
        return Accept(
            origins[0] if certain else None, rid, method, params if params is not None else {}
        )

    def opened(self, event: InputNeeded) -> None:
        """``event`` (of an :class:`Accept`) went to the application: it awaits an answer."""
        self._open[event.key] = event

    def answer(self, event: InputNeeded, answer: dict[str, Any]) -> Reply | None:
        """The response carrying the application's result, or None when ``event`` is no
        longer pending. Once it is sent, :meth:`closed`."""
        if self._open.get(event.key) is not event:
            return None
        return Reply(result_message(event.key, answer))

    def answer_error(self, event: InputNeeded, error: JsonRpcError) -> Reply | None:
        """The response refusing ``event`` with ``error``, or None when it is not pending.
        Once it is sent, :meth:`closed`."""
        if self._open.get(event.key) is not event:
            return None
        return Reply(error_message(event.key, error), error)

    def closed(self, event: InputNeeded) -> None:
        """The answer to ``event`` went out: it no longer awaits one."""
        del self._open[event.key]

    def on_cancelled(self, params: dict[str, Any] | None) -> InputNeeded | None:
        """``notifications/cancelled`` from the server: the request it withdraws, if pending."""
        rid = params.get("requestId") if params is not None else None
        if not is_valid_id(rid):
            return None
        return self._open.pop(rid, None)

    def has_open(self, call: Any) -> bool:
        """Whether a request linked to ``call`` still awaits the application's answer (the
        one record of them: the connection asks instead of counting)."""
        return any(event.call is call for event in self._open.values())

    def drop_call(self, call: Any) -> None:
        """``call`` ended: its linked requests are void (the server was told, or answered)."""
        self._open = {rid: ev for rid, ev in self._open.items() if ev.call is not call}

    def close(self) -> list[InputNeeded]:
        """The stream ended: every pending request is void; return them."""
        events = list(self._open.values())
        self._open.clear()
        return events
