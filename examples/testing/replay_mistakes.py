"""What the replay checker says about each handler of ``examples/replay_handlers.py``.

    python examples/testing/replay_mistakes.py                 # every handler
    python examples/testing/replay_mistakes.py clock_key good  # some of them

Each handler serves the tool ``book_vm``; the checker drives it with ``{"size": "small"}``
(the options some mistakes need, such as a state limit, are given below). The same reports come
from ``mrtr-check replay --path examples replay_handlers:NAME --tool 'book_vm={"size":"small"}'``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mrtr_sansio.testing import ReplayViolationError, check_replay, tool

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import replay_handlers

#: Handler name -> the check_replay options its mistake needs to show.
OPTIONS: dict[str, dict[str, Any]] = {
    "good": {},
    "random_question": {},
    "clock_key": {},
    "endless": {"max_rounds": 3},
    "wrong_key": {},
    "effect_first": {},
    "mail_first": {"watch": ["replay_handlers:send_mail"]},
    "round_key": {},
    "growing_state": {"max_state_bytes": 2000},
    "decline_crash": {},
    "decline_again": {},
}


def report(name: str) -> str:
    """The checker's report on one handler, as ``mrtr-check replay`` prints it."""
    handler = getattr(replay_handlers, name)
    try:
        return check_replay(handler, tool("book_vm", {"size": "small"}), **OPTIONS[name]).text()
    except ReplayViolationError as error:
        return str(error)


def main(argv: list[str]) -> int:
    for name in argv or list(OPTIONS):
        if len(argv) != 1:
            print(f"== {name}")
        print(report(name))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
