"""An MCP client over Streamable HTTP, on ``httpx`` (``http`` extra), under asyncio or trio.

:class:`HttpClient` drives a :class:`~mrtr_sansio.ClientConnection`: every message the
connection wants sent becomes one POST, and what comes back (a JSON body, or an SSE stream read
event by event) is fed to it. The application API and the input callbacks are those of the
stream clients (:mod:`mrtr_sansio.adapters._client_common`)::

    async with HttpClient.connect("http://127.0.0.1:8000/mcp", elicitation=ask_user) as client:
        result = await client.call_tool("book_trip", {"destination": "Lisbon"})

* **Modern** (2026-07-28): each request carries the mirror headers (``MCP-Protocol-Version``,
  ``Mcp-Method``, ``Mcp-Name``, and ``Mcp-Param-*`` for the arguments a listed tool marks with
  ``x-mcp-header``); the answer is JSON, or SSE with notifications before the response. Each
  ``input_required`` round is answered by the callbacks and retried by the connection.
  Cancelling a call closes its stream, which is the cancellation signal on this wire.
* **Legacy** (2025-11-25): ``initialize`` opens a session (``Mcp-Session-Id``), sent on every
  later POST with ``MCP-Protocol-Version``. A server request arriving on a call's SSE stream
  belongs to that call; its answer is POSTed back (202 expected). Cancelling sends
  ``notifications/cancelled`` and closes the stream; closing the client DELETEs the session. A
  404 to a POST carrying the session means the server ended it: the calls open in it raise
  :class:`SessionExpiredError`, and a new session is opened for the calls that follow.
* ``era="auto"`` follows the spec's HTTP rule: a ``server/discover`` probe; a recognised modern
  error means modern even with status 400; anything else (an empty or foreign 400, a 404, a
  405) falls back to ``initialize``.

Not done: the legacy standalone GET stream (SEP-2260 forbids input requests there) and resuming
a broken SSE stream: a request whose stream breaks before its answer fails.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import attrs
import httpx
from anyio.abc import TaskGroup
from typing_extensions import Unpack

from mrtr_sansio import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    Call,
    ClientConfig,
    ClientConnection,
    Era,
    InputNeeded,
    JsonRpcError,
    Outgoing,
    OutgoingRequest,
    mirrored_params,
)

from ._client_common import (
    AsyncClientBase,
    CallFailedError,
    ClientDriver,
    ClientOptions,
    ConnectionClosedError,
    InputCallback,
    client_config,
)
from ._sse import SseDecoder, SseEventTooLargeError

__all__ = ["DEFAULT_TIMEOUT", "HttpClient", "SessionExpiredError"]

log = logging.getLogger("mrtr_sansio.adapters.http")

ACCEPT = "application/json, text/event-stream"
SESSION_HEADER = "mcp-session-id"
#: Connecting and sending are bounded; reading is not, as a legacy server's stream waits for
#: the user's answers (pass your own ``httpx.AsyncClient`` to choose otherwise).
DEFAULT_TIMEOUT = httpx.Timeout(30.0, read=None)
#: Seconds the DELETE that ends a legacy session may take when the client closes.
CLOSE_TIMEOUT = 5.0
#: Pages of ``tools/list`` read to refresh the tool definitions after a -32020.
MAX_TOOL_PAGES = 100
#: Headers the client sets itself: extra headers cannot override them.
_MANAGED_HEADERS = frozenset(
    {"content-type", "accept", SESSION_HEADER, "mcp-protocol-version", "mcp-method", "mcp-name"}
)
#: What a codec's ``loads`` raises on bad input, across codecs.
_DECODE_ERRORS = (ValueError, UnicodeDecodeError, RecursionError, TypeError)


class SessionExpiredError(ConnectionClosedError):
    """The server ended the legacy session (HTTP 404) while the call was open; the call is
    lost. The client has already opened a new session for the calls that follow."""


class HttpClient(AsyncClientBase):
    """An MCP client of one Streamable HTTP endpoint; open it with :meth:`connect`.

    Calls may be made from many tasks at once, each on its own POST. Input callbacks run in
    their own tasks; one the server withdraws, or whose call ends, is cancelled.
    """

    def __init__(
        self,
        url: str,
        config: ClientConfig | None = None,
        *,
        http: httpx.AsyncClient | None = None,
        headers: Mapping[str, str] | None = None,
        **options: Unpack[ClientOptions],
    ) -> None:
        self.url = httpx.URL(url)
        self._config, self._callbacks = client_config(config, options)
        self._options = options
        self._trace = options.get("trace")
        self._http = http if http is not None else httpx.AsyncClient(timeout=DEFAULT_TIMEOUT)
        self._own_http = http is None
        self._extra_headers = {
            name: value for name, value in (headers or {}).items() if not _managed(name)
        }
        self._loads = self._config.codec.loads
        self._limit = self._config.limits.max_message_bytes
        self._session_id: str | None = None
        self._streams: dict[Any, anyio.CancelScope] = {}  # request id -> its POST
        self._origins: dict[Any, Any] = {}  # server request id -> the request whose stream bore it
        self._inputs: dict[int, anyio.CancelScope] = {}  # id(InputNeeded) -> its callback
        self._waiters: dict[Call, anyio.Event] = {}
        #: Tool name -> its ``x-mcp-header`` arguments, from the latest ``tools/list``.
        self.param_headers: dict[str, dict[str, tuple[str, ...]]] = {}
        self._tg: TaskGroup | None = None
        self._ready: anyio.Event | None = None
        self._wake: anyio.Event | None = None  # set when the timer deadline moved
        self._initialized: anyio.Event | None = None  # set once notifications/initialized is out
        self._driver = self._new_driver(self._config)

    # --- opening and closing ----------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def connect(
        cls,
        url: str,
        config: ClientConfig | None = None,
        *,
        http: httpx.AsyncClient | None = None,
        headers: Mapping[str, str] | None = None,
        **options: Unpack[ClientOptions],
    ) -> AsyncIterator[HttpClient]:
        """A client of the endpoint ``url``, once the era is known (``era`` legacy or auto).

        ``http`` is the ``httpx.AsyncClient`` to use (kept open on exit; by default one is made
        with :data:`DEFAULT_TIMEOUT` and closed on exit); ``headers`` are added to every POST
        (authorization, say). On exit, calls still open raise :class:`ConnectionClosedError`
        and a legacy session is DELETEd. A failed handshake raises
        :class:`~mrtr_sansio.adapters._client_common.HandshakeFailedError`.
        """
        client = cls(url, config, http=http, headers=headers, **options)
        # What the handshake or the caller's block raised leaves the task group unwrapped
        # (a task group turns what crosses it into an exception group).
        raised: BaseException | None = None
        try:
            async with anyio.create_task_group() as tg:
                client._tg = tg
                try:
                    await client._open()
                    yield client
                except BaseException as exc:
                    raised = exc
                finally:
                    with anyio.CancelScope(shield=True):
                        await client._close()
                    tg.cancel_scope.cancel()
        finally:
            if client._own_http:
                with anyio.CancelScope(shield=True):
                    await client._http.aclose()
        if raised is not None:
            raise raised

    @property
    def session_id(self) -> str | None:
        """The legacy session the server assigned, if any."""
        return self._session_id

    async def _open(self) -> None:
        assert self._tg is not None
        self._ready = anyio.Event()
        self._wake = anyio.Event()
        self._tg.start_soon(self._run_timer)
        driver = self._driver
        if driver.ready:
            self._ready.set()
        self._flush(driver)
        await self._ready.wait()
        if driver.handshake_error is not None:
            raise driver.handshake_error
        if self._initialized is not None:
            await self._initialized.wait()

    async def _close(self) -> None:
        driver = self._driver
        self._cancel_streams()
        for scope in self._inputs.values():
            scope.cancel()
        driver.close()  # whatever is still open fails: ConnectionClosedError
        session = self._session_id
        if session is not None and driver.conn.era is Era.LEGACY:
            self._session_id = None
            headers = {**self._extra_headers, SESSION_HEADER: session}
            if driver.conn.protocol_version is not None:
                headers["MCP-Protocol-Version"] = driver.conn.protocol_version
            with anyio.move_on_after(CLOSE_TIMEOUT):
                try:
                    response = await self._http.delete(self.url, headers=headers)
                    log.debug("DELETE of the session: HTTP %d", response.status_code)
                except httpx.HTTPError as exc:
                    log.debug("DELETE of the session failed: %s", exc)

    def _new_driver(self, config: ClientConfig) -> ClientDriver:
        def start_input(event: InputNeeded, callback: InputCallback) -> None:
            self._start_input(driver, event, callback)

        driver = ClientDriver(
            ClientConnection(config),
            self._callbacks,
            start_input=start_input,
            stop_input=self._stop_input,
            settled=self._settled,
            ready=self._on_ready,
            on_notification=self._options.get("on_notification"),
        )
        return driver

    def _on_ready(self) -> None:
        assert self._ready is not None  # events are only routed once the client is open
        self._ready.set()

    def _cancel_streams(self) -> None:
        streams, self._streams = self._streams, {}
        for scope in streams.values():
            scope.cancel()

    # --- calls ------------------------------------------------------------------------------

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None
    ) -> Mapping[str, Any]:
        """Send any request; MRTR rounds and legacy server requests are handled on the way.

        A ``tools/call`` refused with -32020 (mirror headers) makes the client re-read
        ``tools/list`` and, if the tool's ``x-mcp-header`` arguments changed, send it once more.
        A ``tools/list`` result leaves out tools whose ``x-mcp-header`` annotations are invalid
        (modern wire; each is logged), as the spec requires of HTTP clients.
        """
        try:
            result = await self._request(method, params)
        except CallFailedError as exc:
            if exc.local or exc.code != HEADER_MISMATCH or method != "tools/call":
                raise
            if not await self._refresh_tools(params):
                raise
            log.info("retrying tools/call with the refreshed x-mcp-header arguments")
            result = await self._request(method, params)
        if method == "tools/list":
            result = self._read_tools(result)
        return result

    async def _request(self, method: str, params: Mapping[str, Any] | None) -> Mapping[str, Any]:
        driver = self._driver
        call = driver.call(method, params)
        waiter = self._waiters[call] = anyio.Event()
        try:
            self._flush(driver)
            await waiter.wait()
        except BaseException:
            driver.cancel(call, "The caller cancelled the request")
            self._flush(driver)
            raise
        finally:
            del self._waiters[call]
        return driver.take(call)

    def _settled(self, call: Call) -> None:
        waiter = self._waiters.get(call)
        if waiter is not None:  # pragma: no branch - every call is awaited until it settles
            waiter.set()

    def _read_tools(self, result: Mapping[str, Any]) -> Mapping[str, Any]:
        """Note the tools' mirrored arguments; drop the tools whose annotations are invalid."""
        tools = result.get("tools")
        if self.era is not Era.MODERN or not isinstance(tools, list):
            return result
        kept = []
        for tool in tools:
            name = tool.get("name") if isinstance(tool, Mapping) else None
            if not isinstance(name, str):
                kept.append(tool)
                continue
            try:
                mirrored = mirrored_params(tool.get("inputSchema") or {})
            except ValueError as exc:
                log.warning("tools/list: tool %r left out: %s", name, exc)
                continue
            if mirrored:
                self.param_headers[name] = mirrored
            else:
                self.param_headers.pop(name, None)
            kept.append(tool)
        return result if len(kept) == len(tools) else {**result, "tools": kept}

    async def _refresh_tools(self, params: Mapping[str, Any] | None) -> bool:
        """Re-read every page of ``tools/list``; True when the called tool's mirrored
        arguments changed (so that sending the call again may succeed)."""
        name = params.get("name") if params is not None else None
        before = self.param_headers.get(name) if isinstance(name, str) else None
        cursor = None
        for _ in range(MAX_TOOL_PAGES):
            page = await self.request("tools/list", {} if cursor is None else {"cursor": cursor})
            cursor = page.get("nextCursor")
            if not isinstance(cursor, str):
                break
        after = self.param_headers.get(name) if isinstance(name, str) else None
        return after != before

    # --- input callbacks --------------------------------------------------------------------

    def _start_input(self, driver: ClientDriver, event: InputNeeded, callback: Any) -> None:
        assert self._tg is not None
        scope = self._inputs[id(event)] = anyio.CancelScope()
        self._tg.start_soon(self._run_input, driver, event, callback, scope)

    def _stop_input(self, event: InputNeeded) -> None:
        scope = self._inputs.pop(id(event), None)
        if scope is not None:
            scope.cancel()

    async def _run_input(
        self, driver: ClientDriver, event: InputNeeded, callback: Any, scope: anyio.CancelScope
    ) -> None:
        with scope:
            try:
                result = await callback(event)
            except Exception as exc:
                driver.fail(event, exc)
            else:
                driver.answer(event, result)
            self._flush(driver)
        if self._inputs.get(id(event)) is scope:
            del self._inputs[id(event)]

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
        headers = {**self._extra_headers, "content-type": "application/json", "accept": ACCEPT}
        headers.update(driver.conn.http_headers(item, self.param_headers))
        if self._session_id is not None and driver.conn.era is Era.LEGACY:
            headers[SESSION_HEADER] = self._session_id
        return headers

    async def _post_message(
        self, driver: ClientDriver, item: Outgoing, gate: anyio.Event | None
    ) -> None:
        """POST a notification or an answer to a server request: 202 is expected.

        An answer that does not get through fails the call it was for: the server would wait
        for it in vain (until its own timeout).
        """
        problem = None
        headers = self._headers(driver, item)
        try:
            if self._trace is not None:
                self._trace("send", item.data)
            async with self._http.stream(
                "POST", self.url, content=item.data, headers=headers
            ) as response:
                status = response.status_code
            if status == 404 and SESSION_HEADER in headers:
                self._expire(driver, headers[SESSION_HEADER])
            elif not 200 <= status < 300:
                problem = f"HTTP {status}"
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
                reason = await self._exchange(driver, item)
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

    async def _exchange(self, driver: ClientDriver, item: OutgoingRequest) -> str | None:
        """One POST: its answer fed to the connection, or why there is none (None: fed, or
        nothing to say)."""
        rid = item.request_id
        headers = self._headers(driver, item)
        if self._trace is not None:
            self._trace("send", item.data)
        async with self._http.stream(
            "POST", self.url, content=item.data, headers=headers
        ) as response:
            status = response.status_code
            session = headers.get(SESSION_HEADER)
            if status == 404 and session is not None:
                self._expire(driver, session)
                return None
            if item.message.get("method") == "initialize" and 200 <= status < 300:
                problem = self._take_session(response)
                if problem is not None:
                    return problem
            kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind == "text/event-stream" and 200 <= status < 300:
                return await self._read_events(driver, rid, response)
            body = await _read_body(response, self._limit)
            if body is None:
                return f"HTTP {status}: the response exceeds {self._limit} bytes"
            if (kind == "application/json" or kind.endswith("+json")) and self._deliver(
                driver, rid, body
            ):
                return None
            return _describe(status, kind, body)

    def _take_session(self, response: httpx.Response) -> str | None:
        """Keep the session id ``initialize`` was answered with; why it is unusable, if so."""
        value = response.headers.get(SESSION_HEADER)
        if value is None:
            return None  # a server without sessions
        if not value or not all(0x21 <= ord(c) <= 0x7E for c in value):
            return "the server's Mcp-Session-Id is not visible ASCII"
        self._session_id = value
        return None

    # --- receiving --------------------------------------------------------------------------

    async def _read_events(
        self, driver: ClientDriver, rid: Any, response: httpx.Response
    ) -> str | None:
        """Feed each SSE message until the answer to ``rid`` (the stream is closed then)."""
        decoder = SseDecoder(self._limit)
        problem: str | None = None

        def take(chunk: bytes) -> bool:
            nonlocal problem
            try:
                events = decoder.feed(chunk)
            except SseEventTooLargeError as exc:
                problem = str(exc)
                return True
            for event in events:
                if self._deliver_event(driver, rid, event.event, event.data):
                    return True
            return False

        if not await _consume(response, take):
            for event in decoder.close():
                if self._deliver_event(driver, rid, event.event, event.data):
                    break
        return problem

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
            self._trace("recv", data)
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
            elif "id" in msg and len(self._origins) < self._config.limits.max_in_flight:
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
        error = JsonRpcError(INTERNAL_ERROR, "The server ended the session (HTTP 404)")
        for call, outcome in driver.outcomes.items():
            if isinstance(outcome, ConnectionClosedError):
                driver.outcomes[call] = SessionExpiredError(call, error, local=True)
        self._driver = self._new_driver(attrs.evolve(self._config, era="legacy"))
        self._flush(self._driver)

    # --- time -------------------------------------------------------------------------------

    async def _run_timer(self) -> None:
        """Call the connection's ``handle_timer`` at its deadlines (state-only retry backoff,
        the era probe's timeout)."""
        while True:
            wake = self._wake = anyio.Event()
            driver = self._driver
            delay = driver.timer_delay()
            if delay is None:
                await wake.wait()
                continue
            with anyio.move_on_after(delay) as timed:
                await wake.wait()
            if timed.cancelled_caught:
                driver.fire_timer()
                self._flush(driver)


async def _consume(response: httpx.Response, take: Callable[[bytes], bool]) -> bool:
    """Hand the body's chunks to ``take`` until it returns True (then True) or the body ends.

    Reading stops by cancellation rather than by leaving the loop, so that every one of
    httpx's nested async generators ends (trio warns about those left to the garbage
    collector). ``take`` must not raise.
    """
    done = False
    with anyio.CancelScope() as reading:
        async for chunk in response.aiter_bytes():
            if not done and take(chunk):
                done = True
                reading.cancel()
    return done


async def _read_body(response: httpx.Response, limit: int) -> bytes | None:
    """The whole body, or None past ``limit`` bytes (the rest is not read)."""
    chunks: list[bytes] = []
    size = 0

    def take(chunk: bytes) -> bool:
        nonlocal size
        size += len(chunk)
        chunks.append(chunk)
        return size > limit

    return None if await _consume(response, take) else b"".join(chunks)


def _describe(status: int, kind: str, body: bytes) -> str:
    """Why a response did not answer its request, for the caller's error message."""
    if 200 <= status < 300:
        return f"HTTP {status} ({kind or 'no content type'}) without a JSON-RPC response"
    text = body[:200].decode("utf-8", "replace").strip()
    return f"HTTP {status}" + (f": {text}" if text else "")


def _managed(header: str) -> bool:
    """Whether the client sets ``header`` itself (the caller's value is dropped)."""
    name = header.lower()
    return name in _MANAGED_HEADERS or name.startswith("mcp-param-")


def _describe_item(item: Outgoing) -> str:
    method = item.message.get("method")
    if isinstance(method, str):
        return method
    return f"the answer to server request {item.message.get('id')!r}"
