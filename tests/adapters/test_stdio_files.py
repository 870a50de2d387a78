"""The stdio servers whatever their stdin and stdout are: a regular file (``python server.py <
requests.jsonl > answers.jsonl``), ``/dev/null`` or a terminal, for the anyio adapter on asyncio
and on trio and for the blocking adapter, each run as its example echo server in a subprocess.
(Pipes are the other stdio tests' transport.)"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import threading
import tty
from pathlib import Path
from typing import Any, BinaryIO, cast

import pytest
from stream_harness import (
    ADA,
    EXAMPLES,
    TIMEOUT,
    Transcript,
    modern_call,
    request,
)

from mrtr_sansio import ServerConfig
from mrtr_sansio.adapters.stdio import serve

ADAPTERS = ["stdio", "asyncio", "trio"]  # asyncio and trio: the anyio adapter on each


def requests() -> list[dict[str, Any]]:
    meta = modern_call(0, "x")["params"]["_meta"]
    return [
        modern_call(1, "greet"),
        modern_call(2, "greet", inputResponses={"name": ADA}),
        request(3, "tools/list", {"_meta": meta}),
    ]


def run_server(adapter: str, stdin: Path | str, stdout: Path | str) -> str:
    """Run ``examples/<adapter>/echo_server.py`` on the given files; returns its stderr once it
    exited on its own, cleanly."""
    with open(stdin, "rb") as fin, open(stdout, "wb") as fout:
        proc = subprocess.run(
            [sys.executable, str(EXAMPLES / adapter / "echo_server.py")],
            stdin=fin,
            stdout=fout,
            stderr=subprocess.PIPE,
            timeout=TIMEOUT,
            check=False,
        )
    stderr = proc.stderr.decode()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    return stderr


def answers(path: Path) -> dict[Any, dict[str, Any]]:
    """The messages written to ``path`` (each checked against the schemas), by id."""
    transcript = Transcript()
    transcript.feed(path.read_bytes())
    got = {}
    while (msg := transcript.next_line()) is not None:
        got[msg["id"]] = msg
    assert not transcript.leftover
    return got


def write_requests(path: Path) -> None:
    transcript = Transcript()
    path.write_bytes(b"".join(transcript.encode(m) for m in requests()))


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_regular_file_in_regular_file_out(adapter: str, tmp_path: Path) -> None:
    """Every request read from a file is answered into a file, then the server exits 0."""
    write_requests(tmp_path / "requests.jsonl")
    run_server(adapter, tmp_path / "requests.jsonl", tmp_path / "answers.jsonl")
    got = answers(tmp_path / "answers.jsonl")
    assert sorted(got) == [1, 2, 3]
    assert got[1]["result"]["resultType"] == "input_required"
    assert got[2]["result"]["content"] == [{"type": "text", "text": "Hello, Ada!"}]
    assert [tool["name"] for tool in got[3]["result"]["tools"]] == ["greet"]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_dev_null_in_writes_nothing_and_exits(adapter: str, tmp_path: Path) -> None:
    run_server(adapter, os.devnull, tmp_path / "answers.jsonl")
    assert (tmp_path / "answers.jsonl").read_bytes() == b""


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_regular_file_in_dev_null_out(adapter: str, tmp_path: Path) -> None:
    """The answers go nowhere, and serving ends cleanly at the end of the file."""
    write_requests(tmp_path / "requests.jsonl")
    run_server(adapter, tmp_path / "requests.jsonl", os.devnull)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_dev_null_in_dev_null_out(adapter: str) -> None:
    run_server(adapter, os.devnull, os.devnull)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_terminal_in_and_out(adapter: str) -> None:
    """stdin and stdout one pseudo-terminal (raw mode, so the line discipline changes no byte);
    the terminal hanging up ends the input."""
    main, side = pty.openpty()
    tty.setraw(side)
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLES / adapter / "echo_server.py")],
        stdin=side,
        stdout=side,
        stderr=subprocess.PIPE,
    )
    os.close(side)
    transcript = Transcript()
    try:
        os.write(main, b"".join(transcript.encode(m) for m in requests()))
        got: dict[Any, dict[str, Any]] = {}
        while len(got) < 3:
            assert select.select([main], [], [], TIMEOUT)[0], "the server did not answer"
            transcript.feed(os.read(main, 65536))
            while (msg := transcript.next_line()) is not None:
                got[msg["id"]] = msg
        assert got[2]["result"]["content"] == [{"type": "text", "text": "Hello, Ada!"}]
    finally:
        os.close(main)  # the hang-up: the server's reads end
        proc.wait(TIMEOUT)
    assert proc.stderr is not None
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr


class _Descriptor:
    """A bare file descriptor for ``serve(stdin=...)``, which only asks for ``fileno()``."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd


def test_an_unreadable_input_ends_the_blocking_server(tmp_path: Path) -> None:
    """An input whose reads fail (a directory: EISDIR; Python refuses one as a process's
    stdin, so it is served in a thread here) is the end of the input, as a terminal that hung
    up is: serve returns and writes nothing."""
    fd = os.open(tmp_path, os.O_RDONLY)
    outcome: list[object] = []

    def run(fout: BinaryIO) -> None:
        try:
            serve(
                lambda request, _ctx: request.method_not_found(),
                ServerConfig(),
                stdin=cast("BinaryIO", _Descriptor(fd)),
                stdout=fout,
            )
        except BaseException as exc:  # reported below, not lost in the thread
            outcome.append(exc)
        else:
            outcome.append("returned")

    try:
        with open(tmp_path / "answers.jsonl", "wb") as fout:
            done = threading.Thread(target=run, args=(fout,), daemon=True)
            done.start()
            done.join(TIMEOUT)
        assert not done.is_alive()
    finally:
        os.close(fd)
    assert outcome == ["returned"]
    assert (tmp_path / "answers.jsonl").read_bytes() == b""
