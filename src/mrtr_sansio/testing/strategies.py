"""Hypothesis strategies for MRTR wire values, valid and invalid, as plain JSON objects.

Everything here draws what goes on the wire (dicts, lists, strings), so the strategies serve any
implementation, not only this package. Valid strategies draw values the 2026-07-28 schema
accepts; ``invalid_*`` strategies draw values a receiver must refuse (wrong types, missing
fields, oversized values) for negative tests; the ``hostile_*`` ones draw whole messages and
raw JSON texts meant to break parsers.

Names and shapes follow DIGEST §2-§3: client capabilities including their edge forms (bare
``elicitation: {}`` means form mode; ``{"url": {}}`` alone does not), the three embedded request
kinds, ``inputRequests`` maps, answers that fit given requests, and request states.
"""

from ._embedded import (
    content_for_schema,
    elicit_form_requests,
    elicit_url_requests,
    form_schemas,
    input_request_keys,
    input_requests,
    input_requests_maps,
    input_required_results,
    input_response_for,
    input_responses_for,
    invalid_input_requests,
    invalid_input_required_results,
    invalid_input_response_for,
    invalid_input_responses,
    roots_requests,
    sampling_requests,
)
from ._hostile import chunked, hostile_json_texts, hostile_messages, wrong_type_variants
from ._values import (
    FULL_CAPABILITIES,
    MAX_SAFE_INTEGER,
    client_capabilities,
    client_infos,
    invalid_client_capabilities,
    invalid_envelopes,
    invalid_request_ids,
    invalid_request_states,
    json_values,
    modern_envelopes,
    modern_requests,
    request_ids,
    request_states,
    tampered_states,
)

__all__ = [
    "FULL_CAPABILITIES",
    "MAX_SAFE_INTEGER",
    "chunked",
    "client_capabilities",
    "client_infos",
    "content_for_schema",
    "elicit_form_requests",
    "elicit_url_requests",
    "form_schemas",
    "hostile_json_texts",
    "hostile_messages",
    "input_request_keys",
    "input_requests",
    "input_requests_maps",
    "input_required_results",
    "input_response_for",
    "input_responses_for",
    "invalid_client_capabilities",
    "invalid_envelopes",
    "invalid_input_requests",
    "invalid_input_required_results",
    "invalid_input_response_for",
    "invalid_input_responses",
    "invalid_request_ids",
    "invalid_request_states",
    "json_values",
    "modern_envelopes",
    "modern_requests",
    "request_ids",
    "request_states",
    "roots_requests",
    "sampling_requests",
    "tampered_states",
    "wrong_type_variants",
]
