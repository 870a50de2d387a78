"""Event values: what their constructors promise."""

from __future__ import annotations

import inspect
from typing import Any

import attrs
import pytest

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


def test_sealing_values_init_follow_their_fields() -> None:
    """StateBinding's and UnsealedState's hand-written ``__init__`` (bench/README.md) take
    exactly the attrs fields, in order, with the same defaults, and set each one."""
    from mrtr_sansio.sealing import StateBinding, UnsealedState

    for cls in (StateBinding, UnsealedState):
        fields = attrs.fields(cls)
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
        assert [p.name for p in params] == [f.name for f in fields]
        assert [p.default for p in params] == [
            inspect.Parameter.empty if f.default is attrs.NOTHING else f.default for f in fields
        ]
        values: dict[str, Any] = {f.name: object() for f in fields}
        value = cls(**values)
        assert all(getattr(value, name) is v for name, v in values.items())
        assert value == cls(**values)
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            setattr(value, fields[0].name, None)
