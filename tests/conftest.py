"""Shared pytest configuration: ``tests/`` modules (``wire``) importable from every subfolder,
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
