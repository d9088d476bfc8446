"""The store side of the operator commands, through the real `tether` command (issue 8, items
12 and 13): `--db` URLs, commands that must not create a database, bounded `--limit`,
`--older-than` and `show` pages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tether.runtime.ids import new_execution_id
from tether.stores.sqlite import SQLiteCheckpointer

ENCODED = "s3cr3t%20pw"
SLOW = f"postgresql://tether:{ENCODED}@127.0.0.1:1/db?retry_seconds=0&connect_timeout=1"


def tether(*args: str, cwd: Path, debug: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TETHER_DB", "TETHER_DEBUG")}
    if debug:
        env["TETHER_DEBUG"] = "1"
    return subprocess.run([sys.executable, "-m", "tether", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


# --------------------------------------------------------------------------- --db


@pytest.mark.parametrize(("url", "message"), [
    ("postgress://u:s3cr3t@h/db", "did you mean postgresql://?"),
    ("postgresql://u:s3cr3t@h:99999/db", "the port must be between 1 and 65535"),
    ("postgresql://u:s3cr3t@h:port/db", "the port must be a number"),
    ("postgresql://u:s3cr3t@h/db?retry_seconds=abc", "retry_seconds must be a number"),
    ("postgresql://u:s3cr3t@h/db?retry_seconds=-5", "retry_seconds must be a number"),
    ("postgresql://u:s3cr3t@h/db?retry_seconds=1e309", "retry_seconds must be a number"),
    ("postgresql://u:s3cr3t@h/db?bogus=1", "unknown URL option 'bogus'"),
    ('postgresql://u:s3cr3t@h/db?schema=x";COMMIT;CREATE TABLE t(i int);--',
     "schema must be a plain identifier"),
    ("sqlite:///t.db?durability=maybe", "durability must be normal or full"),
    ("t.db", "a SQLite file is written sqlite:///t.db"),
])
def test_bad_db_urls_are_usage_errors(tmp_path: Path, url: str, message: str) -> None:
    """Exit 2 naming --db and the problem; no password, no traceback, nothing created (every
    command that opens a store, for the first URL; `runs` for the others)."""
    commands = [["runs"], ["pending"], ["show", "x"], ["prune", "--older-than", "1d"],
                ["resume", "x"], ["fork", "x"]]
    for command in commands if url.startswith("postgress:") else commands[:1]:
        result = tether(*command, "--db", url, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert "Invalid value for --db" in result.stderr and message in result.stderr
        assert "s3cr3t" not in result.stdout + result.stderr
        assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_unreachable_server_exits_1_without_the_password_even_in_debug(
        tmp_path: Path) -> None:
    for debug in (False, True):
        result = tether("runs", "--db", SLOW, cwd=tmp_path, debug=debug)
        assert result.returncode == 1, result.stderr
        assert "s3cr3t" not in result.stdout + result.stderr
        assert ("Traceback" in result.stderr) == debug


# --------------------------------------------------------------------------- no creation


@pytest.mark.parametrize("command", [
    ["runs"], ["show", "some-run"], ["pending"], ["prune", "--older-than", "7d"],
    ["resume", "some-run"], ["fork", "some-run"],
], ids=lambda c: c[0])
def test_commands_other_than_run_never_create_a_database(tmp_path: Path,
                                                         command: list[str]) -> None:
    """A mistyped --db path: exit 1, the path named, no file and no directory made."""
    missing = tmp_path / "typo" / "tether.db"
    result = tether(*command, "--db", f"sqlite:///{missing}", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().startswith(f"error: no database at {missing}")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- bounds


def test_runs_limit_and_prune_age_are_bounded(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 't.db'}"
    SQLiteCheckpointer(tmp_path / "t.db").close()
    for limit in ("99999999999999999999", "0", "-1", "100001"):
        result = tether("runs", "--limit", limit, "--db", db, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert "Invalid value for '--limit'" in result.stderr
    assert tether("runs", "--limit", "100000", "--db", db, cwd=tmp_path).returncode == 0
    for age, message in (("99999999999d", "longer than the limit of 366 days"),
                         ("367d", "longer than the limit of 366 days"),
                         ("7 days", "is not a duration like"), ("-1d", "is not a duration")):
        result = tether("prune", "--older-than", age, "--db", db, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert "Invalid value for '--older-than'" in result.stderr and message in result.stderr
    for age in ("0s", "366d", "500ms", "2w"):
        assert tether("prune", "--older-than", age, "--db", db, cwd=tmp_path).returncode == 0


# --------------------------------------------------------------------------- show pages


@pytest.fixture
def long_run(tmp_path: Path) -> tuple[str, str, list[str]]:
    """A real run of 605 checkpoints (a loop), in a SQLite file: (db URL, id, checkpoints)."""
    (tmp_path / "loop.yaml").write_text("""\
tether: 1
name: loop
nodes:
  step:
    task: t.step
    loop: {to: step, while: "{{ iteration < 604 }}", max_iterations: 1000}
""")
    (tmp_path / "t.py").write_text("from tether import task\n\n@task('t.step')\n"
                                   "def step():\n    return 1\n")
    db = f"sqlite:///{tmp_path / 't.db'}"
    eid = new_execution_id()
    result = tether("run", "loop.yaml", "--tasks", "t.py", "--db", db, "-q",
                    "--execution-id", eid, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    with SQLiteCheckpointer(tmp_path / "t.db") as store:
        ids = [r.checkpoint_id for r in store.rows(eid)]
    assert len(ids) > 600
    return db, eid, ids


def test_show_prints_one_page_and_the_command_for_the_next(tmp_path: Path,
                                                           long_run: tuple[str, str, list[str]],
                                                           ) -> None:
    db, eid, ids = long_run
    first = tether("show", eid, "--db", db, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    rows = [line for line in first.stdout.splitlines() if line.startswith("+")]
    assert {c for c in ids if c in first.stdout} == set(ids[:200])  # the page's checkpoints
    assert first.stderr.strip() == f"more checkpoints: tether show {eid} --after {ids[199]}"
    last = tether("show", eid, "--after", ids[-3], "--db", db, cwd=tmp_path)
    rows = [line for line in last.stdout.splitlines() if line.startswith("+")]
    assert {c for c in ids if c in last.stdout} == set(ids[-2:])
    assert "run_ended" in rows[-1] and last.stderr == ""


def test_show_json_pages_through_every_checkpoint(tmp_path: Path,
                                                  long_run: tuple[str, str, list[str]],
                                                  ) -> None:
    db, eid, ids = long_run
    seen: list[str] = []
    after: list[str] = []
    while True:
        result = tether("show", eid, "--json", "--limit", "250", *after, "--db", db,
                        cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        page = json.loads(result.stdout)
        shown = list(dict.fromkeys(e["checkpoint_id"] for e in page["events"]
                                   if e["checkpoint_id"]))
        assert len(shown) <= 250
        seen.extend(shown)
        if page["next_after"] is None:
            break
        after = ["--after", page["next_after"]]
    assert seen == ids
    too_many = tether("show", eid, "--limit", "100001", "--db", db, cwd=tmp_path)
    assert too_many.returncode == 2
