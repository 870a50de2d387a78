"""The MRTR wire's names, written once: the ``resultType`` values and the retry fields.

:class:`ResultType` names the values; the plain-``str`` constants beside it are what the
per-exchange code compares and writes, because a module global costs less than an enum member
lookup there (``docs/performance.md``). ``tests/test_facts_once.py`` fails if any other module
spells one of these strings.
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = ["COMPLETE", "INPUT_REQUIRED", "RETRY_FIELDS", "TASK", "ResultType"]


class ResultType(str, enum.Enum):
    """What a modern result is (``resultType``): final, asking for input, or a task."""

    COMPLETE = "complete"
    INPUT_REQUIRED = "input_required"
    #: The tasks extension's ``CreateTaskResult`` (SEP-2663).
    TASK = "task"


COMPLETE: Final[str] = ResultType.COMPLETE.value
INPUT_REQUIRED: Final[str] = ResultType.INPUT_REQUIRED.value
TASK: Final[str] = ResultType.TASK.value
#: The params a client adds when it retries an ``input_required`` request: the answers and the
#: echoed state. Every part that strips, manages or copies them reads this tuple.
RETRY_FIELDS: Final = ("inputResponses", "requestState")
