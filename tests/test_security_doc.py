"""The security page states the real defaults of every limit and timeout it lists."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import attrs
import pytest

import mrtr_sansio as m
from mrtr_sansio.adapters.serve import ServeOptions

PAGE = Path(__file__).resolve().parents[1] / "docs" / "security.md"
OWNERS: dict[str, Any] = {
    "ServerConfig": m.ServerConfig(),
    "Limits": m.Limits(),
    "ServeOptions": ServeOptions(),
}
UNITS = {"MiB": 1024 * 1024, "KiB": 1024}


def _rows() -> list[tuple[str, str, str]]:
    text = PAGE.read_text(encoding="utf-8")
    return re.findall(r"^\| `(\w+)\.(\w+)` \| ([^|]+?) \|", text, re.MULTILINE)


def _number(text: str) -> float:
    value, *unit = text.split(" (", maxsplit=1)[0].split()
    return float(value) * (UNITS[unit[0]] if unit and unit[0] in UNITS else 1)


def test_the_page_lists_every_session_message_and_connection_bound() -> None:
    listed = {(owner, field) for owner, field, _ in _rows()}
    for name in ("max_sessions", "max_sessions_per_principal", "session_idle_timeout"):
        assert ("ServerConfig", name) in listed
    for owner in ("Limits", "ServeOptions"):  # every numeric bound of these two
        numeric = {
            f.name for f in attrs.fields(type(OWNERS[owner])) if isinstance(f.default, (int, float))
        }
        assert numeric <= {field for o, field in listed if o == owner}, owner


@pytest.mark.parametrize(("owner", "field", "stated"), _rows())
def test_each_stated_default_is_the_code_s(owner: str, field: str, stated: str) -> None:
    assert _number(stated) == getattr(OWNERS[owner], field)


def test_the_page_lists_every_request_check_before_the_limits() -> None:
    page = PAGE.read_text(encoding="utf-8")
    checks = page.index("## What every request is checked for")
    assert page.index("## Threat model") < checks < page.index("## Limits and timeouts")
    for heading in ("### At the HTTP layer", "### Choosing the connection", "### In the core"):
        assert checks < page.index(heading) < page.index("## Limits and timeouts")
