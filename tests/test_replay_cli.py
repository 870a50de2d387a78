"""``mrtr-check``: the console script is installed, its ``replay`` command checks the example
servers' handlers and reports a bad one, and its ``server`` command is the former example."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

from mrtr_sansio.testing import cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = str(ROOT / "examples")


def test_the_entry_point_is_in_the_installed_metadata() -> None:
    (found,) = importlib.metadata.entry_points(group="console_scripts", name="mrtr-check")
    assert found.value == "mrtr_sansio.testing.cli:main"
    assert found.load() is cli.main
    dist = found.dist
    assert dist is not None
    assert dist.metadata["Name"] == "mrtr-sansio"


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
