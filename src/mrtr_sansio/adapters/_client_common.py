"""What every client adapter shares above its loop: the application API (the requests, and
what a client tells about its server). The callbacks and options are in
:mod:`~mrtr_sansio.adapters._client_options`, the exceptions in ``_client_errors``, the IO-free
driver in :mod:`~mrtr_sansio.adapters._client_driver`; they are re-exported here, where the client
adapters have always found them.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from typing import Any, Generic, TypeAlias, TypeVar

from mrtr_sansio import ClientConnection, Era

from ._client_driver import ClientDriver
from ._client_errors import (
    CallFailedError,
    ClientError,
    ConnectionClosedError,
    HandshakeFailedError,
    InputRejectedError,
    RoundsExhaustedError,
)
from ._client_options import (
    SHUTDOWN_TIMEOUT,
    BlockingClientOptions,
    BlockingInputCallback,
    ClientOptions,
    InputCallback,
    NotificationCallback,
    TaskCallback,
    Trace,
    call_hook,
    client_config,
)

__all__ = [
    "SHUTDOWN_TIMEOUT",
    "AsyncClientBase",
    "BlockingClientOptions",
    "BlockingInputCallback",
    "CallFailedError",
    "ClientBase",
    "ClientDriver",
    "ClientError",
    "ClientOptions",
    "ClientRequests",
    "ConnectionClosedError",
    "HandshakeFailedError",
    "InputCallback",
    "InputRejectedError",
    "NotificationCallback",
    "RoundsExhaustedError",
    "TaskCallback",
    "Trace",
    "call_hook",
    "client_config",
    "request_params",
]


R = TypeVar("R")


def request_params(**fields: Any) -> dict[str, Any]:
    """Request params from the fields that are given (None means absent)."""
    return {name: value for name, value in fields.items() if value is not None}


class ClientBase:
    """What every client tells about the server it talks to."""

    _driver: ClientDriver

    @property
    def connection(self) -> ClientConnection:
        """The Sans-IO connection underneath (for what this API does not cover)."""
        return self._driver.conn

    @property
    def era(self) -> Era | None:
        """The wire the server speaks, once known."""
        return self._driver.conn.era

    @property
    def protocol_version(self) -> str | None:
        """The protocol version in use, once known."""
        return self._driver.conn.protocol_version

    @property
    def server_info(self) -> Mapping[str, Any] | None:
        """What ``server/discover`` or ``initialize`` said, when one was answered."""
        return self._driver.conn.server_info

    @property
    def server_capabilities(self) -> Mapping[str, Any] | None:
        """The server's capabilities, from ``server/discover`` or ``initialize``."""
        return self._driver.conn.server_capabilities

    @property
    def instructions(self) -> str | None:
        """The server's instructions for the model, when it gave any."""
        return self._driver.conn.instructions


class ClientRequests(ClientBase, Generic[R]):
    """The requests of every client, written once over ``request``: ``R`` is what a request
    gives, the result (blocking client) or a coroutine of it (async clients).

    Each gives the result object; a JSON-RPC error raises :class:`CallFailedError`, too many
    rounds of input :class:`RoundsExhaustedError`. ``timeout`` bounds a whole call (all its
    rounds): when it expires the request in flight is cancelled on the wire and
    ``TimeoutError`` is raised. A tool that fails gives a result with ``isError`` set.
    """

    def _send(self, method: str, params: Mapping[str, Any] | None, timeout: float | None) -> R:
        """``request(method, params)`` within ``timeout`` seconds (None: unbounded)."""
        raise NotImplementedError

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> R:
        """Call tool ``name``; the rounds of input it asks for are answered by the callbacks."""
        params = request_params(name=name, arguments=arguments, _meta=meta)
        return self._send("tools/call", params, timeout)

    def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> R:
        """Get prompt ``name``, answering any input it asks for through the callbacks."""
        params = request_params(name=name, arguments=arguments, _meta=meta)
        return self._send("prompts/get", params, timeout)

    def read_resource(
        self, uri: str, *, meta: Mapping[str, Any] | None = None, timeout: float | None = None
    ) -> R:
        """Read resource ``uri``, answering any input it asks for through the callbacks."""
        return self._send("resources/read", request_params(uri=uri, _meta=meta), timeout)

    def list_tools(self, cursor: str | None = None, *, timeout: float | None = None) -> R:
        """One page of ``tools/list`` (pass the previous ``nextCursor`` for the next)."""
        return self._send("tools/list", request_params(cursor=cursor), timeout)

    def list_prompts(self, cursor: str | None = None, *, timeout: float | None = None) -> R:
        """One page of ``prompts/list``."""
        return self._send("prompts/list", request_params(cursor=cursor), timeout)

    def list_resources(self, cursor: str | None = None, *, timeout: float | None = None) -> R:
        """One page of ``resources/list``."""
        return self._send("resources/list", request_params(cursor=cursor), timeout)

    def list_resource_templates(
        self, cursor: str | None = None, *, timeout: float | None = None
    ) -> R:
        """One page of ``resources/templates/list``."""
        return self._send("resources/templates/list", request_params(cursor=cursor), timeout)


#: What an async client's request gives: a coroutine of the result.
AsyncResult: TypeAlias = Coroutine[Any, Any, Mapping[str, Any]]


class AsyncClientBase(ClientRequests[AsyncResult]):
    """The requests of the async clients, over their :meth:`request` (see
    :class:`ClientRequests`): ``await client.call_tool(...)``. Cancelling the awaiting task
    cancels the request on the wire, as ``timeout`` expiring does.
    """

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None
    ) -> Mapping[str, Any]:
        """Send any request; MRTR rounds and legacy server requests are handled on the way."""
        raise NotImplementedError

    async def resume_task(self, task_id: str) -> Mapping[str, Any]:
        """Follow the task ``task_id`` (from the ``on_task`` hook, say of a client before a
        restart) to its end, answering the input it asks for through the callbacks; returns
        the tool's result as :meth:`call_tool` would. Needs the tasks extension declared
        (``ClientConfig.capabilities["extensions"]``) and the modern wire."""
        raise NotImplementedError

    def _send(
        self, method: str, params: Mapping[str, Any] | None, timeout: float | None
    ) -> AsyncResult:
        if timeout is None:
            return self.request(method, params)  # the request's own coroutine: no extra frame
        return self._within(timeout, method, params)

    async def _within(
        self, timeout: float, method: str, params: Mapping[str, Any] | None
    ) -> Mapping[str, Any]:
        import anyio  # only the async clients get here, and they run on anyio

        try:
            with anyio.fail_after(timeout):
                return await self.request(method, params)
        except TimeoutError:
            raise TimeoutError(f"{method} did not end within {timeout} s") from None
