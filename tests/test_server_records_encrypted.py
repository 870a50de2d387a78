"""The example server (``examples/http/server.py``) encrypts its task records at rest when it has
a key ring and a durable store: a real server process on a real SQLite file or redis-server
runs a task whose arguments and result carry a marker, and the raw store holds no trace of
it (and does with ``--tasks-in-clear``: the search finds it); ``kill -HUP`` with a new ring
reaches the store too (a record under the removed key is then unreadable)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scale import cluster
from scale.tasks import Peer

pytest.importorskip("cryptography")

MARKER = "argument-marker-e81d"
K1, K2 = b"\x01" * 32, b"\x02" * 32


def run_task(peer: Peer, label: str) -> str:
    """A ``slow_compute`` task carrying ``label`` to its completion; its id."""
    call = {"name": "slow_compute", "arguments": {"seconds": 0.05, "label": label}}
    created, _ = peer.send("tools/call", call)
    task_id: str = created["taskId"]
    peer.until(task_id, {"completed"}, 15)
    return task_id


def raw_sqlite(path: Path) -> bytes:
    """Every byte SQLite keeps of the store: the file and its write-ahead log."""
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


def raw_redis(url: str) -> bytes:
    import redis

    client = redis.Redis.from_url(url)
    try:
        out = []
        for key in client.scan_iter():
            out.append(key)
            kind = client.type(key)
            if kind == b"hash":
                out += [b for kv in client.hgetall(key).items() for b in kv]
            elif kind == b"string":
                out.append(client.get(key) or b"")
            elif kind == b"zset":
                out += client.zrange(key, 0, -1)
            elif kind == b"set":
                out += list(client.smembers(key))
            elif kind == b"list":
                out += client.lrange(key, 0, -1)
        return b"\n".join(out)
    finally:
        client.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Any]:
    started: list[cluster.Server] = []

    def start(*extra: str) -> tuple[cluster.Server, Peer]:
        ring = tmp_path / "ring"
        cluster.write_ring(ring, [K1])
        proc = cluster.start_server(tmp_path, f"s{len(started)}", keys_file=ring, ttl=60.0,
                                    extra=extra)  # fmt: skip
        started.append(proc)
        return proc, Peer(f"http://127.0.0.1:{proc.port}/mcp")

    yield start
    for proc in started:
        cluster.stop(proc.proc)


def test_sqlite_records_hold_no_argument(server: Any, tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    _, peer = server("--tasks-db", str(db))
    run_task(peer, MARKER)
    peer.close()
    assert MARKER.encode() not in raw_sqlite(db)
    assert b"slow_compute" not in raw_sqlite(db)


def test_sqlite_in_clear_when_told(server: Any, tmp_path: Path) -> None:
    db = tmp_path / "clear.db"
    _, peer = server("--tasks-db", str(db), "--tasks-in-clear")
    run_task(peer, MARKER)
    peer.close()
    assert MARKER.encode() in raw_sqlite(db)  # the search finds what is there


def test_redis_records_hold_no_argument(
    server: Any, redis_server: tuple[str, subprocess.Popen[bytes]]
) -> None:
    url = redis_server[0]
    _, peer = server("--tasks-redis", url)
    run_task(peer, MARKER)
    peer.close()
    raw = raw_redis(url)
    assert raw  # the store holds the task
    assert MARKER.encode() not in raw


def test_sighup_gives_the_store_the_new_ring(server: Any, tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    proc, peer = server("--tasks-db", str(db))
    old = run_task(peer, "under-k1")
    cluster.write_ring(tmp_path / "ring", [K2])
    proc.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while proc.reloads() < 1:
        assert time.monotonic() < deadline, "the server did not reload its ring"
        time.sleep(0.05)
    run_task(peer, MARKER)  # written and read back under K2
    with pytest.raises(cluster.ClusterError, match=r"-32603.*not in the ring"):
        peer.get(old)  # its record is under K1, which the store no longer has
    peer.close()
    assert MARKER.encode() not in raw_sqlite(db)
