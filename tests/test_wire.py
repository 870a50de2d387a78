"""The schema checker itself: it finds the official schemas and it can fail."""

from __future__ import annotations

import pytest

from helpers import (
    SCHEMA_SKIP_REASON,
    VENDORED_SPEC,
    check,
    check_message,
    spec_dir,
)
from mrtr_sansio import Era

needs_schema = pytest.mark.skipif(spec_dir() is None, reason=SCHEMA_SKIP_REASON)


def test_the_vendored_schemas_are_used_unless_another_folder_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MRTR_SPEC_DIR", raising=False)
    assert spec_dir() == VENDORED_SPEC
    for part in ("schema/2026-07-28", "schema/2025-11-25", "ext-tasks"):
        assert (VENDORED_SPEC / part / "schema.json").is_file(), part
    assert len(list((VENDORED_SPEC / "examples").glob("*.json"))) >= 50
    monkeypatch.setenv("MRTR_SPEC_DIR", str(VENDORED_SPEC / "examples"))  # no schema/ in it
    assert spec_dir() is None


@needs_schema
def test_rejects_result_without_result_type_on_modern() -> None:
    with pytest.raises(AssertionError):
        check_message({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}, Era.MODERN)


@needs_schema
def test_rejects_input_required_without_fields() -> None:
    with pytest.raises(AssertionError):
        check(
            "2026-07-28",
            "InputRequiredResult",
            {"resultType": "input_required", "x": 1} | {"requestState": 5},
        )


@needs_schema
def test_rejects_missing_capability_error_without_data() -> None:
    with pytest.raises(AssertionError):
        check_message(
            {"jsonrpc": "2.0", "id": 1, "error": {"code": -32021, "message": "x"}}, Era.MODERN
        )


@needs_schema
def test_accepts_spec_example_error() -> None:
    check_message(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {
                "code": -32022,
                "message": "Unsupported protocol version",
                "data": {"supported": ["2026-07-28"], "requested": "1900-01-01"},
            },
        },
        Era.MODERN,
    )


@needs_schema
def test_legacy_result_must_not_carry_result_type() -> None:
    with pytest.raises(AssertionError):
        check_message(
            {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "resultType": "complete"}},
            Era.LEGACY,
        )


@needs_schema
def test_standard_errors_are_checked_on_the_error_member() -> None:
    check_message(
        {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}}, Era.MODERN
    )
    with pytest.raises(AssertionError):
        check_message({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602}}, Era.MODERN)
