"""The Docket runner against a real Redis (Debian's redis-server) and two ``mrtr-worker``
processes: two fronts (ASGI apps, called in process) enqueue each round, the workers run the
handler (``docket_app``) and write the outcome to the shared Redis task store, and either front
answers from it. Two rounds of input complete; a worker killed mid-round leaves its round to
be redelivered to the other and the task completes with its effect applied once; a cancel
reaches the round on its worker; a round past its deadline fails its task. The workers are
the module's (their startup takes seconds): the test that kills one comes last.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from http_harness import Client
from scale import cluster
from test_task_pool_uvicorn import post, served
from test_tasks_http import answer, body, call

import mrtr_sansio as m

pytest.importorskip("docket", reason="the Docket runner needs the tasks-docket extra")

import docket_app
import redis

from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.adapters.docket import (
    ASYNCIO_ONLY,
    DEADLINE_PASSED,
    REDELIVERY_TIMEOUT,
    DocketRunner,
    NotReplaySafeError,
    RoundWorker,
)
from mrtr_sansio.adapters.stores import RedisTaskStore
from mrtr_sansio.tasks import TaskSettings
from mrtr_sansio.tasks._settings import DURABLE_LEASE_SECONDS

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 2.0  # the workers' round deadline, in seconds
WAIT = 15.0  # the most any single wait may take


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # Docket runs on asyncio


def worker_command(url: str, *extra: str) -> list[str]:
    """The mrtr-worker command: the script this venv installed, else the module."""
    script = shutil.which("mrtr-worker", path=str(Path(sys.executable).parent))
    start = [script] if script else [sys.executable, "-m", "mrtr_sansio.adapters.docket"]
    return [*start, "docket_app:handle",
            "--redis", url, "--redelivery-timeout", "1", "--deadline", str(DEADLINE),
            "--concurrency", "4", *extra]  # fmt: skip


def worker_env(url: str) -> dict[str, str]:
    paths = [ROOT / "src", ROOT / "tests" / "adapters", ROOT / "examples"]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, paths)), "MRTR_TEST_REDIS": url}


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server for this module's tests (their keys are all per task)."""
    if cluster.find_redis() is None:
        pytest.skip(cluster.REDIS_MISSING)
    url, proc = cluster.start_redis(tmp_path_factory.mktemp("redis"))
    before = os.environ.get("MRTR_TEST_REDIS")
    os.environ["MRTR_TEST_REDIS"] = url
    try:
        yield url
    finally:
        if before is None:
            del os.environ["MRTR_TEST_REDIS"]
        else:
            os.environ["MRTR_TEST_REDIS"] = before
        cluster.stop(proc)


@pytest.fixture(scope="module")
def workers(
    redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Two worker processes on the module's Redis (the last test kills one of them)."""
    tmp_path = tmp_path_factory.mktemp("workers")
    procs = []
    for n in range(2):
        with (tmp_path / f"worker{n}.log").open("wb") as log:
            procs.append(
                subprocess.Popen(
                    worker_command(redis_url, "--replay-safe"),
                    env=worker_env(redis_url),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
    try:
        for n, proc in enumerate(procs):  # each one's startup imports take a while
            log_file = tmp_path / f"worker{n}.log"
            deadline = time.monotonic() + WAIT
            while b"running the rounds" not in log_file.read_bytes():
                assert proc.poll() is None, log_file.read_text()
                assert time.monotonic() < deadline, "a worker did not start in time"
                time.sleep(0.05)
        yield procs
    finally:
        for proc in procs:
            cluster.stop(proc)


def config(url: str) -> m.ServerConfig:
    store = RedisTaskStore.from_url(url)
    return m.ServerConfig(tasks=TaskSettings(store=store, tools=docket_app.TOOLS))


@pytest.fixture
async def fronts(redis_url: str) -> AsyncIterator[list[Client]]:
    """Two fronts: ASGI apps with a Docket runner each (and a store client each), called in
    process; a test creates a task on one and goes on with it on the other."""
    runners = []
    async with anyio.create_task_group() as tg:
        clients = []
        for _ in range(2):
            cfg = config(redis_url)
            runner = DocketRunner(cfg, redis_url, replay_safe=True, deadline=DEADLINE)
            runner.attach(tg)
            runners.append(runner)
            clients.append(Client(McpHttpApp(docket_app.handle, cfg, task_runner=runner), tg))
        yield clients
        for runner in runners:
            await runner.stop()
        tg.cancel_scope.cancel()


async def get(client: Client, task_id: str) -> dict[str, Any]:
    result: dict[str, Any] = (await answer(client, body(90, "tasks/get", {"taskId": task_id})))[
        "result"
    ]
    return result


async def until(client: Client, task_id: str, *statuses: str) -> dict[str, Any]:
    with anyio.fail_after(WAIT):
        while True:
            task = await get(client, task_id)
            if task["status"] in statuses:
                return task
            await anyio.sleep(0.05)


async def respond(client: Client, task_id: str, key: str, word: str) -> None:
    update = {
        "taskId": task_id,
        "inputResponses": {key: {"action": "accept", "content": {"word": word}}},
    }
    ack = await answer(client, body(2, "tasks/update", update))
    assert ack["result"]["resultType"] == "complete", ack


async def two_rounds_to_the_last(fronts: list[Client]) -> str:
    """Create a two_rounds task on one front and answer both of its questions, each on the
    other front from the one before; its id."""
    one, other = fronts
    created = (await call(one, 1, "two_rounds", {}))["result"]
    assert created["resultType"] == "task", created
    task_id: str = created["taskId"]
    asked = await until(other, task_id, "input_required")
    assert list(asked["inputRequests"]) == ["first"]
    await respond(other, task_id, "first", "hello")
    asked = await until(one, task_id, "input_required")
    assert list(asked["inputRequests"]) == ["second"]
    await respond(one, task_id, "second", "world")
    return task_id


def effects(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, decode_responses=True)


async def eventually(check: Any, timeout: float = WAIT) -> Any:
    with anyio.fail_after(timeout):
        while True:
            found = await anyio.to_thread.run_sync(check)
            if found:
                return found
            await anyio.sleep(0.05)


@pytest.mark.anyio
async def test_two_rounds_of_input_complete_on_the_workers(
    workers: list[subprocess.Popen[bytes]], fronts: list[Client], redis_url: str
) -> None:
    task_id = await two_rounds_to_the_last(fronts)
    done = await until(fronts[1], task_id, "completed", "failed")
    assert done["status"] == "completed", done
    assert done["result"]["content"][0]["text"] == "hello world"
    with effects(redis_url) as r:
        assert r.lrange(f"runs:{task_id}", 0, -1) in (
            [str(p.pid)] for p in workers
        )  # the last round ran once, on one of the workers
        assert r.get(f"effect-writes:{task_id}") == "1"


@pytest.mark.anyio
async def test_a_cancel_reaches_the_round_on_its_worker(
    workers: list[subprocess.Popen[bytes]], fronts: list[Client], redis_url: str
) -> None:
    front, other = fronts
    created = (await call(front, 1, "sleepy", {"seconds": 1.5}))["result"]
    task_id = created["taskId"]
    await anyio.sleep(0.5)  # the round is running on a worker
    await answer(other, body(3, "tasks/cancel", {"taskId": task_id}))  # through the other
    with effects(redis_url) as r:
        pids = await eventually(lambda: r.lrange(f"cancelled:{task_id}", 0, -1), 1.0)
    assert int(pids[0]) in {p.pid for p in workers}
    assert (await get(front, task_id))["status"] == "cancelled"


@pytest.mark.anyio
async def test_a_round_past_its_deadline_fails_its_task(
    workers: list[subprocess.Popen[bytes]], fronts: list[Client]
) -> None:
    front = fronts[0]
    created = (await call(front, 1, "sleepy", {"seconds": 30}))["result"]
    failed = await until(front, created["taskId"], "failed", "completed")
    assert failed["status"] == "failed"
    assert failed["statusMessage"] == DEADLINE_PASSED.format(seconds=DEADLINE)


def test_a_handler_not_proven_replay_safe_is_refused(redis_url: str) -> None:
    cfg = config(redis_url)
    with pytest.raises(NotReplaySafeError, match="replay_safe=True"):
        DocketRunner(cfg, redis_url)
    with pytest.raises(NotReplaySafeError, match="replay_safe=True"):
        RoundWorker(docket_app.handle, cfg, redis_url)
    run = subprocess.run(
        worker_command(redis_url),
        env=worker_env(redis_url),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 2
    assert b"replay_safe=True" in run.stderr


def test_the_replay_checker_runs_at_start_up_on_demand(redis_url: str) -> None:
    from fixtures import Everything

    from mrtr_sansio.testing import Operation, check_replay

    cfg = config(redis_url)
    handler = Everything().handle
    safe = [Operation("tools/call", "confirm_delete", {"filename": "a.txt"})]
    DocketRunner(cfg, redis_url, replay_check=functools.partial(check_replay, handler, safe))

    def unsafe() -> None:
        raise AssertionError("round 2 differs when run again")

    with pytest.raises(NotReplaySafeError, match="round 2 differs when run again"):
        RoundWorker(handler, cfg, redis_url, replay_check=unsafe)


def test_a_lease_shorter_than_the_redelivery_timeout_is_refused(redis_url: str) -> None:
    store = RedisTaskStore.from_url(redis_url)
    cfg = m.ServerConfig(tasks=TaskSettings(store=store, lease_seconds=5))
    with pytest.raises(ValueError, match="must exceed the redelivery timeout"):
        RoundWorker(docket_app.handle, cfg, redis_url, replay_safe=True, redelivery_timeout=30)


def test_the_worker_command_starts_with_every_default(redis_url: str, tmp_path: Path) -> None:
    """Nothing but the handler, ``--redis`` and ``--replay-safe``: the default redelivery
    timeout (the same constant as ``RoundWorker``'s) is under the default durable lease, so
    the worker starts and runs rounds."""
    assert REDELIVERY_TIMEOUT < DURABLE_LEASE_SECONDS
    script = shutil.which("mrtr-worker", path=str(Path(sys.executable).parent))
    start = [script] if script else [sys.executable, "-m", "mrtr_sansio.adapters.docket"]
    helped = subprocess.run([*start, "--help"], capture_output=True, text=True, check=True)
    assert f"({REDELIVERY_TIMEOUT:g}; below the task lease)" in " ".join(helped.stdout.split())
    log_file = tmp_path / "worker.log"
    with log_file.open("wb") as log:
        proc = subprocess.Popen(
            [*start, "docket_app:handle", "--redis", redis_url, "--replay-safe"],
            env=worker_env(redis_url), stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 4 * WAIT  # its imports alone, on a loaded machine
        while b"running the rounds" not in log_file.read_bytes():
            assert proc.poll() is None, log_file.read_text()
            assert time.monotonic() < deadline, "the worker did not start in time"
            time.sleep(0.05)
    finally:
        cluster.stop(proc)


def test_the_worker_command_names_an_unusable_key_ring_without_a_traceback(
    redis_url: str, tmp_path: Path
) -> None:
    short = tmp_path / "ring"
    short.write_text("c2hvcnQ=\n")  # "short": 5 bytes
    for ring, reason in ((tmp_path / "missing", "No such file"), (short, "key 1 is 5 bytes")):
        run = subprocess.run(
            worker_command(redis_url, "--replay-safe", "--state-keys-file", str(ring)),
            env=worker_env(redis_url), capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert run.returncode == 2, run
        assert reason in run.stderr, run.stderr
        assert f"mrtr-worker: cannot use the key ring in {ring}" in run.stderr, run.stderr
        assert "Traceback" not in run.stderr, run.stderr


def test_a_front_under_trio_is_refused_at_start_up(redis_url: str) -> None:
    """Docket is asyncio code: a front served under trio fails its lifespan's start-up with
    :data:`ASYNCIO_ONLY` (not at its first task), and so does a front without a lifespan at
    its first round."""
    cfg = config(redis_url)
    runner = DocketRunner(cfg, redis_url, replay_safe=True)
    app = McpHttpApp(docket_app.handle, cfg, task_runner=runner)
    startup: list[dict[str, Any]] = [{"type": "lifespan.startup"}]
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        if startup:
            return startup.pop()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: Any) -> None:
        sent.append(message)

    async def lifespan() -> BaseException:
        try:
            await app({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
        except BaseException as exc:  # the lifespan's task group wraps it in a group
            inner: tuple[BaseException, ...] = getattr(exc, "exceptions", ())
            while len(inner) == 1:  # an exception group of one (Python 3.10 too)
                exc = inner[0]
                inner = getattr(exc, "exceptions", ())
            return exc
        raise AssertionError("the lifespan started under trio")

    async def first_round() -> None:
        with pytest.raises(RuntimeError, match="asyncio only"):
            await runner._open()

    refused = anyio.run(lifespan, backend="trio")
    assert isinstance(refused, RuntimeError), refused
    assert str(refused) == ASYNCIO_ONLY
    assert {"type": "lifespan.startup.complete"} not in sent
    anyio.run(first_round, backend="trio")


def test_a_front_under_uvicorn_runs_its_lifespan_with_the_docket_runner(
    workers: list[subprocess.Popen[bytes]], redis_url: str
) -> None:
    """Under uvicorn the lifespan attaches the runner and its shutdown closes it; a task's
    rounds go to the workers through real HTTP."""
    cfg = config(redis_url)
    runner = DocketRunner(cfg, redis_url, replay_safe=True, deadline=DEADLINE)
    app = McpHttpApp(docket_app.handle, cfg, task_runner=runner)
    with served(app, "on") as url:
        reply = post(url, "alice", body(1, "tools/call", {"name": "two_rounds", "arguments": {}}))
        task_id = reply.json()["result"]["taskId"]
        for key, word in (("first", "hello"), ("second", "world")):
            deadline = time.monotonic() + WAIT
            while True:
                got = post(url, "alice", body(2, "tasks/get", {"taskId": task_id})).json()
                if key in got["result"].get("inputRequests", {}):
                    break
                assert time.monotonic() < deadline, got
                time.sleep(0.05)
            answers = {key: {"action": "accept", "content": {"word": word}}}
            update = {"taskId": task_id, "inputResponses": answers}
            assert post(url, "alice", body(3, "tasks/update", update)).status_code == 200
        deadline = time.monotonic() + WAIT
        while (task := post(url, "alice", body(4, "tasks/get", {"taskId": task_id})).json())[
            "result"
        ]["status"] != "completed":
            assert time.monotonic() < deadline, task
            time.sleep(0.05)
        assert runner.enqueued == 3  # one job per round
    assert runner._docket is None  # the lifespan's shutdown closed it


@pytest.mark.anyio
async def test_a_worker_killed_mid_round_leaves_it_to_the_other(
    workers: list[subprocess.Popen[bytes]], fronts: list[Client], redis_url: str
) -> None:
    front = fronts[0]
    with effects(redis_url) as r:
        r.set("hold", "1")  # the last round waits, so that its worker dies in it
        task_id = await two_rounds_to_the_last(fronts)
        runs = f"runs:{task_id}"
        holder = int((await eventually(lambda: r.lrange(runs, 0, -1)))[0])
        (victim,) = [p for p in workers if p.pid == holder]
        victim.send_signal(signal.SIGKILL)
        victim.wait(WAIT)
        started = time.monotonic()
        r.delete("hold")
        done = await until(front, task_id, "completed", "failed")
        assert done["status"] == "completed", done
        assert done["result"]["content"][0]["text"] == "hello world"
        (other,) = [p for p in workers if p is not victim]
        assert r.lrange(runs, 0, -1) == [str(holder), str(other.pid)]  # redelivered once
        assert r.get(f"effect-writes:{task_id}") == "1"  # and its effect applied once
        assert r.hget("effects", task_id) == "hello world"
        assert time.monotonic() - started < 10
