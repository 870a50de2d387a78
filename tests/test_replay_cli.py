"""``mrtr-check``: the console script is installed, its ``replay`` command checks the example
servers' handlers and reports a bad one, and its ``server`` command is the former example."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from helpers import correct_server
from mrtr_sansio.testing import Server, SpecViolationError, cli, prompt, tool

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = str(ROOT / "examples")


def test_the_entry_point_is_in_the_installed_metadata() -> None:
    (found,) = importlib.metadata.entry_points(group="console_scripts", name="mrtr-check")
    assert found.value == "mrtr_sansio.testing.cli:main"
    assert found.load() is cli.main
    dist = found.dist
    assert dist is not None
    assert dist.metadata["Name"] == "mrtr-sansio"


def test_the_command_without_the_testing_extra_says_so_in_one_line() -> None:
    """The installed script, run where hypothesis cannot be imported: one line naming the
    extra on stderr, status 2, no traceback."""
    script = Path(sys.executable).with_name("mrtr-check")
    assert script.exists(), f"{script} is not installed (pip install -e '.[testing]')"
    code = (
        "import runpy, sys; sys.modules['hypothesis'] = None; "
        f"sys.argv = [{str(script)!r}, 'server', 'http://127.0.0.1:9/mcp']; "
        f"runpy.run_path({str(script)!r}, run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "mrtr-check needs hypothesis: pip install 'mrtr-sansio[testing]'\n"


def test_the_installed_command_runs() -> None:
    script = Path(sys.executable).with_name("mrtr-check")
    assert script.exists(), f"{script} is not installed (pip install -e '.[testing]')"
    args = ["replay", "--path", EXAMPLES, "replay_handlers:good", "--tool", 'book_vm={"size":"s"}']
    done = subprocess.run(
        [str(script), *args, "--examples", "5"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("OK: no replay problem in 1 operation (")
    bad = subprocess.run(
        [str(script), "replay", "--path", EXAMPLES, "replay_handlers:effect_first", "--tool", "b"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert bad.returncode == 1
    assert "[effect-before-ask] tools/call b, round 1, key 'name'" in bad.stdout


@pytest.mark.parametrize(
    ("path", "target", "extra"),
    [
        ("examples", "fixtures:Everything().handle", ["--config", "fixtures:server_config()"]),
        ("examples/asyncio", "echo_server:handler", []),
        ("examples/stdio", "echo_server:handler", []),
    ],
    ids=["fixtures", "asyncio-echo", "stdio-echo"],
)
def test_the_example_servers_handlers_pass(
    path: str, target: str, extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Each echo_server module is its own: forget the other one.
    sys.modules.pop("echo_server", None)
    code = cli.main(["replay", "--path", str(ROOT / path), target, *extra, "--examples", "3"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "FAILED" not in out
    assert out.splitlines()[-1].startswith("OK: no replay problem in ")


def test_discovery_lists_tools_prompts_and_resources(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        [
            *("replay", "--path", str(ROOT / "examples"), "fixtures:Everything().handle"),
            *("--config", "fixtures:server_config()", "--examples", "2"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    for line in (
        "ok  tools/call book_trip: ",
        "ok  prompts/get test_prompt_with_arguments: ",
        "ok  resources/read test://static-text: 1 flow, up to 1 round, no state",
    ):
        assert any(row.startswith(line) for row in out.splitlines()), line


def test_a_bad_handler_fails_with_its_report(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        [
            *("replay", "--path", EXAMPLES, "replay_handlers:growing_state", "--tool", "book_vm"),
            *("--tool", "again", "--max-state-bytes", "300", "--max-rounds", "3"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "\nFAILED tools/call book_vm\n[bounded-state] tools/call book_vm, round 1: " in out
    assert out.splitlines()[-1].startswith("FAILED: 2 of 2 operations broke a replay property")


def test_watch_and_unsealed_options(capsys: pytest.CaptureFixture[str]) -> None:
    watched = ["replay", "--path", EXAMPLES, "replay_handlers:mail_first", "--tool", "t"]
    assert cli.main([*watched, "--watch", "replay_handlers:send_mail"]) == 1
    assert "[effect-before-ask]" in capsys.readouterr().out
    good = ["replay", "--path", EXAMPLES, "replay_handlers:good", "--tool", "t"]
    assert cli.main(good) == 0
    assert cli.main([*good, "--unsealed"]) == 1
    assert "the server connection refused the answer" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["replay", "no_colon"], "handler no_colon: 'no_colon': expected package.module:name"),
        (["replay", "no_such_module_x:h"], "handler no_such_module_x:h: No module named"),
        (["replay", "replay_handlers:nope"], "replay_handlers:nope: 'replay_handlers:nope': nope"),
        (
            ["replay", "replay_handlers:good", "--config", "replay_handlers:OK_FORM"],
            "not a ServerConfig",
        ),
        (
            ["replay", "replay_handlers:good", "--watch", "replay_handlers:x"],
            "--watch replay_handlers:x",
        ),
        (["server", "--handler", "nowhere"], "--handler nowhere"),
    ],
)
def test_bad_targets_end_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main([argv[0], "--path", EXAMPLES, *argv[1:]])
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_a_handler_that_lists_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["replay", "--path", EXAMPLES, "replay_handlers:good"]) == 2
    assert "lists no tools, prompts or resources" in capsys.readouterr().out


def test_server_needs_a_url_or_a_handler(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["server"]) == 2
    assert "give a URL or --handler" in capsys.readouterr().err


def test_server_checks_a_handler_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["server", "--path", str(ROOT / "tests"), "--handler", "helpers:model_handler"]
    argv += ["--config", "helpers:model_config()", "--tool", "greet:mrtr", "--examples", "3"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("Checking helpers:model_handler, in process: 1 operations")


def two_bugs() -> Server:
    """A server of our own that breaks two rules: the plain tool ``echo`` asks for input
    (mrtr-operation), and ``prompts/get`` results, its first ``input_required`` included,
    carry no ``resultType`` (result-type). Each breaks on an operation's first call, so
    hypothesis meets both."""
    inner = correct_server()

    def broken(request: dict[str, Any]) -> Mapping[str, Any] | None:
        response = inner(request)
        if response is None or "result" not in response:
            return response
        if request["method"] == "tools/call":
            state = {"resultType": "input_required", "requestState": "again"}
            return {**response, "result": state}
        if request["method"] == "prompts/get":  # its first answer already breaks the rule
            response["result"].pop("resultType", None)
        return response

    return broken


def test_server_reports_each_of_several_failures(capsys: pytest.CaptureFixture[str]) -> None:
    # (this order, derandomized, finds both: hypothesis tries the first operation first)
    ops = [prompt("intro", mrtr=True), tool("echo", {"text": "hi"}, mrtr=False)]
    argv = ["server", "--examples", "30", "--steps", "6", "--no-tamper-check"]
    assert cli.main(argv, default_server=two_bugs, default_operations=ops) == 1
    out = capsys.readouterr().out
    assert "Traceback" not in out
    assert ": 2 distinct failures\n" in out
    reports = out.split("\n--- failure ")[1:]
    assert [r.split("\n", 1)[0] for r in reports] == ["1 of 2", "2 of 2"]
    rules = sorted(r.split("\n", 2)[1].split("]", 1)[0] for r in reports)
    assert rules == ["[mrtr-operation", "[result-type"]
    for report in reports:
        assert "\n  rule: " in report
        assert "\n  request:  " in report
        assert "\n  response: " in report


def test_only_groups_made_of_violations_are_reports() -> None:
    class GroupError(Exception):  # the shape of an exception group, on Python 3.10 too
        def __init__(self, *parts: BaseException) -> None:
            super().__init__("group")
            self.exceptions = parts

    one = SpecViolationError("jsonrpc", "no id")
    two = SpecViolationError("result-type", "no resultType")
    assert cli.violations(GroupError(one, GroupError(two))) == [one, two]
    assert cli.violations(one) == [one]
    assert cli.violations(GroupError(one, ValueError("bug"))) == []
    assert cli.violations(GroupError()) == []
    assert cli.violations(ValueError("bug")) == []
