"""Deduplicated submission (issue 26): a second submission with the same key returns the
first run, on every store, however many submissions race (16 threads, each with its own
store connection, released together), from the Python API and from ``tether submit --id``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tether.errors import DedupKeyTaken, ExecutionExists, TetherError, UsageError
from tether.runtime.runner import Runner
from tether.stores.base import Checkpointer
from tether.stores.open import open_checkpointer

RACERS = 16


def workflow(directory: Path, name: str = "deploy") -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(f"tether: 1\nname: {name}\ninputs:\n  branch: {{type: string}}\n"
                    "nodes:\n  go:\n    task: step\n    with: {b: '{{ inputs.branch }}'}\n",
                    encoding="utf-8")
    return path


def test_second_submission_returns_the_first_run(store: Checkpointer, tmp_path: Path) -> None:
    runner = Runner(workflow(tmp_path), store, {})
    first = runner.submit_run({"branch": "main"}, dedup_key="deploy-main-1")
    again = runner.submit_run({"branch": "other"}, dedup_key="deploy-main-1")
    assert (first.execution_id, first.created) == ("deploy-main-1", True)
    assert (again.execution_id, again.created, again.status) == ("deploy-main-1", False,
                                                                "queued")
    runs = store.find_runs(workflow="deploy", limit=10)
    assert [r.execution_id for r in runs] == ["deploy-main-1"]
    assert runs[0].inputs == {"branch": "main"}  # the first submission wins
    assert runner.submit({"branch": "x"}, dedup_key="deploy-main-1") == "deploy-main-1"


def test_a_key_of_another_workflow_is_refused(store: Checkpointer, tmp_path: Path) -> None:
    Runner(workflow(tmp_path), store, {}).submit({"branch": "a"}, dedup_key="k-1")
    other = Runner(workflow(tmp_path, "release"), store, {})
    with pytest.raises(DedupKeyTaken, match="workflow 'deploy'"):
        other.submit({"branch": "a"}, dedup_key="k-1")
    assert store.find_runs(workflow="release", limit=10) == []


def test_without_a_key_a_taken_id_still_raises(store: Checkpointer, tmp_path: Path) -> None:
    runner = Runner(workflow(tmp_path), store, {})
    runner.submit({"branch": "a"}, execution_id="fixed-1")
    with pytest.raises(ExecutionExists):
        runner.submit({"branch": "a"}, execution_id="fixed-1")
    with pytest.raises(UsageError, match="not both"):
        runner.submit({"branch": "a"}, execution_id="x", dedup_key="y")
    for bad in ("", "a\nb", "k" * 201, "a/b", "..x"):
        with pytest.raises(TetherError, match="dedup key"):
            runner.submit({"branch": "a"}, dedup_key=bad)


def _race(url: str, path: Path, key: str) -> list[tuple[int, str, bool] | BaseException]:
    """16 threads, each with its own connection, submit ``path`` with dedup key ``key`` at
    the same instant, racer ``n`` with the branch ``bN``: (n, execution id, created) or
    the exception, per racer."""
    stores = [open_checkpointer(url) for _ in range(RACERS)]
    barrier = threading.Barrier(RACERS)
    outcomes: list[tuple[int, str, bool] | BaseException] = []
    lock = threading.Lock()

    def submit(store: Checkpointer, n: int) -> None:
        runner = Runner(path, store, {})
        barrier.wait(60)
        try:
            done = runner.submit_run({"branch": f"b{n}"}, dedup_key=key)
            outcome: tuple[int, str, bool] | BaseException = (n, done.execution_id,
                                                              done.created)
        except BaseException as exc:  # reported by the callers' assertions
            outcome = exc
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=submit, args=(s, n)) for n, s in enumerate(stores)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        for s in stores:
            s.close()
    return outcomes


def test_sixteen_racing_submissions_make_one_run(shared_url: str, tmp_path: Path) -> None:
    """16 threads, each with its own connection, submit one key at the same instant: all get
    the same execution id, exactly one of them created it, one run is stored."""
    path = workflow(tmp_path)
    outcomes = _race(shared_url, path, "race-key-1")
    assert sorted(str(o[1:]) if isinstance(o, tuple) else repr(o) for o in outcomes) == sorted(
        [str(("race-key-1", True))] + [str(("race-key-1", False))] * (RACERS - 1))
    with open_checkpointer(shared_url) as setup:
        assert [r.execution_id for r in setup.find_runs(workflow="deploy", limit=50)] == \
            ["race-key-1"]


def test_cli_submit_id_twice_prints_the_first_run(shared_url: str, tmp_path: Path) -> None:
    path = workflow(tmp_path)
    env = {**os.environ}

    def submit(branch: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tether", "submit", str(path), "--db",
                               shared_url, "-i", f"branch={branch}", "--id", "cli-key-1"],
                              env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)

    first, second = submit("main"), submit("dev")
    assert (first.returncode, first.stdout.strip(), first.stderr) == (0, "cli-key-1", "")
    assert (second.returncode, second.stdout.strip()) == (0, "cli-key-1")
    assert "cli-key-1 already existed (queued); nothing was submitted" in second.stderr
    store = open_checkpointer(shared_url)
    try:
        runs = store.find_runs(workflow="deploy", limit=10)
        assert [(r.execution_id, r.inputs) for r in runs] == [("cli-key-1", {"branch": "main"})]
    finally:
        store.close()
    other = workflow(tmp_path, "release")
    refused = subprocess.run([sys.executable, "-m", "tether", "submit", str(other), "--db",
                              shared_url, "-i", "branch=x", "--id", "cli-key-1"], env=env,
                             cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0
    assert "already names a run of workflow 'deploy'" in refused.stderr
    assert "Traceback" not in refused.stderr


KEYED = """\
tether: 1
name: keyed-dedup
inputs:
  branch: {type: string}
concurrency: {key: "{{ inputs.branch }}", limit: 1, on_conflict: cancel_running}
nodes:
  go: {task: step}
"""


def test_racing_repeats_under_other_concurrency_keys_make_one_run_and_cancel_nothing(
        shared_url: str, tmp_path: Path) -> None:
    """16 submissions of one dedup key race, each with another branch, so each renders
    another concurrency key and takes another key's lock (PostgreSQL): one creates the run;
    the 15 others are told it existed, and the older run of each of their branches, which
    a ``cancel_running`` newcomer would cancel, is left alone (each repeat stored nothing).
    Before the fix every racer said it created the run and cancelled its branch's run."""
    path = tmp_path / "keyed-dedup.yaml"
    path.write_text(KEYED, encoding="utf-8")
    with open_checkpointer(shared_url) as setup:
        older = {n: Runner(path, setup, {}).submit({"branch": f"b{n}"}) for n in range(RACERS)}
        outcomes = _race(shared_url, path, "keyed-race-1")
        assert all(isinstance(o, tuple) for o in outcomes), outcomes
        winners = [o[0] for o in outcomes if isinstance(o, tuple) and o[2]]
        assert len(outcomes) == RACERS and len(winners) == 1, outcomes
        run = setup.get_run("keyed-race-1")
        assert run is not None and run.inputs == {"branch": f"b{winners[0]}"}
        statuses = {n: (r.status, r.cancel_requested_at is None) for n, eid in older.items()
                    if (r := setup.get_run(eid)) is not None}
    assert statuses.pop(winners[0])[0] == "cancelled"  # the winner superseded its own
    assert statuses == {n: ("queued", True) for n in range(RACERS) if n != winners[0]}
