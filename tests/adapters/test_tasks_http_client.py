"""Our HTTP client with the tasks extension declared, against our ASGI app (in process): the
same ``call_tool`` and the same input callbacks whether the server answers synchronously, by
MRTR rounds, or with a task it polls."""

from __future__ import annotations

from typing import Any

import pytest
from http_harness import (
    User,
    connected,
    everything_app,
    methods,
    texts,
)

from mrtr_sansio.tasks import EXTENSION

pytestmark = pytest.mark.anyio

TASKS: dict[str, Any] = {"capabilities": {"extensions": {EXTENSION: {}}}}


async def test_a_task_is_polled_to_its_result_with_the_same_callbacks() -> None:
    user = User()
    async with connected(everything_app(), config=TASKS, user=user) as (client, transport):
        result = await client.call_tool("confirm_delete", {"filename": "a.txt"})
    assert texts(result) == ["Kept a.txt."]  # the scripted user answers a name, not "confirm"
    assert [event.key for event in user.asked] == ["confirm"]
    sent = methods(transport)
    assert sent[0] == "tools/call"
    assert "tasks/update" in sent
    assert sent[-1] == "tasks/get"
    assert set(sent[1:]) <= {"tasks/get", "tasks/update"}


async def test_without_the_extension_the_same_call_is_mrtr_rounds() -> None:
    user = User()
    async with connected(everything_app(), user=user) as (client, transport):
        result = await client.call_tool("confirm_delete", {"filename": "a.txt"})
    assert texts(result) == ["Kept a.txt."]
    assert methods(transport) == ["tools/call", "tools/call"]


async def test_a_working_task_is_polled_until_it_completes() -> None:
    async with connected(everything_app(), config=TASKS) as (client, transport):
        result = await client.call_tool("slow_compute", {"seconds": 0.2, "label": "z"})
    assert texts(result) == ["Computed z in 0.2s."]
    assert methods(transport)[:2] == ["tools/call", "tasks/get"]
