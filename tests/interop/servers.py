"""Our example servers as real processes for the interop and live tests: the HTTP one under
uvicorn on a free loopback port, and the stdio one."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HTTP_SERVER = ROOT / "examples" / "http" / "server.py"
STDIO_SERVER = Path(__file__).resolve().parent / "stdio_server.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def http_server() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``examples/http/server.py`` under uvicorn; yields its URL and the process."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(HTTP_SERVER), "--port", str(port), "--log-level", "error"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
                assert time.monotonic() < deadline, "the HTTP example server did not start"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()
