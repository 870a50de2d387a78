"""Single-use requestState across processes: a token replayed on another process is refused.

    python examples/scale/replay.py [--guard redis|sqlite]

Two example servers (``examples/http/server.py``) share one key ring file, so each unseals the
other's ``requestState``, and one replay guard: a redis-server started here on loopback
(``--replay-redis``), or one SQLite file (``--replay-db``). A client answers the first round
of ``book_trip`` on process A; the same retry (same answers, same ``requestState``, a new
request id) sent again to process B must be refused with -32602
``Invalid or expired requestState`` (HTTP 400). Then the
same two steps on two processes sharing the ring but no guard: B accepts the replay, which is
what the guard is for.

Prints what each process answered and exits 1 if anything is not as stated. redis-server comes
from Debian's package; every file lives in a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scale.cluster import REDIS_MISSING, find_redis, start_redis, start_server, stop, write_ring

import mrtr_sansio as m

__all__ = ["REFUSED", "main", "replay_across"]

ARGS = {"destination": "Lisbon", "guests": 2}
CAPS: dict[str, Any] = {"elicitation": {}, "roots": {}}
#: What a process answers a requestState another process already accepted.
REFUSED = {
    "code": -32602,
    "message": "Invalid or expired requestState",
    "data": {"reason": "invalid_request_state"},
}


def post(url: str, rid: int, **extra: Any) -> dict[str, Any]:
    """One modern ``tools/call`` of ``book_trip`` with the mirror headers; the JSON answer."""
    params = {
        "name": "book_trip",
        "arguments": ARGS,
        "_meta": {
            m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28",
            m.protocol.CLIENT_CAPABILITIES: CAPS,
        },
        **extra,
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "book_trip",
    }
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
    answer: dict[str, Any] = httpx.post(url, json=body, headers=headers, timeout=10.0).json()
    return answer


def answers() -> dict[str, Any]:
    """The client's answers to round 1 (the dates form and the roots request)."""
    dates = {"action": "accept", "content": {"check_in": "2026-09-01", "check_out": "2026-09-03"}}
    return {"dates": dates, "workspace": {"roots": [{"uri": "file:///trips", "name": "trips"}]}}


def replay_across(workdir: Path, guard: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Start processes A and B on one ring (and ``guard``, their replay-guard options);
    answer round 1 on A, replay the same retry on B. Returns A's and B's answers."""
    ring = workdir / "ring"
    write_ring(ring, [secrets.token_bytes(32)])
    name = "guarded" if guard else "unguarded"
    a = start_server(workdir, f"{name}-a", keys_file=ring, ttl=60.0, extra=guard)
    try:
        b = start_server(workdir, f"{name}-b", keys_file=ring, ttl=60.0, extra=guard)
        try:
            first = post(f"http://{a.address}/mcp", 1)["result"]
            assert first["resultType"] == "input_required", first
            retry = {"inputResponses": answers(), "requestState": first["requestState"]}
            on_a = post(f"http://{a.address}/mcp", 2, **retry)
            on_b = post(f"http://{b.address}/mcp", 3, **retry)  # the same token, replayed
        finally:
            stop(b.proc)
    finally:
        stop(a.proc)
    return on_a, on_b


def accepted(answer: dict[str, Any]) -> bool:
    return "result" in answer and answer["result"].get("resultType") in {
        "input_required",
        "complete",
    }


def run(kind: str, workdir: Path) -> list[str]:
    failures: list[str] = []
    redis = None
    if kind == "redis":
        url, redis = start_redis(workdir)
        guard = ["--replay-redis", url]
    else:
        guard = ["--replay-db", str(workdir / "redeemed.db")]
    try:
        on_a, on_b = replay_across(workdir, guard)
    finally:
        if redis is not None:
            stop(redis)
    print(f"shared key ring and one {kind} replay guard:")
    print(f"  round 1 answered on A: {_brief(on_a)}")
    print(f"  same retry on B:       {_brief(on_b)}")
    if not accepted(on_a):
        failures.append(f"A did not accept the first use of the token: {on_a}")
    if on_b.get("error") != REFUSED:
        failures.append(f"B did not refuse the replayed token: {on_b}")
    on_a, on_b = replay_across(workdir, [])
    print("shared key ring, no replay guard (the control):")
    print(f"  round 1 answered on A: {_brief(on_a)}")
    print(f"  same retry on B:       {_brief(on_b)}")
    if not (accepted(on_a) and accepted(on_b)):
        failures.append(f"without a guard both should accept the token: {on_a} {on_b}")
    return failures


def _brief(answer: dict[str, Any]) -> str:
    if "error" in answer:
        return "refused " + json.dumps(answer["error"], separators=(",", ":"))
    return "accepted (resultType " + str(answer["result"].get("resultType")) + ")"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--guard", choices=["redis", "sqlite"], default="redis")
    args = parser.parse_args(argv)
    if args.guard == "redis" and find_redis() is None:
        print(REDIS_MISSING, file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="mrtr-replay-") as tmp:
        failures = run(args.guard, Path(tmp))
    for failure in failures:
        print("FAILED:", failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
