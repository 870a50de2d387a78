"""Replacing the ``requestState`` protector while a server runs: key rotation without a restart.

:class:`ServerConfig` is frozen and every connection keeps the protector it was built with, so a
new key ring cannot reach running connections through the config. Configure a
:class:`SwappableStateProtector` instead and :meth:`~SwappableStateProtector.swap` in a new
protector when the ring changes (a file was rewritten, a signal arrived, a KMS pushed a key):
every connection, long-lived ones included, seals and unseals with it from its next token on::

    protector = SwappableStateProtector(RequestStateSecurity([old]))
    config = ServerConfig(request_state=protector)
    ...
    protector.swap(RequestStateSecurity([old, new]))  # then [new, old], then [new]

Rotating a ring across instances still follows the phases of :class:`RequestStateSecurity`:
each phase reaches every instance before the next one starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ._state import OpenedState, StateBinding, StateProtector

__all__ = ["SwappableStateProtector"]


class SwappableStateProtector:
    """A :class:`StateProtector` that forwards to another one, replaceable at any time.

    A swap is one reference assignment: a seal or unseal already under way finishes with the
    protector it started with, and the next one uses the new protector. An observer's carry
    is passed on to a current protector that seals carries (``seals_carry``), and dropped for
    one that does not (its next round is then reported unlinked).
    """

    __slots__ = ("_current",)
    seals_carry: ClassVar[bool] = True

    def __init__(self, protector: StateProtector) -> None:
        self._current: StateProtector = self._checked(protector)

    @property
    def current(self) -> StateProtector:
        """The protector in use."""
        return self._current

    def swap(self, protector: StateProtector) -> StateProtector:
        """Use ``protector`` from now on; returns the one it replaces."""
        old, self._current = self._current, self._checked(protector)
        return old

    def seal(
        self,
        state: Any,
        binding: StateBinding,
        round: int,
        now: float,
        carry: Mapping[str, str] | None = None,
    ) -> str:
        """Seal with the current protector (with ``carry`` when it seals carries)."""
        current = self._current
        if carry is not None and getattr(current, "seals_carry", False) is True:
            return current.seal(state, binding, round, now, carry=carry)  # type: ignore[call-arg]
        return current.seal(state, binding, round, now)

    def unseal(self, token: str, binding: StateBinding, now: float) -> OpenedState:
        """Unseal with the current protector."""
        return self._current.unseal(token, binding, now)

    def _checked(self, protector: StateProtector) -> StateProtector:
        """``protector``, refused (TypeError) when it cannot protect state or would forward
        back to this one (every seal would recurse forever)."""
        if not all(callable(getattr(protector, name, None)) for name in ("seal", "unseal")):
            raise TypeError(
                f"protector must have seal() and unseal() (a StateProtector such as "
                f"RequestStateSecurity), got {type(protector).__name__}"
            )
        inner: Any = protector
        while isinstance(inner, SwappableStateProtector):
            if inner is self:
                raise TypeError("a SwappableStateProtector cannot forward to itself")
            inner = inner._current
        return protector
