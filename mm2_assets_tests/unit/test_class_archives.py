"""Creating a class archive (the Kafka JVMs' and the Spark driver's share one way): the file
appears whole or not at all, and a failed dump names the archive and the child's output."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mm2_assets.local.runtime import create_class_archive

WRITES = "import sys; open(sys.argv[1], 'wb').write(b'archive')"
FAILS = "import sys; open(sys.argv[1], 'wb').write(b'half'); sys.exit('the JVM refused')"


class DumpError(RuntimeError):
    pass


def _create(path: Path, script: str, *, force: bool = False) -> Path:
    return create_class_archive(
        path,
        script,
        kind="Test",
        error=DumpError,
        env=lambda partial: {**os.environ, "PARTIAL": str(partial)},
        force=force,
        timeout=60,
    )


def test_the_dump_becomes_the_archive_and_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "cds" / "a.jsa"
    assert _create(path, WRITES) == path
    assert path.read_bytes() == b"archive"
    assert _create(path, FAILS) == path  # kept: no dump runs
    assert sorted(p.name for p in path.parent.iterdir()) == ["a.jsa"]


def test_a_failed_dump_leaves_no_file_and_says_why(tmp_path: Path) -> None:
    path = tmp_path / "a.jsa"
    with pytest.raises(DumpError, match=r"creating the Test class archive .*a\.jsa failed"):
        _create(path, FAILS)
    assert list(tmp_path.iterdir()) == []  # neither the archive nor the partial dump
    with pytest.raises(DumpError, match="the JVM refused"):
        _create(path, FAILS, force=True)


def test_without_a_java_there_is_nothing_to_create() -> None:
    with pytest.raises(DumpError, match="no 'java' found"):
        create_class_archive(
            None, WRITES, kind="Test", error=DumpError, env=lambda _: {}, force=False, timeout=1
        )
