"""Load test: many concurrent MRTR flows against one server process, and its memory.

    python examples/scale/load.py [--flows 1000] [--rounds 3] [--deadline 600]

Starts one example server (``examples/http/server.py`` under uvicorn) and runs rounds of
``--flows`` concurrent ``book_trip`` flows (two rounds of input each, three HTTP requests, every
flow its own client and connection) against it. Checks:

* every flow completes, or ends with a clean protocol error (a JSON-RPC error answer): no
  transport failure, no wrong result;
* nothing hangs: everything runs under one global deadline;
* memory returns to baseline. The server's resident memory (``VmRSS``) is read before, during
  (its peak, sampled every 20 ms) and after each round. The first round is a warm-up: a
  process's allocators keep the memory of a burst for reuse rather than handing it back, so
  the RSS after one full burst is the working size it will hold from then on, and that is the
  baseline. After the measured rounds the RSS must be back within ``--tolerance-mib`` of it.
  The tolerance (default 4 MiB) covers what is not a leak: allocator fragmentation and the
  bounded caches the first rounds fill (measured drift here: 0.2 to 0.5 MiB per 1,000-flow
  round, levelling off after a few rounds). Retaining about 0.5 KiB per request (a request's
  params, say) exceeds it within the default three rounds (9,000 requests); a smaller leak
  shows as growth that does not level off, which is why the growth per round is printed
  (``--rounds 10`` makes it plain).

Also printed: each round's throughput (the client, in this one process, is usually what limits
it) and the server's CPU time per HTTP request (``ms/req``, from ``/proc``), which does not
depend on the client. Prints the figures and exits 1 if a check fails. Linux (reads ``/proc``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import attrs
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scale.cluster import Server, start_server, stop
from scale.flows import Outcome, Tally, book_trip, http_clients

__all__ = ["main"]

MiB = 1024 * 1024


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--flows", type=int, default=1000, help="concurrent flows (default 1000)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="measured rounds after the warm-up (default 3)"
    )
    parser.add_argument(
        "--deadline", type=float, default=600.0, help="seconds for everything (default 600)"
    )
    parser.add_argument(
        "--tolerance-mib",
        type=float,
        default=4.0,
        help="RSS above baseline still counted as baseline (default 4)",
    )
    parser.add_argument(
        "--keep-alive",
        type=float,
        default=30.0,
        help="the server's keep-alive timeout in seconds (default 30; see run())",
    )
    parser.add_argument("--workdir", type=Path, help="keep the server log here")
    args = parser.parse_args(argv)
    if args.flows < 1 or args.rounds < 1 or args.deadline <= 0 or args.tolerance_mib < 0:
        parser.error("--flows, --rounds, --deadline must be positive, --tolerance-mib not < 0")
    return args


@attrs.define
class Round:
    """One burst of flows and the server's memory around it."""

    name: str
    outcomes: list[Outcome] = attrs.field(factory=list)
    seconds: float = 0.0
    #: CPU time the server used meanwhile.
    cpu: float = 0.0
    peak: int = 0
    after: int = 0

    def line(self, flows: int) -> str:
        tally = Tally().extend(self.outcomes)
        per_request = 1000 * self.cpu / tally.legs if tally.legs else 0.0
        return (
            f"{self.name:<9}{tally.completed:>10}{sum(tally.errors.values()):>8}"
            f"{sum(tally.problems.values()):>7}{flows - tally.flows:>6}{self.seconds:>9.2f}"
            f"{tally.flows / self.seconds if self.seconds else 0:>9.0f}{per_request:>10.2f}"
            f"{self.peak / MiB:>10.1f}{self.after / MiB:>10.1f}"
        )


async def burst(server: Server, url: str, flows: int, first: int, out: Round) -> None:
    """``flows`` flows at once against ``url``, sampling the server's RSS meanwhile."""

    async def one(http: httpx.AsyncClient, n: int) -> None:
        out.outcomes.append(await book_trip(http, url, n))

    async def sample() -> None:
        while True:
            out.peak = max(out.peak, server.rss())
            await anyio.sleep(0.02)

    async with http_clients(flows) as clients, anyio.create_task_group() as sampling:
        sampling.start_soon(sample)
        started, cpu = time.perf_counter(), server.cpu()
        try:
            async with anyio.create_task_group() as tg:
                for i, http in enumerate(clients):
                    tg.start_soon(one, http, first + i)
        finally:
            out.seconds = time.perf_counter() - started
            out.cpu = server.cpu() - cpu
            sampling.cancel_scope.cancel()
    out.peak = max(out.peak, server.rss())


async def settle(server: Server) -> int:
    """The server's RSS once the connections of the last round are gone."""
    await anyio.sleep(1.0)
    return server.rss()


async def run(args: argparse.Namespace, workdir: Path) -> list[str]:
    # One client process drives every flow; under CPU load it can read an answer seconds after
    # the server sent it, and then send its next POST on a connection the server's keep-alive
    # timer (5 s by default) is closing: a reset no client can retry, since POSTs are not
    # idempotent. That race is not what this test measures, so the server waits longer.
    extra = ["--keep-alive-timeout", str(args.keep_alive)]
    server = start_server(workdir, "server", keys_file=None, ttl=600.0, extra=extra)
    url = f"http://{server.address}/mcp"
    rounds = [Round("warm-up"), *(Round(f"round {i + 1}") for i in range(args.rounds))]
    hung = 0
    try:
        cold = server.rss()
        print(f"== load: {args.flows} concurrent flows against one uvicorn process ({url})")
        print(f"server RSS before any request: {cold / MiB:.1f} MiB")
        print(
            f"{'':<9}{'completed':>10}{'errors':>8}{'other':>7}{'hung':>6}{'seconds':>9}"
            f"{'flows/s':>9}{'ms/req':>10}{'peak MiB':>10}{'after MiB':>10}"
        )
        with anyio.move_on_after(args.deadline) as deadline:
            for i, current in enumerate(rounds):
                await burst(server, url, args.flows, i * args.flows, current)
                current.after = await settle(server)
                print(current.line(args.flows), flush=True)
        if deadline.cancelled_caught:
            hung = sum(args.flows - len(r.outcomes) for r in rounds if r.seconds)
            print(f"the deadline ({args.deadline:g} s) passed with {hung} flows unfinished")
    finally:
        stop(server.proc)
    outcomes = [o for r in rounds for o in r.outcomes]
    tally = Tally().extend(outcomes)
    for line in tally.failures():
        print(f"  {line}")
    failed = []

    def expect(ok: bool, claim: str) -> None:
        print(f"  check: {claim}: {'ok' if ok else 'FAILED'}")
        if not ok:
            failed.append(claim)

    expect(
        not tally.problems,
        "every flow completed or ended with a clean protocol error",
    )
    expect(hung == 0 and not deadline.cancelled_caught, f"nothing hung ({args.deadline:g} s)")
    if not deadline.cancelled_caught:
        baseline, last = rounds[0].after, rounds[-1].after
        peak = max(r.peak for r in rounds[1:])
        growth = (last - baseline) / MiB
        per_round = growth / args.rounds
        print(
            f"server RSS: before {cold / MiB:.1f} MiB, baseline (after the warm-up) "
            f"{baseline / MiB:.1f} MiB, peak {peak / MiB:.1f} MiB, after {last / MiB:.1f} MiB "
            f"({growth:+.1f} MiB, {per_round:+.2f} MiB a round; tolerance "
            f"{args.tolerance_mib:g} MiB)"
        )
        expect(growth <= args.tolerance_mib, "memory returned to baseline")
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mrtr-load-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        failed = anyio.run(run, args, workdir)
    if failed:
        print("FAILED: " + "; ".join(failed))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
