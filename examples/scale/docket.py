"""Tasks on Docket workers apart from the HTTP fronts (``tasks-docket`` extra).

    python examples/scale/docket.py [--fronts 2] [--workers 2] [--tasks 100]

Starts one Redis, ``--workers`` ``mrtr-worker`` processes running the fixtures' handler and
``--fronts`` example servers (``examples/http/server.py --tasks-redis URL --docket URL``)
behind nginx, then:

1. **every task completes**: ``--tasks`` tasks through nginx, half with an MRTR round first
   and half asking inside the task (``examples/scale/tasks.py``'s flows), every round a
   Docket job run by a worker, every read and answer on whichever front nginx picks.
2. **a worker killed mid-round**: tasks whose round takes 2 s are created, the worker holding
   a round is killed (SIGKILL), and every task must still complete: Docket redelivers the dead
   worker's rounds to the other after the redelivery timeout.
3. **a front killed**: tasks are created on one front directly (three running, one waiting
   for input), that front is killed (SIGKILL), and through nginx the other front answers
   ``tasks/get`` and the ``tasks/update`` for them, and they complete.
4. **every effect once**: the workers run the fixtures' handler counting, in Redis, each task
   round that ends in a result (``examples/scale/effects.py``); every task of steps 1 to 3
   must have a count of exactly 1, the redelivered rounds' included.

Prints the figures and exits 1 if anything is not as stated.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scale.cluster import (
    NGINX_MISSING,
    Cluster,
    ClusterError,
    cluster,
    find_nginx,
    start_redis,
    stop,
    write_ring,
)
from scale.effects import EFFECT_PREFIX
from scale.tasks import Peer, accept, one_task

EXAMPLES = Path(__file__).resolve().parents[1]
REDELIVERY = 2.0  # seconds before a dead worker's round goes to another
READY = b"running the rounds"
HANDLER = "scale.effects:Counted().handle"


def start_workers(
    workdir: Path, url: str, count: int, ring: Path
) -> list[tuple[subprocess.Popen[bytes], Path]]:
    """``count`` worker processes on ``url``, each logging to a file of its own and reading
    the task records under the fronts' key ring ``ring``; returns once each one says it runs
    rounds."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(EXAMPLES), os.environ.get("PYTHONPATH", "")]),
        "MRTR_EFFECTS_REDIS": url,
    }
    workers = []
    for n in range(count):
        log = workdir / f"worker-{n + 1}.log"
        argv = [sys.executable, "-m", "mrtr_sansio.adapters.docket",
                HANDLER, "--redis", url, "--replay-safe",
                "--redelivery-timeout", str(REDELIVERY),
                "--state-keys-file", str(ring)]  # fmt: skip
        with log.open("wb") as out:
            workers.append((subprocess.Popen(argv, env=env, stdout=out, stderr=out), log))
    deadline = time.monotonic() + 30
    for proc, log in workers:
        while READY not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise ClusterError(f"a worker did not start: {log.read_text()[-500:]}")
            time.sleep(0.05)
    return workers


def all_complete(url: str, tasks: int) -> list[str]:
    peer = Peer(url)
    started = time.monotonic()
    crossed = 0
    try:
        for n in range(tasks):
            crossed += len(one_task(peer, n)) > 1
    finally:
        peer.close()
    seconds = time.monotonic() - started
    print(f"1. {tasks} tasks completed through nginx on the workers in {seconds:.1f} s "
          f"({tasks / seconds:.1f} tasks/s, one at a time); {crossed} touched both fronts; "
          f"requests per front: {dict(sorted(peer.upstreams.items()))}")  # fmt: skip
    return [] if crossed >= tasks // 2 else [f"only {crossed} tasks crossed fronts"]


def worker_killed(url: str, workers: list[tuple[subprocess.Popen[bytes], Path]]) -> list[str]:
    peer = Peer(url)
    try:
        ids = []
        for n in range(4):
            call = {"name": "slow_compute", "arguments": {"seconds": 2, "label": f"k{n}"}}
            created, _ = peer.send("tools/call", call)
            ids.append(created["taskId"])
        time.sleep(1.0)  # the rounds are running on the workers
        victim, victim_log = workers[0]
        held = [i for i in ids if i in victim_log.read_text()]
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        killed = time.monotonic()
        ended = [peer.until(i, {"completed", "failed", "cancelled"}, 30) for i in ids]
    finally:
        peer.close()
    seconds = time.monotonic() - killed
    statuses = sorted(t["status"] for t in ended)
    _, other_log = workers[1]
    redelivered = [i for i in held if i in other_log.read_text()]
    print(
        f"2. killed a worker holding {len(held)} of {len(ids)} rounds: {statuses} "
        f"{seconds:.1f} s after the kill; {len(redelivered)} redelivered to the other"
    )
    problems = []
    if statuses != ["completed"] * len(ids):
        problems.append(f"not every task completed: {ended}")
    if len(redelivered) != len(held):
        problems.append(f"rounds not redelivered: {sorted(set(held) - set(redelivered))}")
    if not held:
        problems.append("the killed worker held no round (nothing was redelivered)")
    return problems


def front_killed(running: Cluster) -> list[str]:
    victim = running.servers[0]
    direct = Peer(f"http://127.0.0.1:{victim.port}/mcp")
    try:
        ids = []
        for n in range(3):
            call = {"name": "slow_compute", "arguments": {"seconds": 1, "label": f"f{n}"}}
            ids.append(direct.send("tools/call", call)[0]["taskId"])
        asks = {"name": "confirm_delete", "arguments": {"filename": "front-killed"}}
        waiting = direct.send("tools/call", asks)[0]["taskId"]
        direct.until(waiting, {"input_required"}, 10)
    finally:
        direct.close()
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait(10)
    killed = time.monotonic()
    peer = Peer(running.url)
    try:
        task, _ = peer.get(waiting)
        (key,) = task["inputRequests"]
        update = {"taskId": waiting, "inputResponses": {key: accept(confirm=True)}}
        peer.send("tasks/update", update)
        ended = [peer.until(i, {"completed", "failed", "cancelled"}, 20) for i in [*ids, waiting]]
    finally:
        peer.close()
    seconds = time.monotonic() - killed
    statuses = [t["status"] for t in ended]
    # nginx names every upstream it tried, the dead front first when it tried that one
    answered = Counter[str]()
    for tried, count in peer.upstreams.items():
        answered[tried.split(", ")[-1]] += count
    retried = sum(c for tried, c in peer.upstreams.items() if "," in tried)
    print(
        f"3. killed the front that created {len(ended)} tasks ({len(ids)} running, 1 waiting "
        f"for input): {sorted(statuses)} {seconds:.1f} s after the kill; answered through "
        f"nginx by: {dict(sorted(answered.items()))} (after trying the dead front first: "
        f"{retried})"
    )
    problems = []
    if statuses != ["completed"] * len(ended):
        problems.append(f"not every task of the killed front completed: {ended}")
    if not answered or victim.address in answered:
        problems.append(f"the killed front answered, or none did: {dict(peer.upstreams)}")
    return problems


def effects_once(url: str, tasks: int) -> list[str]:
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=EFFECT_PREFIX + "*"))
        counts = Counter(int(client.get(k) or 0) for k in keys)
    finally:
        client.close()
    print(f"4. effects per task, for {len(keys)} tasks of {tasks}: {dict(sorted(counts.items()))}")
    problems = []
    if len(keys) != tasks:
        problems.append(f"{len(keys)} tasks had an effect, not {tasks}")
    if set(counts) != {1}:
        problems.append(f"a task's effect did not happen exactly once: {dict(counts)}")
    return problems


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fronts", type=int, default=2, help="front processes (default 2)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--tasks", type=int, default=100, help="tasks in step 1 (default 100)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.fronts < 2:
        print("docket.py: --fronts must be at least 2 (one is killed)", file=sys.stderr)
        return 2
    nginx = find_nginx()
    if nginx is None:
        print(NGINX_MISSING, file=sys.stderr)
        return 1
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mrtr-docket-") as tmp:
        workdir = Path(tmp)
        redis_url, redis = start_redis(workdir)
        workers: list[tuple[subprocess.Popen[bytes], Path]] = []
        try:
            ring = workdir / "ring"
            write_ring(ring, [secrets.token_bytes(32)])
            workers = start_workers(workdir, redis_url, args.workers, ring)
            extra = ["--tasks-redis", redis_url, "--docket", redis_url]
            with cluster(
                workdir, args.fronts, keys_file=ring, ttl=60.0, nginx=nginx, extra=extra
            ) as running:
                problems += all_complete(running.url, args.tasks)
                problems += worker_killed(running.url, workers)
                problems += front_killed(running)
                problems += effects_once(redis_url, args.tasks + 4 + 4)
        except ClusterError as exc:
            problems.append(str(exc))
        finally:
            for proc, _ in workers:
                stop(proc)
            stop(redis)
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    print("docket scale-out: " + ("FAILED" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
