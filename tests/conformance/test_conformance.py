"""The conformance runner: its judging rules, and a negative control proving it can fail.

The judging tests run everywhere. The live tests start servers and the official harness
(Node.js from npm); they run when ``MRTR_CONFORMANCE=1``, as ``tests/conformance/run.sh`` sets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import runner
from runner import Expected, judge_leg, judge_scenario

live = pytest.mark.skipif(
    os.environ.get("MRTR_CONFORMANCE") != "1",
    reason="live conformance run: set MRTR_CONFORMANCE=1 (tests/conformance/run.sh does)",
)
TAMPERED = "input-required-result-tampered-state"


def check(ident: str, status: str, message: str = "") -> dict[str, Any]:
    return {"id": ident, "name": ident, "status": status, "errorMessage": message}


# --- judging ----------------------------------------------------------------------------------


def test_expected_failures_file_parses_and_needs_reasons(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_text("# comment\n\ntasks-lifecycle  not implemented  # trailing\na/b-c  bug 12\n")
    assert runner.load_expected(path) == [
        Expected("tasks-lifecycle", None, "not implemented"),
        Expected("a", "b-c", "bug 12"),
    ]
    path.write_text("tasks-lifecycle\n")
    with pytest.raises(ValueError, match="needs a reason"):
        runner.load_expected(path)
    # The real file parses, and lists nothing: every scenario we run passes (tasks included).
    assert runner.load_expected(runner.HERE / "expected-failures.txt") == []


def test_result_directories_name_their_scenario() -> None:
    assert runner.scenario_of("server-server-stateless-2026-11-30T06-13-27-684Z") == (
        "server-stateless"
    )
    assert runner.scenario_of("server-tools-list-2026-01-02T03-04-05-006Z") == "tools-list"
    assert runner.scenario_of("sep-2322-client-request-state-2026-01-02T03-04-05-006Z") == (
        "sep-2322-client-request-state"
    )
    assert runner.scenario_of("server-tools-list") is None


def test_failures_are_expected_only_when_listed() -> None:
    expected = [Expected("s", "c1", "known"), Expected("t", None, "all of t")]
    checks = [check("c1", "FAILURE"), check("c2", "FAILURE", "boom"), check("c3", "SUCCESS")]
    got = judge_scenario("s", checks, expected)
    assert got.failures == [("c2", "boom")]
    assert got.expected == ["c1"]
    assert got.counts == Counter({"FAILURE": 2, "SUCCESS": 1})
    assert judge_scenario("t", checks, expected).failures == []


def test_warnings_fail_mrtr_scenarios_and_strict_legs_only() -> None:
    warned = [check("w", "WARNING", "should"), check("ok", "SUCCESS")]
    mrtr = judge_scenario(TAMPERED, warned, [])
    other = judge_scenario("tools-list", warned, [])
    lax = judge_leg("2026", 1.0, [], {s.name: s for s in (mrtr, other)}, [], strict=False)
    assert lax.problems == [f"{TAMPERED}: WARNING w: should"]
    strict = judge_leg("shim", 1.0, [], {"tools-list": other}, [], strict=True)
    assert strict.problems == ["tools-list: WARNING w: should"]


def test_exit_codes_missing_results_and_failures() -> None:
    passed = judge_scenario("a", [check("x", "SUCCESS")], [])
    xfailed = judge_scenario("b", [check("x", "FAILURE")], [Expected("b", None, "known")])
    failed = judge_scenario("c", [check("x", "FAILURE", "bad")], [])
    scenarios = {s.name: s for s in (passed, xfailed, failed)}
    leg = judge_leg(
        "l", 1.0, [("a", 0), ("b", 1), ("c", 1)], scenarios, ["a", "b", "c"], strict=True
    )
    assert leg.problems == ["c: FAILURE x: bad"]  # b's exit is explained by its listed failure
    crashed = judge_leg("l", 1.0, [("a", 1)], {"a": passed}, ["a", "z"], strict=True)
    assert crashed.problems == ["no results for z", "harness exited 1 (a)"]
    required = judge_leg("r", 1.0, [("--requirements V", 1)], {"b": xfailed}, [], strict=False)
    assert required.problems == ["harness exited 1 (--requirements V)"]
    assert not required.ok


def test_stale_expectations_are_reported() -> None:
    expected = [
        Expected("b", None, "known"),
        Expected("a", "x", "was a bug"),
        Expected("z", None, ""),
    ]
    legs = [
        judge_leg(
            "l",
            1.0,
            [],
            {
                "a": judge_scenario("a", [check("x", "SUCCESS")], expected),
                "b": judge_scenario("b", [check("y", "FAILURE")], expected),
            },
            [],
            strict=False,
        )
    ]
    assert runner.stale_expectations(legs, expected) == [
        "a/x is listed in expected-failures.txt but did not fail"
    ]  # z did not run: nothing to say


def test_summary_shows_counts_problems_and_skips() -> None:
    leg = judge_leg(
        "mrtr",
        2.5,
        [],
        {TAMPERED: judge_scenario(TAMPERED, [check("c", "FAILURE", "m")], [])},
        [],
        strict=True,
    )
    skipped = runner.LegResult("client", 0.0, {}, [], "client.py not present")
    lines = runner.summary_lines([leg, skipped], [])
    assert lines[2].split() == [
        "mrtr",
        "1",
        "0",
        "1",
        "0",
        "0",
        "0",
        "0",
        "2.5s",
        "FAILED",
        "(1",
        "problem(s))",
    ]
    assert "skipped: client.py not present" in lines[3]
    assert f"  mrtr: {TAMPERED}: FAILURE c: m" in lines
    assert lines[-1] == "conformance: FAILED"
    data = runner.summary_json([leg, skipped], [])
    assert data["ok"] is False
    assert json.loads(json.dumps(data))["legs"][0]["scenarios"][TAMPERED]["failures"] == [
        ["c", "m"]
    ]


# --- live: the runner against real servers ----------------------------------------------------


def run_runner(tmp_path: Path, server: str, scenario: str) -> tuple[int, dict[str, Any], str]:
    summary = tmp_path / "summary.json"
    done = subprocess.run(
        [
            sys.executable,
            str(runner.HERE / "runner.py"),
            "--server",
            server,
            "--scenario",
            scenario,
            "--out",
            str(tmp_path / "results"),
            "--summary-json",
            str(summary),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.returncode, json.loads(summary.read_text()), done.stdout


@pytest.mark.conformance
@live
def test_negative_control_broken_server_fails_tampered_state(tmp_path: Path) -> None:
    """The runner reports a server that accepts a tampered requestState."""
    broken = f"{sys.executable} tests/conformance/broken_server.py --port {{port}}"
    code, summary, stdout = run_runner(tmp_path, broken, TAMPERED)
    assert code == 1, stdout
    assert summary["ok"] is False
    (leg,) = summary["legs"]
    failures = leg["scenarios"][TAMPERED]["failures"]
    assert [f[0] for f in failures] == ["sep-2322-reject-tampered-state"]
    assert f"{TAMPERED}: FAILURE sep-2322-reject-tampered-state" in stdout
    assert stdout.rstrip().endswith("conformance: FAILED")


@pytest.mark.conformance
@live
def test_positive_twin_real_server_passes_tampered_state(tmp_path: Path) -> None:
    """The same run against the real example server passes: only the break differs."""
    code, summary, stdout = run_runner(tmp_path, runner.DEFAULT_SERVER, TAMPERED)
    assert code == 0, stdout
    (leg,) = summary["legs"]
    assert leg["scenarios"][TAMPERED]["counts"] == {"SUCCESS": 2}
    assert stdout.rstrip().endswith("conformance: passed")
