"""Which extra installs which optional import, and the error that tells a user to install it.

An optional part (an adapter, the testing package) imports its third-party modules at the top;
without them Python would say only ``No module named 'anyio'``. The part catches that and
calls :func:`raise_missing_extra`, which names the extra to install instead.
"""

from __future__ import annotations

from typing import NoReturn

__all__ = ["EXTRAS", "raise_missing_extra"]

#: The top-level modules each extra of the distribution installs (``pyproject.toml``'s
#: ``[project.optional-dependencies]``; ``tests/test_packaging.py`` holds the two together).
EXTRAS: dict[str, frozenset[str]] = {
    "fast": frozenset({"orjson"}),
    "crypto": frozenset({"cryptography"}),
    "anyio": frozenset({"anyio"}),
    "trio": frozenset({"trio", "anyio"}),
    "http": frozenset({"httpx", "anyio"}),
    "server": frozenset({"uvicorn", "anyio"}),
    "tasks-redis": frozenset({"redis"}),
    "tasks-docket": frozenset({"docket", "anyio", "redis"}),
    "testing": frozenset({"hypothesis"}),
    "otel": frozenset({"opentelemetry"}),
}


def raise_missing_extra(error: ImportError, part: str, extra: str) -> NoReturn:
    """Raise ``error`` again as "``part`` needs X: pip install 'mrtr-sansio[extra]'" when the
    missing module is one ``extra`` installs; any other import error is raised unchanged, so a
    broken installation is not mistaken for a missing extra."""
    missing = (error.name or "").partition(".")[0]
    if missing not in EXTRAS[extra]:
        raise error
    raise ModuleNotFoundError(
        f"{part} needs {missing}: pip install 'mrtr-sansio[{extra}]'", name=error.name
    ) from error
