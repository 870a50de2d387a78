"""The long fuzz profile: the properties of tests/test_fuzz.py with many more examples.

    python fuzz/run.py                       # 10**6 examples over the fuzz properties
    python fuzz/run.py --examples 20000 --jobs 2 --batch 5000
    python fuzz/run.py --model 2000          # also the ServerModel against our server

Each property runs in batches (one pytest process per batch, each with its own seed, so that
hypothesis' memory stays bounded), ``--jobs`` processes at a time. The examples counted are the
passing ones hypothesis reports (``--hypothesis-show-statistics``). On a failure the batch's
output, with hypothesis' minimal example and ``@reproduce_failure`` blob, is printed and kept.
Exit status 0 means every batch passed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FUZZ = "tests/test_fuzz.py"
#: Property -> share of the examples (the slower ones get fewer).
PROPERTIES = {
    "test_modern_server_survives_hostile_streams": 0.25,
    "test_legacy_server_survives_hostile_streams": 0.25,
    "test_any_chunking_gives_the_same_events_and_bytes": 0.15,
    "test_client_survives_hostile_streams": 0.25,
    "test_client_chunking_gives_the_same_events_and_bytes": 0.10,
}
MODEL = "tests/test_testing_model.py::test_correct_server_passes_every_check"
PASSING = re.compile(r"(\d+) passing")


def batch(
    node: str, examples: int, seed: int, env_name: str, log_dir: Path
) -> tuple[int, bool, str]:
    """Run one batch; return (passing examples, ok, log path)."""
    env = {**os.environ, env_name: str(examples)}
    log = log_dir / f"{node.rsplit('::', maxsplit=1)[-1]}-{seed}.log"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        node,
        f"--hypothesis-seed={seed}",
        "--hypothesis-show-statistics",
        "-s",  # the ServerModel test prints its example count
    ]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    log.write_text(done.stdout + done.stderr, encoding="utf-8")
    passing = sum(int(n) for n in PASSING.findall(done.stdout))
    return passing, done.returncode == 0, str(log)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=10**6, help="total over the properties")
    parser.add_argument("--batch", type=int, default=20_000, help="examples per process")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--model", type=int, default=0, help="ServerModel examples (0: skip)")
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args()

    log_dir = Path(tempfile.mkdtemp(prefix="mrtr-fuzz-"))
    work: list[tuple[str, str, int, int, str]] = []  # (label, node, examples, seed, env)
    seed = args.seed
    for name, share in PROPERTIES.items():
        left = round(args.examples * share)
        while left > 0:
            size = min(args.batch, left)
            work.append((name, f"{FUZZ}::{name}", size, seed, "MRTR_FUZZ_EXAMPLES"))
            seed += 1
            left -= size
    if args.model:
        work.append(("ServerModel", MODEL, args.model, seed, "MRTR_MODEL_EXAMPLES"))

    print(f"{len(work)} batches, {args.jobs} at a time; logs in {log_dir}", flush=True)
    totals: dict[str, list[float]] = {}
    failures: list[str] = []
    started = time.monotonic()

    def run(item: tuple[str, str, int, int, str]) -> None:
        label, node, size, item_seed, env_name = item
        t0 = time.monotonic()
        passing, ok, log = batch(node, size, item_seed, env_name, log_dir)
        seconds = time.monotonic() - t0
        entry = totals.setdefault(label, [0, 0.0, 0])
        entry[0] += passing
        entry[1] += seconds
        entry[2] += 1
        status = "ok" if ok else "FAILED"
        print(
            f"  {label}: seed {item_seed}, {passing} examples, {seconds:.0f} s, {status}",
            flush=True,
        )
        if not ok:
            failures.append(log)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        list(pool.map(run, work))

    wall = time.monotonic() - started
    print("\nproperty                                             examples   cpu s  batches")
    for label, (passing, seconds, count) in totals.items():
        print(f"{label:<52} {int(passing):>9} {seconds:>7.0f} {int(count):>8}")
    total = sum(int(v[0]) for v in totals.values())
    print(f"{'total':<52} {total:>9}   wall {wall:.0f} s")
    for log in failures:
        print(f"\nFAILED: {log}\n{Path(log).read_text(encoding='utf-8')[-6000:]}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
