"""A raw HTTP/1.1 client on a loopback socket, for requests no HTTP library would send
(repeated headers, lying lengths, endless chunked bodies) and for reading SSE streams event by
event. Every read is bounded by the socket timeout."""

from __future__ import annotations

import json
import socket
from typing import Any

TIMEOUT = 10.0


class Response:
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

    def response(self) -> Response:
        """A whole response, its body read by Content-Length, chunks, or to the close."""
        status, headers = self.head()
        values = dict(headers)
        if "content-length" in values:
            return Response(status, headers, self._exactly(int(values["content-length"])))
        if values.get("transfer-encoding") == "chunked":
            parts = []
            while part := self.chunk():
                parts.append(part)
            return Response(status, headers, b"".join(parts))
        while self._fill():
            pass
        body, self._buf = self._buf, b""
        return Response(status, headers, body)

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
