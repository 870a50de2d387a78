"""Embedding the Sans-IO server in your own loop: stdin/stdout, no async library, both wires.

The whole transport is the ``serve`` function below: read bytes, feed them, answer the events,
write what the connection queued, and keep its timer. Swap ``select``/``os.read``/``os.write``
for your SDK's IO and it is the same loop. ``handle`` is an ordinary MRTR handler.

    python examples/embed/server_loop.py       # one JSON-RPC message per line on stdin/stdout
"""

from __future__ import annotations

import os
import select
from collections.abc import Callable
from typing import Any

import mrtr_sansio as m

Handler = Callable[[m.RequestReceived], Any]


# --8<-- [start:loop]
def serve(handle: Handler, config: m.ServerConfig, fd_in: int = 0, fd_out: int = 1) -> None:
    """Serve one stream until it ends: the whole event loop."""
    conn = m.ServerConnection(config)
    clock = config.clock
    while True:
        deadline = conn.next_deadline()  # legacy shim legs awaiting the client's answer
        timeout = None if deadline is None else max(0.0, deadline - clock())
        if select.select([fd_in], [], [], timeout)[0]:
            conn.receive_data(os.read(fd_in, 65536))  # b"" at the end: ConnectionClosed
        else:
            conn.handle_timer(clock())
        closed = False
        while (event := conn.next_event()) is not m.NEED_DATA:
            if isinstance(event, m.RequestReceived):  # first rounds and shim replays alike
                conn.respond(event.request_id, handle(event))
            elif isinstance(event, m.ConnectionClosed):
                closed = True
        os.write(fd_out, conn.data_to_send())
        if closed:
            return


# --8<-- [end:loop]


# --8<-- [start:handler]
ASK_NAME = m.elicit_form(
    "What is your name?",
    {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
)
GREET = {"name": "greet", "description": "Asks for your name.", "inputSchema": {"type": "object"}}


def handle(request: m.RequestReceived) -> Any:
    """``greet`` asks for a name (once more if the answer lacks it), then greets."""
    if request.method == "tools/list":
        return {"tools": [GREET]}
    if request.method != "tools/call":
        return request.method_not_found()
    if request.name != "greet":
        return request.unknown()
    answers = request.input_responses
    if answers.elicitation_action("name") in ("decline", "cancel"):
        return {"content": [{"type": "text", "text": "Hello, stranger!"}]}
    content = answers.accepted_content("name")
    if content is None or not isinstance(content.get("name"), str):
        return m.InputRequiredResult({"name": ASK_NAME})
    return {"content": [{"type": "text", "text": f"Hello, {content['name']}!"}]}


# --8<-- [end:handler]


CONFIG = m.ServerConfig(
    server_info={"name": "embedded", "version": "1.0.0"}, capabilities={"tools": {}}
)

if __name__ == "__main__":
    serve(handle, CONFIG)
