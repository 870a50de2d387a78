"""The tasks guide (``docs/tasks.md``) states what the code does: the status table it draws,
the defaults of every limit in its limits table, and the error our server sends to a
``tasks/*`` request without ``Mcp-Name`` (fastmcp's client's), quoted as sent."""

from __future__ import annotations

import importlib.util
import inspect
import json
import re
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest

from mrtr_sansio import ServerConfig
from mrtr_sansio.adapters import SubscriptionHub
from mrtr_sansio.adapters import anyio as anyio_adapter
from mrtr_sansio.adapters.asgi import McpHttpApp, TaskRunOptions
from mrtr_sansio.adapters.stores import SqliteTaskStore
from mrtr_sansio.tasks import EXTENSION, TASK, TaskSettings

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "tasks.md"


def test_the_guide_draws_the_status_table() -> None:
    """The diagram and the table are generated from ``TASK`` at build time (docs/hooks)."""
    assert TASK.name == "task"
    assert "\n<!-- lifecycle: task -->\n" in GUIDE.read_text(encoding="utf-8")


def test_the_guide_states_every_limit_with_its_real_default() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    settings = TaskSettings()
    fields = [f.name for f in attrs.fields(TaskSettings) if f.name not in ("store", "tools")]
    for field in fields:
        assert f"| `{field}` | `{getattr(settings, field)}` |" in text, field
    runs = TaskRunOptions()
    for run_field in attrs.fields(TaskRunOptions):
        row = f"| `TaskRunOptions.{run_field.name}` | `{getattr(runs, run_field.name)}` |"
        assert row in text, run_field.name


def test_the_guide_states_the_stream_bounds_with_their_real_defaults() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)\((\w+)=\)` \| `([^`]+)` \|", text, re.MULTILINE)
    owners: dict[str, Any] = {
        "SubscriptionHub": SubscriptionHub,
        "McpHttpApp": McpHttpApp,
        "serve": anyio_adapter.serve,
    }
    docket_rows = {"DocketRunner", "RoundWorker"}  # the scale-out section's bounds
    if importlib.util.find_spec("docket") is None:  # the tasks-docket extra is missing
        rows = [row for row in rows if row[0] not in docket_rows]
    else:
        from mrtr_sansio.adapters.docket import DocketRunner, RoundWorker

        owners |= {"DocketRunner": DocketRunner, "RoundWorker": RoundWorker}
    assert {owner for owner, _, _ in rows} == set(owners)
    for owner, param, literal in rows:
        default = inspect.signature(owners[owner]).parameters[param].default
        assert repr(default) == literal, (owner, param, literal)
    worker = inspect.signature(RoundWorker).parameters if "RoundWorker" in owners else {}
    stated_worker = {param for owner, param, _ in rows if owner == "RoundWorker"}
    assert stated_worker == set(worker) - {"handler", "config", "url", "name", "replay_safe",
                                           "replay_check"}  # fmt: skip
    hub = inspect.signature(SubscriptionHub).parameters
    stated = {param for owner, param, _ in rows if owner == "SubscriptionHub"}
    assert stated == set(hub) - {"store_threads"}


def test_the_guide_states_the_lease_default_of_a_durable_store(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    try:
        lease = TaskSettings(store=store).lease_seconds
    finally:
        store.close()
    row = next(line for line in GUIDE.read_text().splitlines() if "| `lease_seconds` |" in line)
    assert f"`{lease}` when the store is durable" in row


@pytest.mark.anyio
async def test_the_quoted_missing_mcp_name_error_is_what_the_server_sends() -> None:
    quoted = re.search(r'```json\n(\{"jsonrpc".*?"code":-32020.*?\})\n```', GUIDE.read_text())
    assert quoted is not None
    expected = json.loads(quoted.group(1))

    async def handler(request: Any, ctx: Any) -> dict[str, Any]:
        return {}

    app = McpHttpApp(handler, ServerConfig(tasks=TaskSettings()))
    caps: dict[str, Any] = {"extensions": {EXTENSION: {}}}
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
    }
    body = {
        "jsonrpc": "2.0",
        "id": expected["id"],
        "method": "tasks/get",
        "params": {"taskId": "0" * 32, "_meta": meta},
    }
    headers = {  # as fastmcp's client sends it: everything but Mcp-Name
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tasks/get",
    }
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app)) as http:
        response = await http.post("http://localhost/mcp", json=body, headers=headers)
    assert response.status_code == 400
    assert response.json() == expected
