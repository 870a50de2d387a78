"""A blocking test client over OS pipes: for the stdio adapter (served in a thread) and for
the example servers (run as subprocesses)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from stream_scenarios import TIMEOUT, Transcript

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class BlockingPeer:
    """Writes requests to ``write_fd`` and reads lines from ``read_fd``, never waiting longer
    than :data:`TIMEOUT` for an answer."""

    def __init__(self, write_fd: int, read_fd: int) -> None:
        self.transcript = Transcript()
        self._write_fd: int | None = write_fd
        self._read_fd = read_fd

    def send(self, *messages: dict[str, Any]) -> None:
        self.send_raw(b"".join(self.transcript.encode(m) for m in messages))

    def send_raw(self, data: bytes) -> None:
        assert self._write_fd is not None
        view = memoryview(data)
        while view:
            view = view[os.write(self._write_fd, view) :]

    def _read(self) -> bytes:
        ready = select.select([self._read_fd], [], [], TIMEOUT)[0]
        assert ready, "the server did not answer in time"
        return os.read(self._read_fd, 65536)

    def recv(self) -> dict[str, Any]:
        while (msg := self.transcript.next_line()) is None:
            data = self._read()
            assert data, "the server closed its output"
            self.transcript.feed(data)
        return msg

    def recv_eof(self) -> None:
        """The server closed its output, with nothing more to say."""
        data = self._read()
        assert data == b"", f"unexpected output: {data!r}"
        assert not self.transcript.leftover

    def close_input(self) -> None:
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None

    def close(self) -> None:
        self.close_input()
        os.close(self._read_fd)


@contextmanager
def example_server(adapter: str) -> Iterator[tuple[BlockingPeer, subprocess.Popen[bytes]]]:
    """Run ``examples/<adapter>/echo_server.py`` on pipes; on exit close its stdin and check
    that it ends cleanly on its own."""
    script = EXAMPLES / adapter / "echo_server.py"
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert proc.stderr is not None
    peer = BlockingPeer(proc.stdin.fileno(), proc.stdout.fileno())
    try:
        yield peer, proc
        proc.stdin.close()  # end of input: the server must exit by itself
        peer.recv_eof()
        assert proc.wait(TIMEOUT) == 0, proc.stderr.read().decode()
        stderr = proc.stderr.read().decode()
        assert "Traceback" not in stderr, stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
