"""The harness of the HTTP adapter tests: our ASGI app in process, or on a loopback socket.

* :class:`StreamingAsgi`: an httpx transport that runs an ASGI app in process and streams its
  responses chunk by chunk (httpx's own ``ASGITransport`` collects the whole body first, which
  deadlocks a legacy SSE exchange); it tells the app ``http.disconnect`` when the client closes
  a response early, can drop a response mid-body, and records every request.
* :class:`Client`: a tiny ASGI 3 client speaking to the app directly (no sockets), for whole
  responses or SSE streams read event by event, several requests interleaved and client
  disconnects simulated deterministically.
* :class:`RawConnection` and :class:`SseReader`: a raw HTTP/1.1 client on a loopback socket,
  for requests no HTTP library would send (repeated headers, lying lengths, endless chunked
  bodies); every read is bounded by the socket timeout.
* :func:`connected`: our HTTP client connected to the app in process, with scripted users
  (:class:`User`), and the wire as the server saw it (schema-checked).
"""

from __future__ import annotations

import json
import math
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream
from fixtures import Everything, server_config

import mrtr_sansio as m
from helpers import (
    check_message,
)
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.adapters.http import HttpClient

# --- an httpx transport that streams an in-process ASGI app ---------------------------------------


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


# --- a tiny ASGI client: whole responses, SSE event by event --------------------------------------

JSON_HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "host": "localhost:8000",
}


def scope(method: str, headers: Mapping[str, str], path: str = "/mcp") -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


class Response:
    """A response as it arrives: status, headers, and the body chunks."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.chunks: list[bytes] = []
        self.complete = False
        self.started = anyio.Event()
        self.done = anyio.Event()
        self._buffer = b""  # received and not yet consumed by next_message()
        self._changed = anyio.Event()

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    def messages(self) -> list[dict[str, Any]]:
        """Every JSON-RPC message in the body (SSE events or one JSON document)."""
        if self.content_type.startswith("text/event-stream"):
            return [json.loads(data) for data in _sse_data(self.body)]
        return [self.json()] if self.body else []

    async def next_message(self) -> dict[str, Any] | None:
        """The next SSE event's message, waiting for it; None when the stream ended."""
        while True:
            data = _pop_event(self)
            if data is not None:
                return json.loads(data)  # type: ignore[no-any-return]
            if self.complete:
                return None
            changed = self._changed
            await changed.wait()

    async def _asgi_send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {k.decode(): v.decode() for k, v in message.get("headers", [])}
            self.started.set()
        elif message["type"] == "http.response.body":
            chunk = message.get("body", b"")
            self.chunks.append(chunk)
            self._buffer += chunk
            if not message.get("more_body", False):
                self.complete = True
                self.done.set()
            self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()


def _sse_data(body: bytes) -> list[str]:
    out = []
    for block in body.decode().split("\n\n"):
        data = [line[6:] for line in block.split("\n") if line.startswith("data: ")]
        if data:
            out.append("\n".join(data))
    return out


def _pop_event(response: Response) -> str | None:
    while b"\n\n" in response._buffer:
        block, response._buffer = response._buffer.split(b"\n\n", 1)
        data = [line[6:] for line in block.decode().split("\n") if line.startswith("data: ")]
        if data:
            return "\n".join(data)
    return None


class Request:
    """One in-flight request to the app; ``disconnect()`` makes the client go away."""

    def __init__(self, app: Any, method: str, body: bytes, headers: Mapping[str, str]) -> None:
        self.app = app
        self.scope = scope(method, headers)
        self.body = body
        self.response = Response()
        self._gone = anyio.Event()
        self._sent_body = False
        self.finished = anyio.Event()

    async def _receive(self) -> dict[str, Any]:
        if not self._sent_body:
            self._sent_body = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    def disconnect(self) -> None:
        self._gone.set()

    async def run(self) -> None:
        try:
            await self.app(self.scope, self._receive, self.response._asgi_send)
        finally:
            self.finished.set()
            if not self.response.complete:
                self.response.complete = True  # the app returned without finishing the body
                self.response._wake()


class Client:
    """Sends requests to an ASGI app inside a task group."""

    def __init__(self, app: Any, tg: TaskGroup) -> None:
        self.app = app
        self.tg = tg

    def start(
        self,
        body: Mapping[str, Any] | bytes,
        headers: Mapping[str, str] | None = None,
        method: str = "POST",
    ) -> Request:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        request = Request(self.app, method, raw, {**JSON_HEADERS, **(headers or {})})
        self.tg.start_soon(request.run)
        return request

    async def send(
        self,
        body: Mapping[str, Any] | bytes,
        headers: Mapping[str, str] | None = None,
        method: str = "POST",
    ) -> Response:
        request = self.start(body, headers, method)
        await request.finished.wait()
        return request.response


# --- a raw HTTP/1.1 client on a loopback socket ---------------------------------------------------

TIMEOUT = 10.0


class RawResponse:
    """A response's status line, headers (lower-case names, in order) and body."""

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k == name:
                return v
        return None

    def json(self) -> Any:
        return json.loads(self.body)


class RawConnection:
    """One TCP connection to the server; requests are written as given."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self._buf = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        self._buf += data
        return bool(data)

    def _line(self) -> bytes:
        while b"\r\n" not in self._buf:
            if not self._fill():
                raise ConnectionError("connection closed mid-line")
        line, self._buf = self._buf.split(b"\r\n", 1)
        return line

    def _exactly(self, n: int) -> bytes:
        while len(self._buf) < n:
            if not self._fill():
                raise ConnectionError("connection closed mid-body")
        data, self._buf = self._buf[:n], self._buf[n:]
        return data

    def head(self) -> tuple[int, list[tuple[str, str]]]:
        """Read a status line and the headers."""
        status = int(self._line().split(b" ", 2)[1])
        headers = []
        while line := self._line():
            name, _, value = line.partition(b":")
            headers.append((name.decode("latin-1").lower(), value.decode("latin-1").strip()))
        return status, headers

    def chunk(self) -> bytes:
        """The next chunk of a chunked body (b"" for the last)."""
        size = int(self._line().split(b";")[0], 16)
        data = self._exactly(size)
        self._exactly(2)
        if size == 0:
            return b""
        return data

    def response(self) -> RawResponse:
        """A whole response, its body read by Content-Length, chunks, or to the close."""
        status, headers = self.head()
        values = dict(headers)
        if "content-length" in values:
            return RawResponse(status, headers, self._exactly(int(values["content-length"])))
        if values.get("transfer-encoding") == "chunked":
            parts = []
            while part := self.chunk():
                parts.append(part)
            return RawResponse(status, headers, b"".join(parts))
        while self._fill():
            pass
        body, self._buf = self._buf, b""
        return RawResponse(status, headers, body)

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the server closes the connection (EOF or reset) within ``timeout``;
        anything it still sends is read and dropped, at most 64 MiB of it."""
        self.sock.settimeout(timeout)
        received = 0
        try:
            while received < 64 * 1024 * 1024:
                data = self.sock.recv(65536)
                if not data:
                    return True
                received += len(data)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        finally:
            self.sock.settimeout(TIMEOUT)
        return False  # pragma: no cover - it kept talking


class SseReader:
    """The ``data:`` messages of an SSE response on a chunked body, one at a time."""

    def __init__(self, conn: RawConnection) -> None:
        self.conn = conn
        self._text = b""
        self.ended = False

    def next(self) -> dict[str, Any] | None:
        """The next message, or None when the stream ended."""
        while b"\n\n" not in self._text:
            if self.ended:
                return None
            part = self.conn.chunk()
            if not part:
                self.ended = True
                continue
            self._text += part
        event, self._text = self._text.split(b"\n\n", 1)
        for line in event.split(b"\n"):
            if line.startswith(b"data:"):
                return json.loads(line[5:])  # type: ignore[no-any-return]
        return self.next()  # pragma: no cover - every event we send has data

    def rest(self) -> list[dict[str, Any]]:
        """Every message until the stream ends."""
        out = []
        while (msg := self.next()) is not None:
            out.append(msg)
        return out


def post(
    body: bytes,
    headers: list[tuple[str, str]] | None = None,
    *,
    content_type: str | None = "application/json",
    length: int | None = None,
    host: str = "127.0.0.1",
    path: str = "/mcp",
) -> bytes:
    """The bytes of a POST: ``headers`` written as given, after Host, Content-Type (unless
    None), Accept and Content-Length (``length``, or the body's)."""
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}"]
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    lines.append("Accept: application/json, text/event-stream")
    lines.append(f"Content-Length: {len(body) if length is None else length}")
    lines += [f"{k}: {v}" for k, v in headers or []]
    return "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + body


# --- our HTTP client connected to the app, scripted users, the server's wire ----------------------

URL = "http://localhost:8000/mcp"
INFO = {"name": "http-test-client", "version": "1.0.0"}
DATES = {"check_in": "2026-08-01", "check_out": "2026-08-05"}
ROOTS = {"roots": [{"uri": "file:///work/trips", "name": "Trips"}]}


def sampled(text: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": {"type": "text", "text": text},
        "model": "test-model",
        "stopReason": "endTurn",
    }


class User:
    """Scripted callbacks that remember what they were asked."""

    def __init__(self, name: str = "Ada") -> None:
        self.name = name
        self.asked: list[m.InputNeeded] = []

    async def elicitation(self, event: m.InputNeeded) -> Mapping[str, Any]:
        self.asked.append(event)
        props = event.params["requestedSchema"]["properties"]
        if "check_in" in props:
            return {"action": "accept", "content": DATES}
        if "ok" in props:
            return {"action": "accept", "content": {"ok": True}}
        if "context" in props:
            return {"action": "accept", "content": {"context": "travel"}}
        if "color" in props:
            return {"action": "accept", "content": {"color": "teal"}}
        return {"action": "accept", "content": {"name": self.name}}

    async def sampling(self, event: m.InputNeeded) -> Mapping[str, Any]:
        self.asked.append(event)
        return sampled("Paris")

    async def roots(self, event: m.InputNeeded) -> Mapping[str, Any]:
        self.asked.append(event)
        return ROOTS

    def callbacks(self) -> dict[str, Any]:
        return {"elicitation": self.elicitation, "sampling": self.sampling, "roots": self.roots}


def everything_app(**options: Any) -> McpHttpApp:
    config = server_config(request_state=m.sealing.RequestStateSecurity.ephemeral())
    return McpHttpApp(Everything().handle, config, **options)


@asynccontextmanager
async def transport_for(app: Any) -> AsyncIterator[StreamingAsgi]:
    """The transport, its app tasks cancelled on exit; what the block raises comes out as is
    (not wrapped in an exception group by the task group)."""
    raised: BaseException | None = None
    async with anyio.create_task_group() as tg:
        try:
            yield StreamingAsgi(app, tg)
        except BaseException as exc:
            raised = exc
        tg.cancel_scope.cancel()
    if raised is not None:
        raise raised


@asynccontextmanager
async def connected(
    app: Any,
    era: str = "modern",
    *,
    user: User | None = None,
    config: Mapping[str, Any] | None = None,
    prepare: Callable[[StreamingAsgi], object] | None = None,
    **options: Any,
) -> AsyncIterator[tuple[HttpClient, StreamingAsgi]]:
    """Our client connected to ``app`` in process; ``user`` answers (a fresh ``User`` by
    default); ``options`` add to or replace its callbacks (``sampling=None`` removes one);
    ``prepare`` sees the transport before the client connects."""
    callbacks = (user or User()).callbacks()
    settings: dict[str, Any] = {"era": era, "client_info": INFO, **(config or {})}
    async with transport_for(app) as transport:
        if prepare is not None:
            prepare(transport)
        async with (
            httpx.AsyncClient(transport=transport) as http,
            HttpClient.connect(
                URL, m.ClientConfig(**settings), http=http, **{**callbacks, **options}
            ) as client,
        ):
            yield client, transport


def posts(transport: StreamingAsgi) -> list[tuple[httpx.Headers, dict[str, Any]]]:
    """Every POST the client made: its headers and its body, checked against the schema of
    the era the body is in (a body with the modern envelope is modern)."""
    out = []
    for request, body in zip(transport.requests, transport.bodies, strict=True):
        if request.method != "POST":
            continue
        msg = json.loads(body)
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        modern = m.protocol.PROTOCOL_VERSION_KEY in params.get("_meta", {})
        check_message(msg, m.Era.MODERN if modern else m.Era.LEGACY, sender="client")
        out.append((request.headers, msg))
    return out


def methods(transport: StreamingAsgi) -> list[str]:
    """What each request carried: its JSON-RPC method, ``answer`` or the HTTP method (but
    not the legacy standalone stream's GETs, whose timing is their own)."""
    out = []
    for request, body in zip(transport.requests, transport.bodies, strict=True):
        if request.method == "GET":
            continue
        if request.method != "POST":
            out.append(request.method)
            continue
        msg = json.loads(body)
        out.append(msg.get("method", "answer"))
    return out


def texts(result: Mapping[str, Any]) -> list[str]:
    return [block["text"] for block in result["content"] if block["type"] == "text"]
