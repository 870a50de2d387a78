"""Property-based testing for MRTR implementations, ours or anyone's (``testing`` extra).

* :mod:`mrtr_sansio.testing.strategies`: hypothesis strategies for wire values, valid and
  invalid (ids, envelopes, capabilities, embedded requests, answers, states, hostile input).
* :class:`ServerModel`: a hypothesis state machine that checks any MRTR server, given as a
  callable taking one modern JSON-RPC request and returning its response. Bind it with
  :meth:`ServerModel.against` or run it with :func:`check_server`.
* :func:`check_replay`: drives a handler written against our API round by round, as a client
  would, and checks that re-running it is safe (:data:`REPLAY_CHECKS`); ``mrtr-check replay``
  runs it from the command line.
* :func:`in_process_server` and :func:`http_endpoint` build such callables for a handler on our
  own :class:`~mrtr_sansio.ServerConnection` and for any Streamable HTTP URL.

Never imported by ``import mrtr_sansio``.
"""

from mrtr_sansio._extras import raise_missing_extra

try:
    import hypothesis  # noqa: F401  (every strategy and the model below are built on it)
except ModuleNotFoundError as exc:
    from ._command_hint import exit_if_the_command

    exit_if_the_command(exc)  # the mrtr-check script: one line and status 2, no traceback
    raise_missing_extra(exc, __name__, "testing")

from . import strategies
from ._checks import CHECKS, SpecViolationError
from ._inprocess import InProcessServer, in_process_server, run_to_completion
from ._model import Server, ServerModel, check_server
from ._operations import ModelConfig, Operation, prompt, resource, tool
from ._replay import check_replay, plain_answer
from ._replay_report import REPLAY_CHECKS, ReplayReport, ReplayRound, ReplayViolationError
from .http import HttpEndpoint, http_endpoint

__all__ = [
    "CHECKS",
    "REPLAY_CHECKS",
    "HttpEndpoint",
    "InProcessServer",
    "ModelConfig",
    "Operation",
    "ReplayReport",
    "ReplayRound",
    "ReplayViolationError",
    "Server",
    "ServerModel",
    "SpecViolationError",
    "check_replay",
    "check_server",
    "http_endpoint",
    "in_process_server",
    "plain_answer",
    "prompt",
    "resource",
    "run_to_completion",
    "strategies",
    "tool",
]

from mrtr_sansio._public import publish_errors  # after __all__, which it reads

publish_errors(globals(), __name__)
del publish_errors
