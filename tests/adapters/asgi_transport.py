"""An httpx transport that runs an ASGI app in process and streams its responses.

httpx's own ``ASGITransport`` collects the whole body before returning, which deadlocks a
legacy SSE exchange (the server waits for an answer the client can only send after reading
the stream). This one hands the body over chunk by chunk, tells the app ``http.disconnect``
when the client closes the response early, and can drop a response mid-body to play a server
that goes away. It also records every request for assertions.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream


class DroppedError(Exception):
    """Raised into the client when a response is cut off (see ``StreamingAsgi.cut``)."""


class _Body(httpx.AsyncByteStream):
    def __init__(
        self,
        chunks: MemoryObjectReceiveStream[Any],
        gone: anyio.Event,
        on_early_close: Callable[[], None],
    ) -> None:
        self._chunks = chunks
        self._gone = gone
        self._on_early_close = on_early_close
        self.complete = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._chunks:
            if isinstance(chunk, BaseException):
                raise httpx.RemoteProtocolError(f"server gone: {chunk}")
            yield chunk

    async def aclose(self) -> None:
        if not self.complete and not self._gone.is_set():
            self._on_early_close()
        self._gone.set()
        self._chunks.close()


class StreamingAsgi(httpx.AsyncBaseTransport):
    """Serve ``app`` to an ``httpx.AsyncClient``; app tasks run in ``tg``.

    ``requests`` lists every request seen (method, headers, body). ``cut(predicate)`` makes
    every later response whose request matches end abruptly after its first body chunk;
    ``refuse(predicate)`` makes matching requests fail to connect.
    """

    def __init__(self, app: Any, tg: TaskGroup) -> None:
        self.app = app
        self.tg = tg
        self.requests: list[httpx.Request] = []
        self.bodies: list[bytes] = []
        self._cut: Callable[[httpx.Request, bytes], bool] | None = None
        self._refuse: Callable[[httpx.Request, bytes], bool] | None = None
        self.finished = 0  # app calls that returned
        #: Requests whose response the client closed before the app finished it.
        self.closed_early: list[httpx.Request] = []

    def cut(self, predicate: Callable[[httpx.Request, bytes], bool]) -> None:
        self._cut = predicate

    def refuse(self, predicate: Callable[[httpx.Request, bytes], bool]) -> None:
        """Every later request that matches fails to connect (``httpx.ConnectError``)."""
        self._refuse = predicate

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        if self._refuse is not None and self._refuse(request, body):
            raise httpx.ConnectError("connection refused", request=request)
        self.requests.append(request)
        self.bodies.append(body)
        cut = self._cut is not None and self._cut(request, body)
        send_chunk, chunks = anyio.create_memory_object_stream[Any](math.inf)
        gone = anyio.Event()
        started = anyio.Event()
        head: dict[str, Any] = {}
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path,
            "query_string": request.url.query,
            "root_path": "",
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "client": ("127.0.0.1", 50000),
            "server": (request.url.host, request.url.port or 80),
        }
        sent_body = False
        body_stream = _Body(chunks, gone, lambda: self.closed_early.append(request))

        async def receive() -> dict[str, Any]:
            nonlocal sent_body
            if not sent_body:
                sent_body = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                head["status"] = message["status"]
                head["headers"] = message.get("headers", [])
                started.set()
            elif message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                if gone.is_set():
                    return
                if chunk:
                    send_chunk.send_nowait(chunk)
                if cut:
                    send_chunk.send_nowait(DroppedError("cut after the first chunk"))
                    send_chunk.close()
                    gone.set()
                elif not message.get("more_body", False):
                    body_stream.complete = True
                    send_chunk.close()

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            finally:
                self.finished += 1
                if not started.is_set():
                    head["status"] = 500
                    head["headers"] = []
                    started.set()
                send_chunk.close()

        self.tg.start_soon(run)
        try:
            await started.wait()
        except BaseException:  # the client gave up before the app started answering
            self.closed_early.append(request)
            gone.set()
            chunks.close()
            raise
        return httpx.Response(
            head["status"], headers=head["headers"], stream=body_stream, request=request
        )
