"""Tasks (extension io.modelcontextprotocol/tasks) across server processes: Redis and SQLite.

    python examples/scale/tasks.py [--processes 3] [--tasks 30] [--lease 2]

1. **any process answers for any task**: N example servers share one Redis
   (``--tasks-redis``, started here on loopback) behind nginx (round-robin). Each task is
   created through nginx, polled through nginx and answered (``tasks/update``) through nginx,
   so its requests land on different processes; nginx names the process that answered each
   (``X-Upstream``). Half the tasks start with an MRTR round (``test_tool_with_task``), the
   other half ask inside the task (``confirm_delete``). Every task must complete.
2. **a worker that dies**: tasks whose run sleeps a minute are created on one process
   directly, which is then killed (SIGKILL); polled through nginx, every one must end
   ``failed`` with the lease's ``statusMessage`` within the lease (plus a margin).
3. **SQLite and a restart**: one process on a SQLite file; a task waits for input, the
   process is killed and started again on the same file; the task is still there and
   completes.

Prints the figures and exits 1 if anything is not as stated. nginx and redis-server come from
Debian's packages; their files live in a temporary directory.
"""

from __future__ import annotations

import argparse
import secrets
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scale.cluster import (
    NGINX_MISSING,
    ClusterError,
    cluster,
    find_nginx,
    start_redis,
    start_server,
    stop,
    write_ring,
)
from scale.flows import UPSTREAM_HEADER

import mrtr_sansio as m

__all__ = ["main"]

EXTENSION = "io.modelcontextprotocol/tasks"
CAPS: dict[str, Any] = {"elicitation": {}, "extensions": {EXTENSION: {}}}
LEASE_FAILED = "The worker running this task stopped before it finished"


class Peer:
    """POSTs modern requests to one URL with the mirror headers, counting who answered."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(timeout=15.0)
        self.upstreams: Counter[str] = Counter()
        self._ids = iter(range(1, 10**9))

    def close(self) -> None:
        self.http.close()

    def send(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        meta = {m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28", m.protocol.CLIENT_CAPABILITIES: CAPS}
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        body["params"] = {**params, "_meta": meta}
        headers = {
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": method,
            "mcp-name": m.http.encode_header_value(params.get("name") or params["taskId"]),
        }
        response = self.http.post(self.url, json=body, headers=headers)
        upstream = response.headers.get(UPSTREAM_HEADER)
        if upstream is not None:
            self.upstreams[upstream] += 1
        reply: dict[str, Any] = response.json()
        if "result" not in reply:
            raise ClusterError(f"{method} failed: {reply}")
        result: dict[str, Any] = reply["result"]
        return result, upstream

    def get(self, task_id: str) -> tuple[dict[str, Any], str | None]:
        return self.send("tasks/get", {"taskId": task_id})

    def until(self, task_id: str, statuses: set[str], timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            task, _ = self.get(task_id)
            if task["status"] in statuses:
                return task
            if time.monotonic() > deadline:
                raise ClusterError(f"task {task_id} still {task['status']} after {timeout} s")
            time.sleep(0.05)


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def one_task(peer: Peer, n: int) -> set[str | None]:
    """One task from creation to its result through the balancer; the processes it touched."""
    touched: set[str | None] = set()
    if n % 2:
        call = {"name": "test_tool_with_task", "arguments": {}}
        first, who = peer.send("tools/call", call)
        touched.add(who)
        if first["resultType"] != "input_required":
            raise ClusterError(f"expected an MRTR round first, got {first}")
        retry = {**call, "inputResponses": {"user_name": accept(name=f"user{n}")}}
        if "requestState" in first:
            retry["requestState"] = first["requestState"]
        created, who = peer.send("tools/call", retry)
        want = f"user{n}"
    else:
        created, who = peer.send(
            "tools/call", {"name": "confirm_delete", "arguments": {"filename": f"f{n}"}}
        )
        want = f"Deleted f{n}."
    touched.add(who)
    if created.get("resultType") != "task" or "requestState" in created:
        raise ClusterError(f"expected a CreateTaskResult, got {created}")
    task_id = created["taskId"]
    deadline = time.monotonic() + 20
    while True:
        task, who = peer.get(task_id)
        touched.add(who)
        if task["status"] == "input_required":
            (key,) = task["inputRequests"]
            update = {"taskId": task_id, "inputResponses": {key: accept(confirm=True)}}
            _ack, who = peer.send("tasks/update", update)
            touched.add(who)
        elif task["status"] == "completed":
            text = task["result"]["content"][0]["text"]
            if want not in text:
                raise ClusterError(f"task {task_id}: {text!r} lacks {want!r}")
            return touched
        elif task["status"] != "working":
            raise ClusterError(f"task {task_id} ended {task['status']}: {task}")
        if time.monotonic() > deadline:
            raise ClusterError(f"task {task_id} did not complete")
        time.sleep(0.05)


def any_process(workdir: Path, args: argparse.Namespace, nginx: str) -> list[str]:
    problems: list[str] = []
    redis_url, redis = start_redis(workdir)
    ring = workdir / "ring"
    write_ring(ring, [secrets.token_bytes(32)])
    extra = ["--tasks-redis", redis_url, "--task-lease", str(args.lease)]
    try:
        with cluster(
            workdir, args.processes, keys_file=ring, ttl=60.0, nginx=nginx, extra=extra
        ) as running:
            peer = Peer(running.url)
            crossed = 0
            started = time.monotonic()
            try:
                for n in range(args.tasks):
                    touched = one_task(peer, n)
                    crossed += len(touched) > 1
            finally:
                peer.close()
            seconds = time.monotonic() - started
            print(
                f"1. {args.tasks} tasks completed through nginx in {seconds:.1f} s; "
                f"{crossed} touched more than one process; requests per process: "
                f"{dict(sorted(peer.upstreams.items()))}"
            )
            if crossed < args.tasks // 2:
                problems.append(f"only {crossed} tasks crossed processes")
            if len(peer.upstreams) < args.processes:
                problems.append(f"not every process answered: {dict(peer.upstreams)}")
            problems += worker_dies(running.servers[0], running.url, args)
    finally:
        stop(redis)
    return problems


def worker_dies(victim: Any, url: str, args: argparse.Namespace) -> list[str]:
    direct = Peer(f"http://{victim.address}/mcp")
    ids = []
    try:
        for n in range(3):
            call = {"name": "slow_compute", "arguments": {"seconds": 60, "label": f"doomed{n}"}}
            created, _ = direct.send("tools/call", call)
            ids.append(created["taskId"])
    finally:
        direct.close()
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait(10)
    killed = time.monotonic()
    peer = Peer(url)
    try:
        ended = [
            peer.until(task_id, {"failed", "completed", "cancelled"}, args.lease + 10)
            for task_id in ids
        ]
    finally:
        peer.close()
    seconds = time.monotonic() - killed
    print(
        f"2. {len(ids)} tasks of a killed process: "
        f"{Counter(t['status'] for t in ended)} {seconds:.1f} s after the kill "
        f"(lease {args.lease:g} s)"
    )
    problems = []
    for task in ended:
        if task["status"] != "failed" or task.get("statusMessage") != LEASE_FAILED:
            problems.append(f"a dead worker's task ended {task}")
    if seconds > args.lease + 5:
        problems.append(f"the dead worker's tasks took {seconds:.1f} s to fail")
    return problems


def sqlite_restart(workdir: Path) -> list[str]:
    extra = ["--tasks-db", str(workdir / "tasks.db")]
    first = start_server(workdir, "sqlite-1", keys_file=None, ttl=60.0, extra=extra)
    try:
        peer = Peer(f"http://{first.address}/mcp")
        call = {"name": "confirm_delete", "arguments": {"filename": "kept-across"}}
        try:
            created, _ = peer.send("tools/call", call)
            task_id = created["taskId"]
            peer.until(task_id, {"input_required"}, 10)
        finally:
            peer.close()
    finally:
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
    second = start_server(workdir, "sqlite-2", keys_file=None, ttl=60.0, extra=extra)
    try:
        peer = Peer(f"http://{second.address}/mcp")
        try:
            waiting, _ = peer.get(task_id)
            update = {"taskId": task_id, "inputResponses": {"confirm": accept(confirm=True)}}
            peer.send("tasks/update", update)
            final = peer.until(task_id, {"completed", "failed", "cancelled"}, 10)
        finally:
            peer.close()
    finally:
        stop(second.proc)
    print(
        f"3. SQLite: after a kill and a restart the task was {waiting['status']}, "
        f"then {final['status']}"
    )
    if waiting["status"] != "input_required" or final["status"] != "completed":
        return [f"the task across the restart: {waiting['status']} then {final}"]
    return []


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", type=int, default=3, help="server processes (default 3)")
    parser.add_argument("--tasks", type=int, default=30, help="tasks in step 1 (default 30)")
    parser.add_argument("--lease", type=float, default=2.0, help="task lease, s (default 2)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    nginx = find_nginx()
    if nginx is None:
        print(NGINX_MISSING, file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="mrtr-tasks-") as tmp:
        workdir = Path(tmp)
        try:
            problems = any_process(workdir, args, nginx)
            problems += sqlite_restart(workdir)
        except ClusterError as exc:
            problems = [str(exc)]
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    print("tasks scale-out: " + ("FAILED" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
