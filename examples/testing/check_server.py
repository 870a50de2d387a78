"""Check an MRTR server against the spec with mrtr_sansio.testing.ServerModel.

    python examples/testing/check_server.py                             # our fixtures, in process
    python examples/testing/check_server.py http://127.0.0.1:8000/mcp   # any server over HTTP

Without a URL the model drives the fixtures of ``examples/fixtures.py`` (the conformance
"everything" server) on a :class:`~mrtr_sansio.ServerConnection` in this process. With a URL it
POSTs to that Streamable HTTP endpoint (modern wire, 2026-07-28), e.g. ``examples/http/server.py``
or another SDK's server exposing the same conformance fixtures. ``--tool``/``--prompt``/
``--resource`` replace the default operations; see ``--help``. Exit status 0: no rule broken.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, settings

from mrtr_sansio.testing import (
    CHECKS,
    ModelConfig,
    Operation,
    SpecViolationError,
    check_server,
    http_endpoint,
    in_process_server,
    prompt,
    resource,
    tool,
)

#: What the conformance fixtures expose (the official suite's tool names).
DEFAULT_OPERATIONS = (
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


#: Our fixtures also have the booking demo, which takes arguments.
IN_PROCESS_EXTRA = (tool("book_trip", {"destination": "Lisbon", "guests": 2}, mrtr=True),)


def _operation(kind: str, spec: str) -> Operation:
    """``NAME[:mrtr|:plain][=JSON]``: ``mrtr`` asks for input on a first call, ``plain`` never;
    the JSON object is the arguments (tools and prompts)."""
    spec, _, arguments = spec.partition("=")
    name, _, how = spec.rpartition(":") if spec.endswith((":mrtr", ":plain")) else (spec, "", "")
    mrtr = {"mrtr": True, "plain": False}.get(how)
    args = json.loads(arguments) if arguments else None
    if kind == "tool":
        return tool(name, args, mrtr=mrtr)
    if kind == "prompt":
        return prompt(name, args, mrtr=mrtr)
    return resource(name, mrtr=mrtr)


def _in_process() -> Any:
    """The conformance fixtures on our ServerConnection, state sealed with a random key."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from fixtures import Everything, server_config

    import mrtr_sansio as m

    security = m.RequestStateSecurity.ephemeral()
    return in_process_server(Everything().handle, server_config(request_state=security))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", nargs="?", help="a Streamable HTTP endpoint (default: in process)")
    parser.add_argument("--tool", action="append", default=[], metavar="NAME[:mrtr|:plain][=JSON]")
    parser.add_argument(
        "--prompt", action="append", default=[], metavar="NAME[:mrtr|:plain][=JSON]"
    )
    parser.add_argument("--resource", action="append", default=[], metavar="URI[:mrtr|:plain]")
    parser.add_argument("--examples", type=int, default=50, help="hypothesis examples")
    parser.add_argument("--steps", type=int, default=25, help="rules per example")
    parser.add_argument("--header", action="append", default=[], metavar="NAME:VALUE")
    parser.add_argument("--bound-state", action="store_true", help="state is bound (SHOULD)")
    parser.add_argument("--single-use", action="store_true", help="state is single use")
    parser.add_argument("--no-tamper-check", action="store_true", help="state is not protected")
    parser.add_argument("--lenient", action="store_true", help="skip the suite's SHOULD checks")
    args = parser.parse_args(argv)

    operations = [_operation("tool", s) for s in args.tool]
    operations += [_operation("prompt", s) for s in args.prompt]
    operations += [_operation("resource", s) for s in args.resource]
    if args.url is None:
        server = _in_process()
        default = DEFAULT_OPERATIONS + IN_PROCESS_EXTRA
    else:
        default = DEFAULT_OPERATIONS
        headers = dict(h.split(":", 1) for h in args.header)
        server = http_endpoint(args.url, headers={k.strip(): v.strip() for k, v in headers.items()})
    config = ModelConfig(
        operations or default,
        reject_tampered_state=not args.no_tamper_check,
        reject_foreign_state=args.bound_state,
        single_use_state=args.single_use,
        reask_missing=not args.lenient,
        reject_invalid_answers=not args.lenient,
        ignore_unknown_keys=not args.lenient,
    )
    run = settings(
        max_examples=args.examples,
        stateful_step_count=args.steps,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=[HealthCheck.too_slow],
    )
    where = args.url or "the fixtures, in process"
    print(f"Checking {where}: {len(config.operations)} operations, {args.examples} examples")
    started = time.monotonic()
    try:
        check_server(server, config, settings=run)
    except SpecViolationError as error:
        print(f"\nFAILED after {time.monotonic() - started:.1f} s\n{error}")
        return 1
    print(f"OK in {time.monotonic() - started:.1f} s: no rule broken ({len(CHECKS)} checked)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
