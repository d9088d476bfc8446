"""The SQLite file on disk (issue 8, items 11 and 13): created private, never created by
a command that only reads.

A database file tether creates is ``0600`` (and its ``-wal``/``-shm`` files with it), each
directory it creates ``0700``, whatever the umask; what already exists keeps its mode. With
``create=False`` (every command but ``run``) a missing file is an error naming it, and nothing
appears on disk.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import new_run, row

from tether.errors import StoreError
from tether.stores.open import open_checkpointer
from tether.stores.sqlite import SQLiteCheckpointer


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o022, 0o000], ids=["umask022", "umask000"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """Run the test under a permissive umask: the modes must not depend on it."""
    previous = os.umask(request.param)
    yield request.param
    os.umask(previous)


def test_a_new_database_is_0600_in_new_directories_0700(tmp_path: Path, umask: int) -> None:
    path = tmp_path / "a" / "b" / "tether.db"
    store = SQLiteCheckpointer(path)
    eid = new_run(store)
    store.put(row(eid))
    assert mode(path) == 0o600
    assert mode(tmp_path / "a") == 0o700 and mode(tmp_path / "a" / "b") == 0o700
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        assert side.exists() and mode(side) == 0o600
    store.close()


def test_existing_directories_and_files_keep_their_modes(tmp_path: Path, umask: int) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    SQLiteCheckpointer(shared / "new.db").close()
    assert mode(shared) == 0o755 and mode(shared / "new.db") == 0o600
    existing = shared / "existing.db"
    existing.touch()
    existing.chmod(0o640)
    with SQLiteCheckpointer(existing) as store:
        new_run(store)
    assert mode(existing) == 0o640


def test_the_default_database_of_the_command_is_private(tmp_path: Path) -> None:
    """`tether run` in a fresh directory creates .tether/ 0700 and tether.db 0600."""
    (tmp_path / "w.yaml").write_text("tether: 1\nname: w\nnodes:\n  a: {task: t.a}\n")
    (tmp_path / "t.py").write_text("from tether import task\n\n@task('t.a')\n"
                                   "def a():\n    return 1\n")
    env = {k: v for k, v in os.environ.items() if k != "TETHER_DB"}
    result = subprocess.run([sys.executable, "-m", "tether", "run", "w.yaml", "--tasks",
                             "t.py", "-q"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert mode(tmp_path / ".tether") == 0o700
    assert mode(tmp_path / ".tether" / "tether.db") == 0o600


def test_read_only_open_of_a_missing_file_is_an_error_and_creates_nothing(
        tmp_path: Path) -> None:
    path = tmp_path / "typo" / "tether.db"
    for opener in (lambda: SQLiteCheckpointer(path, create=False),
                   lambda: open_checkpointer(f"sqlite:///{path}", create=False)):
        with pytest.raises(StoreError, match=f"no database at {path}"):
            opener()
    assert list(tmp_path.iterdir()) == []


def test_read_only_open_of_an_existing_file_reads_and_writes(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with SQLiteCheckpointer(path) as store:
        eid = new_run(store)
    with SQLiteCheckpointer(path, create=False) as store:
        assert store.get_run(eid) is not None
        store.put(row(eid))
        assert len(store.rows(eid)) == 1
