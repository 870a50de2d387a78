"""How often a task run's lease is renewed (every server adapter), and the lease kept from a
thread for the blocking stdio server (no event loop there; the async adapters renew in
:class:`~mrtr_sansio.adapters._tasks.TaskRunner`).

The thread has a connection of its own, so it shares nothing with the serving thread but the
task store (whose calls are safe from any thread); it renews every third of
``TaskSettings.lease_seconds`` whatever the handler does (even one deaf to everything, in
``time.sleep``), and calls ``on_stop`` (from the thread) once the task is no longer running.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from mrtr_sansio import RequestReceived, ServerConfig, ServerConnection

__all__ = ["SERVER_STOPPED", "LeaseThread", "renewal_interval"]

#: The -32603 message of a task whose run the server's shutdown (or end of input) ended.
SERVER_STOPPED = "The server stopped before the task finished"


def renewal_interval(config: ServerConfig) -> float | None:
    """Seconds between two renewals of a task run's lease, in every server adapter: a third of
    ``TaskSettings.lease_seconds``, so that two renewals may fail before the lease runs out;
    None without leases."""
    settings = config.tasks
    lease = None if settings is None else settings.lease_seconds
    return None if lease is None else lease / 3


class LeaseThread:
    """Renew the lease of the task ``task_id`` while a ``with`` :meth:`running` body runs."""

    def __init__(self, config: ServerConfig, task_id: str, on_stop: Callable[[], None]) -> None:
        #: Seconds between renewals (None: no leases, nothing to renew).
        self.every = renewal_interval(config)
        self._config = config
        self._task_id = task_id
        self._done = threading.Event()
        self._on_stop = on_stop

    @classmethod
    def of(
        cls, config: ServerConfig, request: RequestReceived, on_stop: Callable[[], None]
    ) -> LeaseThread | None:
        """The lease keeper of ``request`` when it is a task's run, else None."""
        return None if request.task_id is None else cls(config, request.task_id, on_stop)

    @contextlib.contextmanager
    def running(self) -> Iterator[LeaseThread]:
        """Renew while the body runs (nothing to do without leases)."""
        if self.every is None:
            yield self
            return
        conn = ServerConnection(self._config)
        thread = threading.Thread(
            target=self._renew, args=(conn, self.every), name=f"lease {self._task_id}"
        )
        thread.daemon = True
        thread.start()
        try:
            yield self
        finally:
            self._done.set()
            thread.join()

    def _renew(self, conn: ServerConnection, every: float) -> None:
        # A store fault is no reason to stop: renew_task says True, and the next one retries.
        while not self._done.wait(every):
            if not conn.renew_task(self._task_id):  # cancelled, failed or gone
                self._on_stop()
                return
