"""Our example servers as real processes for the interop and live tests: the HTTP one under
uvicorn on a free loopback port, the stdio one (``examples/asyncio/server.py``: the fixtures,
both eras, sealed state), and the official SDK's server (``sdk_server.py``)."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HTTP_SERVER = ROOT / "examples" / "http" / "server.py"
STDIO_SERVER = ROOT / "examples" / "asyncio" / "server.py"
SDK_SERVER = Path(__file__).resolve().parent / "sdk_server.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def http_server(
    script: Path = HTTP_SERVER, *extra: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``examples/http/server.py`` (or ``script`` taking ``--port``) under uvicorn; yields
    its URL and the process."""
    port = free_port()
    with tempfile.TemporaryFile() as log:  # a file, not a pipe: it never fills up
        proc = subprocess.Popen(
            [sys.executable, str(script), "--port", str(port), *extra],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        log.seek(0)
                        message = f"{script.name} did not start: {log.read()!r}"
                        raise AssertionError(message) from None
                    time.sleep(0.05)
            yield f"http://127.0.0.1:{port}/mcp", proc
        finally:
            if proc.poll() is None:
                proc.terminate()
            proc.wait(timeout=10)
