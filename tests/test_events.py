"""Event values: what their constructors promise."""

from __future__ import annotations

import inspect
from typing import Any

import attrs

from mrtr_sansio import RequestReceived


def test_request_received_init_follows_its_fields() -> None:
    """RequestReceived's hand-written ``__init__`` (docs/performance.md) takes exactly the attrs
    fields, in order, with the same defaults, and sets each one."""
    fields = attrs.fields(RequestReceived)
    params = list(inspect.signature(RequestReceived.__init__).parameters.values())[1:]
    assert [p.name for p in params] == [f.name for f in fields]
    assert [p.default for p in params] == [
        inspect.Parameter.empty if f.default is attrs.NOTHING else f.default for f in fields
    ]
    values: dict[str, Any] = {f.name: object() for f in fields}
    event = RequestReceived(**values)
    assert all(getattr(event, name) is value for name, value in values.items())
