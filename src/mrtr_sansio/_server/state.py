"""The server's ``requestState`` seam: the one place state comes in and the one it goes out.

Incoming: the MRTR fields of a modern ``tools/call``/``prompts/get``/``resources/read`` are
validated (``inputResponses`` an object of objects within the limit, ``requestState`` a string
within the limit) and the state is unsealed by the configured :class:`StateProtector` (unless
the config says ``UNSEALED``); any
failure is -32602, and a state that fails verification is reported as a
:class:`RequestStateRejected` event whose reason never reaches the wire. Outgoing: the state a
handler returns is sealed, or passed through when it is a string and the config is ``UNSEALED``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mrtr_sansio._config import ServerConfig
from mrtr_sansio._errors import ErrorCode, JsonRpcError, RemoteProtocolError
from mrtr_sansio._events import RequestReceived, RequestStateRejected
from mrtr_sansio._mcp.envelope import invalid
from mrtr_sansio._mcp.methods import NAME_FIELDS, RESOURCE_METHOD
from mrtr_sansio._mcp.mrtr_fields import RETRY_FIELDS
from mrtr_sansio.observe import CARRY_MAX_BYTES
from mrtr_sansio.sealing._state import RequestStateError, StateBinding, Unsealed

__all__ = ["INVALID_STATE", "MRTR_FIELDS", "StateGate", "StateRejectedError"]

#: The wire answer to any state that fails verification (the reason goes to an event only).
INVALID_STATE = JsonRpcError(
    ErrorCode.INVALID_PARAMS, "Invalid or expired requestState", {"reason": "invalid_request_state"}
)
#: The request fields that exist only on the modern wire's retries.
MRTR_FIELDS = frozenset(RETRY_FIELDS)
_ABSENT: Any = object()


class StateRejectedError(RemoteProtocolError):
    """A request's ``requestState`` was refused (-32602): ``event`` tells the application
    why; the connection queues it before the refusal."""

    def __init__(self, event: RequestStateRejected) -> None:
        super().__init__(INVALID_STATE, event.request_id)
        self.event = event


class StateGate:
    """Reads the MRTR fields of incoming requests and produces outgoing state."""

    __slots__ = ("_clock", "_key", "_limits", "_observer", "_protector", "seals")

    def __init__(self, config: ServerConfig, key: int = 0) -> None:
        protector = config.request_state
        self._protector = None if isinstance(protector, Unsealed) else protector
        #: Whether outgoing state is sealed (unsealed, it must be a string).
        self.seals = self._protector is not None
        self._clock = config.clock
        self._limits = config.limits
        # the observer's carry is sealed only by protectors that say they can
        self._observer = (
            config.observer if getattr(protector, "seals_carry", False) is True else None
        )
        self._key = key  # the connection's, for the observer

    def read(
        self, rid: Any, method: str, params: Mapping[str, Any], principal: str | None
    ) -> tuple[Any, int | None, Mapping[str, str] | None]:
        """Validate ``inputResponses``/``requestState``; return (handler state, round, the
        observer's carry sealed with the state).

        The round is known only from a sealed state (its round + 1) or when neither field is
        present (1); otherwise it is None.
        """
        limits = self._limits
        responses = params.get("inputResponses", _ABSENT)
        if responses is not _ABSENT:
            if type(responses) is not dict:
                raise invalid(rid, "inputResponses must be an object")
            if len(responses) > limits.max_input_responses:
                raise invalid(
                    rid, f"inputResponses has more than {limits.max_input_responses} entries"
                )
            for value in responses.values():
                if type(value) is not dict:
                    raise invalid(rid, "each inputResponses value must be an object")
        token = params.get("requestState", _ABSENT)
        if token is _ABSENT:
            return None, (1 if responses is _ABSENT else None), None
        if type(token) is not str:
            raise invalid(rid, "requestState must be a string")
        max_state = limits.max_request_state_bytes
        if len(token) > max_state or (
            len(token) * 4 > max_state and len(token.encode("utf-8", "surrogatepass")) > max_state
        ):
            self._reject(rid, method, "oversized")
        protector = self._protector
        if protector is None:
            return token, None, None
        try:
            unsealed = protector.unseal(token, binding(method, params, principal), self._clock())
        except RequestStateError as exc:
            self._reject(rid, method, exc.reason)
        return unsealed.state, unsealed.round + 1, unsealed.carried

    def write(self, event: RequestReceived, state: Any) -> Any:
        """The ``requestState`` to send for ``state`` (None: no state), already checked by
        :func:`~mrtr_sansio._server.answers.check_input_required`."""
        if state is None:
            return None
        protector = self._protector
        if protector is None:
            return state
        if self._observer is not None:
            carry = _carry(self._observer.carry(self._key, event.request_id))
            if carry is not None:
                return protector.seal(  # type: ignore[call-arg]
                    state,
                    binding(event.method, event.params, event.principal),
                    event.round or 1,
                    self._clock(),
                    carry=carry,
                )
        return protector.seal(
            state,
            binding(event.method, event.params, event.principal),
            event.round or 1,
            self._clock(),
        )

    def _reject(self, rid: Any, method: str, reason: str) -> None:
        raise StateRejectedError(RequestStateRejected(rid, method, reason))


def _carry(carry: Any) -> Mapping[str, str] | None:
    """An observer's carry if it can be sealed: a mapping of strings whose compact JSON is
    at most :data:`CARRY_MAX_BYTES`; anything else is dropped (the next round is unlinked)."""
    if not carry or not isinstance(carry, Mapping):
        return None
    if not all(type(k) is str and type(v) is str for k, v in carry.items()):
        return None
    size = len(json.dumps(dict(carry), separators=(",", ":"), ensure_ascii=True))
    return carry if size <= CARRY_MAX_BYTES else None


def binding(method: str, params: Mapping[str, Any], principal: str | None) -> StateBinding:
    """What a state is bound to: the method, its target, its arguments, the caller."""
    target = params.get(NAME_FIELDS[method])
    return StateBinding(
        method,
        target if isinstance(target, str) else None,
        None if method == RESOURCE_METHOD else params.get("arguments"),
        principal,
    )
