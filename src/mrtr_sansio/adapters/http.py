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
  :class:`SessionExpiredError`, and a new session is opened for the calls that follow. The
  standalone GET stream is opened too (``listen``), for what the server sends outside any
  request; a response stream that ends before its answer, having carried an event id, is
  resumed with ``Last-Event-ID`` after the server's ``retry:`` delay (SEP-1699).
* ``era="auto"`` follows the spec's HTTP rule: a ``server/discover`` probe; a recognised modern
  error means modern even with status 400; anything else (an empty or foreign 400, a 404, a
  405) falls back to ``initialize``.

A request whose stream breaks (a network error, or a modern stream that ends early) fails
with :class:`~mrtr_sansio.adapters.CallFailedError` (``local``); others go on.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # typing.Unpack is 3.11+; annotations are not evaluated at run time
    from typing_extensions import Unpack

from mrtr_sansio._extras import raise_missing_extra
from mrtr_sansio._mcp.methods import PARAM_HEADER_METHOD

try:
    import anyio
    import httpx
except ModuleNotFoundError as exc:
    raise_missing_extra(exc, __name__, "http")

from mrtr_sansio import Call, ClientConfig, ClientConnection, Era, ErrorCode, InputNeeded
from mrtr_sansio.http import mirrored_params
from mrtr_sansio.http._names import SESSION_HEADER, VERSION_DISPLAY

from ._client_common import (
    AsyncClientBase,
    CallFailedError,
    ClientDriver,
    ClientOptions,
    InputCallback,
    client_config,
)
from ._http_wire import HttpWire, SessionExpiredError

__all__ = ["DEFAULT_TIMEOUT", "HttpClient", "SessionExpiredError"]

log = logging.getLogger("mrtr_sansio.adapters.http")

#: Connecting and sending are bounded; reading is not, as a legacy server's stream waits for
#: the user's answers (pass your own ``httpx.AsyncClient`` to choose otherwise).
DEFAULT_TIMEOUT = httpx.Timeout(30.0, read=None)
#: Seconds an idle connection is kept for reuse: below the servers' usual idle timeouts
#: (uvicorn closes after 5 s), so that a POST, which is never resent, does not race the server
#: closing the connection it goes out on.
DEFAULT_KEEPALIVE_EXPIRY = 2.0
#: Seconds the DELETE that ends a legacy session may take when the client closes.
CLOSE_TIMEOUT = 5.0
#: Pages of ``tools/list`` read to refresh the tool definitions after a -32020.
MAX_TOOL_PAGES = 100


class HttpClient(HttpWire, AsyncClientBase):
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
        listen: bool = True,
        **options: Unpack[ClientOptions],
    ) -> None:
        config, self._callbacks = client_config(config, options)
        own = http is None
        if http is None:
            http = httpx.AsyncClient(
                timeout=DEFAULT_TIMEOUT,
                limits=httpx.Limits(keepalive_expiry=DEFAULT_KEEPALIVE_EXPIRY),
            )
        super().__init__(url, config, http, headers, listen=listen, trace=options.get("trace"))
        self._options = options
        self._own_http = own
        self._inputs: dict[int, anyio.CancelScope] = {}  # id(InputNeeded) -> its callback
        self._waiters: dict[Call, anyio.Event] = {}
        self._ready: anyio.Event | None = None
        self._driver = self._new_driver(config)
        self._driver.conn.transport = self._transport()

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
        listen: bool = True,
        **options: Unpack[ClientOptions],
    ) -> AsyncIterator[HttpClient]:
        """A client of the endpoint ``url``, once the era is known (``era`` legacy or auto).

        ``http`` is the ``httpx.AsyncClient`` to use (kept open on exit; by default one is made
        with :data:`DEFAULT_TIMEOUT` and closed on exit); ``headers`` are added to every POST
        (authorization, say). ``listen`` opens the legacy standalone stream (GET) for what a
        server sends outside any request. On exit, calls still open raise
        :class:`ConnectionClosedError` and a legacy session is DELETEd. A failed handshake raises
        :class:`~mrtr_sansio.adapters.HandshakeFailedError`.
        """
        client = cls(url, config, http=http, headers=headers, listen=listen, **options)
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
        if self._listening is not None:
            # The standalone stream is open before the first call goes out, so that nothing
            # the server sends outside a request right after the handshake is missed.
            await self._listening.wait()

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
                headers[VERSION_DISPLAY] = driver.conn.protocol_version
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
            on_task=self._options.get("on_task"),
        )
        return driver

    def _on_ready(self) -> None:
        assert self._ready is not None  # events are only routed once the client is open
        assert self._tg is not None
        self._ready.set()
        driver = self._driver
        if self._listen_enabled and driver.conn.era is Era.LEGACY and not driver.handshake_error:
            scope = self._listener = anyio.CancelScope()
            listening = self._listening = anyio.Event()
            self._tg.start_soon(self._listen, driver, scope, listening)

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
            if exc.local or exc.code != ErrorCode.HEADER_MISMATCH or method != PARAM_HEADER_METHOD:
                raise
            try:
                changed = await self._refresh_tools(params)
            except CallFailedError as relisting:
                raise exc from relisting
            if not changed:
                raise
            log.info("retrying tools/call with the refreshed x-mcp-header arguments")
            result = await self._request(method, params)
        if method == "tools/list":
            result = self._read_tools(result)
        return result

    async def resume_task(self, task_id: str) -> Mapping[str, Any]:
        """Follow the task ``task_id`` to its end (see
        :meth:`~mrtr_sansio.adapters.AsyncClientBase.resume_task`); its ``tasks/*`` requests
        name the task in ``Mcp-Name``."""
        return await self._await(self._driver.resume_task(task_id))

    async def _request(self, method: str, params: Mapping[str, Any] | None) -> Mapping[str, Any]:
        return await self._await(self._driver.call(method, params))

    async def _await(self, call: Call) -> Mapping[str, Any]:
        """Wait for ``call`` to end; its result, or its :class:`ClientError` raised."""
        driver = self._driver
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
        if waiter is not None:
            waiter.set()
        else:  # started on the connection directly: nobody takes its outcome
            self._driver.outcomes.pop(call, None)

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


from mrtr_sansio._public import publish_errors  # noqa: E402  (once every name is defined)

publish_errors(globals(), __name__)
del publish_errors
