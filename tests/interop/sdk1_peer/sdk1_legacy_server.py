# mypy: ignore-errors
# (this script runs in .venv-sdk1, where mcp 1.x is installed; the project's venv has 2.x)
"""A legacy-only server (2025-11-25) on the official Python SDK 1.x (``mcp<2``) over stdio, with
tools that ask through real ``elicitation/create`` requests; tests/test_bridge_peers.py runs it
behind ``mrtr-bridge`` for the official TS client (2026-07-28).

    python sdk1_legacy_server.py        # stdio; run by the bridge as its upstream command
"""

from __future__ import annotations

from mcp.server.fastmcp import Context, FastMCP
from pydantic import BaseModel

server = FastMCP("sdk1-legacy-peer")


class Name(BaseModel):
    name: str


class Confirm(BaseModel):
    ok: bool


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers (no question asked)."""
    return str(a + b)


@server.tool()
async def ask_name(ctx: Context) -> str:
    """Ask for a name once and greet it."""
    answer = await ctx.elicit("What is your name?", Name)
    if answer.action != "accept":
        return f"No name ({answer.action})"
    return f"Hello, {answer.data.name}!"


@server.tool()
async def ask_twice(ctx: Context) -> str:
    """Ask for a name, then for a confirmation that names it: two questions in a row."""
    first = await ctx.elicit("Who is the table for?", Name)
    if first.action != "accept":
        return f"No booking ({first.action})"
    name = first.data.name
    second = await ctx.elicit(f"Book a table for {name}?", Confirm)
    if second.action != "accept" or not second.data.ok:
        return f"Table for {name}: not booked"
    return f"Table for {name}: booked"


if __name__ == "__main__":
    server.run("stdio")
