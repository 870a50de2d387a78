"""A tool that asks for confirmation and a prompt that asks for roots, on ``registry.py``.

``python examples/sdk/server.py`` serves stdio, both wires, with the same functions."""

from __future__ import annotations

import asyncio

from registry import Context, Registry

from mrtr_sansio.adapters.asyncio import serve_stdio

# --8<-- [start:app]
app = Registry("files", "1.0.0")


@app.tool()
async def delete_file(path: str, ctx: Context, force: bool = False) -> str:
    """Delete a file, once the user confirms."""
    if not force and not ctx.confirm("confirm", f"Delete {path}?"):
        return f"Kept {path}."
    return f"Deleted {path}."


@app.prompt()
async def review(ctx: Context, focus: str = "bugs") -> str:
    """Review the client's workspace."""
    return f"Review the code under {', '.join(ctx.roots())} for {focus}."


@app.resource("notes://today")
async def today() -> str:
    return "Nothing planned."


# --8<-- [end:app]


if __name__ == "__main__":
    asyncio.run(serve_stdio(app.handle, app.config()))
