"""The seam between the server connection and ``requestState`` protection.

The connection produces outgoing state and reads incoming state in exactly one place each, and
goes through a :class:`StateProtector` there. With :data:`UNSEALED` configured instead, state
travels as the handler wrote it (a string), which the spec allows only when tampering can cause
nothing worse than request failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import attrs

__all__ = [
    "UNSEALED",
    "OpenedState",
    "RequestStateError",
    "StateBinding",
    "StateProtector",
    "Unsealed",
]


@attrs.frozen(slots=False, init=False)
class StateBinding:
    """What a sealed state is bound to: the request it belongs to and who made it.

    ``target`` is the tool or prompt name or the resource URI; ``arguments`` the salient
    parameters (``arguments`` of tools/call and prompts/get, None for resources/read);
    ``principal`` the authenticated caller as the adapter or application supplied it.
    """

    method: str
    target: str | None
    arguments: Any
    principal: str | None

    def __init__(
        self, method: str, target: str | None, arguments: Any, principal: str | None
    ) -> None:
        # Written out, as attrs would, without its per-call setattr binding: bench/README.md.
        fields = self.__dict__
        fields["method"] = method
        fields["target"] = target
        fields["arguments"] = arguments
        fields["principal"] = principal


@attrs.frozen(slots=False, init=False)
class OpenedState:
    """What :meth:`StateProtector.unseal` opens a token into: the state a handler wrote, and
    the round that wrote it (named ``UnsealedState`` before; ``UNSEALED`` is something else,
    the choice not to seal at all);
    ``carried`` is the observer's trace context sealed beside it (``mrtr_sansio.observe``)."""

    state: Any
    round: int
    carried: Mapping[str, str] | None = None

    def __init__(self, state: Any, round: int, carried: Mapping[str, str] | None = None) -> None:
        # Written out, as attrs would, without its per-call setattr binding: bench/README.md.
        fields = self.__dict__
        fields["state"] = state
        fields["round"] = round
        fields["carried"] = carried


class RequestStateError(Exception):
    """A token failed verification; ``reason`` is for logs and events, never for the wire."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class StateProtector(Protocol):
    """Seals the state a handler returns and opens the token a client echoes back.

    ``seal`` takes any JSON value; ``unseal`` returns it or raises :class:`RequestStateError`.
    ``now`` is the connection's clock reading, so that implementations never read time.
    A protector whose class sets ``seals_carry = True`` also takes ``seal(..., carry=...)``
    (an observer's trace context, string to string, passed only when there is one) and
    returns it as :attr:`OpenedState.carried`; :class:`RequestStateSecurity` does.
    """

    def seal(self, state: Any, binding: StateBinding, round: int, now: float) -> str:
        """The token for ``state``, written by the handler in ``round``, bound to ``binding``."""
        ...

    def unseal(self, token: str, binding: StateBinding, now: float) -> OpenedState:
        """The state in ``token`` if it verifies for ``binding`` at ``now``; else raises
        :class:`RequestStateError`."""
        ...


@attrs.frozen(repr=False)
class Unsealed:
    """The type of :data:`UNSEALED`: the explicit choice to send ``requestState`` unprotected."""

    def __repr__(self) -> str:
        return "UNSEALED"


#: ``ServerConfig(request_state=UNSEALED)``: state is not sealed but passed through as the
#: handler wrote it (a string) and read back as the client sent it. Choose it only when a
#: tampered state can cause nothing worse than a failed request; the default seals.
UNSEALED = Unsealed()
