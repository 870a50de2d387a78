"""What the era bridge adds per exchange, as a ratio against talking to the server directly.

The fixtures (``examples/fixtures.py``) serve over Streamable HTTP under uvicorn on loopback,
and the bridge (:mod:`mrtr_sansio.adapters.bridge`) serves in front of them the same way, all
in this process; our HTTP client makes the same calls to each, interleaved in batches: a plain
``tools/call`` (``greet``), a one-round MRTR call (``test_input_required_result_elicitation``)
on the modern wire, and the same call from a legacy client (through the bridge: the shim's real
request; direct: the fixtures' own shim). Medians of wall time per call; the last line is the
figure the project tracks.

    python bench/bridge.py [--calls 200] [--batches 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

import mrtr_sansio as m
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.adapters.bridge import Bridge, Upstream
from mrtr_sansio.adapters.http import HttpClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from fixtures import Everything, server_config
from scale.cluster import served_here as served


async def name(event: m.InputNeeded) -> Mapping[str, Any]:
    return {"action": "accept", "content": {"name": "Ada"}}


CASES = {
    "plain": ("modern", "greet", {"name": "Ada"}),
    "mrtr": ("modern", "test_input_required_result_elicitation", {}),
    "legacy-mrtr": ("legacy", "test_input_required_result_elicitation", {}),
}


async def per_call(client: HttpClient, tool: str, args: dict[str, Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        await client.call_tool(tool, args)
    return (time.perf_counter() - start) / calls


async def main(calls: int, batches: int) -> None:
    state = m.sealing.RequestStateSecurity.ephemeral()
    upstream = McpHttpApp(Everything().handle, server_config(request_state=state))
    async with served(upstream) as direct, Bridge.open(Upstream(url=direct)) as bridge:
        base = m.ServerConfig(request_state=m.sealing.RequestStateSecurity.ephemeral())
        app = McpHttpApp(bridge.handle, bridge.use_config(bridge.server_config(base)))
        async with served(app) as bridged:
            times: dict[tuple[str, str], list[float]] = {}
            for _ in range(batches):
                for case, (era, tool, args) in CASES.items():
                    for where, url in (("direct", direct), ("bridge", bridged)):
                        config = m.ClientConfig(era=era)
                        async with HttpClient.connect(url, config, elicitation=name) as client:
                            await per_call(client, tool, args, 2)  # warm up the connection
                            took = await per_call(client, tool, args, calls)
                        times.setdefault((case, where), []).append(took)
    ratios = []
    for case in CASES:
        d = statistics.median(times[(case, "direct")])
        b = statistics.median(times[(case, "bridge")])
        print(f"{case}: direct {d * 1e3:.2f} ms, bridge {b * 1e3:.2f} ms per call")
        ratios.append(f"{case}={b / d:.2f}")
    print("ratio bridge/direct: " + " ".join(ratios))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--batches", type=int, default=5)
    args = parser.parse_args()
    anyio.run(main, args.calls, args.batches)
