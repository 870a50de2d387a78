"""What the model drives (operations) and how strict it is (ModelConfig)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from hypothesis import strategies as st

from mrtr_sansio._mcp.methods import MRTR_METHODS, NAME_FIELDS
from mrtr_sansio.protocol import LATEST_MODERN_VERSION

__all__ = ["ModelConfig", "Operation", "prompt", "resource", "tool"]

#: The param that names each operation's target (the methods that allow MRTR).
NAME_FIELD = {method: NAME_FIELDS[method] for method in sorted(MRTR_METHODS)}


@attrs.frozen
class Operation:
    """One thing the model may call: a tool, a prompt or a resource.

    ``arguments`` is a fixed mapping or a strategy drawing one (None: ``{}`` for tools and
    prompts, nothing for resources). ``mrtr`` says whether the operation asks for input:
    True (it must, on a first call declaring every capability), False (it must never), None
    (either).
    """

    method: str
    target: str
    arguments: Mapping[str, Any] | st.SearchStrategy[Mapping[str, Any]] | None = None
    mrtr: bool | None = None

    def __attrs_post_init__(self) -> None:
        if self.method not in NAME_FIELD:
            raise ValueError(f"method: must be one of {sorted(NAME_FIELD)}, not {self.method!r}")

    def draw_params(self, data: st.DataObject) -> dict[str, Any]:
        """The request params (without ``_meta``) for one call."""
        params: dict[str, Any] = {NAME_FIELD[self.method]: self.target}
        args = self.arguments
        if isinstance(args, st.SearchStrategy):
            params["arguments"] = dict(data.draw(args, label="arguments"))
        elif args is not None:
            params["arguments"] = dict(args)
        elif self.method != "resources/read":
            params["arguments"] = {}
        return params


def tool(
    name: str,
    arguments: Mapping[str, Any] | st.SearchStrategy[Mapping[str, Any]] | None = None,
    *,
    mrtr: bool | None = None,
) -> Operation:
    """A ``tools/call`` operation."""
    return Operation("tools/call", name, arguments, mrtr)


def prompt(
    name: str,
    arguments: Mapping[str, str] | st.SearchStrategy[Mapping[str, str]] | None = None,
    *,
    mrtr: bool | None = None,
) -> Operation:
    """A ``prompts/get`` operation (prompt arguments are strings)."""
    return Operation("prompts/get", name, arguments, mrtr)


def resource(uri: str, *, mrtr: bool | None = None) -> Operation:
    """A ``resources/read`` operation."""
    return Operation("resources/read", uri, None, mrtr)


def _operations(value: Sequence[Operation]) -> tuple[Operation, ...]:
    ops = tuple(value)
    if not ops:
        raise ValueError("operations: name at least one tool, prompt or resource to drive")
    return ops


@attrs.frozen
class ModelConfig:
    """What to drive and how strict to be. Defaults follow the spec's MUSTs and the official
    conformance suite's SHOULDs; relax a SHOULD only for a server that documents otherwise."""

    #: The tools, prompts and resources to call (see :func:`tool`, :func:`prompt`,
    #: :func:`resource`).
    operations: tuple[Operation, ...] = attrs.field(converter=_operations)
    #: Methods called with an envelope that must never answer ``input_required``.
    other_methods: tuple[str, ...] = attrs.field(
        default=("tools/list", "prompts/list", "resources/list", "server/discover"),
        converter=tuple,
    )
    protocol_version: str = LATEST_MODERN_VERSION
    client_info: Mapping[str, Any] | None = attrs.field(
        factory=lambda: {"name": "mrtr-sansio-model", "version": "1"}
    )
    #: Capabilities to declare; default :func:`strategies.client_capabilities` and, half the
    #: time, every capability.
    capabilities: st.SearchStrategy[dict[str, Any]] | None = None
    #: A tampered requestState must be a JSON-RPC error (MUST when state matters; the suite
    #: requires it).
    reject_tampered_state: bool = True
    #: State presented on another operation or other arguments must be an error (SHOULD).
    reject_foreign_state: bool = False
    #: State is single use: a second retry with the same state must be an error.
    single_use_state: bool = False
    #: Missing answers are asked again, not refused (S13, SHOULD).
    reask_missing: bool = True
    #: Invalid answers never complete the request (S11, SHOULD).
    reject_invalid_answers: bool = True
    #: Unknown ``_meta`` and ``inputResponses`` keys are ignored (S12, SHOULD).
    ignore_unknown_keys: bool = True
    #: Valid, complete answers with the echoed state are never refused with an error.
    accept_valid_answers: bool = True
    #: Rounds of one operation the model follows before dropping it.
    max_rounds: int = 10
    #: Extra check of each response, e.g. schema validation: ``(response, method)``; raise
    #: AssertionError to report a problem.
    validate: Callable[[Mapping[str, Any], str], None] | None = None
