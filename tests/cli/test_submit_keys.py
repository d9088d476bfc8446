"""`tether submit` of a workflow whose concurrency key is full, as docs/workers.md says
(*Exit codes*): ``reject`` exits 6 and stores nothing; ``cancel_new`` prints the id of the
run it stored cancelled, says why on stderr and exits 6; ``queue`` exits 0. A repeated
``--id`` exits 0 with the first run, whatever the key. Real subprocesses, on SQLite and
PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tether.stores.open import open_checkpointer

KEYED = ('tether: 1\nname: {policy}\ninputs: {{branch: {{type: string}}}}\n'
         'concurrency: {{key: "{policy}-{{{{ inputs.branch }}}}", on_conflict: {policy}}}\n'
         'nodes: {{go: {{task: step}}}}\n')


def _submit(url: str, path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tether", "submit", str(path), "--db", url,
                           "-i", "branch=main", *extra], cwd=path.parent,
                          env={**os.environ, "NO_COLOR": "1"}, capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.mark.parametrize("policy", ["queue", "cancel_new", "reject"])
def test_submit_with_its_key_full(shared_url: str, tmp_path: Path, policy: str) -> None:
    path = tmp_path / f"{policy}.yaml"
    path.write_text(KEYED.format(policy=policy), encoding="utf-8")
    first = _submit(shared_url, path, "--id", f"{policy}-first")
    assert (first.returncode, first.stdout.strip(), first.stderr) == (0, f"{policy}-first", "")
    second = _submit(shared_url, path)
    assert "Traceback" not in second.stderr
    with open_checkpointer(shared_url) as store:
        runs = store.find_runs(workflow=policy, limit=10)
    if policy == "queue":
        assert (second.returncode, second.stderr) == (0, "")
        assert sorted(str(r.status) for r in runs) == ["queued", "queued"]
    elif policy == "cancel_new":
        assert second.returncode == 6, second
        [dropped] = [r for r in runs if r.execution_id != f"{policy}-first"]
        assert second.stdout.strip() == dropped.execution_id and dropped.status == "cancelled"
        assert f"run {dropped.execution_id} was cancelled when submitted" in second.stderr
        assert "concurrency key 'cancel_new-main' already had 1 run in progress" in \
            second.stderr and "on_conflict: cancel_new" in second.stderr
    else:
        assert (second.returncode, second.stdout) == (6, "")
        assert "concurrency key 'reject-main' already has 1 run in progress" in second.stderr
        assert [r.execution_id for r in runs] == [f"{policy}-first"]
    again = _submit(shared_url, path, "--id", f"{policy}-first")  # the key is not asked
    assert (again.returncode, again.stdout.strip()) == (0, f"{policy}-first")
    assert "already existed (queued)" in again.stderr
