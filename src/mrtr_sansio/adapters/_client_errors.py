"""The exceptions a client call raises instead of returning a result, shared by every client
adapter (the typed face of ``CallFailed``, ``RoundsExhausted`` and ``HandshakeFailed``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mrtr_sansio import Call, JsonRpcError

__all__ = [
    "CallFailedError",
    "ClientError",
    "ConnectionClosedError",
    "HandshakeFailedError",
    "InputRejectedError",
    "RoundsExhaustedError",
]


class ClientError(Exception):
    """Base of what a client call raises when it does not return a result."""


class CallFailedError(ClientError):
    """The call ended with a JSON-RPC error: the server's, or one the connection made
    (``local``: the server's response broke a rule, or the stream closed; for logs, not users).
    """

    def __init__(self, call: Call | None, error: JsonRpcError, *, local: bool = False) -> None:
        what = "the handshake" if call is None else call.method
        super().__init__(f"{what} failed: {error.message} ({error.code})")
        self.call = call
        self.error = error
        self.local = local

    @property
    def code(self) -> int:
        """The JSON-RPC error code."""
        return self.error.code

    @property
    def required_capabilities(self) -> Mapping[str, Any] | None:
        """For -32021: the client capabilities the server said it needs."""
        caps = self._data("requiredCapabilities")
        return caps if isinstance(caps, Mapping) else None

    @property
    def supported_versions(self) -> list[str] | None:
        """For -32022: the protocol versions the server serves."""
        versions = self._data("supported")
        return [v for v in versions if isinstance(v, str)] if isinstance(versions, list) else None

    def _data(self, field: str) -> Any:
        data = self.error.data
        return data.get(field) if isinstance(data, Mapping) else None


class ConnectionClosedError(CallFailedError):
    """The stream ended (the server exited or closed it) before the call did."""


class HandshakeFailedError(CallFailedError):
    """No protocol could be agreed with the server; no call can be made."""


class RoundsExhaustedError(ClientError):
    """The server still asked for input after ``ClientConfig.max_rounds`` rounds; the call was
    ended. ``last_result`` is the last ``input_required`` result (legacy: the server request
    that would have started one round too many). ``asked_again``: the ``inputRequests`` keys
    the server asked again right after the client answered them; the message names them, or
    the keys (legacy: the request method) still asked."""

    def __init__(
        self,
        call: Call,
        rounds: int,
        last_result: Mapping[str, Any],
        asked_again: tuple[str, ...] = (),
    ) -> None:
        message = f"{call.method} still needed input after {rounds} rounds"
        asked = last_result.get("inputRequests")
        if asked_again:
            keys = ", ".join(repr(k) for k in asked_again)
            message += f": the server asked again for {keys}; the answer given did not satisfy it"
        elif isinstance(asked, Mapping) and asked:
            message += f": the server still asked for {', '.join(repr(k) for k in asked)}"
        elif isinstance(last_result.get("method"), str):
            message += f": the server still sent {last_result['method']}"
        super().__init__(message)
        self.call = call
        self.rounds = rounds
        self.last_result = last_result
        self.asked_again = asked_again


class InputRejectedError(ClientError):
    """Raise it in a callback to refuse a request (the user said no to sampling, say).

    Legacy wire: the server's request is answered with ``error`` (default -1, "User rejected
    the request") and the call goes on. Modern wire: an embedded request has no error channel,
    so the call is abandoned and raises this exception. For elicitation prefer returning
    ``{"action": "decline"}``, which the server sees on both wires.
    """

    def __init__(self, error: JsonRpcError | None = None) -> None:
        super().__init__(error.message if error is not None else "input rejected")
        self.error = error
