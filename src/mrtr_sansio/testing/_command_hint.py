"""What ``mrtr-check`` says when the ``testing`` extra is missing: one line, no traceback.

The console script imports :mod:`mrtr_sansio.testing` before its ``main()`` can run, so the
package asks this module (which prints, hence apart from the IO-free rest) first.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mrtr_sansio._extras import raise_missing_extra

__all__ = ["exit_if_the_command"]


def exit_if_the_command(exc: ModuleNotFoundError) -> None:
    """When this process is the ``mrtr-check`` script, print the install hint for ``exc`` on
    stderr and exit 2; otherwise return (the importer raises as usual)."""
    if not Path(sys.argv[0]).name.startswith("mrtr-check"):
        return
    try:
        raise_missing_extra(exc, "mrtr-check", "testing")
    except ModuleNotFoundError as missing:
        print(missing, file=sys.stderr)
        raise SystemExit(2) from None
