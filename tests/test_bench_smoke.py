"""The engine benchmarks keep running and keep the last lines the project tracks (figures are
not checked here: they come from a quiet machine, see docs/performance.md)."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _run(script: str, *args: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    return out.strip().splitlines()


def test_server_exchange() -> None:
    last = _run("server_exchange.py", "--samples", "1", "--loops", "20")[-1]
    assert re.fullmatch(r"ratio engine/floor: stdlib=\d+\.\d\d orjson=\d+\.\d\d", last), last


def test_compare_sdk() -> None:
    lines = _run("compare_sdk.py", "--quick")
    assert any(line.startswith("every path sends the same two responses") for line in lines)
    ratio = r"ratio sdk/ours: engine=\d+\.\d engine-orjson=\d+\.\d asgi=\d+\.\d client=\d+\.\d"
    assert re.fullmatch(ratio, lines[-1]), lines[-1]


@pytest.mark.parametrize(
    "path",
    [
        "engine-orjson",
        "engine",
        "prebuilt-orjson",
        "floor-orjson",
        "asgi-example",
        "asgi-floor",
        "stdio-asyncio",
        "stdio-asyncio-sealed",
        "asgi-necessary",
        "sealing",
        "sealing-necessary",
    ],
)
def test_instructions_paths_run(path: str) -> None:
    """Each path of bench/instructions.py runs (as its callgrind child does, without valgrind)."""
    assert _run("instructions.py", "--child", path, "5") == []


def test_instructions_rejects_an_unknown_path() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "instructions.py"), "nonsense"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "unknown path(s): nonsense" in done.stderr


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_instructions_counts_under_callgrind() -> None:
    lines = _run("instructions.py", "floor-orjson", "--small", "20", "--large", "60")
    assert lines[0].startswith("Python ")
    match = re.fullmatch(r"floor-orjson +([\d,]+)", lines[-1])
    assert match is not None, lines[-1]
    # Four JSON operations on small messages: thousands of instructions, not millions.
    assert 1_000 < int(match.group(1).replace(",", "")) < 1_000_000


def _http_e2e(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("wrk") is None:
        pytest.skip("wrk is not installed (Debian: apt-get install wrk)")
    pytest.importorskip("uvicorn", reason="uvicorn is not installed (the server extra)")
    return subprocess.run(
        [sys.executable, str(BENCH / "http_e2e.py"), "--quick", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_http_e2e() -> None:
    """The HTTP bench runs every server it can under every uvicorn configuration installed,
    counts no error, and ends with the ratio line (h11 ships with uvicorn: never skipped)."""
    done = _http_e2e()
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    assert "errors: 0" in lines, done.stdout
    ratio = r"ratio ours/floor: httptools=(\d+\.\d\d|skipped) h11=\d+\.\d\d"
    assert re.fullmatch(ratio, lines[-1]), lines[-1]
    # The necessary-work floor ran (a real exchange per iteration, no error) and is compared.
    assert re.search(r"^h11 +necessary +[1-9]\d* .* 0$", done.stdout, re.M), done.stdout
    necessary = r"ratio ours/necessary: httptools=(\d+\.\d\d|skipped) h11=\d+\.\d\d"
    assert any(re.fullmatch(necessary, line) for line in lines), done.stdout
    if sys.platform == "linux":  # server CPU per exchange, read from /proc
        cpu = r"cpu ratio floor/ours: (httptools=\d+\.\d\d )?h11=\d+\.\d\d"
        assert re.fullmatch(cpu, lines[-2]), lines[-2]
        assert re.search(r"^h11 +ours +\d+ +[\d.]+ +[\d.]+ +[1-9]\d* 0$", done.stdout, re.M)


def _nginx() -> str | None:
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")


def test_http_scale() -> None:
    """The scale table runs one server direct and behind nginx, and prints its rows with no
    error."""
    if shutil.which("wrk") is None or _nginx() is None:
        pytest.skip("wrk and nginx are needed (Debian: apt-get install wrk nginx)")
    pytest.importorskip("uvicorn", reason="uvicorn is not installed (the server extra)")
    argv = ["--processes", "1", "--seconds", "1", "--connections", "2"]
    done = subprocess.run(
        [sys.executable, str(BENCH / "http_scale.py"), *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| 1 process")]
    assert [row.split(" | ")[0] for row in rows] == [
        "| 1 process, direct",
        "| 1 process behind nginx",
    ]
    for row in rows:
        assert re.fullmatch(r"\| [^|]+ \| [1-9]\d* \|( [\d.]+ \|){3} (\d+|-) \| 0 \|", row), row


def test_http_e2e_counts_wrong_answers() -> None:
    """The load generator checks every answer: requiring another result text turns every
    exchange into a counted error, and the run fails."""
    done = _http_e2e("--configs", "h11", "--no-sdk", "--expect", "Not what the tool says.")
    assert done.returncode == 1, done.stdout + done.stderr
    counted = re.search(r"^errors: (\d+)$", done.stdout, re.MULTILINE)
    assert counted is not None, done.stdout
    assert int(counted.group(1)) > 0
    assert re.search(r"^h11 +ours +0 ", done.stdout, re.MULTILINE), done.stdout


def test_stdio_e2e() -> None:
    """The stdio bench drives our stdio server (and the SDK's, in the test extra) without an
    error and ends with its ratio line."""
    lines = _run("stdio_e2e.py", "--quick")
    assert "errors: 0" in lines, lines
    assert re.fullmatch(r"ratio ours/sdk: stdio=(\d+\.\d\d|skipped)", lines[-1]), lines[-1]


def test_stdio_e2e_pipelined() -> None:
    """Pipelined, the stdio bench drives the blocking and the async adapters (asyncio and trio,
    sealed and not) without an error and prints their ratios."""
    argv = ["--quick", "--pipeline", "8", "--servers", "ours,asyncio,asyncio-sealed,trio"]
    lines = _run("stdio_e2e.py", *argv)
    assert "errors: 0" in lines, lines
    ratios = (
        r"ratios: asyncio-sealed/asyncio=\d+\.\d\d asyncio/ours=\d+\.\d\d trio/asyncio=\d+\.\d\d"
    )
    assert re.fullmatch(ratios, lines[-2]), lines[-2]
    assert re.fullmatch(r"ratio ours/sdk: stdio=skipped", lines[-1]), lines[-1]


def test_http_e2e_necessary_floor_checks_what_a_server_must() -> None:
    """The necessary-work floor answers the exchange, and refuses a tampered, expired or
    unbound state and a request without the envelope: the work it stands for is done."""
    pytest.importorskip("orjson", reason="orjson is not installed (the bench extra)")
    spec = importlib.util.spec_from_file_location("http_e2e_floor", BENCH / "http_e2e.py")
    assert spec is not None
    assert spec.loader is not None
    bench: Any = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclasses look their module up
    try:
        spec.loader.exec_module(bench)
    finally:
        del sys.modules[spec.name]
    now = 1_800_000_000.0

    def post(msg: dict[str, Any], at: float = now) -> dict[str, Any]:
        answer: dict[str, Any] = json.loads(bench.necessary_answer(json.dumps(msg).encode(), at))
        return answer

    asked = post(bench.request_1(1))["result"]
    assert asked["resultType"] == "input_required"
    assert set(asked["inputRequests"]) == {"confirm"}
    token = asked["requestState"]
    done = post(bench.request_2(2, token))["result"]
    assert done["content"] == [{"type": "text", "text": bench.EXPECTED}]
    tampered = token[:-2] + ("AA" if token[-2:] != "AA" else "BA")
    for msg, at in [
        (bench.request_2(3, tampered), now),
        (bench.request_2(4, token), now + bench.NECESSARY_TTL + 1),
        (bench.request_2(5, "not-base64!"), now),
        (bench.request_2(6, "QQ"), now),
    ]:
        assert post(msg, at)["error"]["message"] == "Invalid or expired requestState"
    bare = bench.request_1(7)
    del bare["params"]["_meta"]
    assert "envelope" in post(bare)["error"]["message"]
    other = bench.request_1(8)
    other["params"]["name"] = "another_tool"
    assert post(other)["error"]["message"] == "unknown tool"
    blind = bench.request_1(9)
    blind["params"]["_meta"] = {**blind["params"]["_meta"], bench._CAPABILITIES_KEY: {}}
    assert post(blind)["error"]["message"] == "the client cannot elicit"


def test_tasks_bench() -> None:
    """The tasks bench runs its quick mode against the example server for the memory and
    SQLite stores (Redis too when redis-server is installed) and prints every figure."""
    pytest.importorskip("uvicorn", reason="uvicorn is not installed (the server extra)")
    pytest.importorskip("httpx", reason="httpx is not installed (the test extra)")
    stores = "memory,sqlite" + (",redis" if shutil.which("redis-server") else "")
    lines = _run("tasks.py", "--quick", "--stores", stores, "--runners", "none")
    assert re.fullmatch(r"Python \S+, load average [\d.]+", lines[0]), lines[0]
    ms = r"[\d.]+"
    figures = {
        "run": r"tasks=40 streams=4 created in [\d.]+s",
        "stall ms": rf"create={ms} idle={ms} calls={ms}",
        "stall cpu ms": rf"create={ms} idle={ms} calls={ms}",
        "call ms": rf"p50={ms} p99={ms} n=[1-9]\d*",
        "get ms": rf"small={ms} 100KB={ms} 1MB={ms}",
        "get cpu ms": rf"small={ms} 100KB={ms} 1MB={ms}",
        "idle cpu s/s": rf"streams={ms} none={ms}",
    }
    body = lines[1:-1]
    assert len(body) == len(stores.split(",")) * len(figures), lines
    for line, (store, (name, pattern)) in zip(
        body, [(s, f) for s in stores.split(",") for f in figures.items()], strict=True
    ):
        assert re.fullmatch(rf"{store} +{name}: {pattern}", line), line
    assert lines[-1].startswith("aims missed: "), lines[-1]


def test_tasks_bench_runners() -> None:
    """The tasks bench's runner rows, small: the in-process pool and the Docket runner with
    one worker, each on its own redis-server, and their ratio (skipped without redis-server
    or the tasks-docket extra)."""
    pytest.importorskip("uvicorn", reason="uvicorn is not installed (the server extra)")
    pytest.importorskip("httpx", reason="httpx is not installed (the test extra)")
    pytest.importorskip("docket", reason="the Docket rows need the tasks-docket extra")
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    args = ("--stores", "none", "--runners", "pool,docket-1")
    lines = _run("tasks.py", *args, "--runner-tasks", "4", "--runner-concurrency", "2")
    assert re.fullmatch(r"Python \S+, load average [\d.]+", lines[0]), lines[0]
    ms = r"[\d.]+"
    for line, name in zip(lines[1:3], ("pool", "docket-1"), strict=True):
        pattern = rf"runner {name} +tasks/s={ms} round ms: p50={ms} p99={ms}"
        assert re.fullmatch(pattern, line), line
    assert re.fullmatch(rf"ratio docket/pool tasks/s: docket-1={ms}", lines[3]), lines[3]
    assert lines[4:] == ["aims missed: none"], lines
