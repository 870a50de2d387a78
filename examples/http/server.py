"""The fixtures over Streamable HTTP: the ASGI app under uvicorn, both eras on one URL.

    python examples/http/server.py --port 8000            # http://127.0.0.1:8000/mcp

``requestState`` is sealed with a key ring: ``--state-keys-file PATH`` (one key per line) or
``--state-keys-env NAME`` (keys separated by commas or whitespace), each key base64 (standard
or URL-safe) of at least 32 random bytes; the first key seals, every key unseals
(:class:`mrtr_sansio.sealing.RequestStateSecurity`). Several processes serving one URL must
share the ring. Without either, a random key is made for this process only. ``kill -HUP`` makes
the server read its key file again and seal and unseal with the new ring from then on, without
a restart (a :class:`mrtr_sansio.sealing.SwappableStateProtector`); an unreadable file keeps the
old ring. ``--replay-db PATH`` (SQLite) or ``--replay-redis URL`` makes each sealed
``requestState`` single-use across every process sharing the file or the Redis (a replay
guard: :class:`mrtr_sansio.adapters.stores.SqliteReplayGuard`, ``RedisReplayGuard``).

Tasks (extension ``io.modelcontextprotocol/tasks``) are kept in memory, or with
``--tasks-db PATH`` in a SQLite file that survives restarts and may be shared by the processes
of one machine, or with ``--tasks-redis URL`` in Redis, shared by processes on any machine
(the ``tasks-redis`` extra); ``--task-lease SECONDS`` fails a task whose run stopped renewing
its lease (a process that died mid-task). With ``--docket URL`` too (the ``tasks-docket``
extra) the rounds of tasks run on ``mrtr-worker fixtures:Everything().handle --redis URL
--replay-safe`` processes, not here (:class:`mrtr_sansio.adapters.docket.DocketRunner`).
With a key ring and ``--tasks-db`` or ``--tasks-redis``, the task records are encrypted at
rest under the ring (:class:`mrtr_sansio.sealing.RecordEncryption`, the ``crypto`` extra;
``--tasks-in-clear`` turns it off); ``kill -HUP`` gives the store the reloaded ring too, and
Docket workers need the same ring (``mrtr-worker --state-keys-file PATH``).

``--trace-file PATH`` exports an OpenTelemetry span for every request, shim leg and task to
PATH, one JSON object a line (:class:`mrtr_sansio.otel.OtelObserver`; needs the
``opentelemetry-sdk`` package): ``examples/scale/trace.py`` reads three servers' files back as
one trace.

It is served by :func:`mrtr_sansio.adapters.serve.serve_http`: idle and slow connections are
closed, connections are capped, ambiguous framing is refused, and uvicorn picks the loop
(uvloop when installed). The legacy session caps and idle timeout are options too (``--help``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TextIO

import attrs

import mrtr_sansio as m
from mrtr_sansio.adapters.asgi import LOCAL_HOSTS, McpHttpApp
from mrtr_sansio.adapters.keyfile import KeyRingError, decode_keys, read_key_file
from mrtr_sansio.adapters.serve import ServeOptions, http_server
from mrtr_sansio.adapters.stores import (
    RedisReplayGuard,
    RedisTaskStore,
    SqliteReplayGuard,
    SqliteTaskStore,
)
from mrtr_sansio.observe import Observer
from mrtr_sansio.tasks import TaskStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fixtures import Everything, server_config

__all__ = ["build_app", "file_observer", "load_keys", "main", "reload_keys"]

log = logging.getLogger("mrtr_sansio.examples.http")


def load_keys(file: str | None = None, env: str | None = None) -> list[bytes] | None:
    """The key ring from a file (``read_key_file``'s format, shared with ``mrtr-worker``) or
    an environment variable (the same keys, separated by commas or spaces), or None when
    neither is given."""
    if file is not None and env is not None:
        raise KeyRingError("give --state-keys-file or --state-keys-env, not both")
    if file is not None:
        return read_key_file(file)
    if env is None:
        return None
    value = os.environ.get(env)
    if value is None:
        raise KeyRingError(f"environment variable {env} is not set")
    return decode_keys(value.replace(",", " ").split(), f"environment variable {env}")


Codec = Literal["hmac-sha256", "aes-256-gcm"]


def build_app(
    keys: Sequence[bytes] | None,
    *,
    codec: Codec = "hmac-sha256",
    audience: str | None = None,
    allowed_hosts: Sequence[str] = LOCAL_HOSTS,
    ttl: float = 600.0,
    tasks_db: str | None = None,
    tasks_redis: str | None = None,
    task_lease: float | None = None,
    sessions: Mapping[str, Any] | None = None,
    observer: Observer | None = None,
    replay_db: str | None = None,
    replay_redis: str | None = None,
    docket: str | None = None,
    encrypt_records: bool = True,
    legacy: bool = True,
) -> McpHttpApp:
    """The fixtures' ASGI app, sealing state with ``keys`` (a key for this process when None),
    tokens valid ``ttl`` seconds. A ring given in ``keys`` can be replaced later with
    :func:`reload_keys`. ``sessions`` sets ``ServerConfig`` session fields (``max_sessions``,
    ``max_sessions_per_principal``, ``session_idle_timeout``); ``observer`` is told what
    every connection does (:func:`file_observer`). ``replay_db`` (a SQLite file) or
    ``replay_redis`` (a Redis URL) is the replay guard that makes each token single-use
    across the processes sharing it. ``docket`` (a Redis URL) has Docket workers run the
    tasks' rounds (the fixtures are replay-safe: ``mrtr-check replay`` checks them). A durable
    task store given a ring in ``keys`` encrypts its records under it unless
    ``encrypt_records`` is False. ``legacy=False`` serves the 2026-07-28 wire only (what the
    bridge's tests put behind it).

    Raises ``ValueError`` for an unusable key ring (a key shorter than 32 bytes, duplicates).
    """
    sealing: m.sealing.StateProtector
    guard: m.sealing.ReplayGuard | None = None
    if replay_db is not None:
        guard = SqliteReplayGuard(replay_db)
    elif replay_redis is not None:
        guard = RedisReplayGuard.from_url(replay_redis)
    if keys is None:
        log.warning("no state key ring given: sealing with a key for this process only")
        sealing = m.sealing.RequestStateSecurity.ephemeral(
            codec=codec, audience=audience, ttl=ttl, replay_guard=guard
        )
    else:
        ring = m.sealing.RequestStateSecurity(
            keys, codec=codec, audience=audience, ttl=ttl, replay_guard=guard
        )
        sealing = m.sealing.SwappableStateProtector(ring)
    store: TaskStore | None = None
    durable = tasks_db is not None or tasks_redis is not None
    records = None
    if durable and keys is not None and encrypt_records:
        records = m.sealing.RecordEncryption(keys)
    if tasks_db is not None:
        store = SqliteTaskStore(tasks_db, encryption=records)
    elif tasks_redis is not None:
        store = RedisTaskStore.from_url(tasks_redis, encryption=records)
    config = attrs.evolve(
        server_config(request_state=sealing, task_store=store, task_lease=task_lease),
        **(sessions or {}),
        observer=observer,
    )
    runner = None
    if docket is not None:
        from mrtr_sansio.adapters.docket import DocketRunner

        runner = DocketRunner(config, docket, replay_safe=True)
    return McpHttpApp(
        Everything().handle,
        config,
        allowed_hosts=allowed_hosts,
        task_runner=runner,
        legacy=legacy,
    )


def file_observer(out: TextIO, instance: str) -> Observer:
    """An :class:`~mrtr_sansio.otel.OtelObserver` whose spans go to ``out`` (one JSON object a
    line, written and flushed as each span ends), from the service ``mrtr-example-http`` whose
    ``service.instance.id`` is ``instance``. Needs ``opentelemetry-sdk``."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    from mrtr_sansio.otel import OtelObserver

    resource = Resource.create(
        {"service.name": "mrtr-example-http", "service.instance.id": instance}
    )
    provider = TracerProvider(resource=resource)
    exporter = ConsoleSpanExporter(out=out, formatter=lambda s: s.to_json(indent=None) + "\n")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OtelObserver(provider, to_epoch=float)  # the server clock is time.time already


def reload_keys(app: McpHttpApp, file: str) -> bool:
    """Read the key ring ``file`` again and seal and unseal with it from now on (same codec,
    audience and TTL), and encrypt the task records with it when they were encrypted. A file
    that cannot be used is logged and the current ring kept."""
    protector = app.config.request_state
    if not isinstance(protector, m.sealing.SwappableStateProtector):
        raise TypeError("the app was not built with a key ring (build_app(keys=...))")
    current = protector.current
    if not isinstance(current, m.sealing.RequestStateSecurity):
        raise TypeError(f"cannot tell the options of a {type(current).__name__} to reload")
    codec: Codec = (
        "aes-256-gcm" if isinstance(current.codec, m.sealing.AesGcmCodec) else "hmac-sha256"
    )
    try:
        keys = load_keys(file=file)
        assert keys is not None  # a file was given
        ring = m.sealing.RequestStateSecurity(
            keys,
            codec=codec,
            audience=current.audience,
            ttl=current.ttl,
            replay_guard=current.replay_guard,
        )
        store = app.config.tasks.store if app.config.tasks is not None else None
        encrypted = isinstance(store, SqliteTaskStore | RedisTaskStore) and (
            store.encryption is not None
        )
        records = m.sealing.RecordEncryption(keys) if encrypted else None
    except (ValueError, OSError) as exc:
        log.error("state key ring NOT reloaded from %s, the current one stays: %s", file, exc)
        return False
    protector.swap(ring)
    if records is not None:
        assert isinstance(store, SqliteTaskStore | RedisTaskStore)
        store.encryption = records  # rotation on a store in use: read at each record
    # A key change is a security event: logged at the default level. Deployment scripts wait
    # for this line (examples/scale/run.py does).
    log.warning("state key ring reloaded from %s: %d key(s)", file, len(keys))
    return True


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also accept this name in Host/Origin (default: localhost names only)",
    )
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument("--state-keys-file", metavar="PATH", help="key ring file, one key a line")
    keys.add_argument("--state-keys-env", metavar="NAME", help="environment variable with keys")
    parser.add_argument(
        "--state-codec",
        choices=["hmac-sha256", "aes-256-gcm"],
        default="hmac-sha256",
        help="integrity only, or also confidentiality (needs the crypto extra)",
    )
    parser.add_argument("--audience", help="this server's name, bound into sealed state")
    parser.add_argument(
        "--state-ttl",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="how long a sealed requestState stays valid (default 600)",
    )
    tasks = parser.add_mutually_exclusive_group()
    tasks.add_argument("--tasks-db", metavar="PATH", help="keep tasks in this SQLite file")
    tasks.add_argument("--tasks-redis", metavar="URL", help="keep tasks in this Redis")
    parser.add_argument(
        "--docket",
        metavar="URL",
        help="run the tasks' rounds on mrtr-worker processes through the Docket at this Redis "
        "(with --tasks-redis)",
    )
    parser.add_argument(
        "--tasks-in-clear",
        action="store_true",
        help="do not encrypt the task records under the key ring (they are by default)",
    )
    replay = parser.add_mutually_exclusive_group()
    replay.add_argument(
        "--replay-db", metavar="PATH", help="single-use requestState: a SQLite replay guard"
    )
    replay.add_argument(
        "--replay-redis", metavar="URL", help="single-use requestState: a Redis replay guard"
    )
    parser.add_argument(
        "--task-lease",
        type=float,
        metavar="SECONDS",
        help="fail a task whose run has not renewed its lease for this long",
    )
    sessions = parser.add_argument_group("legacy sessions")
    defaults = m.ServerConfig()
    sessions.add_argument(
        "--max-sessions",
        type=int,
        default=defaults.max_sessions,
        metavar="N",
        help="sessions at once; the longest idle gives way (default %(default)s)",
    )
    sessions.add_argument(
        "--max-sessions-per-principal",
        type=int,
        default=defaults.max_sessions_per_principal,
        metavar="N",
        help="sessions one principal may hold (default %(default)s)",
    )
    sessions.add_argument(
        "--session-idle-timeout",
        type=float,
        default=defaults.session_idle_timeout,
        metavar="SECONDS",
        help="an idle session ends after this (default %(default)s)",
    )
    connections = parser.add_argument_group("connections (serve_http)")
    serve = ServeOptions()
    connections.add_argument(
        "--keep-alive-timeout",
        type=float,
        default=serve.keep_alive_timeout,
        metavar="SECONDS",
        help="close a keep-alive connection idle this long between requests (default %(default)s)",
    )
    connections.add_argument(
        "--request-timeout",
        type=float,
        default=serve.request_timeout,
        metavar="SECONDS",
        help="close a connection whose request has not fully arrived by then, silent ones "
        "included (default %(default)s)",
    )
    connections.add_argument(
        "--limit-concurrency",
        type=int,
        default=serve.limit_concurrency,
        metavar="N",
        help="connections and requests at once, 503 beyond; kept under the open-file limit "
        "(default %(default)s)",
    )
    connections.add_argument(
        "--backlog",
        type=int,
        default=serve.backlog,
        metavar="N",
        help="connections queued before accept (default %(default)s)",
    )
    connections.add_argument(
        "--max-head-bytes",
        type=int,
        default=serve.max_head_bytes,
        metavar="N",
        help="largest request head, h11 parser (default %(default)s)",
    )
    connections.add_argument(
        "--http",
        choices=["auto", "h11", "httptools"],
        default=serve.http,
        help="HTTP parser; auto prefers httptools (default %(default)s)",
    )
    parser.add_argument(
        "--trace-file",
        metavar="PATH",
        help="append an OpenTelemetry span per request to PATH, one JSON a line "
        "(needs opentelemetry-sdk)",
    )
    parser.add_argument(
        "--modern-only",
        action="store_true",
        help="serve 2026-07-28 only: no initialize, no sessions (a modern-only server)",
    )
    parser.add_argument("--log-level", default="warning")
    return parser.parse_args(argv)


def serve_options(args: argparse.Namespace) -> ServeOptions:
    """The connection options given on the command line (ValueError for a bad value)."""
    return ServeOptions(
        keep_alive_timeout=args.keep_alive_timeout,
        request_timeout=args.request_timeout,
        limit_concurrency=args.limit_concurrency,
        backlog=args.backlog,
        max_head_bytes=args.max_head_bytes,
        http=args.http,
    )


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    try:
        keys = load_keys(args.state_keys_file, args.state_keys_env)
        observer = None
        if args.trace_file is not None:
            spans = open(args.trace_file, "a", encoding="utf-8")  # noqa: SIM115 - for life
            observer = file_observer(spans, f"{args.host}:{args.port}")
        app = build_app(
            keys,
            codec=args.state_codec,
            audience=args.audience,
            allowed_hosts=[*LOCAL_HOSTS, *args.allow_host],
            ttl=args.state_ttl,
            tasks_db=args.tasks_db,
            tasks_redis=args.tasks_redis,
            task_lease=args.task_lease,
            sessions={
                "max_sessions": args.max_sessions,
                "max_sessions_per_principal": args.max_sessions_per_principal,
                "session_idle_timeout": args.session_idle_timeout,
            },
            observer=observer,
            replay_db=args.replay_db,
            replay_redis=args.replay_redis,
            docket=args.docket,
            encrypt_records=not args.tasks_in_clear,
            legacy=not args.modern_only,
        )
        options = serve_options(args)
    except (ValueError, OSError, ImportError) as exc:
        sys.exit(f"server.py: {exc}")
    server = http_server(app, args.host, args.port, options=options, log_level=args.log_level)
    if args.state_keys_file is not None and hasattr(signal, "SIGHUP"):
        reload = functools.partial(reload_keys, app, args.state_keys_file)
        signal.signal(signal.SIGHUP, functools.partial(_later, reload))
    server.run()  # no asyncio.run: uvicorn picks the loop (uvloop when installed)


def _later(callback: Any, _signum: int, _frame: object) -> None:
    """A signal handler that runs ``callback`` as a loop callback, between requests, rather
    than in the middle of whatever the interrupted code was doing."""
    asyncio.get_running_loop().call_soon_threadsafe(callback)


if __name__ == "__main__":
    main()
