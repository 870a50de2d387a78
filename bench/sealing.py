"""What sealing a ``requestState`` costs per round, against a bare HMAC floor.

One round on our server path is an ``unseal`` of the token the client echoed (envelope claims,
binding, state JSON, codec) and a ``seal`` of the next state, each with the ``StateBinding`` the
server builds. The tracked case is the requestState of the SEP-2322 ADO example; a heavier state
is reported too. The floor, measured in the same run, is an HMAC-SHA256 seal+unseal of the same
state bytes (stdlib ``hmac.digest`` + base64url, no claims, no JSON). Variants run interleaved
in batches timed in process CPU time (time spent descheduled on a busy machine is left out);
we report medians per operation and the median of per-round ratios. The last line is the
figure the project tracks.

    python bench/sealing.py [--rounds 300] [--batch 1000]
"""

from __future__ import annotations

import argparse
import base64
import gc
import hmac
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import attrs

from mrtr_sansio.config import OrjsonCodec
from mrtr_sansio.sealing import RequestStateSecurity, StateBinding

KEY = bytes(range(32))
NOW = 1_800_000_000.0
METHOD = "tools/call"
PRINCIPAL = "user-1842"


@attrs.frozen
class Case:
    """One tool call whose handler carries ``state`` across a round."""

    label: str
    tool: str
    arguments: dict[str, Any]
    state: Any


#: The tracked case: round 2 of the SEP-2322 ADO custom-rules example (update_work_item
#: carries the elicited resolution to the next round in requestState).
ADO = Case(
    "SEP-2322 ADO example",
    "update_work_item",
    {"workItemId": 4522, "fields": {"System.State": "Resolved"}},
    {"resolution": "Duplicate"},
)
#: A heavier state (nested, with a float), to show how JSON work grows with the state.
BOOKING = Case(
    "booking wizard",
    "book_flight",
    {"from": "LHR", "to": "JFK", "date": "2026-08-14", "passengers": 2},
    {
        "step": "seat",
        "booking": {"from": "LHR", "to": "JFK", "date": "2026-08-14", "fare": "Y", "price": 612.4},
        "answers": {"passengers": [{"name": "Ada"}, {"name": "Grace"}], "meal": "vegetarian"},
    },
)


def floor_round(state_bytes: bytes) -> Callable[[], bytes]:
    """HMAC-SHA256 seal+unseal of the state bytes: tag, base64url, decode, verify."""

    def one() -> bytes:
        token = base64.urlsafe_b64encode(
            state_bytes + hmac.digest(KEY, state_bytes, "sha256")
        ).rstrip(b"=")
        raw = base64.urlsafe_b64decode(token + b"=" * (-len(token) % 4))
        body, tag = raw[:-32], raw[-32:]
        if not hmac.compare_digest(hmac.digest(KEY, body, "sha256"), tag):
            raise AssertionError("floor: bad tag")
        return body

    return one


def our_round(
    security: RequestStateSecurity, case: Case, *, fresh_arguments: bool = False
) -> Callable[[], Any]:
    """A seal then an unseal through RequestStateSecurity, bindings built as the server does.

    In a server the retry's seal follows the unseal of the same request, so the arguments
    digest verified there is reused; ``fresh_arguments`` copies them first to show the cost
    without that (as when other requests are unsealed in between), the copy included.
    """
    tool, state, arguments = case.tool, case.state, case.arguments

    def one() -> Any:
        args = dict(arguments) if fresh_arguments else arguments
        token = security.seal(state, StateBinding(METHOD, tool, args, PRINCIPAL), 1, NOW)
        return security.unseal(token, StateBinding(METHOD, tool, args, PRINCIPAL), NOW + 1.0)

    return one


def measure(
    variants: dict[str, Callable[[], Any]], rounds: int, batch: int
) -> dict[str, list[float]]:
    """Seconds per call of each variant, one sample per (round, variant), interleaved."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for fn in variants.values():  # warm up
        for _ in range(batch):
            fn()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                fn = variants[name]
                start = time.process_time_ns()
                for _ in range(batch):
                    fn()
                samples[name].append((time.process_time_ns() - start) / batch / 1e9)
    finally:
        if gc_was_enabled:
            gc.enable()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--batch", type=int, default=1000)
    opts = parser.parse_args()

    hmac_security = RequestStateSecurity([KEY], codec="hmac-sha256", audience="bench")
    aes_security = RequestStateSecurity([KEY], codec="aes-256-gcm", audience="bench")
    names = ["floor", "hmac", "aes-gcm", "hmac, no reuse"]
    try:
        orjson_security = RequestStateSecurity([KEY], audience="bench", json_codec=OrjsonCodec())
        names.append("hmac, orjson state")
    except ImportError:  # the 'fast' extra is not installed
        orjson_security = None
    variants: dict[str, Callable[[], Any]] = {}
    for case in (ADO, BOOKING):
        state_bytes = json.dumps(case.state, separators=(",", ":")).encode()
        variants[f"{case.label}: floor"] = floor_round(state_bytes)
        variants[f"{case.label}: hmac"] = our_round(hmac_security, case)
        variants[f"{case.label}: aes-gcm"] = our_round(aes_security, case)
        variants[f"{case.label}: hmac, no reuse"] = our_round(
            hmac_security, case, fresh_arguments=True
        )
        if orjson_security is not None:
            variants[f"{case.label}: hmac, orjson state"] = our_round(orjson_security, case)
    samples = measure(variants, opts.rounds, opts.batch)

    def ratio(case: Case, name: str) -> float:
        pairs = zip(samples[f"{case.label}: {name}"], samples[f"{case.label}: floor"], strict=True)
        return statistics.median(ours / floor for ours, floor in pairs)

    print(f"{opts.rounds} interleaved rounds x {opts.batch} calls; medians per seal+unseal")
    for case in (ADO, BOOKING):
        size = len(json.dumps(case.state, separators=(",", ":")))
        print(f"{case.label} (state {size} bytes of JSON):")
        for name in names:
            median = statistics.median(samples[f"{case.label}: {name}"])
            times = "" if name == "floor" else f"  ({ratio(case, name):.2f}x floor)"
            print(f"  {name:>18}: {median * 1e6:6.2f} us{times}")
    print(
        f"ratio seal+unseal/hmac: hmac={ratio(ADO, 'hmac'):.2f} aes-gcm={ratio(ADO, 'aes-gcm'):.2f}"
    )


if __name__ == "__main__":
    main()
