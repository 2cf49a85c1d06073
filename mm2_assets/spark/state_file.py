"""The state file a background Spark process leaves in its directory (`spark connect up`,
`spark cluster up`), so `down` and `status` find it later."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def write_state(path: Path, record: Any) -> Path:
    """Write the dataclass `record` to `path` as JSON; returns `path`."""
    path.write_text(json.dumps(asdict(record), indent=2))
    return path


def read_state(path: Path, cls: type[T]) -> T | None:
    """The `cls` recorded at `path`, or None when nothing is recorded."""
    if not path.exists():
        return None
    return cls(**json.loads(path.read_text()))
