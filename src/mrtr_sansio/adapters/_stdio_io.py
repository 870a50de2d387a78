"""The blocking stdio adapter's IO on file descriptors, server and client alike: waiting for
input while keeping a driver's timer, and writing all of a message (``select``: POSIX)."""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable
from typing import Any

from ._common import READ_SIZE
from ._loop import TimedDriver

__all__ = ["CAN_SELECT", "can_select", "readable", "wait_input", "write_all"]

#: Whether waiting with a timeout is possible (``select`` on any descriptor); elsewhere
#: reads simply block.
CAN_SELECT = os.name == "posix"


def can_select() -> bool:
    """:data:`CAN_SELECT`, read when asked (so that one flag rules every wait)."""
    return CAN_SELECT


def readable(fd: int, timeout: float | None) -> bool:
    """Wait up to ``timeout`` seconds (None: forever) for ``fd`` to have input."""
    if not can_select():
        return True
    return bool(select.select([fd], [], [], timeout)[0])


def wait_input(
    fd: int, driver: TimedDriver[Any], flush: Callable[[], None], timeout: float | None
) -> None:
    """Wait for input on ``fd`` (at most ``timeout`` seconds; None: no limit) and feed it to
    ``driver``, firing the driver's timer whenever it falls due meanwhile; ``flush`` writes
    what each step queued."""
    end = None if timeout is None else time.monotonic() + timeout
    while True:
        driver.refresh_timer()
        due = driver.timer_delay()
        left = None if end is None else max(0.0, end - time.monotonic())
        limit = due if left is None else (left if due is None else min(due, left))
        if readable(fd, limit):
            try:
                data = os.read(fd, READ_SIZE)
            except OSError:
                data = b""
            driver.receive(data)
            flush()
            return
        assert limit is not None  # select only times out with a timeout
        if due is not None and due <= limit:
            driver.fire_timer()
            flush()
        if left is not None and left <= limit:
            return


def write_all(fd: int, data: bytes) -> bool:
    """Write all of ``data`` to ``fd``, blocking; False when the peer is gone (broken pipe)."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        return False
    return True
