"""How the durable stores tell subscribers that a task record was written
(:class:`~mrtr_sansio.tasks.WatchableTaskStore`): one background thread per store, running only
while someone watches, that hands each change to every subscriber.

The SQLite store's thread reads the file's change feed (a sequence number stamped on each
written row) every ``interval`` seconds: one indexed query, whichever process wrote. The Redis
store's thread listens on a pub/sub channel the write scripts publish each task id on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from mrtr_sansio.tasks import TaskChanged

__all__ = ["ChangeFeed"]

log = logging.getLogger("mrtr_sansio.adapters.stores")


class ChangeFeed:
    """Subscribers of one store, and the thread that feeds them while there are any.

    ``follow(stopping, tell)`` is the thread's body: it returns when ``stopping`` is set, and
    calls ``tell(task_id)`` for each change it sees (``tell(None)``: changes may have been
    missed).
    """

    def __init__(self, name: str, follow: Callable[[threading.Event, TaskChanged], None]) -> None:
        self._name = name
        self._follow = follow
        self._lock = threading.Lock()
        self._subscribers: dict[int, TaskChanged] = {}
        self._next = 0
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    def watch(self, changed: TaskChanged) -> Callable[[], None]:
        """Add a subscriber (the thread starts with the first); returns its stop function."""
        with self._lock:
            key = self._next
            self._next += 1
            self._subscribers[key] = changed
            if self._thread is None:
                self._stopping = threading.Event()
                self._thread = threading.Thread(
                    target=self._body, args=(self._stopping,), name=self._name, daemon=True
                )
                self._thread.start()

        def stop() -> None:
            with self._lock:
                self._subscribers.pop(key, None)
                if self._subscribers or self._thread is None:
                    return
                self._stopping.set()  # the thread ends at its next wake
                self._thread = None

        return stop

    def tell(self, task_id: str | None) -> None:
        """Hand a change to every subscriber (from any thread)."""
        with self._lock:
            subscribers = list(self._subscribers.values())
        for changed in subscribers:
            try:
                changed(task_id)
            except Exception:  # one subscriber's bug must not stop the others
                log.exception("%s: a change subscriber failed", self._name)

    def _body(self, stopping: threading.Event) -> None:
        while not stopping.is_set():
            try:
                self._follow(stopping, self.tell)
            except Exception as exc:  # the store is down: say so, retry, resync everyone
                log.warning("%s: following changes failed (%s); retrying", self._name, exc)
                if stopping.wait(1.0):
                    return
                self.tell(None)
