"""What every server adapter shares above its loop: the handler signature and the context
handlers get.

A handler is written once and served by every async adapter::

    async def handler(request: RequestReceived, ctx: RequestContext) -> HandlerResult: ...

It returns a result mapping, an :class:`~mrtr_sansio.InputRequiredResult` or a
:class:`~mrtr_sansio.JsonRpcError`. It must not import an async library: it sleeps with
``await ctx.sleep(s)`` and sends progress and log messages through ``ctx``, so the same handler
runs under asyncio, trio, and any ASGI server. The blocking stdio adapter takes the same
handler written with ``def`` and a :class:`BlockingRequestContext`.

The loops' IO-free halves, and the one path by which an answer reaches the connection, are in
:mod:`mrtr_sansio.adapters._loop`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, TypeAlias, TypeVar

from mrtr_sansio import (
    InputRequiredResult,
    JsonRpcError,
    RequestReceived,
    ServerConfig,
    ServerConnection,
)
from mrtr_sansio.observe import Transport
from mrtr_sansio.tasks import RunAsTask

__all__ = [
    "PIPE",
    "BlockingHandler",
    "BlockingRequestContext",
    "Handler",
    "HandlerResult",
    "RequestContext",
    "announce_state_key",
    "call_blocking_handler",
    "call_handler",
]

log = logging.getLogger("mrtr_sansio.adapters")

#: What a handler returns: a result mapping, an input request, an error, or (tasks
#: extension, when ``request.can_create_task``) :class:`~mrtr_sansio.tasks.RunAsTask`.
HandlerResult: TypeAlias = Mapping[str, Any] | InputRequiredResult | JsonRpcError | RunAsTask

#: Bytes asked of the transport per read.
READ_SIZE = 64 * 1024
#: What observers are told of a stdio wire (``network.transport=pipe``).
PIPE = Transport("pipe")


SleepT = TypeVar("SleepT")


class _Context(Generic[SleepT]):
    """Notifications tied to one request, and the adapter's sleep: what contexts share.

    ``flush`` is called after anything is queued on the connection, so that the adapter writes
    it out at once (progress and log messages must reach the client while the handler runs).
    ``effects`` receives each :meth:`effect` the handler declares (the replay checker passes
    one; served, effects are only logged).
    """

    __slots__ = ("_conn", "_effects", "_flush", "_sleep", "request")

    def __init__(
        self,
        conn: ServerConnection,
        request: RequestReceived,
        flush: Callable[[], None],
        sleep: SleepT,
        *,
        effects: Callable[[str, Mapping[str, Any]], None] | None = None,
    ) -> None:
        self._conn = conn
        self._flush = flush
        self._sleep = sleep
        self._effects = effects
        self.request = request

    @property
    def connection(self) -> ServerConnection:
        """The connection the request arrived on."""
        return self._conn

    def flush(self) -> None:
        """Hand whatever the connection has queued to the transport now."""
        self._flush()

    def now(self) -> float:
        """The server's wall clock in seconds (``ServerConfig.clock``).

        Read time here rather than from ``time``: the server injects its clock, and the replay
        checker varies it to find questions that change from one run of a round to the next.
        """
        return self._conn.config.clock()

    def token_hex(self, nbytes: int = 16) -> str:
        """``nbytes`` random bytes as hex, from the server's source (``ServerConfig.token_hex``).

        Like :meth:`now`, injected: the replay checker varies it between runs of a round.
        """
        return self._conn.config.token_hex(nbytes)

    def effect(self, name: str, /, **details: Any) -> None:
        """Declare a change this run makes to the world (a VM created, a mail sent, a charge).

        A handler re-runs from the top on every round, so an effect made in a round that then
        asks for input happens again on the next round. Served, this only logs at DEBUG; under
        the replay checker (:func:`mrtr_sansio.testing.check_replay`) it is recorded and such a
        round is reported.
        """
        if self._effects is not None:
            self._effects(name, details)
        else:
            log.debug("effect %s %r for %s", name, details, self.request.request_id)

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification related to this request (dropped once it has been answered)."""
        self._conn.notify(method, params, self.request.request_id)
        self._flush()

    def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> bool:
        """Report progress if the request asked for it (``_meta.progressToken``).

        A token that is not a string or an integer is ignored: echoing it would make an invalid
        notification.
        """
        token = self.request.meta.get("progressToken")
        if type(token) is not str and type(token) is not int:
            return False
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self.notify("notifications/progress", params)
        return True

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send a log message; the connection drops it unless the client asked for that level."""
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        self.notify("notifications/message", params)


class RequestContext(_Context[Callable[[float], Awaitable[None]]]):
    """A handler's view of its transport: notifications tied to its request, and sleeping.

    Built as ``RequestContext(conn, request, flush, sleep)``.
    """

    __slots__ = ()

    async def sleep(self, seconds: float) -> None:
        """Sleep with whatever async library the adapter runs on."""
        await self._sleep(seconds)


class BlockingRequestContext(_Context[Callable[[float], None]]):
    """:class:`RequestContext` for blocking handlers (the stdio adapter)."""

    __slots__ = ()

    def sleep(self, seconds: float) -> None:
        """Block for ``seconds``; the adapter may end it early if the request is cancelled."""
        self._sleep(seconds)


#: An async handler, served by the asyncio, trio and ASGI adapters alike.
Handler: TypeAlias = Callable[[RequestReceived, RequestContext], Awaitable[HandlerResult]]
#: A plain-function handler, served by the blocking stdio adapter.
BlockingHandler: TypeAlias = Callable[[RequestReceived, BlockingRequestContext], HandlerResult]


def _handler_failed(request: RequestReceived) -> JsonRpcError:
    log.exception("handler failed for %s %r", request.method, request.request_id)
    return JsonRpcError.internal()


async def call_handler(handler: Handler, ctx: RequestContext) -> HandlerResult:
    """Run ``handler``; an exception becomes -32603 (logged, never leaked to the client)."""
    try:
        return await handler(ctx.request, ctx)
    except Exception:
        return _handler_failed(ctx.request)


def call_blocking_handler(handler: BlockingHandler, ctx: BlockingRequestContext) -> HandlerResult:
    """Run a blocking ``handler``; an exception becomes -32603, as in :func:`call_handler`."""
    try:
        return handler(ctx.request, ctx)
    except Exception:
        return _handler_failed(ctx.request)


_announced: list[bool] = []


def announce_state_key(config: ServerConfig) -> None:
    """Log once per process, at WARNING, that ``requestState`` is sealed with the default
    per-process key: right for one process, wrong for several instances or restarts. Only
    servers that several processes could share call it (HTTP); a stream server (stdio) is one
    process per client, where the per-process key is right, and stays quiet."""
    if config.seals_with_process_key and not _announced:
        _announced.append(True)
        log.warning(
            "requestState is sealed with a random key made for this process (the default): "
            "a retry that reaches another process, or this one after a restart, is refused. "
            "Deployments with several processes must configure the same key ring everywhere: "
            "ServerConfig(request_state=RequestStateSecurity(keys=[...]))"
        )
