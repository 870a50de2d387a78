"""Shared pytest configuration: ``tests/`` modules (``helpers``) importable from every subfolder,
and hypothesis profiles.

``pytest --hypothesis-profile=thorough`` runs every property with many more examples (for a
nightly or a pre-release run); the default profile keeps the suite fast.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import settings

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

settings.register_profile("thorough", max_examples=3000)


def pytest_report_header() -> str:
    """Say whether the official schemas and spec examples were found: without them the tests
    that validate our wire messages against the schemas skip, and a run must say so."""
    from helpers import spec_dir

    found = spec_dir()
    if found is None:
        return (
            "official MCP spec: NOT FOUND - schema validation and the spec-example tests skip "
            "(MRTR_SPEC_DIR names a folder without schema/2026-07-28/schema.json; unset, the "
            "copy in tests/spec is used)"
        )
    return f"official MCP spec: {found} (wire messages are schema-validated)"
