"""The handler the Docket runner's tests run on their fronts and in their worker processes
(``mrtr-worker docket_app:handle``): its effects go to the Redis named by ``MRTR_TEST_REDIS``,
so that a test counts every run of a round and every effect, whichever process ran it.

* ``two_rounds``: asks ``first``, then ``second``, then completes; its final round records
  its run, waits while the key ``hold`` is set (a test kills its worker meanwhile), then
  applies its effect once per task (``HSETNX``: replay-safe) and counts the writes.
* ``sleepy``: sleeps ``seconds``; a cancelled run records it.
"""

from __future__ import annotations

import os
from typing import Any

import anyio
import anyio.to_thread
import redis

import mrtr_sansio as m
from mrtr_sansio.adapters import RequestContext
from mrtr_sansio.tasks import RunAsTask

TOOLS = {"two_rounds": "optional", "sleepy": "optional"}
FORM = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}


def effects() -> Any:
    """A Redis client on the tests' Redis (a new one per call: handlers run in threads)."""
    return redis.Redis.from_url(os.environ["MRTR_TEST_REDIS"], decode_responses=True)


async def _redis(*command: Any) -> Any:
    def run() -> Any:
        with effects() as client:
            return client.execute_command(*command)

    return await anyio.to_thread.run_sync(run)


async def handle(request: m.RequestReceived, ctx: RequestContext) -> Any:
    if request.method != "tools/call":
        return m.JsonRpcError.internal(f"no {request.method} here")
    name = request.params.get("name")
    if request.can_create_task:
        return RunAsTask(status_message="Queued")
    task = request.task_id
    if name == "sleepy":
        try:
            await anyio.sleep(float(request.arguments.get("seconds", 30)))
        except BaseException:
            with anyio.CancelScope(shield=True):
                await _redis("RPUSH", f"cancelled:{task}", str(os.getpid()))
            raise
        return {"content": [{"type": "text", "text": "slept"}], "isError": False}
    answers = request.input_responses
    first = request.request_state  # the first answer, carried to the last round
    if first is None:
        content = answers.accepted_content("first")
        if content is None:
            return m.InputRequiredResult({"first": m.elicit_form("First word?", FORM)})
        first = str(content["word"])
        ask = {"second": m.elicit_form("Second word?", FORM)}
        return m.InputRequiredResult(ask, request_state=first)
    second = answers.accepted_content("second")
    if second is None:
        return m.InputRequiredResult({"second": m.elicit_form("Second word?", FORM)}, first)
    await _redis("RPUSH", f"runs:{task}", str(os.getpid()))
    while await _redis("GET", "hold"):
        await anyio.sleep(0.05)
    text = f"{first} {second['word']}"
    if await _redis("HSETNX", "effects", task, text):
        await _redis("INCR", f"effect-writes:{task}")
    return {"content": [{"type": "text", "text": text}], "isError": False}
