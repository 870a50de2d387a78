"""The example HTTP server with many live tasks, per task store: in memory, SQLite, Redis.

For each store, the fixtures' app (``examples/fixtures.py``, its store made as
``examples/http/server.py``'s ``build_app`` makes it from ``--tasks-db`` / ``--tasks-redis``)
runs under uvicorn (``serve_http``'s ``http_server``) in a process of its own, pinned to one
core with ``taskset`` when there are two or more. Redis is a real ``redis-server`` on a free
port in a temp dir, persistence off; SQLite a file in a temp dir. The bench then, over
loopback HTTP (httpx):

1. creates ``--tasks`` live tasks: ``confirm_delete`` calls made as tasks, which park in
   ``input_required`` waiting for an answer that never comes (so they stay live), spread over
   principals so that no per-principal cap is hit (16 calls in flight at once), then waits
   ``--seconds`` with nothing open;
2. opens ``--streams`` ``subscriptions/listen`` streams, each watching 5 of its principal's
   tasks, read to the end by the bench, and leaves them idle for ``--seconds``;
3. with the streams open, makes plain ``tools/call`` (``test_simple_text``) one after another
   for ``--seconds`` as another principal;
4. creates three more tasks whose arguments carry about 0 B, 100 KB and 1 MB of padding (not
   echoed in what ``tasks/get`` returns) and times ``tasks/get`` on each, in interleaved
   rounds (``--gets`` of them, after one to warm up).

Figures, one line each, per store:

* ``stall ms``: the longest gap, in ms, of a ticker inside the server process that sleeps
  5 ms in a loop (the event loop's longest stall), in each window: ``create`` (step 1),
  ``idle`` (step 2), ``calls`` (step 3). The aim: none over 50 ms.
* ``stall cpu ms``: the CPU time, in ms, the event loop's thread used during each of those
  longest gaps (``time.thread_time``): near the gap, the server's own work stalled it (a
  store call, a garbage collection); far under it, the process was waiting for a core (a
  loaded machine).
* ``call ms``: p50 / p99 latency, in ms, of the unrelated ``tools/call`` of step 3.
* ``get ms``: the median ``tasks/get`` latency, in ms, per argument size, as the bench sees it.
  The aim: flat (the get does not grow with the stored record).
* ``get cpu ms``: the median process CPU time, in ms, the server spent on each of those
  ``tasks/get`` (every thread's, the store's workers included), read by the bench layer
  around the app: what the machine's load does not blur. The flatness aim is judged on it
  (the 1 MB record's at most twice the small one's).
* ``idle cpu s/s``: the server's CPU seconds (user + system, ``/proc/<pid>/stat``) per wall
  second with nothing happening: ``streams`` in step 2, the streams open; ``none`` for as long
  just before they open, the tasks live. Both include the ticker's 200 wakeups a second.

The ticker runs only in the bench's server process (``--serve``): the bench wraps the app in
an ASGI layer that starts the ticker with the lifespan and answers ``GET /bench/stall`` with
the longest gap since the last such GET, and ``GET /bench/cpu`` with the CPU of each request.
Principals come from an ``x-bench-principal`` header, trusted because this is a bench on
loopback.

    python bench/tasks.py                       # all three stores, about a minute each
    python bench/tasks.py --quick --stores memory,sqlite   # a smoke run, Redis left out

Then the round runners (``--runners``), each on a real ``redis-server`` with the task store
on it: the in-process pool (``pool``: one example server, ``--tasks-redis URL``) and the
Docket runner with one and two ``mrtr-worker`` processes (``docket-1``, ``docket-2``: the
server with ``--docket URL`` as the front, the workers running the fixtures' handler, records
encrypted under one key ring on both sides). ``--runner-concurrency`` client threads each
create a ``slow_compute`` task (one 10 ms round) and poll ``tasks/get`` every 5 ms until it
completes, ``--runner-tasks`` tasks in all after one to warm up. One line per runner:

* ``tasks/s``: tasks completed per second of the row's wall time;
* ``round ms``: p50 / p99 of a task's time from its creation to the ``tasks/get`` that saw it
  completed: its round, the queue and the polling (which the front serves, so on a loaded
  machine it dominates).

and a ratio line, ``docket/pool``, of each Docket row's tasks per second to the pool's. The
Docket rows need the ``tasks-docket`` extra; every runner row needs ``redis-server``; a row
that cannot run is printed as skipped.

    python bench/tasks.py --stores none --runners pool,docket-1,docket-2   # the runners only

``--quick``: 40 tasks, 4 streams, 0.5 s windows, 5 gets per size; 20 runner tasks, 4 threads.
A store that cannot run (``redis-server`` missing) is printed as skipped. Last line:
``aims missed: none`` or the figures that missed, e.g. ``aims missed: sqlite stall
create=73.2 (loop cpu 1.2)`` (the runners have no aim).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STORES = ("memory", "sqlite", "redis")
#: The round runners measured, by name: Docket workers (0: the in-process pool).
RUNNERS = {"pool": 0, "docket-1": 1, "docket-2": 2}
VERSION = "2026-07-28"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TASK_CAPS: dict[str, Any] = {"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}}
PRINCIPAL_HEADER = "x-bench-principal"
#: Tasks and streams per principal: under the defaults of ``max_tasks`` (256) and of
#: ``SubscriptionHub(max_streams_per_principal=)`` (16).
TASKS_PER_PRINCIPAL = 200
STREAMS_PER_PRINCIPAL = 10
WATCHED = 5  # tasks one stream watches
SIZES = {"small": 0, "100KB": 100_000, "1MB": 1_000_000}
STALL_AIM_MS = 50.0
#: A get on the 1 MB record may take this many times the small one's and still be flat.
FLAT_FACTOR = 2.0

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]


# --- the server process (--serve) -------------------------------------------------------------


class Probe:
    """The app with two readings beside it: an event-loop ticker (``GET /bench/stall``: the
    longest gap since the last read) and the process CPU each ``/mcp`` request took, by its
    ``Mcp-Name`` header (``GET /bench/cpu``: the lists since the last read)."""

    def __init__(self, app: Asgi) -> None:
        self.app = app
        self.longest = 0.0
        self.longest_cpu = 0.0  # CPU seconds the loop's thread used in that gap
        self.request_cpu: dict[str, list[float]] = {}
        self._ticker: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        last, last_cpu = time.monotonic(), time.thread_time()
        while True:
            await asyncio.sleep(0.005)
            now, cpu = time.monotonic(), time.thread_time()
            if now - last > self.longest:
                self.longest, self.longest_cpu = now - last, cpu - last_cpu
            last, last_cpu = now, cpu

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" and self._ticker is None:
            self._ticker = asyncio.get_running_loop().create_task(self._tick())
        if scope["type"] != "http" or scope["path"] == "/mcp":
            name = dict(scope.get("headers", ())).get(b"mcp-name")
            began = time.process_time()  # every thread's: store calls run in workers
            await self.app(scope, receive, send)
            if name is not None:
                spent = time.process_time() - began
                self.request_cpu.setdefault(name.decode("ascii"), []).append(spent)
            return
        if scope["path"] == "/bench/stall":
            reading: Any = {"longest": self.longest, "cpu": self.longest_cpu}
            self.longest = self.longest_cpu = 0.0
        else:
            reading, self.request_cpu = self.request_cpu, {}
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": json.dumps(reading).encode()})


def serve(port: int, store: str, where: str) -> None:
    """Run the fixtures' app with tasks in ``store`` (``where``: the SQLite file or Redis URL)
    under uvicorn on ``port``, as ``examples/http/server.py`` builds and serves it."""
    sys.path.insert(0, str(ROOT / "examples"))
    from fixtures import Everything, server_config

    import mrtr_sansio as m
    from mrtr_sansio.adapters.asgi import McpHttpApp
    from mrtr_sansio.adapters.serve import ServeOptions, http_server
    from mrtr_sansio.adapters.stores import RedisTaskStore, SqliteTaskStore
    from mrtr_sansio.tasks import TaskStore

    task_store: TaskStore | None = None
    if store == "sqlite":
        task_store = SqliteTaskStore(where)
    elif store == "redis":
        task_store = RedisTaskStore.from_url(where)
    config = server_config(
        request_state=m.sealing.RequestStateSecurity.ephemeral(), task_store=task_store
    )

    def principal(scope: Scope) -> str | None:
        for name, value in scope["headers"]:
            if name == PRINCIPAL_HEADER.encode():
                return str(value.decode("ascii"))
        return None

    app = McpHttpApp(Everything().handle, config, principal=principal)
    server = http_server(Probe(app), "127.0.0.1", port, options=ServeOptions(), log_level="warning")
    server.run()


# --- the bench ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by process ``pid`` (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for_port(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        with suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port}")


@contextmanager
def process(argv: list[str], port: int, what: str) -> Iterator[subprocess.Popen[bytes]]:
    """A process that listens on ``port``, stopped on the way out."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc, what)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def store_target(store: str, tmp: Path) -> Iterator[str]:
    """What the server's store is given: a SQLite path, a Redis URL (its server started
    here), or nothing for memory."""
    if store == "sqlite":
        yield str(tmp / "tasks.db")
    elif store == "redis":
        port = free_port()
        argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp)]
        argv += ["--save", "", "--appendonly", "no"]
        with process(argv, port, "redis-server"):
            yield f"redis://127.0.0.1:{port}/0"
    else:
        yield ""


def body(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": TASK_CAPS,
    }
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": meta}}


def headers(message: dict[str, Any], principal: str) -> dict[str, str]:
    params = message["params"]
    out = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": VERSION,
        "mcp-method": message["method"],
        PRINCIPAL_HEADER: principal,
    }
    name = params.get("name", params.get("taskId"))
    if name is not None:
        out["mcp-name"] = name
    return out


def sse_messages(text: str) -> list[Any]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


class Bench:
    """One store's run against its server at ``url``."""

    def __init__(self, client: Any, base: str) -> None:
        self.client = client
        self.base = base
        self.rid = 0

    async def post(self, method: str, params: dict[str, Any], principal: str) -> Any:
        """The JSON-RPC response to one request (an error raises)."""
        self.rid += 1
        message = body(self.rid, method, params)
        reply = await self.client.post(
            self.base + "/mcp", json=message, headers=headers(message, principal)
        )
        reply.raise_for_status()
        if reply.headers["content-type"].startswith("text/event-stream"):
            answer = next(m for m in sse_messages(reply.text) if m.get("id") == self.rid)
        else:
            answer = reply.json()
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    async def stall_ms(self) -> tuple[float, float]:
        """The server loop's longest stall since the last read, and the CPU its thread used
        in it, in ms."""
        stall = (await self.client.get(self.base + "/bench/stall")).json()
        return float(stall["longest"]) * 1000, float(stall["cpu"]) * 1000

    async def create(self, principal: str, padding: int = 0) -> str:
        arguments: dict[str, Any] = {"filename": "bench.txt"}
        if padding:
            arguments["padding"] = "x" * padding
        created = await self.post(
            "tools/call", {"name": "confirm_delete", "arguments": arguments}, principal
        )
        task_id: str = created["taskId"]
        return task_id

    async def get(self, task_id: str, principal: str) -> dict[str, Any]:
        task: dict[str, Any] = await self.post("tasks/get", {"taskId": task_id}, principal)
        return task


async def listen(
    client: Any, base: str, rid: int, task_ids: list[str], principal: str, ready: asyncio.Event
) -> None:
    """One ``subscriptions/listen`` stream, read until it ends or is cancelled."""
    message = body(rid, "subscriptions/listen", {"notifications": {"taskIds": task_ids}})
    async with client.stream(
        "POST", base + "/mcp", json=message, headers=headers(message, principal)
    ) as stream:
        stream.raise_for_status()
        async for line in stream.aiter_lines():
            if line.startswith("data:"):
                note = json.loads(line[5:])
                if note.get("method") == "notifications/subscriptions/acknowledged":
                    ready.set()


async def idle_cpu(pid: int, seconds: float) -> float:
    """The server's CPU seconds per wall second while the bench waits ``seconds``."""
    cpu0, wall0 = cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(seconds)
    return (cpu_seconds(pid) - cpu0) / (time.monotonic() - wall0)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(base: str, pid: int, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    import httpx

    figures: dict[str, dict[str, float]] = {}
    limits = httpx.Limits(max_connections=args.streams + 32, max_keepalive_connections=32)
    timeout = httpx.Timeout(60.0)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        bench = Bench(client, base)
        principals = max(
            -(-args.tasks // TASKS_PER_PRINCIPAL), -(-args.streams // STREAMS_PER_PRINCIPAL), 1
        )
        owners = [f"owner-{i}" for i in range(principals)]
        tasks: dict[str, list[str]] = {owner: [] for owner in owners}

        await bench.stall_ms()
        began = time.monotonic()
        gate = asyncio.Semaphore(16)

        async def one(i: int) -> None:
            owner = owners[i % principals]
            async with gate:
                tasks[owner].append(await bench.create(owner))

        await asyncio.gather(*(one(i) for i in range(args.tasks)))
        created_in = time.monotonic() - began
        stalls = {"create": await bench.stall_ms()}
        # Every task is parked waiting for input (live), or the figures mean nothing.
        sample = tasks[owners[0]][-1]
        status = (await bench.get(sample, owners[0]))["status"]
        while status == "working":
            await asyncio.sleep(0.05)
            status = (await bench.get(sample, owners[0]))["status"]
        assert status == "input_required", status
        no_streams_cpu = await idle_cpu(pid, args.seconds)

        streams = []
        for i in range(args.streams):
            owner = owners[i % principals]
            k = i // principals
            watched = tasks[owner][k * WATCHED : (k + 1) * WATCHED] or tasks[owner][:WATCHED]
            ready = asyncio.Event()
            streams.append(
                (
                    asyncio.create_task(listen(client, base, 10_000 + i, watched, owner, ready)),
                    ready,
                )
            )
        await asyncio.wait_for(asyncio.gather(*(ready.wait() for _, ready in streams)), 60)
        await asyncio.sleep(0.5)  # the streams' first notifications go out

        await bench.stall_ms()
        streams_cpu = await idle_cpu(pid, args.seconds)
        stalls["idle"] = await bench.stall_ms()

        latencies = []
        end = time.monotonic() + args.seconds
        call = {"name": "test_simple_text", "arguments": {}}
        while time.monotonic() < end:
            t0 = time.perf_counter()
            result = await bench.post("tools/call", call, "caller")
            latencies.append((time.perf_counter() - t0) * 1000)
            assert result["content"][0]["type"] == "text", result
        stalls["calls"] = await bench.stall_ms()

        # Interleaved rounds, so that a drift of a busy machine hits every size alike.
        sized = {label: await bench.create("sizer", padding) for label, padding in SIZES.items()}
        times: dict[str, list[float]] = {label: [] for label in SIZES}
        for _ in range(args.gets + 1):
            for label, task_id in sized.items():
                t0 = time.perf_counter()
                task = await bench.get(task_id, "sizer")
                times[label].append((time.perf_counter() - t0) * 1000)
                assert task["status"] in ("working", "input_required"), task
        gets = {label: statistics.median(ms[1:]) for label, ms in times.items()}  # [0]: warm
        spent = (await client.get(base + "/bench/cpu")).json()
        get_cpu = {label: statistics.median(spent[sized[label]][1:]) * 1000 for label in SIZES}

        alive = sum(not stream.done() for stream, _ in streams)
        for stream, _ in streams:
            stream.cancel()
        await asyncio.gather(*(stream for stream, _ in streams), return_exceptions=True)

    figures["run"] = {"tasks": args.tasks, "streams": alive, "create_s": created_in}
    figures["stall"] = {window: wall for window, (wall, _) in stalls.items()}
    figures["stall_cpu"] = {window: cpu for window, (_, cpu) in stalls.items()}
    figures["call"] = {"p50": pct(latencies, 0.5), "p99": pct(latencies, 0.99)}
    figures["call"]["n"] = len(latencies)
    figures["get"] = gets
    figures["get_cpu"] = get_cpu
    figures["cpu"] = {"streams": streams_cpu, "none": no_streams_cpu}
    return figures


def run_store(store: str, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    with (
        tempfile.TemporaryDirectory(prefix=f"bench-tasks-{store}-") as tmp,
        store_target(store, Path(tmp)) as where,
    ):
        port = free_port()
        argv = [sys.executable, str(Path(__file__).resolve()), "--serve", str(port), store, where]
        cores = sorted(os.sched_getaffinity(0))
        if shutil.which("taskset") and len(cores) > 1:  # the server on one core, we elsewhere
            argv = ["taskset", "-c", str(cores[-1]), *argv]
            os.sched_setaffinity(0, cores[:-1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, env=env)
        try:
            wait_for_port(port, proc, f"the {store} server")
            return asyncio.run(measure(f"http://127.0.0.1:{port}", proc.pid, args))
        finally:
            proc.terminate()
            proc.wait(10)


def report(store: str, f: dict[str, dict[str, float]]) -> list[str]:
    """Print one store's lines; return the figures that missed their aims."""
    run, stall, call, get = f["run"], f["stall"], f["call"], f["get"]
    print(
        f"{store:<7} run: tasks={run['tasks']:.0f} streams={run['streams']:.0f} "
        f"created in {run['create_s']:.1f}s"
    )
    print(f"{store:<7} stall ms: " + " ".join(f"{k}={v:.1f}" for k, v in stall.items()))
    cpu = " ".join(f"{k}={v:.1f}" for k, v in f["stall_cpu"].items())
    print(f"{store:<7} stall cpu ms: {cpu}")
    print(f"{store:<7} call ms: p50={call['p50']:.2f} p99={call['p99']:.2f} n={call['n']:.0f}")
    print(f"{store:<7} get ms: " + " ".join(f"{k}={v:.2f}" for k, v in get.items()))
    get_cpu = f["get_cpu"]
    print(f"{store:<7} get cpu ms: " + " ".join(f"{k}={v:.2f}" for k, v in get_cpu.items()))
    idle = f["cpu"]
    print(f"{store:<7} idle cpu s/s: streams={idle['streams']:.3f} none={idle['none']:.3f}")
    missed = [
        f"{store} stall {k}={v:.1f} (loop cpu {f['stall_cpu'][k]:.1f})"
        for k, v in stall.items()
        if v > STALL_AIM_MS
    ]
    if get_cpu["1MB"] > FLAT_FACTOR * get_cpu["small"]:
        missed.append(f"{store} get cpu 1MB={get_cpu['1MB']:.2f} vs small={get_cpu['small']:.2f}")
    return missed


# --- the round runners ---------------------------------------------------------------------


def runner_post(http: Any, url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The result of one JSON-RPC request to the front at ``url`` (an error raises)."""
    message = body(1, method, params)
    heads = headers(message, "runner")
    del heads[PRINCIPAL_HEADER]  # the example server has no principals
    reply = http.post(url, json=message, headers=heads)
    reply.raise_for_status()
    answer = reply.json()
    if "error" in answer:
        raise RuntimeError(f"{method}: {answer['error']}")
    result: dict[str, Any] = answer["result"]
    return result


_clients = threading.local()


def one_task(url: str) -> float:
    """Seconds from a task's creation (a 10 ms ``slow_compute`` round) to the read that saw it
    completed, on this thread's HTTP client."""
    import httpx

    http = getattr(_clients, "http", None)
    if http is None:
        http = _clients.http = httpx.Client(timeout=30.0)
    started = time.perf_counter()
    call = {"name": "slow_compute", "arguments": {"seconds": 0.01, "label": "b"}}
    task_id = str(runner_post(http, url, "tools/call", call)["taskId"])
    while (status := runner_post(http, url, "tasks/get", {"taskId": task_id})["status"]) not in (
        "completed",
        "failed",
    ):
        time.sleep(0.005)
    if status != "completed":
        raise RuntimeError(f"task {task_id} {status}")
    return time.perf_counter() - started


def run_runner(workdir: Path, name: str, args: argparse.Namespace) -> dict[str, float]:
    """One runner's row: a Redis, the front (and the row's workers), the tasks timed."""
    sys.path.insert(0, str(ROOT / "examples"))
    from scale.cluster import start_redis, start_server, stop
    from scale.docket import start_workers

    workers = RUNNERS[name]
    row = workdir / name
    row.mkdir()
    ring = workdir / "ring"
    redis_url, redis = start_redis(row)
    procs: list[tuple[subprocess.Popen[bytes], Path]] = []
    try:
        extra = ["--tasks-redis", redis_url]
        if workers:
            procs = start_workers(row, redis_url, workers, ring)
            extra += ["--docket", redis_url]
        server = start_server(row, "front", keys_file=ring, ttl=60.0, extra=extra)
        url = f"http://{server.address}/mcp"
        try:
            with ThreadPoolExecutor(args.runner_concurrency) as pool:
                list(pool.map(lambda _: one_task(url), range(args.runner_concurrency)))  # warm
                started = time.perf_counter()
                times = sorted(pool.map(lambda _: one_task(url), range(args.runner_tasks)))
                wall = time.perf_counter() - started
        finally:
            stop(server.proc)
    finally:
        for proc, _ in procs:
            stop(proc)
        stop(redis)
    return {
        "tasks_s": len(times) / wall,
        "p50": statistics.median(times) * 1000,
        "p99": pct(times, 0.99) * 1000,
    }


def run_runners(names: list[str], args: argparse.Namespace) -> None:
    """Print one line per runner in ``names`` (or why it is skipped), then the ratios."""
    import importlib.util
    import secrets

    sys.path.insert(0, str(ROOT / "examples"))
    from scale.cluster import write_ring

    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-tasks-runners-") as tmp:
        workdir = Path(tmp)
        write_ring(workdir / "ring", [secrets.token_bytes(32)])
        for name in names:
            if shutil.which("redis-server") is None:
                print(f"runner {name:<9} skipped: redis-server is not installed")
                continue
            if RUNNERS[name] and importlib.util.find_spec("docket") is None:
                print(f"runner {name:<9} skipped: the tasks-docket extra is not installed")
                continue
            row = rows[name] = run_runner(workdir, name, args)
            print(
                f"runner {name:<9} tasks/s={row['tasks_s']:.1f} "
                f"round ms: p50={row['p50']:.1f} p99={row['p99']:.1f}",
                flush=True,
            )
    if "pool" in rows and len(rows) > 1:
        pool = rows["pool"]["tasks_s"]
        ratios = " ".join(
            f"{name}={row['tasks_s'] / pool:.2f}" for name, row in rows.items() if name != "pool"
        )
        print(f"ratio docket/pool tasks/s: {ratios}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--serve", nargs=3, metavar=("PORT", "STORE", "WHERE"), help="(internal)")
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0, help="idle and calls windows")
    parser.add_argument("--gets", type=int, default=50, help="tasks/get timed per size")
    parser.add_argument(
        "--runners",
        default=",".join(RUNNERS),
        help="round runners to measure, or none (default: pool,docket-1,docket-2)",
    )
    parser.add_argument("--runner-tasks", type=int, default=200, help="tasks per runner row")
    parser.add_argument("--runner-concurrency", type=int, default=16, help="client threads")
    parser.add_argument(
        "--quick", action="store_true", help="40 tasks, 4 streams, 0.5 s; 20 runner tasks"
    )
    args = parser.parse_args()
    if args.serve:
        port, store, where = args.serve
        serve(int(port), store, where)
        return
    if args.quick:
        args.tasks, args.streams, args.seconds, args.gets = 40, 4, 0.5, 5
        args.runner_tasks, args.runner_concurrency = 20, 4
    stores = [] if args.stores == "none" else args.stores.split(",")
    runners = [] if args.runners == "none" else args.runners.split(",")
    for runner in runners:
        if runner not in RUNNERS:
            parser.error(f"unknown runner {runner!r}")
    print(f"Python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    missed: list[str] = []
    for store in stores:
        if store not in STORES:
            parser.error(f"unknown store {store!r}")
        if store == "redis" and shutil.which("redis-server") is None:
            print("redis   skipped: redis-server is not installed")
            continue
        missed += report(store, run_store(store, args))
    run_runners(runners, args)
    print(f"aims missed: {', '.join(missed) if missed else 'none'}")


if __name__ == "__main__":
    main()
