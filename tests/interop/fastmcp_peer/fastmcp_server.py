# mypy: ignore-errors
# (this script runs in .venv-fastmcp, where fastmcp is installed; the project's venv has none)
"""A fastmcp-tasks server (PyPI ``fastmcp-tasks`` 4.1.4, in-memory backend) for
``tests/interop/test_fastmcp_tasks.py``: ``python fastmcp_server.py PORT`` serves Streamable
HTTP on 127.0.0.1:PORT/mcp. It runs in its own venv (``.venv-fastmcp``, made by
``install.sh``), never imported by our tests. Two tools, each a task when the client allows:
``slow`` (waits ``seconds``; also the one cancelled) and ``confirm`` (asks through an
elicitation, guard style).
"""

from __future__ import annotations

import asyncio
import sys

import mcp_types
from fastmcp import Context, FastMCP
from fastmcp_tasks import TasksExtension

mcp = FastMCP("fastmcp-tasks-interop")
mcp.add_extension(TasksExtension())


@mcp.tool(task=True)
async def slow(seconds: float, label: str = "") -> str:
    """Waits ``seconds`` and says so."""
    await asyncio.sleep(seconds)
    return f"Slept {label} {seconds:g}s."


@mcp.tool(task=True)
async def confirm(filename: str, ctx: Context) -> object:
    """Asks to confirm before 'deleting' ``filename`` (key ``confirm``)."""
    answers = ctx.input_responses
    if not answers or "confirm" not in answers:
        form = mcp_types.ElicitRequestFormParams(
            mode="form",
            message=f"Delete {filename}?",
            requested_schema={
                "type": "object",
                "properties": {"confirm": {"type": "boolean"}},
                "required": ["confirm"],
            },
        )
        request = mcp_types.ElicitRequest(method="elicitation/create", params=form)
        return mcp_types.InputRequiredResult(input_requests={"confirm": request})
    answer = answers["confirm"]
    action = getattr(answer, "action", None)
    content = getattr(answer, "content", None) or {}
    done = "Deleted" if action == "accept" and content.get("confirm") is True else "Kept"
    return f"{done} {filename}."


if __name__ == "__main__":
    mcp.run(transport="http", host="127.0.0.1", port=int(sys.argv[1]), show_banner=False)
