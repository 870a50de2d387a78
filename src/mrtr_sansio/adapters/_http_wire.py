"""The HTTP half of :class:`~mrtr_sansio.adapters.http.HttpClient`: one POST per message,
responses (JSON, or SSE read event by event) fed to the connection, and the legacy session's
mechanics (its id, its end, the standalone GET stream, resuming a response stream).

:class:`HttpWire` holds that state and behaviour; ``HttpClient`` adds the application API,
the callbacks, the timer and the lifecycle on top.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import attrs
import httpx
from anyio.abc import TaskGroup

from mrtr_sansio import ClientConfig, Era, ErrorCode, JsonRpcError, Limits, Outgoing
from mrtr_sansio._connection import DECODE_ERRORS as _DECODE_ERRORS
from mrtr_sansio._wire.bounds import bounded_loads
from mrtr_sansio.events import OutgoingRequest
from mrtr_sansio.http._names import (
    SESSION_HEADER,
)
from mrtr_sansio.observe import Transport

from ._client_common import ClientDriver, ConnectionClosedError, Trace, call_hook
from ._http_body import consume, content_kind, describe, read_body
from ._http_headers import extra_headers, get_headers, post_headers
from ._sse import SseDecoder, SseEventTooLargeError

_PORTS = {"http": 80, "https": 443}  # the port of a URL that names none

__all__ = ["HttpWire", "SessionExpiredError"]

log = logging.getLogger("mrtr_sansio.adapters.http")

#: Seconds before reopening the legacy standalone stream when the server gave no ``retry:``,
#: doubling while opening fails, up to the maximum; also the default delay before resuming a
#: legacy response stream. A server's ``retry:`` is capped at the maximum too.
LISTEN_RETRY = 1.0
LISTEN_MAX_RETRY = 30.0
#: Legacy response streams resumed in a row without bringing anything before giving up.
MAX_IDLE_RESUMES = 2
#: What a codec's ``loads`` raises on bad input, across codecs.


@attrs.frozen
class _Resume:
    """A legacy response stream ended before the answer: resume it from ``last_id`` after
    ``delay`` seconds; ``progressed`` says whether it brought any event."""

    last_id: str
    delay: float
    progressed: bool


class SessionExpiredError(ConnectionClosedError):
    """The server ended the legacy session (HTTP 404) while the call was open; the call is
    lost. The client has already opened a new session for the calls that follow."""


class HttpWire:
    """The HTTP exchanges of one client of one endpoint (see the module docstring)."""

    def __init__(
        self,
        url: str,
        config: ClientConfig,
        http: httpx.AsyncClient,
        headers: Mapping[str, str] | None,
        *,
        listen: bool,
        trace: Trace | None,
    ) -> None:
        self.url = httpx.URL(url)
        self._config = config
        self._http = http
        self._extra_headers = extra_headers(headers)
        self._listen_enabled = listen
        self._trace = trace
        limits: Limits = config.limits
        # Text past the JSON limits is not decoded here: the connection refuses its bytes.
        self._loads = bounded_loads(
            config.codec.loads, limits.max_json_depth, limits.max_json_nodes
        )
        self._limit = limits.max_message_bytes
        self._limit_origins = limits.max_in_flight
        self._session_id: str | None = None
        self._streams: dict[Any, anyio.CancelScope] = {}  # request id -> its POST
        self._origins: dict[Any, Any] = {}  # server request id -> the stream that bore it
        self._listener: anyio.CancelScope | None = None  # the legacy GET stream
        #: Tool name -> its ``x-mcp-header`` arguments, from the latest ``tools/list``.
        self.param_headers: dict[str, dict[str, tuple[str, ...]]] = {}
        self._tg: TaskGroup | None = None
        self._wake: anyio.Event | None = None  # set when the timer deadline moved
        self._initialized: anyio.Event | None = None  # set once notifications/initialized is out
        # Set once the first GET of the standalone stream has its answer (or failed).
        self._listening: anyio.Event | None = None
        self._driver: ClientDriver

    @property
    def session_id(self) -> str | None:
        """The legacy session the server assigned, if any."""
        return self._session_id

    def _new_driver(self, config: ClientConfig) -> ClientDriver:
        """A driver on a fresh connection (the client's; a new session needs one)."""
        raise NotImplementedError

    def _transport(self) -> Transport:
        """What observers are told of this client's wire: TCP, HTTP, the URL's host and port."""
        url = self.url
        return Transport("tcp", "http", None, url.host or None, url.port or _PORTS.get(url.scheme))

    def _cancel_streams(self) -> None:
        streams, self._streams = self._streams, {}
        for scope in streams.values():
            scope.cancel()
        if self._listener is not None:
            self._listener.cancel()
            self._listener = None

    # --- sending ----------------------------------------------------------------------------

    def _flush(self, driver: ClientDriver) -> None:
        """Start a POST for each message the connection queued; re-arm the timer if needed.

        (A session that ended has nothing queued: its connection was closed.)
        """
        tg = self._tg
        assert tg is not None
        for item in driver.conn.outgoing():
            if isinstance(item, OutgoingRequest):
                # The scope exists before the task runs: a cancellation that comes first
                # stops the POST from being sent at all.
                scope = self._streams[item.request_id] = anyio.CancelScope()
                tg.start_soon(self._post_request, driver, item, scope)
                continue
            method = item.message.get("method")
            if method == "notifications/cancelled":
                self._cancelled(driver, item)
                continue
            gate = None
            if method == "notifications/initialized":
                gate = self._initialized = anyio.Event()
            tg.start_soon(self._post_message, driver, item, gate)
        if driver.refresh_timer() and self._wake is not None:
            self._wake.set()

    def _cancelled(self, driver: ClientDriver, item: Outgoing) -> None:
        """Close the cancelled request's stream: the signal itself on the modern wire; the
        legacy wire also gets the notification (a legacy disconnect is not a cancellation)."""
        assert self._tg is not None
        params = item.message.get("params") or {}
        if driver.conn.era is Era.LEGACY:
            self._tg.start_soon(self._post_message, driver, item, None)
        scope = self._streams.pop(params.get("requestId"), None)
        if scope is not None:
            scope.cancel()

    def _headers(self, driver: ClientDriver, item: Outgoing) -> dict[str, str]:
        conn = driver.conn
        session = self._session_id if conn.era is Era.LEGACY else None
        return post_headers(
            self._extra_headers, conn.http_headers(item, self.param_headers), session
        )

    async def _post_message(
        self, driver: ClientDriver, item: Outgoing, gate: anyio.Event | None
    ) -> None:
        """POST a notification or an answer to a server request: 202 is expected.

        An answer that does not get through fails the call it was for: the server would wait
        for it in vain (until its own timeout).
        """
        problem = None
        try:
            async with self._post(driver, item) as response:
                # (None: the session is over, and so is everything this message was for)
                if response is not None and not 200 <= response.status_code < 300:
                    problem = f"HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            problem = f"{type(exc).__name__}: {exc}"
        finally:
            if gate is not None:
                gate.set()
        if problem is None:
            return
        what = _describe_item(item)
        log.warning("%s did not get through: %s", what, problem)
        rid = (
            self._origins.pop(item.message.get("id"), None)
            if "method" not in item.message
            else None
        )
        if rid is not None and driver.conn.request_failed(
            rid, f"{what} did not get through: {problem}"
        ):
            scope = self._streams.pop(rid, None)
            if scope is not None:
                scope.cancel()
            driver.route()
            self._flush(driver)

    async def _post_request(
        self, driver: ClientDriver, item: OutgoingRequest, scope: anyio.CancelScope
    ) -> None:
        """POST a request and feed its answer to the connection; a request whose answer cannot
        arrive any more fails (the probe falls back, a call raises)."""
        rid = item.request_id
        reason: str | None = None
        with scope:
            try:
                await anyio.lowlevel.checkpoint_if_cancelled()  # cancelled before it started
                initialized = self._initialized
                if initialized is not None and item.message.get("method") != "initialize":
                    await initialized.wait()
                outcome = await self._exchange(driver, item)
                misses = 0  # resumed streams in a row that brought nothing
                while isinstance(outcome, _Resume):
                    misses = 0 if outcome.progressed else misses + 1
                    if misses > MAX_IDLE_RESUMES:
                        outcome = "the response stream kept ending without the answer"
                        break
                    await anyio.sleep(outcome.delay)
                    outcome = await self._resume(driver, rid, outcome.last_id)
                reason = outcome
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                reason = f"could not connect to {self.url}: is the server running? ({exc})"
            except httpx.HTTPError as exc:
                reason = f"HTTP request failed: {type(exc).__name__}: {exc}"
            finally:
                if self._streams.get(rid) is scope:
                    del self._streams[rid]
                for server_id in [k for k, v in self._origins.items() if v == rid]:
                    del self._origins[server_id]
        if scope.cancel_called or driver.closed:
            return
        failure = reason or "the server ended the response without answering the request"
        if driver.conn.request_failed(rid, failure):
            driver.route()
            self._flush(driver)

    async def _exchange(self, driver: ClientDriver, item: OutgoingRequest) -> str | _Resume | None:
        """One POST: its answer fed to the connection, or why there is none (None: fed, or
        nothing to say), or where to resume its stream from."""
        rid = item.request_id
        async with self._post(driver, item) as response:
            if response is None:
                return None  # the session is over
            status = response.status_code
            if item.message.get("method") == "initialize" and 200 <= status < 300:
                problem = self._take_session(response)
                if problem is not None:
                    return problem
            kind = content_kind(response)
            if kind == "text/event-stream" and 200 <= status < 300:
                resumable = driver.conn.era is Era.LEGACY
                return await self._read_events(driver, rid, response, resumable)
            body = await read_body(response, self._limit)
            if body is None:
                return f"HTTP {status}: the response exceeds {self._limit} bytes"
            if (kind == "application/json" or kind.endswith("+json")) and self._deliver(
                driver, rid, body
            ):
                return None
            return describe(status, kind, body)

    @asynccontextmanager
    async def _post(
        self, driver: ClientDriver, item: Outgoing
    ) -> AsyncIterator[httpx.Response | None]:
        """POST ``item``; None instead of the response when a 404 to a POST carrying the
        session said the session is over (it was ended here)."""
        headers = self._headers(driver, item)
        if self._trace is not None:
            call_hook(self._trace, "send", item.data)
        async with self._http.stream(
            "POST", self.url, content=item.data, headers=headers
        ) as response:
            session = headers.get(SESSION_HEADER)
            if response.status_code == 404 and session is not None:
                self._expire(driver, session)
                yield None
            else:
                yield response

    def _get_headers(self, driver: ClientDriver, last_id: str | None) -> dict[str, str]:
        """The headers of a GET of the legacy session: its standalone or a resumed stream."""
        version = driver.conn.protocol_version
        return get_headers(self._extra_headers, self._session_id, version, last_id)

    def _take_session(self, response: httpx.Response) -> str | None:
        """Keep the session id ``initialize`` was answered with; why it is unusable, if so."""
        value = response.headers.get(SESSION_HEADER)
        if value is None:
            return None  # a server without sessions
        if not value or not all(0x21 <= ord(c) <= 0x7E for c in value):
            return "the server's Mcp-Session-Id is not visible ASCII"
        self._session_id = value
        self._driver.conn.session_id = value  # observers report it (mcp.session.id)
        return None

    # --- receiving --------------------------------------------------------------------------

    async def _read_events(
        self, driver: ClientDriver, rid: Any, response: httpx.Response, resumable: bool
    ) -> str | _Resume | None:
        """Feed each SSE message until the answer to ``rid`` (the stream is closed then).

        A legacy stream that ends first, having carried an event id, can be resumed (SEP-1699:
        a server may close it on purpose and let the client poll): that is returned.
        """
        decoder = SseDecoder(self._limit)
        problem: str | None = None
        answered = False
        progressed = False  # a message came (priming events and keep-alives do not count)

        def take(chunk: bytes) -> bool:
            nonlocal problem, answered, progressed
            try:
                events = decoder.feed(chunk)
            except SseEventTooLargeError as exc:
                problem = str(exc)
                return True
            for event in events:
                if event.event == "message" and event.data.strip():
                    progressed = True
                    if self._deliver(driver, rid, event.data):
                        answered = True
                        return True
            return False

        if not await consume(response, take):
            for event in decoder.close():
                if self._deliver_event(driver, rid, event.event, event.data):
                    return None
        if answered or problem is not None:
            return problem
        if resumable and decoder.last_event_id is not None:
            delay = _retry_delay(decoder)
            return _Resume(decoder.last_event_id, delay, progressed)
        return None

    async def _resume(self, driver: ClientDriver, rid: Any, last_id: str) -> str | _Resume | None:
        """Resume the response stream of ``rid`` with a GET carrying ``Last-Event-ID``."""
        headers = self._get_headers(driver, last_id)
        async with self._http.stream("GET", self.url, headers=headers) as response:
            status = response.status_code
            if status == 404 and SESSION_HEADER in headers:
                self._expire(driver, headers[SESSION_HEADER])
                return None
            kind = content_kind(response)
            if status == 200 and kind == "text/event-stream":
                return await self._read_events(driver, rid, response, True)
            return f"the response stream ended before the answer; resuming it: HTTP {status}"

    def _deliver_event(self, driver: ClientDriver, rid: Any, kind: str, data: bytes) -> bool:
        # Only "message" events carry JSON-RPC; empty ones are priming events or keep-alives.
        return kind == "message" and bool(data.strip()) and self._deliver(driver, rid, data)

    def _deliver(self, driver: ClientDriver, rid: Any, data: bytes) -> bool:
        """Feed one message that came on the response to ``rid``; True when it answers it.

        An error response with no id answers ``rid``: it came on that request's response.
        """
        if driver.closed:  # pragma: no cover - its streams are cancelled before it closes
            return False
        if self._trace is not None:
            call_hook(self._trace, "recv", data)
        try:
            msg = self._loads(data)
        except _DECODE_ERRORS:
            msg = None
        answered = False
        if type(msg) is dict:
            if "method" not in msg:
                if msg.get("id") is None and "error" in msg:
                    msg["id"] = rid
                answered = type(msg.get("id")) is int and msg["id"] == rid
            elif rid is not None and "id" in msg and len(self._origins) < self._limit_origins:
                self._origins[msg["id"]] = rid  # a legacy server request: where to fail
        driver.conn.receive_message(msg if type(msg) is dict else data, rid)
        driver.route()
        self._flush(driver)
        return answered

    def _expire(self, driver: ClientDriver, session: str) -> None:
        """HTTP 404 to a POST carrying the session: the server ended it. Fail what was open in
        it and open a new session (MUST, 2025-11-25 transports)."""
        if driver is not self._driver or self._session_id != session:
            return  # already handled
        log.warning("the server ended session %s (HTTP 404); opening a new one", session)
        self._session_id = None
        self._cancel_streams()
        self._origins.clear()
        driver.close()
        error = JsonRpcError(ErrorCode.INTERNAL_ERROR, "The server ended the session (HTTP 404)")
        for call, outcome in driver.outcomes.items():
            if isinstance(outcome, ConnectionClosedError):
                driver.outcomes[call] = SessionExpiredError(call, error, local=True)
        self._driver = self._new_driver(attrs.evolve(self._config, era="legacy"))
        self._driver.conn.transport = self._transport()
        self._flush(self._driver)

    async def _listen(
        self, driver: ClientDriver, scope: anyio.CancelScope, listening: anyio.Event
    ) -> None:
        """The legacy standalone stream (GET): what the server sends outside any request.

        Reopened when it ends, after the server's ``retry:`` delay (else
        :data:`LISTEN_RETRY`), doubling while opening fails; resumed with ``Last-Event-ID``.
        A 405 means the server offers none. A server request arriving here has no stream to
        tie it to a call: the connection links it by timing, as on stdio, or refuses it.
        ``listening`` is set once the first GET has its answer, or failed.
        """
        try:
            with scope:
                initialized = self._initialized
                if initialized is not None:
                    await initialized.wait()
                await self._listen_loop(driver, listening)
        finally:
            listening.set()

    async def _listen_loop(self, driver: ClientDriver, listening: anyio.Event) -> None:
        """Open the standalone stream, and again each time it ends (see :meth:`_listen`)."""
        delay, last_id = LISTEN_RETRY, None
        while True:
            decoder = SseDecoder(self._limit)
            status = await self._listen_once(driver, decoder, last_id, listening)
            if status in (404, 405):
                log.debug("no standalone stream: HTTP %d", status)
                return
            if status == 200:
                delay = LISTEN_RETRY
            if decoder.retry is not None:
                delay = _retry_delay(decoder)
            last_id = decoder.last_event_id or last_id
            await anyio.sleep(delay)
            delay = min(delay * 2, LISTEN_MAX_RETRY)

    async def _listen_once(
        self,
        driver: ClientDriver,
        decoder: SseDecoder,
        last_id: str | None,
        listening: anyio.Event,
    ) -> int | None:
        """One GET, read to its end; its status (None: it failed)."""
        headers = self._get_headers(driver, last_id)

        def take(chunk: bytes) -> bool:
            try:
                events = decoder.feed(chunk)
            except SseEventTooLargeError as exc:
                log.warning("standalone stream: %s", exc)
                return True
            for event in events:
                self._deliver_event(driver, None, event.event, event.data)
            return False

        try:
            async with self._http.stream("GET", self.url, headers=headers) as response:
                status = response.status_code
                listening.set()  # the stream has its answer: the client may go on
                if status == 404 and SESSION_HEADER in headers:
                    self._expire(driver, headers[SESSION_HEADER])
                kind = content_kind(response)
                if status == 200 and kind == "text/event-stream":
                    await consume(response, take)
                return status
        except httpx.HTTPError as exc:
            log.debug("standalone stream: %s", exc)
            listening.set()  # no stream for now: the client goes on without it
            return None


def _retry_delay(decoder: SseDecoder) -> float:
    """Seconds to wait before reconnecting: the server's ``retry:``, within bounds."""
    if decoder.retry is None:
        return LISTEN_RETRY
    return min(decoder.retry / 1000, LISTEN_MAX_RETRY)


def _describe_item(item: Outgoing) -> str:
    method = item.message.get("method")
    if isinstance(method, str):
        return method
    return f"the answer to server request {item.message.get('id')!r}"
