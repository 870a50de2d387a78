"""``examples/scale/docket.py``, short: two fronts behind nginx and two Docket workers on one
Redis; tasks complete, and a worker killed mid-round leaves its rounds to the other (skipped
without the tasks-docket extra, Debian's nginx or redis-server)."""

from __future__ import annotations

import pytest
from scale import cluster

pytest.importorskip("docket", reason="examples/scale/docket.py needs the tasks-docket extra")

from scale import docket


def test_tasks_complete_on_workers_and_survive_a_dead_one(
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
