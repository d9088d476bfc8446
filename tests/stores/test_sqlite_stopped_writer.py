"""SQLite's single-machine limit, with a real stopped process: a process stopped (SIGSTOP)
inside a write transaction (``BEGIN IMMEDIATE``, entered through the store itself) holds the
file's write lock, and nothing can take it away. No tether command hangs on it: a writer
(``tether cancel``) fails after the busy timeout (``?busy_timeout=``) with one line naming
the file and the likely holder, no traceback; readers (``tether runs``, ``tether show``)
keep working (WAL). Once the holder continues and ends, the same writer succeeds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from tether.compiler.plan import Plan, TaskNode, with_fingerprint
from tether.runtime.runner import Runner
from tether.stores.sqlite import SQLiteCheckpointer

HOLDER = textwrap.dedent("""
    import sys, time
    from tether.stores.sqlite import SQLiteCheckpointer
    store = SQLiteCheckpointer(sys.argv[1])
    with store._cursor("holding the write lock", write=True) as cursor:
        cursor.execute("UPDATE runs SET priority = priority")
        print("held", flush=True)
        time.sleep(600)
""")


def _tether(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tether", *args], capture_output=True,
                          text=True, timeout=120, env=os.environ.copy(), check=False)


def test_a_process_stopped_inside_a_write_transaction_fails_writers_clearly(
        tmp_path: Path) -> None:
    path = tmp_path / "tether.db"
    store = SQLiteCheckpointer(path)
    plan = with_fingerprint(Plan(name="one", nodes=(TaskNode(id="n0", index=0, task="t"),),
                                 generations=(("n0",),)))
    eid = Runner(plan, store).submit({})
    store.close()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        os.kill(holder.pid, signal.SIGSTOP)
        url = f"sqlite:///{path}?busy_timeout=1"
        cancel = _tether("cancel", eid, "--db", url)
        assert cancel.returncode != 0, cancel.stdout
        assert "Traceback" not in cancel.stderr, cancel.stderr
        assert f"the SQLite database {path} stayed locked for its busy timeout (1 s)" \
            in cancel.stderr, cancel.stderr
        assert "SIGSTOP" in cancel.stderr and "PostgreSQL" in cancel.stderr
        listed = _tether("runs", "--db", url)
        assert listed.returncode == 0 and eid in listed.stdout, listed.stderr
        shown = _tether("show", eid, "--db", url)
        assert shown.returncode == 0 and eid in shown.stdout, shown.stderr
    finally:
        os.kill(holder.pid, signal.SIGCONT)
        holder.kill()
        holder.wait(30)
    cancel = _tether("cancel", eid, "--db", url)
    assert cancel.returncode == 0, cancel.stderr


def _stopped_holder(path: Path) -> subprocess.Popen[str]:
    """A real process inside the store's write transaction on ``path``, stopped."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    os.kill(holder.pid, signal.SIGSTOP)
    return holder


def _end(holder: subprocess.Popen[str]) -> None:
    os.kill(holder.pid, signal.SIGCONT)
    holder.kill()
    holder.wait(30)


def test_the_sqlite3_submit_reports_a_held_lock_instead_of_trying_the_full_store(
        tmp_path: Path) -> None:
    """``tether submit``'s SQLAlchemy-free insert (``sqlite_submit``) falls back to the full
    store on SQLite errors, but not on the lock: the full store would wait a whole busy
    timeout again for the same lock, then say the same. So it raises the store's error,
    naming the file and the connection's own busy timeout, and nothing is written."""
    from tether.errors import StoreError
    from tether.runtime.submission import queued_run
    from tether.stores.sqlite_submit import insert_queued, open_current

    path = tmp_path / "tether.db"
    store = SQLiteCheckpointer(path)
    plan = with_fingerprint(Plan(name="one", nodes=(TaskNode(id="n0", index=0, task="t"),),
                                 generations=(("n0",),)))
    store.close()
    holder = _stopped_holder(path)
    try:
        connection = open_current(f"sqlite:///{path}")
        assert connection is not None
        connection.execute("PRAGMA busy_timeout = 200")
        run = queued_run(plan, {}, execution_id=None, queue="default", priority=0,
                         dedup_key=None, trigger=None)
        try:
            insert_queued(connection, run, plan.to_json(), deduplicate=False)
        except StoreError as exc:
            message = str(exc)
        else:
            raise AssertionError("the insert did not report the held lock")
        finally:
            connection.close()
        assert message.startswith(f"creating run {run.execution_id}: the SQLite database "
                                  f"{path} stayed locked for its busy timeout (0.2 s)"), message
    finally:
        _end(holder)
    reopened = SQLiteCheckpointer(path)
    assert reopened.list_runs() == []
    reopened.close()


def test_submit_and_resume_on_a_plain_sqlite_url_fail_clearly_on_a_stopped_holder(
        tmp_path: Path) -> None:
    """The same through the commands a user types, on a plain ``sqlite:///PATH`` (the
    SQLAlchemy-free paths of ``submit`` and ``resume --enqueue``): one line naming the file,
    no traceback, nothing written; run side by side, as both wait out the busy timeout."""
    root = Path(__file__).resolve().parents[2]
    refund = root / "examples" / "refund" / "refund.yaml"
    tasks = root / "examples" / "refund" / "tasks.py"
    path = tmp_path / "tether.db"
    url = f"sqlite:///{path}"
    env = {**os.environ, "TETHER_EXAMPLE_LEDGER": str(tmp_path / "ledger.jsonl")}
    started = subprocess.run(
        [sys.executable, "-m", "tether", "run", str(refund), "--tasks", str(tasks), "--db", url,
         "-i", "account=ACC-42", "-i", "amount=500", "--json"],
        capture_output=True, text=True, timeout=120, env=env, check=False)
    assert started.returncode == 4, started.stderr
    eid = json.loads(started.stdout)["execution_id"]
    holder = _stopped_holder(path)
    try:
        commands = {
            "submit": ["submit", str(refund), "--db", url, "-i", "account=ACC-42",
                       "-i", "amount=20"],
            "resume": ["resume", eid, "--enqueue", "--db", url,
                       "--value", '{"approved": true}'],
        }
        running = {name: subprocess.Popen([sys.executable, "-m", "tether", *argv],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True, env=env)
                   for name, argv in commands.items()}
        done = {name: process.communicate(timeout=150) for name, process in running.items()}
    finally:
        _end(holder)
    for name, (out, err) in done.items():
        assert running[name].returncode not in (0, None), (name, out, err)
        assert "Traceback" not in err, err
        assert f"the SQLite database {path} stayed locked for its busy timeout (30 s)" in err, \
            (name, err)
    store = SQLiteCheckpointer(path)
    assert [r.execution_id for r in store.list_runs()] == [eid]
    run = store.get_run(eid)
    assert run is not None and run.status == "paused" and not store.decisions(eid)
    store.close()
