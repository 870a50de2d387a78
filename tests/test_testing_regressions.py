"""Core bugs the ServerModel found, pinned so they stay fixed.

Found by running ``mrtr_sansio.testing.ServerModel`` against a handler written with the typed
readers of ``InputResponses`` (tests/testing_servers.py): each malformed answer below made the
handler complete a request instead of asking again (the model's ``invalid-answers`` check, S11).
"""

from __future__ import annotations

from mrtr_sansio import InputResponses

TEXT = {"type": "text", "text": "Paris"}


def test_sampled_text_needs_a_whole_create_message_result() -> None:
    answers = InputResponses(
        {
            "no_role": {"content": TEXT, "model": "m"},
            "no_model": {"role": "assistant", "content": TEXT},
            "bad_role": {"role": "system", "content": TEXT, "model": "m"},
            "good": {"role": "assistant", "content": TEXT, "model": "m"},
        }
    )
    assert answers.sampled_text("no_role") is None
    assert answers.sampled_text("no_model") is None
    assert answers.sampled_text("bad_role") is None
    assert answers.sampled_text("good") == "Paris"


def test_root_uris_refuses_roots_without_a_uri() -> None:
    answers = InputResponses(
        {
            "no_uri": {"roots": [{"uri": "file:///a"}, {"name": "no uri"}]},
            "not_object": {"roots": ["file:///a"]},
            "empty": {"roots": []},
            "good": {"roots": [{"uri": "file:///a", "name": "A"}]},
        }
    )
    assert answers.root_uris("no_uri") is None
    assert answers.root_uris("not_object") is None
    assert answers.root_uris("empty") == []
    assert answers.root_uris("good") == ["file:///a"]


def test_elicitation_action_refuses_mistyped_content() -> None:
    answers = InputResponses(
        {
            "bad_content": {"action": "accept", "content": False},
            "null_content": {"action": "accept", "content": None},
            "url_accept": {"action": "accept"},
            "decline": {"action": "decline"},
        }
    )
    assert answers.elicitation_action("bad_content") is None
    assert answers.accepted_content("bad_content") is None
    assert answers.elicitation_action("null_content") is None
    assert answers.accepted_content("null_content") is None
    assert answers.elicitation_action("url_accept") == "accept"
    assert answers.elicitation_action("decline") == "decline"
