"""Shared test configuration: hypothesis profiles.

``pytest --hypothesis-profile=thorough`` runs every property with many more examples (for a
nightly or a pre-release run); the default profile keeps the suite fast.
"""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("thorough", max_examples=3000)
