"""Embedding the Sans-IO client in your own loop: call a tool on a server over pipes.

``call_tool`` is the whole client loop: write what the connection queued, read the answer (or
keep its timer), and answer each :class:`~mrtr_sansio.InputNeeded` until the call ends. The same
loop serves a 2026-07-28 server (``input_required`` and retries) and a 2025-11-25 one (real
server requests); ``era="auto"`` asks the server which it is.

    python examples/embed/client_loop.py        # runs server_loop.py and greets it in each era
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import mrtr_sansio as m

Answer = Callable[[m.InputNeeded], Mapping[str, Any]]


# --8<-- [start:loop]
def call_tool(
    conn: m.ClientConnection, fd_out: int, fd_in: int, tool: str, answer: Answer
) -> Mapping[str, Any]:
    """Call ``tool`` and drive every round until it ends: the whole client loop."""
    call = conn.call("tools/call", {"name": tool, "arguments": {}})
    clock = conn.config.clock
    while True:
        os.write(fd_out, conn.data_to_send())
        deadline = conn.next_deadline()  # a state-only retry's backoff, the era probe
        timeout = None if deadline is None else max(0.0, deadline - clock())
        if select.select([fd_in], [], [], timeout)[0]:
            conn.receive_data(os.read(fd_in, 65536))
        else:
            conn.handle_timer(clock())
        while (event := conn.next_event()) is not m.NEED_DATA:
            if isinstance(event, m.InputNeeded):  # inputRequests, or a legacy server request
                conn.fulfil(event, answer(event))
            elif isinstance(event, m.CallCompleted) and event.call is call:
                return event.result
            elif isinstance(event, (m.CallFailed, m.RoundsExhausted, m.HandshakeFailed)):
                raise RuntimeError(f"the call failed: {event}")


# --8<-- [end:loop]


def greet(era: Literal["modern", "legacy", "auto"], name: str = "Ada") -> str:
    """Start ``server_loop.py``, call its ``greet`` tool in ``era`` and return the greeting."""
    server = Path(__file__).with_name("server_loop.py")
    with subprocess.Popen(
        [sys.executable, str(server)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        conn = m.ClientConnection(
            m.ClientConfig(
                client_info={"name": "embedded-client", "version": "1.0.0"},
                capabilities={"elicitation": {"form": {}}},
                era=era,
            )
        )
        result = call_tool(
            conn,
            proc.stdin.fileno(),
            proc.stdout.fileno(),
            "greet",
            lambda _event: {"action": "accept", "content": {"name": name}},
        )
        proc.stdin.close()
    text: str = result["content"][0]["text"]
    return text


if __name__ == "__main__":
    for era in ("modern", "legacy", "auto"):
        print(f"{era:7s} {greet(era)}")
