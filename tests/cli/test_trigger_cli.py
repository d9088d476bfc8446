"""``tether run`` and ``tether submit`` record what started the run (kind ``cli``, the OS
user); the run's nodes read it as ``trigger.*``; ``tether show`` says who started it (real
CLI processes, on SQLite)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tether.stores.open import open_checkpointer
from tether.trigger import os_user

TASKS = '''
from tether import task


@task("trig.echo")
def echo(kind: str, actor: str) -> dict:
    return {"kind": kind, "actor": actor}
'''

FLOW = """workflow who
task a = trig.echo(kind: "{{ trigger.kind }}", actor: "{{ trigger.actor }}")
"""


def tether(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tmp_path), str(Path(__file__).resolve().parents[2] / "src")])}
    return subprocess.run([sys.executable, "-m", "tether", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def test_run_and_submit_record_cli_by_the_os_user(tmp_path: Path) -> None:
    (tmp_path / "trig_tasks.py").write_text(TASKS, encoding="utf-8")
    (tmp_path / "who.flow").write_text(FLOW, encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    ran = tether(tmp_path, "run", "who.flow", "--tasks", "trig_tasks", "--db", db, "--json")
    assert ran.returncode == 0, ran.stderr
    execution_id = json.loads(ran.stdout)["execution_id"]
    store = open_checkpointer(db)
    try:
        outputs = {c.node_id: c.node_output for c in store.list(execution_id)}
        assert outputs["a"] == {"kind": "cli", "actor": os_user()}
        submitted = tether(tmp_path, "submit", "who.flow", "--db", db)
        assert submitted.returncode == 0, submitted.stderr
        queued = store.get_run(submitted.stdout.strip())
        assert queued is not None and queued.trigger is not None
        assert (queued.trigger.kind, queued.trigger.actor) == ("cli", os_user())
    finally:
        store.close()
    shown = tether(tmp_path, "show", execution_id, "--db", db)
    assert shown.returncode == 0, shown.stderr
    assert f"started by: cli by {os_user()}" in shown.stdout
    as_json = json.loads(tether(tmp_path, "show", execution_id, "--db", db, "--json").stdout)
    assert (as_json["trigger"]["kind"], as_json["trigger"]["actor"]) == ("cli", os_user())
