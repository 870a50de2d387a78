"""The production recipe's throughput by process count: the example server as users run it,
alone and as N independent processes behind nginx (examples/scale), driven by the same wrk load
as ``bench/http_e2e.py`` (the modern two-leg MRTR exchange, checked on every answer).

Setups, all started at once and measured in interleaved rounds so that a busy machine's drift
hits every setup alike:

* ``direct x1``: one ``examples/http/server.py`` process, wrk on its port;
* ``nginx x N``: N such processes sharing one key ring file, nginx (one worker, round-robin,
  keep-alive upstream connections: ``examples/scale/cluster.py``) in front; a retry lands on
  another process than the one that sealed its state about (N-1)/N of the time.

Per setup it prints the median exchanges/s of the rounds, p50/p99 latency, and the CPU time the
servers and nginx used per exchange (utime + stime from /proc over the measured runs), as a
markdown table. wrk, nginx and the servers share the machine's cores: the table's last lines say
how many there are, and the load average before and after.

    python bench/scale_table.py [--processes 1,2,3] [--seconds S] [--rounds N] [--connections C]

Linux only (/proc); needs wrk and nginx (Debian's packages) and uvicorn (the ``server`` extra).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "examples" / "scale"))

import cluster  # noqa: E402  (examples/scale/cluster.py)
import http_e2e  # noqa: E402  (bench/http_e2e.py: the wrk script and its runner)


@dataclass
class Setup:
    """One measured arrangement of processes."""

    name: str
    port: int
    pids: list[int]
    rates: list[float] = field(default_factory=list)
    latencies_us: list[int] = field(default_factory=list)
    cpu_per_exchange_us: list[float] = field(default_factory=list)
    errors: int = 0

    def cpu(self) -> float:
        return sum(cluster.cpu_seconds(pid) for pid in self.pids)


@contextmanager
def setups(workdir: Path, counts: list[int], nginx: str) -> Iterator[list[Setup]]:
    """Start ``direct x1`` and one nginx cluster per count; stop everything on exit."""
    ring = workdir / "ring"
    cluster.write_ring(ring, [os.urandom(32)])
    with ExitStack() as stack:
        one = cluster.start_server(workdir, "direct", keys_file=ring, ttl=600)
        stack.callback(cluster.stop, one.proc)
        found = [Setup("direct x1", one.port, [one.proc.pid])]
        for n in counts:
            box = workdir / f"n{n}"
            box.mkdir()
            group = stack.enter_context(
                cluster.cluster(box, n, keys_file=ring, ttl=600, nginx=nginx)
            )
            port = int(group.url.rsplit(":", 1)[1].split("/", 1)[0])
            pids = [s.proc.pid for s in group.servers] + [group.nginx.pid]
            found.append(Setup(f"nginx x{n}", port, pids))
        yield found


def measure(found: list[Setup], script: Path, args: argparse.Namespace) -> None:
    for round_no in range(args.rounds):
        order = found[round_no % len(found) :] + found[: round_no % len(found)]
        for setup in order:
            before = setup.cpu()
            run = http_e2e.run_wrk(script, setup.port, args.seconds, args.connections)
            used = setup.cpu() - before
            setup.rates.append(run.rate)
            setup.latencies_us.extend(run.latencies_us)
            setup.errors += run.errors
            if run.exchanges:
                setup.cpu_per_exchange_us.append(used / run.exchanges * 1e6)


def table(found: list[Setup]) -> list[str]:
    rows = [
        "| setup | exchanges/s | p50 ms | p99 ms | server+nginx CPU per exchange | errors |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s in found:
        lat = sorted(s.latencies_us)
        p50 = lat[len(lat) // 2] / 1000 if lat else 0.0
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] / 1000 if lat else 0.0
        cpu = statistics.median(s.cpu_per_exchange_us) if s.cpu_per_exchange_us else 0.0
        rate = statistics.median(s.rates) if s.rates else 0.0
        rows.append(
            f"| {s.name} | {rate:,.0f} | {p50:.2f} | {p99:.2f} | {cpu:,.0f} µs | {s.errors} |"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--processes", default="1,2,3", help="cluster sizes behind nginx")
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=8)
    args = parser.parse_args(argv)
    nginx = cluster.find_nginx()
    if nginx is None:
        print(cluster.NGINX_MISSING, file=sys.stderr)
        return 2
    counts = [int(x) for x in args.processes.split(",") if x]
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="scale-table-") as tmp:
        workdir = Path(tmp)
        script = workdir / "flow.lua"
        script.write_text(http_e2e.lua_script())
        with setups(workdir, counts, nginx) as found:
            for setup in found:  # one warm-up exchange run, also a correctness check
                run = http_e2e.run_wrk(script, setup.port, 1, 2)
                if run.errors or not run.exchanges:
                    print(f"{setup.name}: {run.first_error or 'no exchange'}", file=sys.stderr)
                    return 1
            measure(found, script, args)
    print("\n".join(table(found)))
    cores = os.cpu_count()
    when = time.strftime("%H:%M UTC", time.gmtime())
    print(
        f"\n{cores} cores shared by wrk ({args.connections} connections), nginx and the servers; "
        f"{args.rounds} rounds of {args.seconds} s per setup; load average "
        f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after ({when})"
    )
    return 1 if any(s.errors for s in found) else 0


if __name__ == "__main__":
    sys.exit(main())
