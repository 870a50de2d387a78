"""The ``mrtr-worker`` command's parts that need no Docket: its options, the objects they
name, and the task records' key ring (the command itself is
:func:`mrtr_sansio.adapters.docket.main`)."""

from __future__ import annotations

import argparse
import importlib
import logging
from typing import Any

from mrtr_sansio import ServerConfig

from .keyfile import read_key_file

__all__ = ["encrypt_records", "resolve", "worker_parser"]

log = logging.getLogger("mrtr_sansio.adapters.docket")


def worker_parser(redelivery_timeout: float) -> argparse.ArgumentParser:
    """The options of ``mrtr-worker`` (``redelivery_timeout``: the default of its own)."""
    parser = argparse.ArgumentParser(
        prog="mrtr-worker", description="Run the rounds of MCP tasks queued on a Docket."
    )
    parser.add_argument("handler", help="the handler, package.module:name (as the front's)")
    parser.add_argument("--redis", required=True, help="the Docket's Redis URL")
    parser.add_argument(
        "--config",
        help="package.module:name of the ServerConfig (its task store shared with the "
        "fronts); default: a RedisTaskStore on --redis",
    )
    parser.add_argument(
        "--state-keys-file",
        metavar="PATH",
        help="the fronts' key ring file: the task records are encrypted under it (reloaded "
        "on SIGHUP)",
    )
    parser.add_argument("--docket", default="mrtr", help="the Docket's name (default: mrtr)")
    parser.add_argument("--concurrency", type=int, default=10, help="rounds at once (10)")
    parser.add_argument(
        "--redelivery-timeout",
        type=float,
        default=redelivery_timeout,
        help="seconds before a dead worker's round goes to another "
        f"({redelivery_timeout:g}; below the task lease)",
    )
    parser.add_argument(
        "--deadline", type=float, default=300.0, help="seconds a round may take (300)"
    )
    parser.add_argument(
        "--attempts", type=int, default=3, help="runs of a round a store fault may take (3)"
    )
    parser.add_argument(
        "--replay-safe",
        action="store_true",
        help="the handler is replay-safe: run it without checking",
    )
    parser.add_argument(
        "--replay-check",
        metavar="CALLABLE",
        help="package.module:name of a callable run at start-up that raises when the "
        "handler is not replay-safe (e.g. one calling mrtr_sansio.testing.check_replay)",
    )
    return parser


def resolve(spec: str) -> Any:
    """The object ``package.module:attr.path`` names; a part written ``name()`` is called
    with no arguments (``app:Tools().handle``)."""
    module_name, sep, path = spec.partition(":")
    if not sep or not module_name or not path:
        raise ValueError(f"{spec!r}: expected package.module:name (e.g. myapp.server:handler)")
    value: Any = importlib.import_module(module_name)
    for part in path.split("."):
        call = part.endswith("()")
        value = getattr(value, part[:-2] if call else part)
        if call:
            value = value()
    return value


def encrypt_records(config: ServerConfig, path: str) -> bool:
    """Give ``config``'s task store the ring in ``path`` as its records' encryption (as the
    fronts' stores have it); False, logged, when the file cannot be used (the old ring stays)."""
    from mrtr_sansio.sealing import RecordEncryption

    from .stores import RedisTaskStore, SqliteTaskStore

    store = config.tasks.store if config.tasks is not None else None
    if not isinstance(store, RedisTaskStore | SqliteTaskStore):
        raise ValueError(f"--state-keys-file: a {type(store).__name__} has no encryption")
    try:
        store.encryption = RecordEncryption(read_key_file(path))
    except ValueError as exc:  # KeyRingError, or a ring RecordEncryption refuses
        log.error("task record key ring NOT loaded: %s", exc)
        return False
    log.warning("task record key ring loaded from %s", path)
    return True
