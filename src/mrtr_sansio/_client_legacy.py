"""The legacy half of the client: requests a 2025-11-25 server sends us, and ``initialize``.

A legacy server asks for input with real JSON-RPC requests (``elicitation/create``,
``sampling/createMessage``, ``roots/list``) while one of our requests is in flight (SEP-2260).
Each becomes the same :class:`InputNeeded` event the modern wire produces, keyed by the server's
request id and linked to our call when exactly one is in flight; the application's answer goes
back as the JSON-RPC response. A request with no call of ours in flight, an unusable one, or one
beyond our declared capabilities is answered with the error DIGEST §5.6 prescribes. (The
``initialize`` handshake lives in ``_client_era.py``.)

Association on a stream is by timing alone, so it is kept sound: only ``tools/call``,
``prompts/get`` and ``resources/read`` can originate server requests (the scope SEP-2260 and
MRTR share), and a request we cancelled while it was in flight stays a possible origin until
the server answers a request we sent after the cancellation, which proves it read the
cancellation first (a stream is ordered). A request whose origin is not certain is unlinked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._client_checks import check_server_request
from ._envelope import Era
from ._errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    JsonRpcError,
    RemoteProtocolError,
)
from ._events import InputNeeded, InputWithdrawn, OutgoingError, OutgoingResult, RoundsExhausted
from ._jsonrpc import error_message, is_valid_id, result_message
from ._mrtr import EMBEDDABLE_METHODS, MRTR_METHODS

if TYPE_CHECKING:
    from ._client import ClientConnection

__all__ = ["ServerRequests"]


class ServerRequests:
    """The legacy server's requests awaiting the application's answers, by server id."""

    __slots__ = ("_conn", "_mark", "_open", "_unsettled")

    def __init__(self, conn: ClientConnection) -> None:
        self._conn = conn
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

    def on_request(self, msg: dict[str, Any]) -> None:
        """A request from the server: answer it here, or surface it as :class:`InputNeeded`."""
        conn = self._conn
        rid = msg["id"]
        method: str = msg["method"]
        params = msg.get("params")
        if conn.era is Era.MODERN:
            # Modern servers never send requests, and modern clients never send responses.
            error = JsonRpcError(INVALID_REQUEST, "A 2026-07-28 server must not send requests")
            conn._invalid(RemoteProtocolError(error, rid), answer=False)
            return
        if method == "ping":
            self._send(result_message(rid, {}), None)
            return
        origins = [st for st in conn._legs.values() if st.call.method in MRTR_METHODS]
        if method not in EMBEDDABLE_METHODS:
            error = JsonRpcError.method_not_found(method)
        elif rid in self._open:
            error = JsonRpcError(INVALID_REQUEST, "Invalid Request: id is already in use")
        elif len(self._open) >= conn._limits.max_in_flight:
            error = JsonRpcError(INTERNAL_ERROR, "Too many requests in flight")
        elif not origins:
            error = JsonRpcError(
                INVALID_PARAMS,
                f"Invalid params: {method} must be sent while a tools/call, prompts/get or "
                "resources/read of this client is in flight (SEP-2260)",
            )
        else:
            error = check_server_request(method, params, conn._caps)  # type: ignore[assignment]
        if error is not None:
            conn._invalid(RemoteProtocolError(error, rid), answer=True)
            return
        st = origins[0] if len(origins) == 1 and not self._unsettled else None
        round_ = 1
        if st is not None:
            if st.open_requests == 0:  # the previous round is answered: a new one starts
                if st.round >= conn.config.max_rounds:
                    self._exhausted(st.call, st.round, msg)
                    return
                st.round += 1
            st.open_requests += 1
            round_ = st.round
        event = InputNeeded(
            None if st is None else st.call,
            rid,
            method,
            params if params is not None else {},
            round_,
        )
        self._open[rid] = event
        conn._events.append(event)

    def _exhausted(self, call: Any, rounds: int, msg: dict[str, Any]) -> None:
        """The server asked for one round more than ``max_rounds``: end the call (cancelling
        it on the wire), refuse the request, and report :class:`RoundsExhausted` with the
        request as ``last_result``."""
        conn = self._conn
        error = JsonRpcError(
            INTERNAL_ERROR,
            f"The client ended the request after {rounds} rounds of input "
            f"(max_rounds={conn.config.max_rounds})",
        )
        self._send(error_message(msg["id"], error), error)
        conn.cancel(call, "Too many rounds of input")
        conn._events.append(RoundsExhausted(call, rounds, msg))

    def answer(self, event: InputNeeded, answer: dict[str, Any]) -> bool:
        """Send the application's result for a pending server request."""
        if self._open.get(event.key) is not event:
            return False
        self._send(result_message(event.key, answer), None)
        self._close(event)
        return True

    def answer_error(self, event: InputNeeded, error: JsonRpcError) -> bool:
        """Refuse a pending server request with ``error``."""
        if self._open.get(event.key) is not event:
            return False
        self._send(error_message(event.key, error), error)
        self._close(event)
        return True

    def on_cancelled(self, params: dict[str, Any] | None) -> None:
        """``notifications/cancelled`` from the server: withdraw its request, if pending."""
        rid = params.get("requestId") if params is not None else None
        if not is_valid_id(rid):
            return
        event = self._open.get(rid)
        if event is not None:
            self._close(event)
            self._conn._events.append(InputWithdrawn(event.call, event.key))

    def drop_call(self, call: Any) -> None:
        """``call`` ended: its linked requests are void (the server was told, or answered)."""
        self._open = {rid: ev for rid, ev in self._open.items() if ev.call is not call}

    def close(self) -> list[InputNeeded]:
        """The stream ended: every pending request is void; return them."""
        events = list(self._open.values())
        self._open.clear()
        return events

    def _send(self, msg: dict[str, Any], error: JsonRpcError | None) -> None:
        conn = self._conn
        data = conn._encode(msg)
        rid = msg["id"]
        if error is None:
            conn._out.append((OutgoingResult, data, msg, rid))
        else:
            conn._out.append((OutgoingError, data, msg, rid, error))

    def _close(self, event: InputNeeded) -> None:
        del self._open[event.key]
        call = event.call
        if call is not None:  # alive: a call's end drops its requests (drop_call)
            self._conn._calls[call.call_id].open_requests -= 1
