"""A tiny in-process ASGI client for tests: whole responses, or SSE streams read event by event.

It speaks ASGI 3 to the app directly (no sockets), so tests can interleave several requests,
read a stream up to a point, and simulate a client disconnect deterministically.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import anyio
from anyio.abc import TaskGroup

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
