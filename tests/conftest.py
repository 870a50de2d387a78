"""Shared pytest configuration: ``tests/`` modules (``helpers``) importable from every subfolder,
hypothesis profiles, and the fixtures several test folders share.

``pytest --hypothesis-profile=thorough`` runs every property with many more examples (for a
nightly or a pre-release run); the default profile keeps the suite fast.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from scale import cluster

from mrtr_sansio import ServerConfig, ServerConnection

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


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A redis-server of this test's own, which the test may pause (SIGSTOP); resumed and
    stopped after it."""
    if cluster.find_redis() is None:
        pytest.skip(cluster.REDIS_MISSING)
    url, proc = cluster.start_redis(tmp_path)
    yield url, proc
    proc.send_signal(signal.SIGCONT)
    cluster.stop(proc)


@pytest.fixture
def server_config() -> ServerConfig:
    """The configuration of the ``conn`` fixture's server (the defaults); a test module that
    wants another overrides this fixture (``params=`` to run its tests under several)."""
    return ServerConfig()


@pytest.fixture
def conn(server_config: ServerConfig) -> ServerConnection:
    """One fresh server connection, configured by :func:`server_config`."""
    return ServerConnection(server_config)
