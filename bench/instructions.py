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
* ``asgi-example``: what ``http_e2e.py`` measures as ``ours`` under uvicorn, in process: the
  example server's app as ``examples/http/server.py`` builds it (the fixtures' handler, both
  eras, HMAC-sealed state, the default codec), fed the two POSTs with the headers ``wrk``
  sends; the token of leg 1 is echoed in leg 2;
* ``asgi-floor``: ``http_e2e.py``'s bare ASGI floor app driven the same way. ``asgi-example``
  minus ``asgi-floor`` is our share of an exchange over HTTP, without the server's own work
  (which is the same for both) and without the load of the machine.
* ``stdio-asyncio``: ``stdio_e2e.py --pipeline 64`` in one process: the async adapter
  (``mrtr_sansio.adapters.anyio.serve`` on a ``StdioStream`` over two pipes, unsealed, the
  bench's handler) on an asyncio loop, and in the same loop a driver that writes 64 first legs
  at once, reads their answers, writes the 64 retries and reads theirs (a regular expression
  per answer, counted with the server). Each call is one such batch, counted as 64 exchanges.
  ``stdio-asyncio-sealed``: the same with the state sealed as shipped (the default
  per-process key).
* ``asgi-necessary``: ``http_e2e.py``'s necessary-work floor app driven the same way (orjson,
  the envelope, method and tool checks, the state sealed with HMAC-SHA256 on leg 1 and verified
  on leg 2): what any MRTR server must do for the exchange.
* ``sealing``: the sealing alone in one exchange, as the example app does it: the ``seal`` of
  leg 1's state and the ``unseal`` of the echoed token, through the example's protector (the
  process key, HMAC-SHA256) with the bindings the server builds for that tool call;
* ``sealing-necessary``: the necessary-work floor's HMAC seal and verification of the same
  state (a small JSON payload with an expiry, base64url). ``sealing`` / ``sealing-necessary``
  is what sealing costs against the HMAC work it needs.

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
from typing import Any

HERE = Path(__file__).resolve().parent
PATHS = (
    "engine-orjson",
    "engine",
    "prebuilt-orjson",
    "floor-orjson",
    "asgi-orjson",
    "asgi-example",
    "asgi-floor",
    "stdio-asyncio",
    "stdio-asyncio-sealed",
    "asgi-necessary",
    "sealing",
    "sealing-necessary",
)
#: Exchanges per call of a path's exchange (1 unless said here).
PER_CALL = {"stdio-asyncio": 64, "stdio-asyncio-sealed": 64}


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
    if path in ("asgi-example", "asgi-floor", "asgi-necessary"):
        return _e2e_exchange(path)
    if path.startswith("stdio-asyncio"):
        return _stdio_exchange(PER_CALL[path], sealed=path.endswith("-sealed"))
    if path in ("sealing", "sealing-necessary"):
        return _sealing_exchange(path)
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


def _e2e_exchange(path: str) -> Callable[[], None]:
    """``http_e2e.py``'s exchange on its ``ours``, ``floor`` or ``necessary`` app, called in
    process; none suspends with the whole body at hand, so each POST runs to its end in one step."""
    import http_e2e

    apps = {
        "asgi-example": _e2e_app,
        "asgi-floor": http_e2e.floor,
    }
    app = apps.get(path, http_e2e.necessary)()
    first = http_e2e._compact(http_e2e.request_1(1)).encode()
    head, tail = http_e2e._compact(http_e2e.request_2(2, "@")).encode().split(b"@")
    headers = [(k.lower().encode(), v.encode()) for k, v in http_e2e.HEADERS.items()]
    headers.append((b"host", f"{http_e2e.HOST}:8000".encode()))
    base = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST"}
    base |= {"scheme": "http", "path": http_e2e.PATH, "root_path": "", "query_string": b""}
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    def post(body: bytes) -> bytes:
        scope = {**base, "headers": [*headers, (b"content-length", b"%d" % len(body))]}
        message = {"type": "http.request", "body": body, "more_body": False}

        async def receive() -> Any:
            return message

        sent.clear()
        step = app(scope, receive, send)
        try:
            step.send(None)
        except StopIteration:
            answer: bytes = sent[-1]["body"]
            return answer
        step.close()
        raise RuntimeError("the ASGI call suspended: it cannot be driven without a loop")

    def exchange() -> None:
        asked = post(first)
        start = asked.index(b'"requestState":"') + 16
        done = post(head + asked[start : asked.index(b'"', start)] + tail)
        if http_e2e.EXPECTED.encode() not in done:
            raise RuntimeError(f"leg 2 answered {done[:200]!r}")

    return exchange


def _stdio_exchange(batch: int, sealed: bool) -> Callable[[], None]:
    """One pipelined batch of ``stdio_e2e.py``'s exchange through the async stdio adapter, its
    driver in the same asyncio loop; ``sealed``: the state sealed as shipped."""
    import asyncio
    import logging

    import stdio_e2e

    from mrtr_sansio.adapters.anyio import StdioStream, serve

    logging.getLogger("mrtr_sansio").setLevel(logging.ERROR)
    to_server, from_driver = os.pipe()[::-1]
    from_server, to_driver = os.pipe()
    blocking = stdio_e2e._handler()

    async def handler(request: Any, ctx: Any) -> Any:
        return blocking(request, ctx)

    loop = asyncio.new_event_loop()
    server = StdioStream(from_driver, to_driver)
    driver = StdioStream(from_server, to_server)
    serving = loop.create_task(serve(handler, stdio_e2e._config(sealed), server))
    legs = stdio_e2e.Legs()
    done = stdio_e2e.EXPECTED.encode()
    state = stdio_e2e._STATE
    next_id = 0

    async def answers() -> list[bytes]:
        buffer = b""
        while buffer.count(b"\n") < batch:
            buffer += await driver.receive()
        return buffer.splitlines()

    async def one_batch() -> None:
        nonlocal next_id
        first = next_id + 1
        next_id += 2 * batch
        await driver.send(b"".join([legs.first(rid) for rid in range(first, first + batch)]))
        tokens = [state.search(line) for line in await answers()]
        retries = [legs.retry(first + batch + i, t.group(1)) for i, t in enumerate(tokens) if t]
        await driver.send(b"".join(retries))
        finished = sum(done in line for line in await answers())
        if len(retries) != batch or finished != batch:
            raise RuntimeError(f"{batch - finished} of {batch} exchanges failed")

    def exchange() -> None:
        loop.run_until_complete(one_batch())
        assert not serving.done(), "the server stopped"

    return exchange


def _sealing_exchange(path: str) -> Callable[[], None]:
    """The state of ``http_e2e.py``'s tool sealed for leg 1 and unsealed on leg 2: through the
    example app's protector with the server's bindings, or as the necessary-work floor does."""
    import http_e2e

    now = 1_800_000_000.0
    if path == "sealing-necessary":
        key, seal, open_ = http_e2e.NECESSARY_KEY, http_e2e.necessary_seal, http_e2e.necessary_open

        def necessary() -> None:
            if open_(key, seal(key, http_e2e.STATE, now), now + 1.0) != http_e2e.STATE:
                raise RuntimeError("the necessary floor did not unseal its state")

        return necessary
    import mrtr_sansio as m

    protector = _e2e_app().config.request_state
    binding = m.sealing.StateBinding

    def exchange() -> None:
        # A binding per leg, as the server builds one per request (the same arguments value).
        asked = binding("tools/call", http_e2e.TOOL, {}, None)
        token = protector.seal(http_e2e.STATE, asked, 1, now)
        retry = binding("tools/call", http_e2e.TOOL, {}, None)
        if protector.unseal(token, retry, now + 1.0).state != http_e2e.STATE:
            raise RuntimeError("the protector did not unseal its state")

    return exchange


def _e2e_app() -> Any:
    """The example server's app as ``http_e2e.py`` builds it (its key warning silenced)."""
    import logging

    import http_e2e

    logging.getLogger("mrtr_sansio").setLevel(logging.ERROR)  # build_app warns of its key
    return http_e2e.ours()


def _child(path: str, count: int) -> None:
    exchange = _exchange(path)
    per_call = PER_CALL.get(path, 1)
    for _ in range(300 // per_call or 1):
        exchange()
    gc.collect()
    gc.disable()
    for _ in range(count // per_call):
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
        per_call = PER_CALL.get(path, 1)
        exchanges = (args.large // per_call - args.small // per_call) * per_call
        print(f"{path:18s} {(large - small) / exchanges:10,.0f}", flush=True)


if __name__ == "__main__":
    main()
