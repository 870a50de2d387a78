"""How the durable stores tell subscribers that a task record was written
(:class:`~mrtr_sansio.tasks.WatchableTaskStore`): one background thread per store, running only
while someone watches, that hands each change to every subscriber.

The SQLite store's thread reads the file's change feed (a sequence number stamped on each
written row) every ``interval`` seconds: one indexed query, whichever process wrote. The Redis
store's thread listens on a pub/sub channel the write scripts publish each task id on.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable

from mrtr_sansio.tasks import TaskChanged

__all__ = ["ChangeFeed", "Follower"]

log = logging.getLogger("mrtr_sansio.adapters.stores")


class Follower:
    """One open follow of a store's changes: :meth:`poll` waits a little and returns the ids
    written meanwhile; :meth:`close` lets go of what it holds."""

    def poll(self) -> list[str]:  # pragma: no cover - an interface
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - an interface
        raise NotImplementedError


class ChangeFeed:
    """Subscribers of one store, and the thread that feeds them while there are any.

    ``open_follower()`` starts following (the first :meth:`watch` calls it in its own thread,
    so that no write after ``watch`` returns is missed); the thread then polls it. When a poll
    fails (the store is down) the thread says so, opens a new follower a second later and
    tells every subscriber None (writes meanwhile may have been missed).
    """

    def __init__(self, name: str, open_follower: Callable[[], Follower]) -> None:
        self._name = name
        self._open = open_follower
        self._lock = threading.Lock()
        self._subscribers: dict[int, TaskChanged] = {}
        self._next = 0
        self._stopping: threading.Event | None = None

    def watch(self, changed: TaskChanged) -> Callable[[], None]:
        """Add a subscriber (the first starts following: this call does IO); returns its
        stop function (no IO: the thread ends at its next poll)."""
        with self._lock:
            key = self._next
            self._next += 1
            self._subscribers[key] = changed
            if self._stopping is None:
                follower = self._open()
                stopping = self._stopping = threading.Event()
                threading.Thread(
                    target=self._body, args=(stopping, follower), name=self._name, daemon=True
                ).start()

        def stop() -> None:
            with self._lock:
                self._subscribers.pop(key, None)
                if not self._subscribers and self._stopping is not None:
                    self._stopping.set()
                    self._stopping = None

        return stop

    def close(self) -> None:
        """Stop following (the store is being closed): every subscriber is dropped."""
        with self._lock:
            self._subscribers.clear()
            if self._stopping is not None:
                self._stopping.set()
                self._stopping = None

    def tell(self, task_id: str | None) -> None:
        """Hand a change to every subscriber (from any thread)."""
        with self._lock:
            subscribers = list(self._subscribers.values())
        for changed in subscribers:
            try:
                changed(task_id)
            except Exception:  # one subscriber's bug must not stop the others
                log.exception("%s: a change subscriber failed", self._name)

    def _body(self, stopping: threading.Event, follower: Follower | None) -> None:
        try:
            while not stopping.is_set():
                try:
                    if follower is None:
                        follower = self._open()
                        self.tell(None)
                    for task_id in follower.poll():
                        self.tell(task_id)
                except Exception as exc:  # the store is down: say so, retry, resync everyone
                    log.warning("%s: following changes failed (%s); retrying", self._name, exc)
                    if follower is not None:
                        with contextlib.suppress(Exception):
                            follower.close()
                        follower = None
                    stopping.wait(1.0)
        finally:
            if follower is not None:
                with contextlib.suppress(Exception):
                    follower.close()
