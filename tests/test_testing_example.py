"""examples/testing/check_server.py runs, in process and against an HTTP endpoint, and finds a
seeded bug; the bound model also works as a unittest TestCase."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import settings

from helpers import (
    MODEL_OPERATIONS,
    correct_server,
    model_config,
    model_handler,
    plain_state_handler,
)
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.testing import ModelConfig, ServerModel
from test_testing_http import Served

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "testing" / "check_server.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_server_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_example_checks_the_fixtures_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert load().main(["--examples", "3", "--steps", "8", "--bound-state"]) == 0
    assert "OK in" in capsys.readouterr().out


def test_example_checks_an_http_endpoint(capsys: pytest.CaptureFixture[str]) -> None:
    served = Served(McpHttpApp(model_handler, model_config(), principal=lambda scope: "alice"))
    try:
        code = load().main(
            [
                served.url,
                "--examples",
                "3",
                "--steps",
                "8",
                "--tool",
                "greet:mrtr",
                "--tool",
                'echo:plain={"text": "hi"}',
                "--prompt",
                "intro",
                "--resource",
                "file:///secret.txt:mrtr",
                "--header",
                "Authorization: Bearer x",
            ]
        )
    finally:
        served.close()
    assert code == 0, capsys.readouterr().out


def test_example_reports_a_broken_server(capsys: pytest.CaptureFixture[str]) -> None:
    served = Served(McpHttpApp(plain_state_handler, model_config(sealed=False)))
    try:
        code = load().main([served.url, "--examples", "20", "--tool", "greet", "--tool", "pause"])
    finally:
        served.close()
    out = capsys.readouterr().out
    assert code == 1
    assert "[tampered-state]" in out


def test_operation_specs() -> None:
    example = load()
    op = example._operation("tool", 'book:mrtr={"city": "Lisbon"}')
    assert (op.method, op.target, op.arguments, op.mrtr) == (
        "tools/call",
        "book",
        {"city": "Lisbon"},
        True,
    )
    assert example._operation("prompt", "p:plain").mrtr is False
    assert example._operation("resource", "file:///a").mrtr is None


# The README's unittest form: collected and run by pytest like any TestCase.
BoundTestCase = ServerModel.against(correct_server(), ModelConfig(MODEL_OPERATIONS)).TestCase
BoundTestCase.settings = settings(max_examples=3, stateful_step_count=5, deadline=None)
