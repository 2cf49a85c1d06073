"""Run tags every flow asset understands."""

from collections.abc import Mapping

FORCE_TAG = "mm2-assets/force"
"""Run tag (`true`) that does interval-gated work even when the last pass is younger than the
MM2 interval (sync.topic.configs / emit.checkpoints / sync.group.offsets / emit.heartbeats)."""

_FALSE = ("", "0", "false", "no", "off")


def is_forced(tags: Mapping[str, str]) -> bool:
    """Whether the run's tags ask for the work regardless of the interval."""
    value = tags.get(FORCE_TAG)
    return value is not None and value.strip().lower() not in _FALSE
