"""A tiny MRTR server on stdio (asyncio): the ``greet`` tool asks for your name, then greets you.

Run it as a client would: ``python examples/asyncio/echo_server.py`` (stdin/stdout, one JSON
message per line). It speaks both wires: on 2026-07-28 the question goes out as an
``input_required`` result and the client retries with the answer; on 2025-11-25 the connection
asks with a real ``elicitation/create`` request and re-runs the handler with the answer.
"""

from __future__ import annotations

import asyncio
import logging
import sys

# --8<-- [start:handler]
from mrtr_sansio import InputRequiredResult, RequestReceived, ServerConfig, elicit_form
from mrtr_sansio.adapters import HandlerResult, RequestContext
from mrtr_sansio.adapters.anyio import serve_stdio

CONFIG = ServerConfig(server_info={"name": "echo", "version": "1.0.0"}, capabilities={"tools": {}})
GREET = {
    "name": "greet",
    "description": "Asks for your name, then greets you.",
    "inputSchema": {"type": "object"},
}
ASK_NAME = elicit_form(
    "What is your name?",
    {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
)


async def handler(request: RequestReceived, ctx: RequestContext) -> HandlerResult:
    """``tools/list`` and ``tools/call greet``; anything else is an error."""
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
        return InputRequiredResult({"name": ASK_NAME})
    return {"content": [{"type": "text", "text": f"Hello, {content['name']}!"}]}


# --8<-- [end:handler]


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    asyncio.run(serve_stdio(handler, CONFIG))
