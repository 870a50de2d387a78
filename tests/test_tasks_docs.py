"""The tasks guide (``docs/tasks.md``) states what the code does: the status table it draws
and the defaults of its limits table."""

from __future__ import annotations

from pathlib import Path

from mrtr_sansio.tasks import TASK, TaskSettings

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "tasks.md"


def test_the_guide_draws_the_status_table() -> None:
    """The diagram and the table are generated from ``TASK`` at build time (docs/hooks)."""
    assert TASK.name == "task"
    assert "\n<!-- lifecycle: task -->\n" in GUIDE.read_text(encoding="utf-8")


def test_the_guide_states_the_real_defaults() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    settings = TaskSettings()
    for field in ("ttl_ms", "poll_interval_ms", "max_tasks", "max_rounds", "lease_seconds"):
        value = getattr(settings, field)
        assert f"| `{field}` | `{value}` |" in text, field
