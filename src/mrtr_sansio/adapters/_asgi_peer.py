"""One server connection as the ASGI app holds it (:class:`Peer`: a stateless POST's, or a
legacy session's), which hands what it produces to the exchanges answering on it (events where
:func:`~mrtr_sansio.adapters._loop.route_of` says, as every server adapter does; outgoing
items by the request they belong to), and what observers are told of the HTTP side (the
transport, a fault's answer)."""

from __future__ import annotations

import json
import logging
from typing import Any

from mrtr_sansio import (
    Era,
    JsonRpcError,
    Outgoing,
    RequestCancelled,
    RequestReceived,
    ServerConnection,
)
from mrtr_sansio.observe import Transport
from mrtr_sansio.tasks import TaskCancelled, TaskStoreError

from ._asgi_stream import Exchange, Scope
from ._loop import CANCEL, HANDLER, TASK_CANCEL, TASK_RUN, route_of

__all__ = ["IDLE_CONNECTIONS", "Peer", "fault", "may_stream", "request_id", "transport"]

log = logging.getLogger("mrtr_sansio.adapters.asgi")

#: Idle stateless connections kept for the POSTs to come: a connection that answered its
#: request and holds nothing of it serves the next one instead of a new one being built.
#: Beyond this many idle at once (after a burst), a finished connection is dropped.
IDLE_CONNECTIONS = 64


class Peer:
    """A connection plus the exchanges currently answering on it (one POST, or a session)."""

    __slots__ = ("broken", "conn", "exchanges", "session_id", "task_cancels", "task_runs")

    def __init__(self, conn: ServerConnection, session_id: str | None = None) -> None:
        self.conn = conn
        self.session_id = session_id
        #: A store fault interrupted a call on the connection: never reuse it.
        self.broken = False
        self.exchanges: dict[Any, Exchange] = {}
        #: Runs of tasks (tasks extension) to do once the POST is answered, and task ids
        #: the client cancelled.
        self.task_runs: list[RequestReceived] = []
        self.task_cancels: list[str] = []

    def pump(self) -> tuple[list[RequestReceived], list[Outgoing]]:
        """Route what the connection produced: outgoing items and replays to their exchanges.

        Returns what no exchange owns: new requests (from the POST just fed) and items such as
        the connection's own answers (``initialize``, ``server/discover``, refusals).
        """
        conn = self.conn
        fresh: list[RequestReceived] = []
        unrouted: list[Outgoing] = []
        # Outgoing items first: when a request is cancelled, the cancellations of its legs were
        # queued before its RequestCancelled, and must reach its stream before the stream ends.
        for item in conn.outgoing():
            exchange = self.exchanges.get(item.related_request_id)
            if exchange is not None:
                exchange.put(item)
            else:
                unrouted.append(item)
        for event in conn.events():
            route = route_of(event)
            if route is HANDLER:
                assert isinstance(event, RequestReceived)
                exchange = self.exchanges.get(event.request_id)
                if exchange is None:
                    fresh.append(event)
                else:
                    exchange.put(event)  # a replay (legacy shim): its exchange runs it
            elif route is CANCEL:
                assert isinstance(event, RequestCancelled)
                exchange = self.exchanges.get(event.request_id)
                if exchange is not None:
                    exchange.put(event)
            elif route is TASK_RUN:
                assert isinstance(event, RequestReceived)
                self.task_runs.append(event)
            elif route is TASK_CANCEL:
                assert isinstance(event, TaskCancelled)
                self.task_cancels.append(event.task_id)
            else:
                log.debug("event: %r", event)
        return fresh, unrouted

    @property
    def idle(self) -> bool:
        """Whether nothing of any request is left here: the peer may serve another POST."""
        return (
            self.conn.reusable
            and not self.broken
            and not self.exchanges
            and not self.task_runs
            and not self.task_cancels
        )

    def flush(self) -> None:
        """Route what can be routed (used while handlers run); log what cannot."""
        fresh, unrouted = self.pump()
        for item in unrouted:
            log.debug("no stream for %r", item.message)
        if fresh:  # pragma: no cover - requests only arrive with a POST, which pumps itself
            log.warning("requests arrived outside a POST: %r", fresh)


def may_stream(event: RequestReceived) -> bool:
    """Whether a modern request could get notifications before its result."""
    meta = event.meta
    return (
        "progressToken" in meta
        or "io.modelcontextprotocol/logLevel" in meta
        or event.method == "subscriptions/listen"
        or event.era is Era.LEGACY
    )


_TRANSPORTS: dict[Any, Transport] = {}


def transport(scope: Scope) -> Transport:
    """What observers are told of a POST's wire: TCP, HTTP, the scope's HTTP version and
    the peer's address when the server gives it (``scope["client"]``)."""
    version = scope.get("http_version")
    peer = scope.get("client")
    if peer:
        return Transport("tcp", "http", version, client_address=peer[0], client_port=peer[1])
    found = _TRANSPORTS.get(version)
    if found is None:
        found = _TRANSPORTS[version] = Transport("tcp", "http", version)
    return found


def fault(exc: Exception, doing: str) -> JsonRpcError:
    """-32603 for an exception a connection call let through: a store fault says what failed
    (its message names no secret); anything else is logged and stays private."""
    if isinstance(exc, TaskStoreError):
        log.error("store fault while %s: %s", doing, exc)
        return JsonRpcError.internal(str(exc))
    log.error("unexpected failure while %s", doing, exc_info=exc)
    return JsonRpcError.internal()


def request_id(body: bytes) -> Any:
    """The id of the request in ``body`` when there is a plain one (for a fault's answer)."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    rid = message.get("id") if isinstance(message, dict) else None
    return rid if type(rid) in (str, int) else None
