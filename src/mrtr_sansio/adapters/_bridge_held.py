"""The era bridge's held calls: one upstream call waiting while its questions are asked
downstream, and each of those questions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

from mrtr_sansio import InputNeeded, InputResponses, JsonRpcError

from ._bridge_upstream import UpstreamConn

__all__ = ["HeldCall", "Slot"]


class Slot:
    """One upstream question waiting for the downstream's answer."""

    __slots__ = ("answer", "done", "need")

    def __init__(self, need: InputNeeded) -> None:
        self.need = need
        self.done = anyio.Event()
        self.answer: Mapping[str, Any] | None = None


class HeldCall:
    """One upstream call held by the bridge: its task, the questions asked and its outcome."""

    def __init__(self, method: str, conn: UpstreamConn) -> None:
        self.method = method
        self.conn = conn
        self.scope = anyio.CancelScope()
        self.pending: list[Slot] = []  # questions not yet asked downstream
        self.asked: list[Slot] = []  # asked downstream, waiting for the retry
        self.outcome: Mapping[str, Any] | JsonRpcError | None = None
        # inputResponses the first request carried without a requestState: they answer the
        # upstream's first round under the same keys (a stateless server would take them).
        self.offered: InputResponses | None = None
        self.waiting = False  # a handler is waiting on it (not expired then)
        self._changed = anyio.Event()

    def changed(self) -> None:
        """Wake the handler waiting in :meth:`wait`."""
        self._changed.set()

    async def wait(self) -> None:
        """Until :meth:`changed` is next called."""
        await self._changed.wait()
        self._changed = anyio.Event()
