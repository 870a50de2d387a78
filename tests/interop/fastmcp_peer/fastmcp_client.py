# mypy: ignore-errors
# (this script runs in .venv-fastmcp, where fastmcp is installed; the project's venv has none)
"""fastmcp's own client (``fastmcp-tasks`` 4.1.4) against one of our servers, for
``tests/interop/test_fastmcp_tasks.py``: ``python fastmcp_client.py URL`` calls
``slow_compute`` as a task (``call_tool_task``), reads its status, and prints one JSON line
with what happened.
fastmcp's client sends ``tasks/*`` without ``Mcp-Name``; our server refuses that (-32020).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from fastmcp import Client
from fastmcp_tasks.client import call_tool_task


async def main(url: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with Client(url, mode="auto") as client:
        task = await call_tool_task(client, "slow_compute", {"seconds": 0.2, "label": "f"})
        out["task_id"] = task.task_id
        try:
            status = await task.status()
            out["status"] = status.status
        except Exception as exc:  # the refusal is what the test checks
            out["error"] = {
                "type": type(exc).__name__,
                "code": getattr(getattr(exc, "error", None), "code", None),
                "message": str(exc),
            }
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
