"""What one large task costs in memory: a ``tools/call`` of ``[{}, {}, ...]`` (about 3.9 MB of
JSON) becomes a task in the in-memory store; the process's resident set is read before it
arrives, once the task is stored (working, its run handed off), and after ``tasks/cancel``.

    python bench/task_memory.py [--bytes N]

Last lines: the bytes the task's record holds (``InMemoryTaskStore.usage``) while it is stored
and after ``tasks/cancel`` released what only a run needs, then ``rss MiB: stored=<x.x>
cancelled=<y.y>``: the resident set's growth over the baseline at those two points (it includes
what the allocator keeps of the memory the transient decoded request used).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
from typing import Any

import mrtr_sansio as m
from mrtr_sansio.tasks import EXTENSION, InMemoryTaskStore, RunAsTask, TaskSettings

ENVELOPE = {
    m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28",
    m.protocol.CLIENT_CAPABILITIES: {"extensions": {EXTENSION: {}}},
    m.protocol.CLIENT_INFO: {"name": "bench-client", "version": "1.0.0"},
}


def rss_mib() -> float:
    """This process's resident set, in MiB (Linux ``/proc``)."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


def request(rid: int, method: str, params: dict[str, Any]) -> bytes:
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": ENVELOPE}}
    return json.dumps(body, separators=(",", ":")).encode()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bytes", type=int, default=3_900_000, help="size of the tools/call")
    args = parser.parse_args()
    store = InMemoryTaskStore()
    config = m.ServerConfig(
        limits=m.Limits(max_message_bytes=8 * 1024 * 1024),
        tasks=TaskSettings(store=store, tools={"work": "optional"}, max_task_bytes=8 * 1024 * 1024),
    )
    items = max(1, (args.bytes - 200) // 3)
    body = request(1, "tools/call", {"name": "work", "arguments": {"items": [{}] * items}})
    gc.collect()
    before = rss_mib()

    conn = m.ServerConnection(config)
    conn.receive_message(body)
    del body
    task_id = None
    while (event := conn.next_event()) is not m.NEED_DATA:
        if type(event) is not m.RequestReceived:
            continue
        if event.task_id is None:
            conn.respond(event.request_id, RunAsTask())
        else:
            task_id = event.task_id  # the run goes on elsewhere: the task stays working
        del event
    for _ in conn.outgoing():  # the response, written
        pass
    assert task_id is not None, "the call did not become a task"
    gc.collect()
    stored = rss_mib()
    stored_bytes = store.usage(None)[0]

    conn.receive_message(request(2, "tasks/cancel", {"taskId": task_id}))
    while conn.next_event() is not m.NEED_DATA:
        pass
    for _ in conn.outgoing():
        pass
    gc.collect()
    cancelled = rss_mib()
    print(f"request: {args.bytes} bytes, {items} items")
    print(f"record bytes: stored={stored_bytes} cancelled={store.usage(None)[0]}")
    print(f"rss MiB: stored={stored - before:.1f} cancelled={cancelled - before:.1f}")


if __name__ == "__main__":
    main()
