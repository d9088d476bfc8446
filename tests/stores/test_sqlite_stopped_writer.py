"""SQLite's single-machine limit, with a real stopped process: a process stopped (SIGSTOP)
inside a write transaction (``BEGIN IMMEDIATE``, entered through the store itself) holds the
file's write lock, and nothing can take it away. No tether command hangs on it: a writer
(``tether cancel``) fails after the busy timeout (``?busy_timeout=``) with one line naming
the file and the likely holder, no traceback; readers (``tether runs``, ``tether show``)
keep working (WAL). Once the holder continues and ends, the same writer succeeds."""

from __future__ import annotations

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
