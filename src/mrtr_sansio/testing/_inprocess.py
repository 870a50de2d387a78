"""Run a handler on our own ServerConnection as a callable server, without an event loop.

The handler has the adapters' signature (``handler(request, ctx)``, async or plain) and must
answer without suspending: an in-process driver cannot wait for anything. Each message goes in
as one NDJSON line, so the stream path (framing, codec) is exercised as a stdio server would.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, TypeVar

from mrtr_sansio import (
    NEED_DATA,
    ErrorCode,
    JsonRpcError,
    LocalProtocolError,
    OutgoingResponse,
    RequestReceived,
    ServerConfig,
    ServerConnection,
)
from mrtr_sansio.adapters import HandlerResult, RequestContext, call_handler

__all__ = ["InProcessServer", "in_process_server"]

T = TypeVar("T")

#: A handler as the adapters take it, or a plain function with the same arguments.
AnyHandler = Callable[[RequestReceived, RequestContext], "Awaitable[HandlerResult] | HandlerResult"]


def run_to_completion(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends and return its value.

    Raises RuntimeError if it awaits something that would need an event loop.
    """
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError(
        "the handler awaited something that needs an event loop; the in-process driver only "
        "runs handlers that answer without suspending"
    )


async def _no_sleep(_seconds: float) -> None:
    """``ctx.sleep`` in process: time does not pass."""


class InProcessServer:
    """A callable server: ``server(message) -> response or None``.

    ``connection`` is the :class:`~mrtr_sansio.ServerConnection` it feeds; ``sent`` keeps every
    message the server wrote (notifications included), oldest first, up to ``keep`` of them.
    """

    def __init__(
        self,
        handler: AnyHandler,
        config: ServerConfig | None = None,
        *,
        principal: str | None = None,
        keep: int = 1000,
    ) -> None:
        self.connection = ServerConnection(config, principal=principal)
        self.sent: list[dict[str, Any]] = []
        self._handler = handler
        self._keep = keep

    async def _call(self, request: RequestReceived, ctx: RequestContext) -> HandlerResult:
        result = self._handler(request, ctx)
        if inspect.isawaitable(result):
            return await result
        return result

    def _answer(self, request: RequestReceived) -> None:
        conn = self.connection
        ctx = RequestContext(conn, request, lambda: None, _no_sleep)
        result = run_to_completion(call_handler(self._call, ctx))
        try:
            conn.respond(request.request_id, result)
        except LocalProtocolError:
            # What the adapters do with an answer the protocol forbids (e.g. input_required
            # on tools/list): the client sees an internal error.
            conn.respond(
                request.request_id, JsonRpcError(ErrorCode.INTERNAL_ERROR, "Internal error")
            )

    def __call__(self, message: Mapping[str, Any]) -> dict[str, Any] | None:
        conn = self.connection
        conn.receive_data(json.dumps(message).encode() + b"\n")
        while (event := conn.next_event()) is not NEED_DATA:
            if type(event) is RequestReceived:
                self._answer(event)
        response: dict[str, Any] | None = None
        for item in conn.outgoing():
            message_out: dict[str, Any] = json.loads(item.data)
            self.sent.append(message_out)
            if isinstance(item, OutgoingResponse):
                response = message_out
        if len(self.sent) > self._keep:
            del self.sent[: len(self.sent) - self._keep]
        return response


def in_process_server(
    handler: AnyHandler,
    config: ServerConfig | None = None,
    *,
    principal: str | None = None,
    keep: int = 1000,
) -> InProcessServer:
    """A callable server running ``handler`` on a :class:`~mrtr_sansio.ServerConnection`
    (``principal`` is bound into sealed state; ``keep`` bounds :attr:`InProcessServer.sent`)."""
    return InProcessServer(handler, config, principal=principal, keep=keep)
