"""``tether compat`` and ``tether upgrade`` as a user runs them: a real subprocess against a
shared store (SQLite file, PostgreSQL schema); exit codes, carets into the new file, formats."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import tether
from tether.stores.open import open_checkpointer

V1 = textwrap.dedent("""\
    tether: 1
    name: deploy
    nodes:
      a:
        task: t.tag
        with: {label: A}
      review:
        needs: [a]
        approval: {reason: check}
      b:
        needs: [review]
        task: t.tag
        with: {label: B}
""")
TASKS = {"t.tag": lambda label: label.lower()}


def _tether(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tether", *args], cwd=cwd, env=os.environ,
                          capture_output=True, text=True, timeout=120, check=False)


def _setup(tmp_path: Path, url: str) -> tuple[str, str]:
    """A paused run (a done) and a queued one, both on V1."""
    path = tmp_path / "v1.yaml"
    path.write_text(V1, encoding="utf-8")
    store = open_checkpointer(url, create=True)
    try:
        paused = tether.Runner(path, store, tasks=TASKS).run().execution_id
        queued = str(tether.Runner(path, store, tasks=TASKS).submit({}))
    finally:
        store.close()
    return paused, queued


def test_compat_points_into_the_new_file_and_exits_1(shared_url: str, tmp_path: Path) -> None:
    paused, queued = _setup(tmp_path, shared_url)
    (tmp_path / "v2.yaml").write_text(V1.replace("label: A}", "label: A2}"), encoding="utf-8")
    result = _tether("compat", "v2.yaml", "--db", shared_url, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "v2.yaml:4:3: error[C110]: node `a`, which the runs started, changed: `with`" \
        in result.stdout
    assert f"1 run stays pinned: {paused}" in result.stdout
    assert "  |   ^" in result.stdout
    assert "2 live runs of `deploy`: 1 can move, 1 stays pinned" in result.stdout
    assert "Traceback" not in result.stderr

    data = json.loads(_tether("compat", "v2.yaml", "--db", shared_url, "--json",
                              cwd=tmp_path).stdout)
    assert data["compat"]["movable"] == [queued]
    assert data["compat"]["pinned"] == {paused: ["C110"]}
    assert [d["code"] for d in data["diagnostics"]] == ["C110"]
    sarif = json.loads(_tether("compat", "v2.yaml", "--db", shared_url, "--format", "sarif",
                               cwd=tmp_path).stdout)
    assert sarif["runs"][0]["results"][0]["ruleId"] == "C110"

    only_queued = _tether("compat", "v2.yaml", "--db", shared_url, "--status", "queued",
                          cwd=tmp_path)
    assert only_queued.returncode == 0, only_queued.stdout


def test_upgrade_moves_the_compatible_runs_only(shared_url: str, tmp_path: Path) -> None:
    paused, queued = _setup(tmp_path, shared_url)
    (tmp_path / "v2.yaml").write_text(V1.replace("label: B}", "label: B2}"), encoding="utf-8")
    new = tether.compile(tmp_path / "v2.yaml")

    dry = _tether("upgrade", "v2.yaml", "--db", shared_url, "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0 and "2 can move" in dry.stdout, dry.stdout + dry.stderr
    store = open_checkpointer(shared_url)
    try:
        assert {store.get_run(e).plan_fingerprint for e in (paused, queued)} != \
            {new.fingerprint}  # type: ignore[union-attr]
    finally:
        store.close()

    unique = next(n for n in range(8, len(paused) + 1) if paused[:n] != queued[:n])
    one = _tether("upgrade", "v2.yaml", "--db", shared_url, "--run", paused[:unique],
                  cwd=tmp_path)  # a unique prefix (two ids of one millisecond share 12 or more)
    assert one.returncode == 0 and "1 moved to the new plan" in one.stdout, one.stdout
    rest = _tether("upgrade", "v2.yaml", "--db", shared_url, cwd=tmp_path)
    assert rest.returncode == 0 and "1 moved" in rest.stdout and "1 already on it" in rest.stdout
    shown = json.loads(_tether("show", paused, "--db", shared_url, "--json", cwd=tmp_path).stdout)
    [moved] = [e for e in shown["events"] if e["kind"] == "upgraded"]  # in the run's history
    assert moved["detail"]["to"] == new.fingerprint and moved["detail"]["from"] != \
        new.fingerprint and moved["channel"] == "cli"
    store = open_checkpointer(shared_url)
    try:
        result = tether.Runner(None, store, tasks=TASKS).resume(paused, tether.Resume(ok=True))
        assert result.status == "completed"
        assert result.state["nodes"]["b"]["output"] == "b2"
    finally:
        store.close()


def test_usage_errors_exit_2(shared_url: str, tmp_path: Path) -> None:
    _setup(tmp_path, shared_url)
    (tmp_path / "v2.yaml").write_text(V1, encoding="utf-8")
    for args in (("compat", "missing.yaml", "--db", shared_url),
                 ("compat", "v2.yaml", "--db", "nosuch://x"),
                 ("upgrade", "v2.yaml", "--db", shared_url, "--status", "completed")):
        result = _tether(*args, cwd=tmp_path)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr


def test_carets_point_at_the_input_and_at_the_nodes_of_a_removal(shared_url: str,
                                                                 tmp_path: Path) -> None:
    paused, _ = _setup(tmp_path, shared_url)
    changed = V1.replace("nodes:\n", "inputs:\n  region: {type: string}\nnodes:\n") \
        .replace("  a:\n", "  first:\n").replace("needs: [a]", "needs: [first]")
    (tmp_path / "v3.yaml").write_text(changed, encoding="utf-8")
    result = _tether("compat", "v3.yaml", "--db", shared_url, "--status", "paused",
                     cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "v3.yaml:4:3: error[C114]: the new plan requires input `region`" in result.stdout
    assert "v3.yaml:5:1: error[C111]: node `a`, which the runs started, is removed" \
        in result.stdout
    assert "help: if it was renamed, add `renamed_from: a` to the new node" in result.stdout
    assert "info: node `first` added" in result.stdout and paused in result.stdout


def test_upgrade_of_a_run_paused_in_a_renamed_approval(shared_url: str, tmp_path: Path) -> None:
    """The pause answers to its new id after `tether upgrade`; `tether show` says what was
    renamed; an answer to the old id is mapped."""
    paused, _ = _setup(tmp_path, shared_url)
    (tmp_path / "v2.yaml").write_text(V1.replace("  review:\n", "  gate:\n    renamed_from: "
                                                 "review\n").replace("needs: [review]",
                                                                     "needs: [gate]"),
                                      encoding="utf-8")
    check = _tether("compat", "v2.yaml", "--db", shared_url, cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "info: node `gate` renamed from `review`" in check.stdout
    moved = _tether("upgrade", "v2.yaml", "--db", shared_url, cwd=tmp_path)
    assert moved.returncode == 0 and "2 moved to the new plan" in moved.stdout, moved.stdout
    pending = _tether("pending", "--db", shared_url, "--json", cwd=tmp_path)
    assert pending.returncode == 0, pending.stderr
    assert "gate" in pending.stdout and "review" not in pending.stdout
    shown = _tether("show", paused, "--db", shared_url, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "review now gate" in shown.stdout, shown.stdout
    store = open_checkpointer(shared_url)
    try:
        result = tether.Runner(None, store, tasks=TASKS).resume(
            paused, tether.Resume(ok=True), node="review")
        assert result.status == "completed" and set(result.state["nodes"]) == {"a", "gate", "b"}
    finally:
        store.close()
