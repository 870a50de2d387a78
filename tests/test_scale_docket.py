"""``examples/scale/docket.py``, short: two fronts behind nginx and two Docket workers on one
Redis; tasks complete, a worker killed mid-round leaves its rounds to the other, a front killed
leaves its tasks to the other, and every task's effect happens exactly once (skipped without
the tasks-docket extra, Debian's nginx or redis-server)."""

from __future__ import annotations

import pytest
from scale import cluster

pytest.importorskip("docket", reason="examples/scale/docket.py needs the tasks-docket extra")

from scale import docket


def test_tasks_complete_on_workers_and_survive_a_dead_worker_and_front(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for found, text in ((cluster.find_nginx(), cluster.NGINX_MISSING),
                        (cluster.find_redis(), cluster.REDIS_MISSING)):  # fmt: skip
        if found is None:
            pytest.skip(text)
    assert docket.main(["--tasks", "6"]) == 0
    out = capsys.readouterr().out
    assert "1. 6 tasks completed through nginx on the workers" in out
    assert "['completed', 'completed', 'completed', 'completed']" in out
    assert "3. killed the front that created 4 tasks" in out
    assert "4. effects per task, for 14 tasks of 14: {1: 14}" in out
