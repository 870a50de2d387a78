"""The fixtures' handler with an effect that can be counted, for ``examples/scale/docket.py``.

``mrtr-worker scale.effects:Counted().handle`` runs it: every time a task's round ends in the
tool's result (not a question), the handler adds one to the Redis counter
``mrtr-effect:<task id>`` at ``$MRTR_EFFECTS_REDIS``. A round that Docket redelivers runs the
handler again, so a task whose counter reads 2 had its effect twice; the script checks every
task's reads exactly 1. The effect comes last in the round, as a replay-safe handler's must:
a round killed before it leaves nothing to undo.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import redis.asyncio
from fixtures import Everything

import mrtr_sansio as m
from mrtr_sansio.adapters import HandlerResult, RequestContext

__all__ = ["EFFECT_PREFIX", "Counted"]

#: The Redis key of a task's effect counter is this and the task's id.
EFFECT_PREFIX = "mrtr-effect:"


class Counted:
    """:class:`fixtures.Everything`'s handler, counting the results of task rounds in the
    Redis at ``$MRTR_EFFECTS_REDIS``."""

    def __init__(self) -> None:
        self._tools = Everything()
        self._redis = redis.asyncio.Redis.from_url(os.environ["MRTR_EFFECTS_REDIS"])

    async def handle(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        """The :data:`~mrtr_sansio.adapters.Handler`."""
        result = await self._tools.handle(request, ctx)
        if request.task_id is not None and isinstance(result, Mapping):
            await self._redis.incr(EFFECT_PREFIX + request.task_id)
        return result
