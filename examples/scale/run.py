"""Stateless scale-out: MRTR flows across independent server processes behind nginx.

    python examples/scale/run.py [--processes 3] [--flows 200]

Starts N example servers (``examples/http/server.py`` under uvicorn), each its own process
sharing only a key ring file, behind nginx as a plain round-robin balancer on loopback, and:

1. **scale-out**: one ``book_trip`` flow (two rounds of input) alone, each of whose requests
   round-robin sends to the next process, then K concurrent flows through nginx with our
   client; a retry goes to whichever process nginx picks, so most retries land on another
   process than the one that sealed their ``requestState``. nginx names the process that
   answered every leg (``X-Upstream``), which is how crossings are counted;
2. **key rotation**: keeps K flows running back to back while the ring goes through the
   documented phases ``[old]`` -> ``[old, new]`` -> ``[new, old]`` -> ``[new]``; each phase is
   written to the file and every server reloads it on SIGHUP, without a restart, before the next
   phase starts, and phases are at least one state TTL apart (a short ``--ttl`` keeps that
   practical). Which key sealed each token is read off the tokens themselves;
3. **the negative**: the same flows against servers that each seal with a key of their own
   (no shared ring): every retry that reaches another process is refused with -32602
   "Invalid or expired requestState", every one that reaches its own process goes through.

Prints the figures and exits 1 if anything is not as stated. nginx comes from Debian's
packages (``apt-get install -y nginx``); its prefix, configuration, pid file and logs live in a
temporary directory, nothing of the system's nginx is touched.
"""

from __future__ import annotations

import argparse
import itertools
import secrets
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import anyio
import anyio.to_thread
import attrs
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scale.cluster import NGINX_MISSING, Cluster, cluster, find_nginx, write_ring
from scale.flows import Outcome, Tally, book_trip, http_clients

import mrtr_sansio as m

__all__ = ["main"]

INVALID_STATE = (m.ErrorCode.INVALID_PARAMS, "Invalid or expired requestState")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", type=int, default=3, help="server processes (default 3)")
    parser.add_argument("--flows", type=int, default=200, help="concurrent flows (default 200)")
    parser.add_argument(
        "--ttl", type=float, default=5.0, help="requestState lifetime, seconds (default 5)"
    )
    parser.add_argument(
        "--phase-seconds",
        type=float,
        default=5.0,
        help="how long each rotation phase runs, at least the TTL (default 5)",
    )
    parser.add_argument("--workdir", type=Path, help="keep logs and configuration here")
    args = parser.parse_args(argv)
    if args.processes < 2 or args.flows < 1:
        parser.error("--processes must be at least 2 and --flows at least 1")
    if not args.ttl > 0 or args.phase_seconds < args.ttl:
        parser.error("--ttl must be positive and --phase-seconds at least --ttl")
    return args


async def burst(url: str, flows: int, first: int = 0) -> tuple[list[Outcome], float]:
    """``flows`` flows started at once; their outcomes and the seconds they took."""
    outcomes: list[Outcome] = []

    async def one(http: httpx.AsyncClient, n: int) -> None:
        outcomes.append(await book_trip(http, url, n))

    async with http_clients(flows) as clients:
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i, http in enumerate(clients):
                tg.start_soon(one, http, first + i)
        elapsed = time.perf_counter() - started
    return outcomes, elapsed


# --- the three parts --------------------------------------------------------------------------


class Checks:
    """What must hold; failures are printed at the end and make the exit status 1."""

    def __init__(self) -> None:
        self.failed: list[str] = []

    def expect(self, ok: bool, claim: str) -> None:
        print(f"  check: {claim}: {'ok' if ok else 'FAILED'}")
        if not ok:
            self.failed.append(claim)


def report(title: str, tally: Tally, elapsed: float, cpu: float) -> None:
    """Print a part's figures; ``cpu`` is the CPU time the servers used meanwhile."""
    print(f"== {title}")
    for line in tally.summary():
        print(f"  {line}")
    if tally.retries:
        print(f"  cross-process share of retries: {100 * tally.cross / tally.retries:.0f}%")
    print(
        f"  throughput: {tally.flows / elapsed:.0f} flows/s, {tally.legs / elapsed:.0f} "
        f"requests/s ({elapsed:.2f} s); server CPU {1000 * cpu / max(tally.legs, 1):.2f} ms "
        "per request"
    )


async def scale_out(c: Cluster, flows: int, processes: int, checks: Checks) -> None:
    # Alone, a flow meets round-robin head on: each of its requests goes to the next process.
    [lone], _ = await burst(c.url, 1, first=flows)
    path = [leg.upstream for leg in lone.legs]
    print(f"== one flow alone: its requests were answered by {' -> '.join(map(str, path))}")
    checks.expect(
        lone.completed and all(a != b for a, b in itertools.pairwise(path)),
        "each round of a lone flow ran on another process than the round before",
    )
    cpu = c.cpu()
    outcomes, elapsed = await burst(c.url, flows)
    tally = Tally().extend(outcomes)
    report(
        f"scale-out: {flows} concurrent flows, {processes} processes, shared key ring",
        tally,
        elapsed,
        c.cpu() - cpu,
    )
    checks.expect(tally.completed == flows, "every flow completed")
    checks.expect(len(tally.by_upstream) == processes, "every process answered")
    # Round-robin without stickiness sends about (N-1)/N of the retries elsewhere.
    checks.expect(
        tally.cross * processes >= tally.retries > 0,
        "at least 1/N of the retries crossed processes",
    )


@attrs.define
class PhaseLog:
    """Flows of the rotation run, by the phase they started and ended in."""

    name: str = "[old]"
    outcomes: dict[tuple[str, str], list[Outcome]] = attrs.field(factory=dict)

    def add(self, started: str, outcome: Outcome) -> None:
        self.outcomes.setdefault((started, self.name), []).append(outcome)


async def rotation(
    c: Cluster, ring: Path, old: bytes, flows: int, dwell: float, checks: Checks
) -> None:
    new = secrets.token_bytes(32)
    sealed_by: dict[str, Callable[[str], bytes]] = {
        "old": m.sealing.HmacSha256Codec([old]).unseal,
        "new": m.sealing.HmacSha256Codec([new]).unseal,
    }
    log = PhaseLog()
    numbers = itertools.count(1_000_000)
    done = anyio.Event()

    async def worker(http: httpx.AsyncClient) -> None:
        while not done.is_set():
            started = log.name
            log.add(started, await book_trip(http, c.url, next(numbers)))

    def roll_out(name: str, keys: list[bytes]) -> float:
        """Phase ``name`` to every process (in a thread: the flows go on meanwhile); the phase
        a flow is in changes the moment the last process has it."""
        log.name = f"-> {name}"
        took = c.rotate(ring, keys)
        log.name = name
        return took

    steps = [("[old, new]", [old, new]), ("[new, old]", [new, old]), ("[new]", [new])]
    print(f"== key rotation: {flows} flows running back to back, each phase {dwell:g} s")
    async with http_clients(flows) as clients:
        started, cpu = time.perf_counter(), c.cpu()
        async with anyio.create_task_group() as tg:
            for http in clients:
                tg.start_soon(worker, http)
            await anyio.sleep(dwell)
            for name, keys in steps:
                took = await anyio.to_thread.run_sync(roll_out, name, keys)
                print(f"  every process reloaded {name} after SIGHUP in {1000 * took:.0f} ms")
                await anyio.sleep(dwell)
            done.set()
        elapsed, cpu = time.perf_counter() - started, c.cpu() - cpu
    everything = Tally()
    print(f"  {'started in':<16}{'ended in':<16}{'flows':>7}{'failed':>8}  tokens sealed by")
    for (began, ended), outcomes in log.outcomes.items():
        tally = Tally().extend(outcomes)
        everything.extend(outcomes)
        sealers = Counter(
            _sealer(leg.state, sealed_by) for o in outcomes for leg in o.legs if leg.state
        )
        print(
            f"  {began:<16}{ended:<16}{tally.flows:>7}{tally.failed:>8}  "
            + ", ".join(f"{k} {v}" for k, v in sorted(sealers.items()))
        )
        if began == ended and not began.startswith("->"):
            expected = "old" if began in ("[old]", "[old, new]") else "new"
            checks.expect(
                set(sealers) == {expected}, f"flows within {began} got tokens sealed by {expected}"
            )
    report("key rotation, all phases", everything, elapsed, cpu)
    checks.expect(everything.failed == 0, "no flow failed during the rotation")
    checks.expect(everything.cross > 0, "retries crossed processes during the rotation")


def _sealer(token: str, sealed_by: Mapping[str, Callable[[str], bytes]]) -> str:
    for name, unseal in sealed_by.items():
        try:
            unseal(token)
        except m.sealing.RequestStateError:
            continue
        return name
    return "unknown"


async def ephemeral(c: Cluster, flows: int, processes: int, checks: Checks) -> None:
    cpu = c.cpu()
    outcomes, elapsed = await burst(c.url, flows)
    tally = Tally().extend(outcomes)
    cpu = c.cpu() - cpu
    title = f"negative: {flows} flows, {processes} processes, each with its own key"
    report(title, tally, elapsed, cpu)
    crossing = sum(any(x for _, x in o.crossings()) for o in outcomes)
    checks.expect(tally.cross > 0, "retries crossed processes")
    checks.expect(tally.cross_refused == tally.cross, "every cross-process retry was refused")
    checks.expect(tally.same_refused == 0, "no same-process retry was refused")
    checks.expect(
        set(tally.errors) == {INVALID_STATE} and not tally.problems,
        "every failure is -32602 'Invalid or expired requestState'",
    )
    checks.expect(tally.failed == crossing, "exactly the flows whose state crossed failed")


async def run(args: argparse.Namespace, nginx: str, workdir: Path) -> list[str]:
    checks = Checks()
    ring = workdir / "state-keys"
    old = secrets.token_bytes(32)
    write_ring(ring, [old])
    with cluster(workdir, args.processes, keys_file=ring, ttl=args.ttl, nginx=nginx) as c:
        print(f"nginx on {c.url} -> {', '.join(s.address for s in c.servers)} (round-robin)")
        await scale_out(c, args.flows, args.processes, checks)
        await rotation(c, ring, old, args.flows, args.phase_seconds, checks)
    with cluster(
        workdir / "ephemeral", args.processes, keys_file=None, ttl=args.ttl, nginx=nginx
    ) as c:
        await ephemeral(c, args.flows, args.processes, checks)
    return checks.failed


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    nginx = find_nginx()
    if nginx is None:
        print(NGINX_MISSING, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="mrtr-scale-") as tmp:
        workdir = args.workdir or Path(tmp)
        (workdir / "ephemeral").mkdir(parents=True, exist_ok=True)
        failed = anyio.run(run, args, nginx, workdir)
    if failed:
        print("FAILED: " + "; ".join(failed))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
