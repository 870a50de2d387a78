"""A server written with the official Python SDK (``mcp`` 2.3.0), for our HTTP client to talk
to: a plain tool, a tool written MRTR-style (returns ``InputRequiredResult``) and one written
the legacy way (``ctx.elicit``, a real server-to-client request).

    python tests/interop/sdk_server.py --port PORT
"""

from __future__ import annotations

import sys

import uvicorn
from mcp.server.elicitation import AcceptedElicitation
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
)
from pydantic import BaseModel

server = MCPServer("sdk-interop")
NAME_FORM = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}


class Name(BaseModel):
    name: str


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


@server.tool()
async def greet(ctx: Context) -> CallToolResult | InputRequiredResult:
    """Asks for a name with an embedded elicitation (MRTR), keeping a state."""
    answer = (ctx.input_responses or {}).get("name")
    if not isinstance(answer, ElicitResult) or answer.content is None:
        form = ElicitRequestFormParams(message="Your name?", requested_schema=NAME_FORM)
        return InputRequiredResult(
            input_requests={"name": ElicitRequest(params=form)}, request_state="round-1"
        )
    text = f"Hello {answer.content['name']} ({ctx.request_state})"
    return CallToolResult(content=[TextContent(type="text", text=text)])


@server.tool()
async def ask(ctx: Context) -> str:
    """Asks for a name with a real server-to-client request (the legacy style)."""
    result = await ctx.elicit("Your name?", Name)
    if isinstance(result, AcceptedElicitation):
        return f"Hi {result.data.name}"
    return f"no name ({result.action})"


if __name__ == "__main__":
    port = int(sys.argv[sys.argv.index("--port") + 1])
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="error")
