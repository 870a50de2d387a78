"""Task records encrypted at rest (``encryption=RecordEncryption(keys)``), on a real SQLite
file and a real redis-server: the arguments, questions, handler state, answers and result of a
task driven through a server are nowhere in the raw file or the raw Redis (and are, without
encryption: the search finds them); rotation reads old keys and writes with the new; a record
under a removed key, altered, or moved to another task or field is unreadable (-32603, left out
of a batched read); a record written in clear before still reads, and is encrypted at its next
write; ``tasks/get`` decrypts none of the params.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

import mrtr_sansio as m
from helpers import task_record, tid
from mrtr_sansio.adapters.stores import RedisTaskStore, SqliteTaskStore
from mrtr_sansio.sealing import (
    AesGcmCodec,
    RecordEncryption,
    RequestStateError,
    RequestStateSecurity,
)
from mrtr_sansio.sealing._codecs import b64url_decode, b64url_encode
from mrtr_sansio.tasks import RunAsTask, StoredParams, Task, TaskStoreError
from test_tasks import Server, accept, call, get, task_request

pytest.importorskip("cryptography")

Durable = SqliteTaskStore | RedisTaskStore
MB = 1_000_000
ARGUMENT = "argument-marker-7f3a"
QUESTION = "question-marker-91c2"
STATE = "state-marker-5d0e"
ANSWER = "answer-marker-c4b8"
RESULT = "result-marker-2a6f"
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
KEY_1 = b"\x01" * 32
KEY_2 = b"\x02" * 32


def record(n: int, params: Any = None) -> Task:
    return task_record(n, params, state={"secret": f"{STATE}-{n}"})


class Backend:
    """A real SQLite file or a real redis-server, and stores opened on it with any keys."""

    def __init__(self, kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.kind = kind
        self.path = tmp_path / "tasks.db"
        self.url = request.getfixturevalue("redis_server")[0] if kind == "redis" else ""
        self._opened: list[Durable] = []

    def open(self, *keys: bytes, read_clear: bool = True) -> Durable:
        """A store on the backend, encrypting under ``keys`` (none: in clear)."""
        encryption = RecordEncryption(keys, read_clear=read_clear) if keys else None
        store: Durable
        if self.kind == "redis":
            store = RedisTaskStore.from_url(self.url, encryption=encryption)
        else:
            store = SqliteTaskStore(self.path, encryption=encryption)
        self._opened.append(store)
        return store

    def raw(self) -> bytes:
        """Every byte the backend holds: the SQLite file with its WAL and shared memory; every
        Redis key and value as the server returns them, and its snapshot written uncompressed."""
        if self.kind == "sqlite":
            files = [
                self.path,
                *(self.path.with_name(self.path.name + s) for s in ("-wal", "-shm")),
            ]
            return b"".join(f.read_bytes() for f in files if f.exists())
        import redis

        client: Any = redis.Redis.from_url(self.url)  # replies typed loosely by redis-py
        try:
            parts: list[bytes] = []
            for key in client.scan_iter(count=1000):
                parts.append(key)
                kind = client.type(key)
                if kind == b"hash":
                    for field, value in client.hgetall(key).items():
                        parts += [field, value]
                elif kind == b"zset":
                    parts += [member for member, _ in client.zrange(key, 0, -1, withscores=True)]
                elif kind == b"string":
                    parts.append(client.get(key))
                else:  # the stores write no other type
                    raise AssertionError(f"unexpected Redis type {kind!r}")
            client.config_set("rdbcompression", "no")
            client.save()
            (folder,) = client.config_get("dir").values()
            parts.append(
                (
                    Path(folder.decode() if isinstance(folder, bytes) else folder) / "dump.rdb"
                ).read_bytes()
            )
            return b"".join(parts)
        finally:
            client.close()

    def stored(self, task_id: str, field: str) -> bytes | str | None:
        """The record (``record``) or params (``params``) of ``task_id`` as stored."""
        if self.kind == "redis":
            import redis

            with redis.Redis.from_url(self.url) as client:
                raw: bytes | None = client.hget("mrtr:task:" + task_id, field[:3])
            return raw
        with sqlite3.connect(self.path) as db:
            row = db.execute(f"SELECT {field} FROM mrtr_tasks WHERE task_id = ?", (task_id,))
            (value,) = row.fetchone()
        return value  # type: ignore[no-any-return]

    def put(self, task_id: str, field: str, value: bytes | str) -> None:
        """Overwrite the record or params of ``task_id``, as an attacker with the store would."""
        if self.kind == "redis":
            import redis

            with redis.Redis.from_url(self.url) as client:
                client.hset("mrtr:task:" + task_id, field[:3], value)
            return
        with sqlite3.connect(self.path) as db:
            db.execute(f"UPDATE mrtr_tasks SET {field} = ? WHERE task_id = ?", (value, task_id))

    def close(self) -> None:
        for store in self._opened:
            store.close()


@pytest.fixture(params=["sqlite", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    opened = Backend(request.param, tmp_path, request)
    yield opened
    opened.close()


def _read_all(store: Durable, task_id: str) -> Task | None:
    """The record of ``task_id`` with its params read (the store reads them only when asked)."""
    task = store.get(task_id)
    if task is not None:
        task.params  # noqa: B018
    return task


def handler(request: m.RequestReceived) -> Any:
    """A task that asks a question (keeping state), then answers with the name it was told."""
    if request.can_create_task:
        return RunAsTask()
    content = request.input_responses.accepted_content("name")
    if content is None:
        form = m.elicit_form(f"Your name? ({QUESTION})", NAME_FORM)
        return m.InputRequiredResult({"name": form}, request_state={"kept": STATE})
    assert request.request_state == {"kept": STATE}
    return {"content": [{"type": "text", "text": f"{RESULT} for {content['name']}"}]}


def server_on(store: Durable) -> Server:
    ids = iter(range(1, 1000))
    return Server(handler, store=store, ids=lambda n: f"{next(ids):0{2 * n}x}")  # type: ignore[arg-type]


def start(server: Server) -> str:
    answer = server.send(call(1, arguments={"text": ARGUMENT}))
    task_id: str = answer["result"]["taskId"]
    return task_id


def drive(backend: Backend, store: Durable) -> dict[str, bytes]:
    """A task through a server on ``store``: what the backend holds while the task waits for
    input, once its answer is stored (its run held back) and once it has completed."""
    server = server_on(store)
    task_id = start(server)
    waiting = get(server, task_id)["result"]
    assert waiting["status"] == "input_required"
    assert QUESTION in waiting["inputRequests"]["name"]["params"]["message"]
    seen = {"waiting": backend.raw()}
    update = task_request(2, "tasks/update", task_id, inputResponses={"name": accept(ANSWER)})
    server.runs.clear()  # the first run, settled: resume() runs the one held back below
    assert server.send(update, run=False)["result"] == {"resultType": "complete"}
    seen["answered"] = backend.raw()
    server.resume()
    done = get(server, task_id)["result"]
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": f"{RESULT} for {ANSWER}"}]
    seen["completed"] = backend.raw()
    return seen


def found(seen: dict[str, bytes]) -> dict[str, list[str]]:
    markers = (ARGUMENT, QUESTION, STATE, ANSWER, RESULT)
    return {when: [x for x in markers if x.encode() in raw] for when, raw in seen.items()}


def test_in_clear_the_raw_store_shows_what_encryption_hides(backend: Backend) -> None:
    """The search of the raw store finds each marker when nothing is encrypted."""
    seen = found(drive(backend, backend.open()))
    assert seen["waiting"] == [ARGUMENT, QUESTION, STATE]
    assert {ARGUMENT, STATE, ANSWER} <= set(seen["answered"])  # the question: answered
    assert RESULT in seen["completed"]


def test_nothing_a_task_carries_is_readable_from_the_raw_store(backend: Backend) -> None:
    seen = found(drive(backend, backend.open(KEY_1)))
    assert seen == {"waiting": [], "answered": [], "completed": []}


def test_the_ids_owners_and_expiry_the_store_queries_stay_in_clear(backend: Backend) -> None:
    store = backend.open(KEY_1)
    task = attrs.evolve(record(1), owner="principal-marker", ttl_ms=60_000)
    assert store.create(task)
    raw = backend.raw()
    assert tid(1).encode() in raw
    assert b"principal-marker" in raw
    assert store.count("principal-marker", 1.0) == 1
    assert store.usage("principal-marker") == (task.size, task.size)
    assert store.sweep(61.0, 10) == 1
    assert store.get(tid(1)) is None


def test_a_get_decrypts_the_record_and_none_of_a_megabyte_of_params(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = backend.open(KEY_1)
    task = record(1, {"name": "work", "arguments": {"pad": "x" * MB}})
    assert store.create(task)
    assert store.create(record(2))
    decrypted: list[int] = []
    decrypt = RecordEncryption.decrypt

    def counting(self: RecordEncryption, task_id: str, field: str, sealed: bytes) -> bytes:
        decrypted.append(len(sealed))
        return decrypt(self, task_id, field, sealed)

    monkeypatch.setattr(RecordEncryption, "decrypt", counting)
    read = store.get(tid(1))
    (again, other) = store.get_many([tid(1), tid(2)])
    assert len(decrypted) == 3
    assert sum(decrypted) < 3000  # three records of a few hundred bytes: no params
    assert read is not None
    assert isinstance(read.params_source, StoredParams)
    assert (read, again, other) == (task, task, record(2))  # params compared: read now
    assert sum(decrypted) > 2 * MB


def test_rotation_reads_old_keys_and_writes_with_the_new(backend: Backend) -> None:
    old = backend.open(KEY_1)
    assert old.create(record(1))
    rotated = backend.open(KEY_2, KEY_1)  # the new key first: it encrypts, the old one reads
    first = rotated.get(tid(1))
    assert first == record(1)
    assert rotated.create(record(2))
    assert first is not None
    assert rotated.replace(attrs.evolve(first, status_message="moved", revision=1), 0)
    new_only = backend.open(KEY_2)
    assert new_only.get(tid(2)) == record(2)  # written with the new key
    moved = new_only.get(tid(1))  # the record rewritten with it
    assert moved is not None
    assert moved.status_message == "moved"
    with pytest.raises(TaskStoreError, match="not in the ring"):
        moved.params  # noqa: B018  (unchanged since the old key wrote them: kept until the end)
    old_only = backend.open(KEY_1)
    with pytest.raises(TaskStoreError, match="not in the ring"):
        old_only.get(tid(2))


def test_a_record_under_a_removed_key_is_unreadable_and_its_tasks_get_is_32603(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    task_id = start(server_on(backend.open(KEY_1)))
    later = backend.open(KEY_2)  # KEY_1 left the ring
    assert later.create(record(500))
    answer = get(server_on(later), task_id)
    assert answer["error"]["code"] == -32603
    assert "not in the ring" in answer["error"]["message"]
    assert later.get_many([task_id, tid(500)]) == [None, record(500)]  # left out, logged
    assert f"task {task_id} is unreadable" in caplog.text
    assert backend.open(KEY_1, KEY_2).get(task_id) is not None  # the key back: readable again


@pytest.mark.parametrize("field", ["record", "params"])
def test_an_altered_ciphertext_is_unreadable(backend: Backend, field: str) -> None:
    store = backend.open(KEY_1)
    assert store.create(record(1))
    sealed = backend.stored(tid(1), field)
    assert isinstance(sealed, bytes)
    for at in (1, 10, len(sealed) // 2, len(sealed) - 1):  # key id, nonce, text, tag
        backend.put(tid(1), field, sealed[:at] + bytes([sealed[at] ^ 1]) + sealed[at + 1 :])
        with pytest.raises(TaskStoreError, match="unreadable"):
            _read_all(store, tid(1))
    backend.put(tid(1), field, sealed)
    task = store.get(tid(1))
    assert task == record(1)


def test_a_ciphertext_moved_to_another_task_or_field_is_unreadable(backend: Backend) -> None:
    store = backend.open(KEY_1)
    assert store.create(record(1))
    assert store.create(record(2))
    first = backend.stored(tid(1), "record")
    first_params = backend.stored(tid(1), "params")
    assert isinstance(first, bytes)
    assert isinstance(first_params, bytes)
    backend.put(tid(2), "record", first)
    with pytest.raises(TaskStoreError, match="altered or belongs to another task"):
        store.get(tid(2))
    assert store.get_many([tid(1), tid(2)]) == [record(1), None]
    backend.put(tid(2), "record", backend.stored(tid(1), "record") or b"")
    backend.put(tid(1), "params", first)  # a record where the params belong
    task = store.get(tid(1))
    assert task is not None
    with pytest.raises(TaskStoreError, match="altered or belongs to another task"):
        task.params  # noqa: B018
    backend.put(tid(1), "record", first_params)  # and the params where the record belongs
    with pytest.raises(TaskStoreError, match="altered or belongs to another task"):
        store.get(tid(1))


def test_a_sealed_request_state_under_the_same_keys_is_no_record(backend: Backend) -> None:
    """The keys are derived per purpose: a requestState token (AES-256-GCM, the same secret)
    put in the store, even with a record's version byte, names a key the ring does not have."""
    store = backend.open(KEY_1)
    assert store.create(record(1))
    clear = json.dumps(record(1).to_record(params=False)).encode()
    raw = b64url_decode(RequestStateSecurity(keys=[KEY_1], codec="aes-256-gcm").codec.seal(clear))
    assert raw is not None
    for forged, why in ((raw, "corrupt"), (b"\x03" + raw[1:], "not in the ring")):
        backend.put(tid(1), "record", forged)
        with pytest.raises(TaskStoreError, match=why):
            store.get(tid(1))
    sealed = backend.open(KEY_1).encryption.encrypt(tid(1), "record", clear)  # type: ignore[union-attr]
    with pytest.raises(RequestStateError, match="unknown_key"):  # nor a record a token
        AesGcmCodec([KEY_1]).unseal(b64url_encode(b"\x02" + sealed[1:]))


def test_a_record_written_in_clear_reads_and_is_encrypted_at_its_next_write(
    backend: Backend,
) -> None:
    before = backend.open()  # before encryption was turned on
    assert before.create(record(1))
    store = backend.open(KEY_1)
    task = store.get(tid(1))
    assert task == record(1)
    assert task is not None
    assert task.params == record(1).params  # in clear too
    strict = backend.open(KEY_1, read_clear=False)
    with pytest.raises(TaskStoreError, match="in clear"):
        strict.get(tid(1))
    assert store.replace(attrs.evolve(task, status_message="now sealed", revision=1), 0)
    assert f"{STATE}-1".encode() not in (backend.stored(tid(1), "record") or b"")
    with pytest.raises(TaskStoreError, match="encrypted and this store has no keys"):
        before.get(tid(1))
    again = strict.get(tid(1))
    assert again is not None
    assert again.status_message == "now sealed"
    with pytest.raises(TaskStoreError, match="in clear"):  # its params: until the task ends
        again.params  # noqa: B018


def test_the_ring_is_checked_when_the_encryption_is_made() -> None:
    with pytest.raises(TypeError, match="sequence of secrets"):
        RecordEncryption(KEY_1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 32"):
        RecordEncryption([b"short"])
    with pytest.raises(ValueError, match="empty"):
        RecordEncryption([])
    with pytest.raises(TypeError, match="read_clear"):
        RecordEncryption([KEY_1], read_clear=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="RecordEncryption"):
        SqliteTaskStore(":memory:", encryption=[KEY_1])  # type: ignore[arg-type]
    one = RecordEncryption([secrets.token_bytes(32)])
    assert "keys=<1 in the ring>" in repr(one)
    sealed = one.encrypt(tid(1), "record", b"{}")
    assert sealed[0] == 0x03
    assert one.encrypt(tid(1), "record", b"{}") != sealed  # a fresh nonce each time
    assert one.decrypt(tid(1), "record", sealed) == b"{}"
    with pytest.raises(ValueError, match="field"):
        one.encrypt(tid(1), "state", b"{}")


def test_a_store_in_use_rotates_when_given_another_ring(backend: Backend) -> None:
    store = backend.open(KEY_1)
    assert store.create(record(1))
    store.encryption = RecordEncryption([KEY_2, KEY_1])
    assert store.get(tid(1)) == record(1)
    assert store.create(record(2))
    store.encryption = RecordEncryption([KEY_2])
    assert store.get(tid(2)) == record(2)
    with pytest.raises(TaskStoreError, match="not in the ring"):
        store.get(tid(1))
