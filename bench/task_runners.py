"""Task rounds per second and round latency: the in-process pool against the Docket runner.

    python bench/task_runners.py [--tasks 200] [--concurrency 16]

For each runner, one example server (``examples/http/server.py --tasks-redis URL``, with
``--docket URL`` for the Docket rows) on a real ``redis-server``, and for the Docket rows one
or two ``mrtr-worker`` processes. ``--concurrency`` client threads each create a
``slow_compute`` task (a 10 ms round) and poll ``tasks/get`` every 5 ms until it completes.
Figures per row: tasks completed per second, and p50 / p99 of a task's time from its
creation to the ``tasks/get`` that saw it completed (its one round, the queue and the poll).
The polling is part of what is measured, and the front serves it: on a loaded machine it
dominates. Needs the tasks-docket extra and Debian's redis-server. Not in bench/tasks.py,
which measures stalls and reads per store with one server and no workers.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from scale.cluster import start_redis, start_server, stop, write_ring
from scale.docket import start_workers

import mrtr_sansio as m

CAPS: dict[str, Any] = {"extensions": {m.tasks.EXTENSION: {}}}


def post(http: httpx.Client, url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    meta = {m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28", m.protocol.CLIENT_CAPABILITIES: CAPS}
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    name = str(params.get("name") or params["taskId"])
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": method, "mcp-name": name}
    reply = http.post(url, json=message, headers=headers).json()
    result: dict[str, Any] = reply["result"]
    return result


def one_task(url: str) -> float:
    """Seconds from a task's creation to the read that saw it completed."""
    with httpx.Client(timeout=30.0) as http:
        started = time.perf_counter()
        call = {"name": "slow_compute", "arguments": {"seconds": 0.01, "label": "b"}}
        task_id = str(post(http, url, "tools/call", call)["taskId"])
        while post(http, url, "tasks/get", {"taskId": task_id})["status"] != "completed":
            time.sleep(0.005)
        return time.perf_counter() - started


def run_row(workdir: Path, name: str, workers: int, args: argparse.Namespace) -> str:
    redis_url, redis = start_redis(workdir / name)
    procs = []
    try:
        ring = workdir / "ring"
        extra = ["--tasks-redis", redis_url]
        if workers:
            procs = start_workers(workdir / name, redis_url, workers)
            extra += ["--docket", redis_url]
        server = start_server(workdir / name, "front", keys_file=ring, ttl=60.0, extra=extra)
        url = f"http://{server.address}/mcp"
        try:
            one_task(url)  # warm up
            started = time.perf_counter()
            with ThreadPoolExecutor(args.concurrency) as pool:
                times = sorted(pool.map(lambda _: one_task(url), range(args.tasks)))
            wall = time.perf_counter() - started
        finally:
            stop(server.proc)
    finally:
        for proc, _ in procs:
            stop(proc)
        stop(redis)
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    return (f"{name:<20} {args.tasks / wall:7.1f} tasks/s   p50 "
            f"{statistics.median(times) * 1000:6.1f} ms   p99 {p99 * 1000:6.1f} ms")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mrtr-bench-runners-") as tmp:
        workdir = Path(tmp)
        write_ring(workdir / "ring", [secrets.token_bytes(32)])
        rows = [("in-process pool", 0), ("docket, 1 worker", 1), ("docket, 2 workers", 2)]
        for name, workers in rows:
            (workdir / name).mkdir()
            print(run_row(workdir, name, workers, args), flush=True)


if __name__ == "__main__":
    main()
