"""``examples/scale/tasks.py``, short: tasks across three server processes behind nginx with
one Redis, a worker killed mid-task, and a SQLite server restarted mid-task (skipped where
Debian's nginx or redis-server is not installed; .ci/run installs both before the tests)."""

from __future__ import annotations

import pytest
from scale import cluster, tasks


def test_tasks_cross_processes_survive_a_dead_worker_and_a_restart(
    capsys: pytest.CaptureFixture[str],
) -> None:
    missing = [
        text
        for found, text in (
            (cluster.find_nginx(), cluster.NGINX_MISSING),
            (cluster.find_redis(), cluster.REDIS_MISSING),
        )
        if found is None
    ]
    if missing:  # .ci/run installs both before the tests
        pytest.skip("; ".join(missing))
    assert tasks.main(["--processes", "3", "--tasks", "6", "--lease", "1"]) == 0
    out = capsys.readouterr().out
    assert "1. 6 tasks completed through nginx" in out
    assert "2. 3 tasks of a killed process: Counter({'failed': 3})" in out
    assert (
        "3. SQLite: after a kill and a restart the task was input_required, then completed" in out
    )
