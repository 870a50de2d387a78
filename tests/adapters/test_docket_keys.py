"""``mrtr-worker --state-keys-file``: the worker's task store gets the fronts' ring as its
records' encryption (reread on SIGHUP through the same function), and a file that cannot be
used keeps the ring it had."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

pytest.importorskip("docket", reason="the Docket runner needs the tasks-docket extra")
pytest.importorskip("cryptography")

from mrtr_sansio import ServerConfig
from mrtr_sansio.adapters._docket_cli import encrypt_records
from mrtr_sansio.adapters.stores import SqliteTaskStore
from mrtr_sansio.sealing import RecordEncryption
from mrtr_sansio.tasks import TaskSettings, TaskStoreError

K1, K2 = b"\x01" * 32, b"\x02" * 32


def test_the_store_gets_the_ring_and_keeps_it_on_a_bad_file(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    config = ServerConfig(tasks=TaskSettings(store=store))
    ring = tmp_path / "ring"
    ring.write_text(base64.b64encode(K1).decode() + "\n")
    try:
        assert encrypt_records(config, str(ring))
        first = store.encryption
        assert isinstance(first, RecordEncryption)
        sealed = first.encrypt("t" * 32, "record", b"{}")
        ring.write_text(base64.b64encode(K2).decode() + "\n")  # rotated, then SIGHUP
        assert encrypt_records(config, str(ring))
        assert store.encryption is not first
        second = store.encryption
        assert second is not None
        with pytest.raises(TaskStoreError):  # K1 is no longer in the store's ring
            second.decrypt("t" * 32, "record", sealed)
        ring.write_text("not base64!\n")
        assert not encrypt_records(config, str(ring))
        assert store.encryption is second
    finally:
        store.close()
