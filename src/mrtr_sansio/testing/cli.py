"""``mrtr-check``: the testing kit's command (installed with the ``testing`` extra).

    mrtr-check server http://127.0.0.1:8000/mcp        # ServerModel against any HTTP endpoint
    mrtr-check server --handler myapp.server:handler   # ... or a handler of ours, in process
    mrtr-check replay myapp.server:handler             # check_replay on every tool and prompt

``server`` runs :class:`~mrtr_sansio.testing.ServerModel` once and exits 0 when no rule of the
spec broke. ``replay`` lists the handler's tools, prompts and resources (or takes those named
with ``--tool``/``--prompt``/``--resource``), runs :func:`~mrtr_sansio.testing.check_replay`
on each and prints a report per operation; it exits 1 when any property broke. A target is
``package.module:name``, where a part written ``name()`` is called with no arguments
(``fixtures:Everything().handle``); the current directory and each ``--path`` are importable.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from mrtr_sansio import ServerConfig
from mrtr_sansio.protocol import CLIENT_CAPABILITIES, LATEST_MODERN_VERSION, PROTOCOL_VERSION_KEY

from ._checks import CHECKS, SpecViolationError
from ._embedded import content_for_schema
from ._inprocess import in_process_server
from ._model import Server, check_server
from ._operations import ModelConfig, Operation, prompt, resource, tool
from ._replay import PHASES, check_replay
from ._replay_report import ReplayViolationError, plural, wrap
from ._replay_run import Runner, resolve
from .http import http_endpoint

__all__ = [
    "CONFORMANCE_OPERATIONS",
    "discover",
    "main",
    "parse_operation",
    "server_command",
    "violations",
]

#: What ``server`` drives by default: the official conformance suite's MRTR fixtures.
CONFORMANCE_OPERATIONS = (
    tool("test_input_required_result_elicitation", mrtr=True),
    tool("test_input_required_result_sampling", mrtr=True),
    tool("test_input_required_result_list_roots", mrtr=True),
    tool("test_input_required_result_request_state", mrtr=True),
    tool("test_input_required_result_tampered_state", mrtr=True),
    tool("test_input_required_result_multiple_inputs", mrtr=True),
    tool("test_input_required_result_multi_round", mrtr=True),
    tool("test_input_required_result_capabilities"),
    tool("test_simple_text", mrtr=False),
    prompt("test_input_required_result_prompt", mrtr=True),
)


def parse_operation(kind: str, spec: str) -> Operation:
    """``NAME[:mrtr|:plain][=JSON]`` as an operation of ``kind`` (tool, prompt, resource):
    ``mrtr`` says it asks for input on a first call, ``plain`` that it never does; the JSON
    object is the arguments (tools and prompts)."""
    spec, _, arguments = spec.partition("=")
    name, _, how = spec.rpartition(":") if spec.endswith((":mrtr", ":plain")) else (spec, "", "")
    mrtr = {"mrtr": True, "plain": False}.get(how)
    args = json.loads(arguments) if arguments else None
    if kind == "tool":
        return tool(name, args, mrtr=mrtr)
    if kind == "prompt":
        return prompt(name, args, mrtr=mrtr)
    return resource(name, mrtr=mrtr)


def _named(args: argparse.Namespace) -> list[Operation]:
    ops = [parse_operation("tool", s) for s in args.tool]
    ops += [parse_operation("prompt", s) for s in args.prompt]
    return ops + [parse_operation("resource", s) for s in args.resource]


def _load(spec: str, what: str) -> Any:
    """The object ``spec`` names; a bad spec ends the command with status 2 and one line."""
    try:
        return resolve(spec)[2]
    except (ValueError, ImportError) as exc:
        print(f"mrtr-check: {what} {spec}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _config(spec: str | None) -> ServerConfig | None:
    if spec is None:
        return None
    config = _load(spec, "--config")
    if not isinstance(config, ServerConfig):
        print(
            f"mrtr-check: --config {spec}: not a ServerConfig but a {type(config).__name__}",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return config


def _common(parser: argparse.ArgumentParser) -> None:
    spec = "NAME[:mrtr|:plain][=JSON]"
    parser.add_argument("--tool", action="append", default=[], metavar=spec)
    parser.add_argument("--prompt", action="append", default=[], metavar=spec)
    parser.add_argument("--resource", action="append", default=[], metavar="URI[:mrtr|:plain]")
    parser.add_argument("--config", metavar="MODULE:NAME", help="the handler's ServerConfig")
    parser.add_argument(
        "--path", action="append", default=[], metavar="DIR", help="make DIR importable"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mrtr-check", description="Check MRTR servers and handlers with mrtr_sansio.testing."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    server = commands.add_parser("server", help="check a server against the spec (ServerModel)")
    server.add_argument("url", nargs="?", help="a Streamable HTTP endpoint")
    server.add_argument("--handler", metavar="MODULE:NAME", help="check this handler in process")
    _common(server)
    server.add_argument("--examples", type=int, default=50, help="hypothesis examples")
    server.add_argument("--steps", type=int, default=25, help="rules per example")
    server.add_argument("--header", action="append", default=[], metavar="NAME:VALUE")
    server.add_argument("--bound-state", action="store_true", help="state is bound (SHOULD)")
    server.add_argument("--single-use", action="store_true", help="state is single use")
    server.add_argument("--no-tamper-check", action="store_true", help="state is not protected")
    server.add_argument("--lenient", action="store_true", help="skip the suite's SHOULD checks")
    replay = commands.add_parser("replay", help="check that a handler is safe to re-run")
    replay.add_argument("handler", metavar="MODULE:NAME", help="the handler to check")
    _common(replay)
    replay.add_argument("--examples", type=int, default=50, help="flows per operation")
    replay.add_argument("--max-rounds", type=int, default=8, help="the round cap")
    replay.add_argument("--max-state-bytes", type=int, help="fail a larger state")
    replay.add_argument(
        "--watch", action="append", default=[], metavar="MODULE:FUNCTION", help="an effect"
    )
    replay.add_argument("--unsealed", action="store_true", help="pass string state through")
    return parser


def _settings(examples: int, **extra: Any) -> settings:
    extra.setdefault("phases", PHASES)
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        **extra,
    )


def server_command(
    args: argparse.Namespace,
    *,
    default_server: Callable[[], Server] | None = None,
    default_operations: Sequence[Operation] = CONFORMANCE_OPERATIONS,
) -> int:
    """``mrtr-check server``. Without a URL or ``--handler``, ``default_server()`` is checked
    on ``default_operations`` (unless operations are named): that is how a wrapper such as
    ``examples/testing/check_server.py`` checks its own fixtures."""
    defaults: Sequence[Operation] = CONFORMANCE_OPERATIONS
    if args.url is not None:
        headers = dict(h.split(":", 1) for h in args.header)
        server: Server = http_endpoint(
            args.url, headers={k.strip(): v.strip() for k, v in headers.items()}
        )
        where = args.url
    elif args.handler is not None:
        server = in_process_server(_load(args.handler, "--handler"), _config(args.config))
        where = f"{args.handler}, in process"
    elif default_server is not None:
        server, where = default_server(), "the fixtures, in process"
        defaults = default_operations
    else:
        print("mrtr-check server: give a URL or --handler MODULE:NAME", file=sys.stderr)
        return 2
    config = ModelConfig(
        _named(args) or tuple(defaults),
        reject_tampered_state=not args.no_tamper_check,
        reject_foreign_state=args.bound_state,
        single_use_state=args.single_use,
        reask_missing=not args.lenient,
        reject_invalid_answers=not args.lenient,
        ignore_unknown_keys=not args.lenient,
    )
    run = _settings(
        args.examples,
        stateful_step_count=args.steps,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
    )
    print(f"Checking {where}: {len(config.operations)} operations, {args.examples} examples")
    started = time.monotonic()
    try:
        check_server(server, config, settings=run)
    except Exception as error:
        found = violations(error)
        if not found:
            raise
        took = f"FAILED after {time.monotonic() - started:.1f} s"
        if len(found) == 1:
            print(f"\n{took}\n{found[0]}")
        else:  # hypothesis found distinct failures: each one's report, not a group traceback
            print(f"\n{took}: {len(found)} distinct failures")
            for n, each in enumerate(found, 1):
                print(f"\n--- failure {n} of {len(found)}\n{each}")
        return 1
    print(f"OK in {time.monotonic() - started:.1f} s: no rule broken ({len(CHECKS)} checked)")
    return 0


def violations(error: BaseException) -> list[SpecViolationError]:
    """The spec violations ``error`` is: itself, or every leaf of an exception group (what
    hypothesis raises when it finds several distinct failures); empty when any part of it is
    something else (a bug to show as a traceback, not a report)."""
    if isinstance(error, SpecViolationError):
        return [error]
    parts = getattr(error, "exceptions", None)  # BaseExceptionGroup (3.11+ or the backport)
    if not isinstance(parts, tuple) or not parts:
        return []
    found: list[SpecViolationError] = []
    for part in parts:
        leaves = violations(part)
        if not leaves:
            return []
        found += leaves
    return found


def discover(runner: Runner) -> list[Operation]:
    """The tools, prompts and resources a handler lists, with arguments drawn from their
    schemas (prompt arguments: short strings)."""
    ops: list[Operation] = []
    listings = {"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources"}
    for method, field in listings.items():
        message = {"jsonrpc": "2.0", "id": method, "method": method, "params": {"_meta": _META}}
        out = runner.run(message, 1_800_000_000.0, 0)
        items = out.payload.get(field) if out.kind == "result" else None
        for item in items if isinstance(items, list) else []:
            if field == "tools":
                schema = item.get("inputSchema")
                ops.append(tool(item["name"], content_for_schema(schema or {})))
            elif field == "prompts":
                text = st.text("abcdefghij XYZ", min_size=1, max_size=12)
                args = item.get("arguments") or []
                fixed = {a["name"]: text for a in args if a.get("required")}
                optional = {a["name"]: text for a in args if not a.get("required")}
                ops.append(prompt(item["name"], st.fixed_dictionaries(fixed, optional=optional)))
            else:
                ops.append(resource(item["uri"]))
    return ops


_META = {PROTOCOL_VERSION_KEY: LATEST_MODERN_VERSION, CLIENT_CAPABILITIES: {}}


def replay_command(args: argparse.Namespace) -> int:
    """``mrtr-check replay``: check_replay on each operation, one report each."""
    handler = _load(args.handler, "handler")
    config = _config(args.config)
    for spec in args.watch:
        _load(spec, "--watch")
    ops = _named(args) or discover(Runner(handler, config))
    if not ops:
        print(f"{args.handler}: lists no tools, prompts or resources; name them (--tool ...)")
        return 2
    print(
        f"Checking that {args.handler} is safe to replay: {plural(len(ops), 'operation')}, up to "
        f"{args.examples} flows each, round cap {args.max_rounds}"
    )
    failed = 0
    started = time.monotonic()
    for op in ops:
        name = f"{op.method} {op.target}"
        try:
            report = check_replay(
                handler,
                op,
                config=config,
                max_rounds=args.max_rounds,
                max_state_bytes=args.max_state_bytes,
                watch=args.watch,
                sealed=not args.unsealed,
                settings=_settings(args.examples),
            )
        except ReplayViolationError as error:
            failed += 1
            print(f"\nFAILED {name}\n{error}\n")
            continue
        states = " ".join(str(n) for _, n in report.largest_state)
        shown = f", largest state per round (bytes): {states}" if states else ", no state"
        refused = f", {plural(report.gave_up, 'flow')} ended refused" if report.gave_up else ""
        flows, rounds = plural(report.flows, "flow"), plural(report.rounds, "round")
        print(wrap(f"ok  {name}: {flows}, up to {rounds}{shown}{refused}"))
    took = time.monotonic() - started
    if failed:
        print(
            f"FAILED: {failed} of {plural(len(ops), 'operation')} broke a replay property "
            f"({took:.1f} s)"
        )
        return 1
    print(f"OK: no replay problem in {plural(len(ops), 'operation')} ({took:.1f} s)")
    return 0


def main(
    argv: Sequence[str] | None = None,
    *,
    default_server: Callable[[], Server] | None = None,
    default_operations: Sequence[Operation] = CONFORMANCE_OPERATIONS,
) -> int:
    """The ``mrtr-check`` console script; returns the exit status (the keywords go to
    :func:`server_command`)."""
    args = _parser().parse_args(argv)
    sys.path[:0] = [*args.path, "."]
    if args.command == "server":
        return server_command(
            args, default_server=default_server, default_operations=default_operations
        )
    return replay_command(args)
