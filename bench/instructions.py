"""Machine instructions per exchange on the engine paths, counted by valgrind's callgrind.

Timings on a shared machine move by a third from run to run; instruction counts repeat to the
instruction. Each path runs in a fresh interpreter under ``valgrind --tool=callgrind`` twice,
for ``--small`` and ``--large`` exchanges after a warm-up, with ``PYTHONHASHSEED=0`` and the
garbage collector off; the difference divided by ``large - small`` is the cost of one exchange,
start-up and imports cancelled out. Paths (bytes in to bytes out, as in ``compare_sdk.py``):

* ``engine-orjson``: ``compare_sdk.py``'s engine leg with ``OrjsonCodec``, its handler
  building its answers (``elicit_form``, ``InputRequiredResult``, a result dict) every round;
* ``engine``: the same with the stdlib codec;
* ``prebuilt-orjson``: ``server_exchange.py``'s exchange (answers built once), the engine
  alone;
* ``floor-orjson``: the JSON floor of ``server_exchange.py``: two ``orjson.loads`` of the
  requests and two ``orjson.dumps`` of the responses;
* ``asgi-orjson``: ``compare_sdk.py``'s ASGI leg, our ``McpHttpApp`` (modern-only, orjson,
  unsealed) called in process with one ``http`` scope per POST. Its handler never suspends,
  so each call runs to its end in one step, driven without an event loop; minus
  ``engine-orjson``, what the HTTP adapter costs.

    python bench/instructions.py [PATH ...] [--small N] [--large M]

Needs ``valgrind`` (Debian: ``apt-get install valgrind``). About a minute per path.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
PATHS = ("engine-orjson", "engine", "prebuilt-orjson", "floor-orjson", "asgi-orjson")


def _exchange(path: str) -> Callable[[], None]:
    """One exchange of ``path``, ready to call."""
    sys.path.insert(0, str(HERE))
    import server_exchange

    import mrtr_sansio as m

    if path in ("engine-orjson", "engine"):
        import compare_sdk

        codec = m.config.OrjsonCodec() if path == "engine-orjson" else m.config.StdlibJsonCodec()
        leg = compare_sdk.ours_engine(path, codec).leg
        assert leg is not None
        first, second = (
            compare_sdk._body(server_exchange.REQUEST_1),
            compare_sdk._body(server_exchange.REQUEST_2),
        )

        def exchange() -> None:
            leg(first)
            leg(second)

        return exchange
    if path == "asgi-orjson":
        return _asgi_exchange()
    engine, sent = server_exchange.make_engine(m.config.OrjsonCodec())
    if path == "prebuilt-orjson":
        return engine
    import orjson

    engine()
    return server_exchange.make_floor(orjson.loads, orjson.dumps, sent)


def _asgi_exchange() -> Callable[[], None]:
    """Both POSTs of the exchange through the ASGI app, each run to its end in one step."""
    import anyio
    import compare_sdk
    import server_exchange

    import mrtr_sansio as m
    from mrtr_sansio.adapters.asgi import McpHttpApp

    config = m.ServerConfig(
        server_info=server_exchange.SERVER_INFO,
        codec=m.config.OrjsonCodec(),
        request_state=m.UNSEALED,
    )
    app = McpHttpApp(compare_sdk.ours_handler, config, legacy=False)
    path = compare_sdk.asgi_path("asgi-orjson", app, anyio.Event())
    assert path.leg is not None
    leg, lines = path.leg, path.lines

    def exchange() -> None:
        for body in lines:
            step = leg(body)
            try:
                step.send(None)
            except StopIteration:
                continue
            step.close()
            raise RuntimeError("the ASGI call suspended: it cannot be driven without a loop")

    return exchange


def _child(path: str, count: int) -> None:
    exchange = _exchange(path)
    for _ in range(300):
        exchange()
    gc.collect()
    gc.disable()
    for _ in range(count):
        exchange()


def _instructions(path: str, count: int) -> int:
    """Instructions callgrind counts for a whole child process running ``count`` exchanges."""
    out = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--child",
            path,
            str(count),
        ],
        env={**os.environ, "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        check=True,
    )
    match = re.search(r"Collected : (\d+)", out.stderr)
    if match is None:
        raise SystemExit(f"no instruction count from callgrind:\n{out.stderr[-2000:]}")
    return int(match.group(1))


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="*", metavar="PATH", help=", ".join(PATHS))
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=3000)
    args = parser.parse_args()
    unknown = set(args.paths) - set(PATHS)
    if unknown:
        parser.error(f"unknown path(s): {', '.join(sorted(unknown))}; choose from {PATHS}")
    print(f"Python {sys.version.split()[0]}; instructions per exchange (callgrind)")
    for path in args.paths or PATHS:
        small = _instructions(path, args.small)
        large = _instructions(path, args.large)
        print(f"{path:18s} {(large - small) / (args.large - args.small):10,.0f}", flush=True)


if __name__ == "__main__":
    main()
