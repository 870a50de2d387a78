"""The attrs validators the configs and settings share, each message naming its field."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["positive", "positive_number"]


def positive(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """An ``int`` of at least 1 (a bool is not one)."""
    if type(value) is not int or value < 1:
        raise ValueError(f"{attribute.name}: must be a positive integer, got {value!r}")


def positive_number(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """An ``int`` or ``float`` above 0 (a bool is not one)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise ValueError(f"{attribute.name}: must be a positive number, got {value!r}")
