"""Event values: what their constructors promise."""

from __future__ import annotations

import inspect
from typing import Any

import attrs
import pytest

from mrtr_sansio import RequestReceived
from mrtr_sansio.sealing import OpenedState, StateBinding


@pytest.mark.parametrize(
    ("cls", "a_value"), [(RequestReceived, False), (StateBinding, True), (OpenedState, True)]
)
def test_hand_written_init_follows_the_fields(cls: Any, a_value: bool) -> None:
    """The hand-written ``__init__`` of RequestReceived (docs/performance.md), StateBinding and
    OpenedState (bench/README.md) takes exactly the attrs fields, in order, with the same
    defaults, and sets each one; a sealing value (not an event) stays frozen and compares by
    its fields."""
    fields = attrs.fields(cls)
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert [p.name for p in params] == [f.name for f in fields]
    assert [p.default for p in params] == [
        inspect.Parameter.empty if f.default is attrs.NOTHING else f.default for f in fields
    ]
    values: dict[str, Any] = {f.name: object() for f in fields}
    value = cls(**values)
    assert all(getattr(value, name) is v for name, v in values.items())
    if a_value:
        assert value == cls(**values)
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            setattr(value, fields[0].name, None)
