"""Serve an ASGI app (such as :class:`~mrtr_sansio.adapters.asgi.McpHttpApp`) with uvicorn,
with connection hygiene on by default (``server`` extra).

Plain uvicorn keeps a connection that never sends a byte open forever, lets a client that
sends its request one byte at a time hold a connection as long as it likes, has no cap on
connections, and (with its pure-Python ``h11`` parser) runs a request smuggled behind
``Content-Length`` + ``Transfer-Encoding``. :func:`serve_http` closes those doors:

* a keep-alive connection idle between requests is closed after ``keep_alive_timeout``;
* a request must arrive whole, head and body, within ``request_timeout`` of the connection
  being ready for it (opened, or done with the previous response), else the connection is
  closed: this also closes a connection that never sends anything;
* at most ``limit_concurrency`` connections and tasks at once (503 beyond), kept below the
  process's open-file limit so the accept loop never runs out of descriptors;
* ``httptools`` (``uvicorn[standard]``) is preferred: it refuses ``Content-Length`` with
  ``Transfer-Encoding`` itself; :class:`~mrtr_sansio.adapters.asgi.McpHttpApp` refuses them
  under any parser too, and closes the connection;
* uvicorn chooses the event loop (``uvloop`` when installed).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal

import attrs

if TYPE_CHECKING:
    import asyncio

    import uvicorn

__all__ = ["ServeOptions", "http_server", "serve_http"]

log = logging.getLogger("mrtr_sansio.adapters.serve")

#: Descriptors kept free beside ``limit_concurrency`` (listening socket, logs, key files).
FD_HEADROOM = 64


def _positive(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{attribute.name}: must be positive, got {value!r}")


@attrs.frozen
class ServeOptions:
    """How :func:`serve_http` treats connections: every timeout and cap with a safe default."""

    #: Seconds a keep-alive connection may stay idle between two requests.
    keep_alive_timeout: float = attrs.field(default=5.0, validator=_positive)
    #: Seconds for a whole request (head and body) to arrive, counted from the moment the
    #: connection is ready for it (opened, or done with the previous response); a silent,
    #: slow or half-sent request has its connection closed.
    request_timeout: float = attrs.field(default=30.0, validator=_positive)
    #: Connections plus running requests at once; beyond, uvicorn answers 503. Lowered to the
    #: process's open-file limit minus a headroom when that is smaller.
    limit_concurrency: int = attrs.field(default=2048, validator=_positive)
    #: Connections the kernel queues before they are accepted.
    backlog: int = attrs.field(default=1024, validator=_positive)
    #: ``h11`` parser only: the largest request head (request line and headers), in bytes.
    max_head_bytes: int = attrs.field(default=16 * 1024, validator=_positive)
    #: Seconds a shutdown waits for open requests (SSE streams) before closing them.
    graceful_shutdown_timeout: float = attrs.field(default=10.0, validator=_positive)
    #: The HTTP/1.1 implementation: ``httptools`` when installed (``auto``), else ``h11``.
    http: Literal["auto", "h11", "httptools"] = attrs.field(
        default="auto", validator=attrs.validators.in_(("auto", "h11", "httptools"))
    )


def http_server(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    options: ServeOptions | None = None,
    log_level: str = "info",
    lifespan: Literal["on", "off", "auto"] = "on",
) -> uvicorn.Server:
    """A uvicorn server for ``app`` with the hygiene of ``options``; ``run()`` it, or await its
    ``serve()`` on an event loop of your choosing."""
    import uvicorn

    opts = options if options is not None else ServeOptions()
    # uvicorn annotates the timeouts as int; it hands them to the loop, which takes seconds.
    timeouts: dict[str, Any] = {
        "timeout_keep_alive": opts.keep_alive_timeout,
        "timeout_graceful_shutdown": opts.graceful_shutdown_timeout,
    }
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=_protocol(opts),
        log_level=log_level,
        lifespan=lifespan,
        limit_concurrency=_fit_to_file_limit(opts.limit_concurrency),
        backlog=opts.backlog,
        h11_max_incomplete_event_size=opts.max_head_bytes,
        # uvicorn formats every access line's arguments before its logger drops them: with
        # the level above "info" nothing would be logged, so the access log is not kept.
        access_log=_level(log_level) <= logging.INFO,
        **timeouts,
    )
    return uvicorn.Server(config)


def serve_http(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    options: ServeOptions | None = None,
    log_level: str = "info",
) -> None:
    """Serve ``app`` on ``host:port`` until interrupted, on the loop uvicorn picks."""
    http_server(app, host, port, options=options, log_level=log_level).run()


def _level(name: str) -> int:
    """The numeric level of a uvicorn log level name ("trace" is below "debug")."""
    level = logging.getLevelName(name.upper())
    return level if isinstance(level, int) else logging.NOTSET


def _fit_to_file_limit(limit: int) -> int:
    """``limit``, or fewer when the open-file limit could not hold that many connections."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return limit
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft - FD_HEADROOM >= limit:
        return limit
    fitted = max(1, soft - FD_HEADROOM)
    log.warning(
        "open-file limit %d: serving at most %d connections (limit_concurrency %d asked)",
        soft,
        fitted,
        limit,
    )
    return fitted


def _protocol(options: ServeOptions) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class of ``options.http``, with the request deadline added."""
    choice = options.http
    if choice == "auto":
        try:
            import httptools  # noqa: F401
        except ImportError:
            choice = "h11"
        else:
            choice = "httptools"
    base: type[asyncio.Protocol]
    if choice == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        base = HttpToolsProtocol
    else:
        from uvicorn.protocols.http.h11_impl import H11Protocol

        base = H11Protocol
    guarded: type[asyncio.Protocol] = type(
        f"Guarded{base.__name__}",
        (_RequestDeadline, base),
        {"request_timeout": options.request_timeout},
    )
    return guarded


class _RequestDeadline:
    """Mixed into uvicorn's protocol classes: the timers uvicorn lacks.

    uvicorn arms its keep-alive timer only after a response and disarms it on the first byte
    of the next request, so a connection that sends nothing, or trickles bytes, is kept
    forever. This adds a deadline for the whole request to arrive, from the moment the
    connection is ready for it, which bytes trickling in do not postpone. (A fresh connection
    gets this longer deadline rather than the keep-alive one: under a loaded loop a short timer
    can fire before the first request, already sent, is read, and a POST is never resent.)
    """

    request_timeout: float
    # Provided by uvicorn's protocol classes:
    loop: Any
    transport: Any
    cycle: Any

    _request_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]
        self._settle()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if not self.transport.is_closing():
            self._arm()
            self._settle()  # a pipelined request may already be complete

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]

    def _settle(self) -> None:
        """Disarm the deadline once the current request has fully arrived."""
        cycle = self.cycle
        if cycle is not None and not cycle.more_body and not cycle.response_complete:
            self._disarm()

    def _arm(self) -> None:
        self._disarm()
        self._request_timer = self.loop.call_later(self.request_timeout, self._timed_out)

    def _disarm(self) -> None:
        if self._request_timer is not None:
            self._request_timer.cancel()
            self._request_timer = None

    def _timed_out(self) -> None:
        self._request_timer = None
        if not self.transport.is_closing():
            log.info("closing a connection whose request did not arrive in time")
            self.transport.close()
