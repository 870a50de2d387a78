"""The production recipe's throughput: example server processes behind nginx, as a table.

For each process count in ``--processes`` (default ``1,2,3``) this starts that many
``examples/http/server.py`` processes sharing one key ring file, with plain round-robin nginx in
front of them (``examples/scale/cluster.py``: no sticky sessions, so most retries reach another
process than the one that sealed their state), drives nginx with ``http_e2e.py``'s closed-loop
``wrk`` load (the two-leg MRTR exchange, every answer checked), and reports exchanges/s, p50 /
p99 of whole exchanges, the servers' CPU per exchange (all processes) and nginx's. A first row,
``direct``, is one process without nginx, for what the proxy costs. Loopback only; every
process started is stopped at the end.

    python bench/http_scale.py [--processes 1,2,3] [--seconds 5] [--connections 16]

Needs Debian's ``wrk`` and ``nginx``. Prints one markdown table (paste it into
docs/performance.md with the machine's core count and load average, which it prints too) and
exits 1 if any exchange failed. Run it on a quiet machine: the load generator, nginx and the
servers share the cores.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "examples"))

import http_e2e  # noqa: E402
from scale.cluster import cluster, cpu_seconds, find_nginx, start_server, stop, write_ring  # noqa: E402


def _tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its children (nginx's master and its worker)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    return cpu_seconds(pid) + sum(cpu_seconds(int(child)) for child in children)


def _row(label: str, run: http_e2e.Run, servers_cpu: float, nginx_cpu: float | None) -> str:
    lat = run.latencies_us
    p50, p99 = (http_e2e._percentile(lat, q) / 1000 if lat else float("nan") for q in (0.5, 0.99))
    per = 1e6 / run.exchanges if run.exchanges else float("nan")
    proxy = "-" if nginx_cpu is None else f"{nginx_cpu * per:.0f}"
    return (
        f"| {label} | {run.rate:.0f} | {p50:.2f} | {p99:.2f} | {servers_cpu * per:.0f} "
        f"| {proxy} | {run.errors} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", default="1,2,3", help="process counts (default 1,2,3)")
    parser.add_argument("--seconds", type=int, default=5, help="per measured run (default 5)")
    parser.add_argument("--connections", type=int, default=16, help="closed-loop connections")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.processes.split(",") if c]
    if not counts or min(counts) < 1 or args.seconds < 1 or args.connections < 1:
        parser.error("values must be >= 1")
    nginx = find_nginx()
    if shutil.which("wrk") is None or nginx is None:
        sys.exit("http_scale.py: needs wrk and nginx (Debian: apt-get install wrk nginx)")
    rows: list[str] = []
    errors = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ring = work / "ring"
        write_ring(ring, [secrets.token_bytes(32)])
        script = work / "mrtr.lua"
        script.write_text(http_e2e.lua_script(), encoding="ascii")

        def drive(port: int, pids: list[int], proxy: int | None, label: str) -> None:
            nonlocal errors
            http_e2e.run_wrk(script, port, 1, args.connections)  # warm-up
            before = [cpu_seconds(pid) for pid in pids]
            proxy_before = _tree_cpu(proxy) if proxy is not None else 0.0
            run = http_e2e.run_wrk(script, port, args.seconds, args.connections)
            used = sum(cpu_seconds(pid) - b for pid, b in zip(pids, before, strict=True))
            proxy_used = _tree_cpu(proxy) - proxy_before if proxy is not None else None
            errors += run.errors
            rows.append(_row(label, run, used, proxy_used))

        server = start_server(work, "direct", keys_file=ring, ttl=600.0)
        try:
            drive(server.port, [server.proc.pid], None, "1 process, direct")
        finally:
            stop(server.proc)
        for count in counts:
            (work / f"p{count}").mkdir()
            with cluster(work / f"p{count}", count, keys_file=ring, ttl=600.0, nginx=nginx) as c:
                port = int(c.url.rsplit(":", 1)[1].split("/", 1)[0])
                pids = [s.proc.pid for s in c.servers]
                label = f"{count} process{'es' if count > 1 else ''} behind nginx"
                drive(port, pids, c.nginx.pid, label)
    load = os.getloadavg()
    print(
        f"{os.cpu_count()} cores, wrk {args.connections} connections, {args.seconds} s per row, "
        f"load average {load[0]:.2f} (1 min) after"
    )
    print()
    print(
        "| servers | exch/s | p50 ms | p99 ms | server CPU us/exch | nginx CPU us/exch | errors |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        print(row)
    return 1 if errors else 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
