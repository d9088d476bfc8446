"""``tether resume --enqueue --value`` on a current SQLite file records the answer without
SQLAlchemy or the runtime (``stores/sqlite_answer.py``, issue 25) and must be
indistinguishable from the full path: the same rows in every table, the same output and
exit codes, the same refusals, runs that continue to the same end, and one winner among
racing answerers whichever path each takes.

As in ``test_submit_paths.py``, the full path is reached through the real command with an
equivalent URL that is not plain (``?durability=normal``).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from test_submit_paths import REFUND, ROOT, TASKS, _said, dump, tether

from tether.errors import AlreadyResumed, ResumeError
from tether.runtime.runner import Runner
from tether.stores.queueing import WorkerRecord
from tether.stores.sqlite import SQLiteCheckpointer
from tether.stores.sqlite_answer import record_answer

WAITS = """\
tether: 1
name: waits
nodes:
  review:
    approval:
      reason: ship?
      form:
        approved: {type: boolean}
        level: {type: string, enum: [low, high], default: low}
      timeout: 1h
  ask:
    approval: {reason: free}
  after:
    needs: [ask, review]
    approval:
      reason: last
      form: {ok: {type: boolean}}
output:
  shipped: "{{ nodes.review.output.approved and nodes.after.output.ok }}"
"""

Pair = tuple[Path, str, Path, str]


@pytest.fixture
def pair(tmp_path: Path) -> Pair:
    """Two current SQLite files: one reached by a plain URL (the fast path), one by the
    equivalent URL the full store reads."""
    fast, full = tmp_path / "fast.db", tmp_path / "full.db"
    for db in (fast, full):
        SQLiteCheckpointer(db).close()
    return fast, f"sqlite:///{fast}", full, f"sqlite:///{full}?durability=normal"


def _both(pair: Pair, *args: str, cwd: Path) -> tuple[int, str, str]:
    """Run the command on both stores; what it said (the same on both: asserted)."""
    _, fast_url, _, full_url = pair
    fast = tether(*[fast_url if a == "DB" else a for a in args], cwd=cwd)
    full = tether(*[full_url if a == "DB" else a for a in args], cwd=cwd)
    assert _said(fast) == _said(full), (args, fast.stderr, full.stderr)
    return _said(fast)


def _start(pair: Pair, cwd: Path, run_id: str, amount: int = 500) -> None:
    code, _, err = _both(pair, "run", str(REFUND), "--tasks", str(TASKS), "--db", "DB", "-q",
                         "-i", "account=ACC-42", "-i", f"amount={amount}", "--execution-id",
                         run_id, cwd=cwd)
    assert code == (4 if amount > 100 else 0), err


def _status(db: Path, run_id: str) -> str:
    with sqlite3.connect(db) as connection:
        row = connection.execute("SELECT status FROM runs WHERE execution_id = ?",
                                 (run_id,)).fetchone()
    return str(row[0])


def test_both_paths_record_the_same_rows_and_continue_alike(pair: Pair,
                                                            tmp_path: Path) -> None:
    fast_db, _, full_db, _ = pair
    for run_id in ("refund-1", "refund-2", "prefixed-0001"):
        _start(pair, tmp_path, run_id)
    answers = [
        ("refund-1", "--value", '{"approved": true, "note": "ok \u00e9"}'),
        ("refund-2", "--value", '{"approved": false}', "--queue", "slow", "--json"),
        ("prefixed-00", "--node", "review", "--value", '{"approved": true}'),  # a prefix
    ]
    for argv in answers:
        code, out, err = _both(pair, "resume", *argv, "--enqueue", "--db", "DB", cwd=tmp_path)
        assert code == 0 and "answer recorded for 'review'" in out, err
    assert dump(fast_db) == dump(full_db)
    with sqlite3.connect(fast_db) as connection:
        assert connection.execute("SELECT queue FROM runs WHERE execution_id = 'refund-2'"
                                  ).fetchone() == ("slow",)
    # the answered runs continue here to the same end, in the same rows
    for run_id in ("refund-1", "refund-2", "prefixed-0001"):
        code, out, err = _both(pair, "resume", run_id, "--tasks", str(TASKS), "--db", "DB",
                               cwd=tmp_path)
        assert code == 0 and "completed run" in out, err
    assert dump(fast_db) == dump(full_db)
    assert _status(fast_db, "refund-2") == "completed"


def test_the_json_output_is_the_full_paths(pair: Pair, tmp_path: Path) -> None:
    _start(pair, tmp_path, "refund-j")
    code, out, err = _both(pair, "resume", "refund-j", "--enqueue", "--json", "--db", "DB",
                           "--value", '{"approved": true}', cwd=tmp_path)
    assert code == 0, err
    assert json.loads(out)["status"] == "queued"
    assert dump(pair[0]) == dump(pair[2])


# Each step runs on both stores, in order (the state carries over): what it says and its
# exit code must be the same, and so must every row after it.
MISTAKES: list[tuple[tuple[str, ...], int, str]] = [
    (("nope-0000", "--value", "{}"), 1, "no run with execution id"),
    (("twin-run", "--value", "{}"), 2, "ambiguous"),  # an ambiguous prefix
    (("twin", "--value", "{}"), 2, "at least 8 characters"),
    (("twin-run-1", "--value", "not json"), 2, "--value"),
    (("twin-run-1", "--value", "[1]"), 2, "JSON object"),
    (("twin-run-1", "--value", '{"approved": "yes"}'), 1, "must be a boolean"),
    (("twin-run-1", "--value", '{"approved": true, "extra": 1}'), 1, "unknown field"),
    (("twin-run-1", "--value", '{"note": "x"}'), 1, "missing required field"),
    (("twin-run-1", "--value", '{"approved": true, "n": "\\u0000"}'), 1, "NUL"),
    (("twin-run-1", "--value", '{"approved": true}', "--queue", " "), 2, "queue"),
    (("twin-run-1", "--value", '{"approved": true}', "--plan", "PLAN"), 2, "--plan"),
    (("twin-run-1", "--node", "nosuch", "--value", '{"approved": true}'), 1,
     "not waiting for input"),
    (("twin-run-1", "--value", '{"approved": true}'), 0, "answer recorded"),
    (("twin-run-1", "--value", '{"approved": true}'), 1, "not waiting for input"),
    (("done-0001", "--value", '{"approved": true}'), 1, "already"),  # completed
    (("w-1", "--value", "{}"), 1, "2 interrupts are pending"),
    (("w-1", "--node", "review", "--value", '{"approved": true, "level": "mid"}'), 1,
     "must be one of"),
    (("w-1", "--node", "ask", "--value", '{"anything": [1, 2]}'), 0, "recorded for 'ask'"),
    (("w-1", "--node", "ask", "--value", '{"anything": [1, 2]}'), 1, "not waiting"),
    # an approval with a deadline (before it): the full path takes it, alike
    (("w-1", "--node", "review", "--value", '{"approved": true}'), 0, "for 'review'"),
    (("w-1",), 0, "left to the workers"),  # no value: answered since it paused
    (("gone-0001", "--value", '{"approved": true}'), 1, "cancelled"),
]


def test_both_paths_refuse_alike(pair: Pair, tmp_path: Path) -> None:
    fast_db, _, full_db, _ = pair
    waits = tmp_path / "waits.yaml"
    waits.write_text(WAITS)
    for run_id in ("twin-run-1", "twin-run-2", "gone-0001"):
        _start(pair, tmp_path, run_id)
    _start(pair, tmp_path, "done-0001", amount=20)
    code, _, err = _both(pair, "run", str(waits), "--db", "DB", "-q", "--execution-id",
                         "w-1", cwd=tmp_path)
    assert code == 4, err
    code, _, err = _both(pair, "cancel", "gone-0001", "--db", "DB", cwd=tmp_path)
    assert code == 0, err
    for argv, expected, says in MISTAKES:
        args = [str(waits) if a == "PLAN" else a for a in argv]
        code, out, err = _both(pair, "resume", *args, "--enqueue", "--db", "DB",
                               cwd=tmp_path)
        assert code == expected and says in out + err, (argv, out, err)
        assert dump(fast_db) == dump(full_db), argv


def _child_env(cwd: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"),
            "TETHER_EXAMPLE_LEDGER": str(cwd / "ledger.jsonl")}


def _answers(db: Path, run_id: str) -> list[Any]:
    with sqlite3.connect(db) as connection:
        return [json.loads(r[0]) for r in connection.execute(
            "SELECT value FROM decisions WHERE execution_id = ?", (run_id,))]


def test_racing_processes_on_both_paths_have_one_winner(pair: Pair, tmp_path: Path) -> None:
    fast_db, fast_url, _, _ = pair
    _start(pair, tmp_path, "race-1")
    urls = [fast_url, f"{fast_url}?durability=normal"] * 3  # the same file, both paths
    env_argv = [[sys.executable, "-m", "tether", "resume", "race-1", "--enqueue", "--db", url,
                 "--value", json.dumps({"approved": True, "note": str(i)})]
                for i, url in enumerate(urls)]
    env = _child_env(tmp_path)
    children = [subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for argv in env_argv]
    done = [(child.wait(120), *child.communicate()) for child in children]
    winners = [i for i, (code, _, _) in enumerate(done) if code == 0]
    assert len(winners) == 1, done
    for i, (code, _out, err) in enumerate(done):
        if i != winners[0]:
            assert code == 1 and ("not waiting for input" in err or "already" in err), err
    assert _answers(fast_db, "race-1") == [{"approved": True, "note": str(winners[0])}]


def test_racing_threads_on_both_paths_have_one_winner(pair: Pair, tmp_path: Path) -> None:
    fast_db, fast_url, _, _ = pair
    _start(pair, tmp_path, "race-2")
    results: list[Any] = [None] * 8
    gate = threading.Barrier(8)

    def fast(i: int) -> None:
        gate.wait()
        results[i] = record_answer(fast_url, "race-2", {"approved": True, "note": str(i)},
                                   None, None)

    def full(i: int) -> None:
        store = SQLiteCheckpointer(fast_db)
        try:
            gate.wait()
            results[i] = Runner(None, store, {}).resume(
                "race-2", {"approved": True, "note": str(i)}, leave=True, channel="cli")
        except (AlreadyResumed, ResumeError) as exc:
            results[i] = exc
        finally:
            store.close()

    threads = [threading.Thread(target=fast if i % 2 else full, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    won = [i for i, r in enumerate(results) if r is not None and not isinstance(r, Exception)]
    assert len(won) == 1, results
    assert all(r is None or isinstance(r, AlreadyResumed | ResumeError)
               for i, r in enumerate(results) if i != won[0]), results
    assert _answers(fast_db, "race-2") == [{"approved": True, "note": str(won[0])}]


def test_a_worker_continues_a_run_answered_on_either_path(pair: Pair,
                                                          tmp_path: Path) -> None:
    """The run left to the workers is continued by a live ``tether worker`` to the end the
    full path's answer leads to."""
    _start(pair, tmp_path, "refund-w")
    _both(pair, "resume", "refund-w", "--enqueue", "--db", "DB", "--value",
          '{"approved": true}', cwd=tmp_path)
    ends = []
    env = _child_env(tmp_path)
    for db, url in ((pair[0], pair[1]), (pair[2], pair[3])):
        worker = subprocess.Popen([sys.executable, "-m", "tether", "worker", "--tasks",
                                   str(TASKS), "--db", url, "--poll", "0.05"], cwd=tmp_path,
                                  env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while _status(db, "refund-w") != "completed" and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            worker.send_signal(signal.SIGINT)
            worker.wait(60)
        ends.append(tether("show", "refund-w", "--db", url, "--json", cwd=tmp_path))
    assert _status(pair[0], "refund-w") == _status(pair[2], "refund-w") == "completed"
    shown = [json.loads(end.stdout) for end in ends]
    assert shown[0].get("output") == shown[1].get("output"), shown


def _register_worker(db: Path, queue: str) -> None:
    """A worker of ``queue`` heard from just now, as ``tether worker`` registers itself."""
    store = SQLiteCheckpointer(db)
    now = time.time()
    store.register_worker(WorkerRecord("w-test", "host-a", 4242, (queue,), 4, now, now))
    store.close()


def test_without_task_modules_both_paths_leave_the_run_alike(pair: Pair,
                                                             tmp_path: Path) -> None:
    """No --tasks and no pyproject.toml: the answer is recorded and the run left to a live
    worker (exit 0), or, with none live, the command says what to run (exit 5); a plan that
    calls no task is continued here. Alike on both paths, in the same rows."""
    fast_db, _, full_db, _ = pair
    assert not any((p / "pyproject.toml").is_file() for p in (tmp_path, *tmp_path.parents))
    for run_id in ("lone-0001", "lone-0002"):
        _start(pair, tmp_path, run_id)
    waits = tmp_path / "waits.yaml"
    waits.write_text(WAITS)
    code, _, err = _both(pair, "run", str(waits), "--db", "DB", "-q", "--execution-id",
                         "w-2", cwd=tmp_path)
    assert code == 4, err
    code, out, err = _both(pair, "resume", "lone-0001", "--db", "DB", "--value",
                           '{"approved": true}', cwd=tmp_path)
    assert code == 5 and "continue it with: tether worker" in err, (out, err)
    assert dump(fast_db) == dump(full_db)
    for db in (fast_db, full_db):
        _register_worker(db, "default")
    for argv in (("lone-0002", "--value", '{"approved": true}'),
                 ("lone-0002", "--value", '{"approved": true}'),  # answered already
                 ("w-2", "--node", "ask", "--value", "{}")):  # no task: continued here
        code, out, err = _both(pair, "resume", *argv, "--db", "DB", cwd=tmp_path)
        assert dump(fast_db) == dump(full_db), argv
    code, out, err = _both(pair, "resume", "lone-0002", "--db", "DB", "--json", "--value",
                           '{"note": "x", "approved": false}', cwd=tmp_path)
    assert code == 1, (out, err)
    _start(pair, tmp_path, "lone-0003")
    code, out, err = _both(pair, "resume", "lone-0003", "--db", "DB", "--value",
                           '{"approved": true}', cwd=tmp_path)
    assert code == 0 and "(1 live: host-a/4242)" in out, (out, err)
    assert dump(fast_db) == dump(full_db)


def test_without_task_modules_or_a_live_worker_both_paths_say_what_to_run(
        pair: Pair, tmp_path: Path) -> None:
    """No --tasks, no pyproject.toml, no live worker of the queue: the answer is recorded,
    the run left on its queue and the command exits 5 naming what to run, whatever the
    options (--json, --quiet, --node, --queue, an id prefix); alike on both paths, in the
    same rows. A worker registered on the queue afterwards gets the next run handed over,
    and every run left continues here (--tasks) to the same end."""
    fast_db, _, full_db, _ = pair
    assert not any((p / "pyproject.toml").is_file() for p in (tmp_path, *tmp_path.parents))
    runs = ("hint-0001", "hint-0002", "prefix-aaaa-0003", "hint-0004", "hint-0005")
    for run_id in runs:
        _start(pair, tmp_path, run_id)
    value = ("--value", '{"approved": true, "note": "late"}')
    for argv, queue in ((("hint-0001", *value), "default"),
                        (("hint-0002", "--json", *value), "default"),
                        (("prefix-aaaa", "--quiet", *value), "default"),
                        (("hint-0004", "--node", "review", "--queue", "slow", *value), "slow")):
        code, out, err = _both(pair, "resume", *argv, "--db", "DB", cwd=tmp_path)
        assert code == 5 and out == "", (argv, out, err)
        assert "no live worker serves queue" in err and "the answer to 'review' is " \
            "recorded" in err, err
        assert f"continue it with: tether worker --queue {queue} --tasks MODULE --db DB" \
            in err, err
        assert dump(fast_db) == dump(full_db), argv
    with sqlite3.connect(fast_db) as connection:
        assert connection.execute("SELECT queue FROM runs WHERE execution_id = 'hint-0004'"
                                  ).fetchone() == ("slow",)
    for db in (fast_db, full_db):
        _register_worker(db, "slow")
    code, out, err = _both(pair, "resume", "hint-0005", "--queue", "slow", *value, "--db",
                           "DB", cwd=tmp_path)
    assert code == 0 and "(1 live: host-a/4242)" in out, (out, err)
    assert dump(fast_db) == dump(full_db)
    for run_id in runs:
        code, out, err = _both(pair, "resume", run_id, "--tasks", str(TASKS), "--db", "DB",
                               cwd=tmp_path)
        assert code == 0 and "completed run" in out, (run_id, err)
    assert dump(fast_db) == dump(full_db)
