"""PostgreSQL restarted while runs are in flight (real server, real processes).

A restart shorter than the store's retry window is ridden out: the run completes by itself.
An outage longer than the window fails the run cleanly (StoreUnavailable, no traceback, nothing
half-written); once the server is back, a resume from a new process completes it. Either way
nothing committed is lost and no committed node runs again.

These tests stop and start the local cluster (`pg_ctlcluster`), so they run only where that is
possible (CI's machine); elsewhere they are skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

NODES = 10
CHILD = textwrap.dedent("""
    import sys, time, os
    import tether
    from tether.stores.open import open_checkpointer

    url, effects, mode = sys.argv[1], sys.argv[2], sys.argv[3]

    def slow(i):
        with open(effects, "a") as f:
            f.write(f"{i}\\n"); f.flush(); os.fsync(f.fileno())
        time.sleep(0.3)
        return {"i": i}

    store = open_checkpointer(url)
    runner = tether.Runner(sys.argv[4] if mode == "run" else None, store, {"slow": slow})
    try:
        result = runner.run({}) if mode == "run" else runner.resume(sys.argv[5])
    except tether.StoreUnavailable as exc:
        print(f"unavailable: {exc}", file=sys.stderr)
        sys.exit(5)
    print(result.execution_id, result.status)
""")


def cluster(url: str) -> tuple[str, str]:
    """The local cluster behind the test URL, or skip."""
    if shutil.which("pg_ctlcluster") is None or shutil.which("pg_lsclusters") is None:
        pytest.skip("pg_ctlcluster is not available: cannot restart the server")
    if os.geteuid() != 0:
        pytest.skip("restarting the cluster needs root")
    port = url.rsplit(":", 1)[-1].split("/")[0] if ":" in url.rsplit("@", 1)[-1] else "5432"
    for line in subprocess.run(["pg_lsclusters", "--no-header"], capture_output=True,
                               text=True, check=True).stdout.splitlines():
        version, name, cluster_port, *_ = line.split()
        if cluster_port == port:
            return version, name
    pytest.skip(f"no local cluster listens on port {port}")


def ctl(action: str, version: str, name: str) -> None:
    subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", version, name, action],
                   check=True, capture_output=True, timeout=120)


def wait_ready(url: str, timeout: float = 60) -> None:
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect(url, connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def write_workflow(path: Path) -> Path:
    lines = ["tether: 1", "name: slow", "nodes:"]
    for i in range(NODES):
        lines += [f"  n{i}:", "    task: slow", f"    with: {{i: {i}}}"]
        if i:
            lines.append(f"    needs: [n{i - 1}]")
    path.write_text("\n".join(lines) + "\n")
    return path


def committed(url: str, schema: str) -> list[tuple[str, str]]:
    import psycopg

    wait_ready(url)
    with psycopg.connect(url) as connection:
        try:
            return [(r[0], r[1]) for r in connection.execute(
                f'SELECT node_id, status FROM "{schema}".checkpoints ORDER BY checkpoint_id')]
        except psycopg.errors.UndefinedTable:  # the child has not set the schema up yet
            return []


def start_child(tmp_path: Path, url: str, effects: Path, *args: str) -> subprocess.Popen[str]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    return subprocess.Popen([sys.executable, str(script), url, str(effects), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_rows(url: str, schema: str, count: int) -> None:
    deadline = time.monotonic() + 60
    while len(committed(url, schema)) < count:
        assert time.monotonic() < deadline, "the run made no progress"
        time.sleep(0.05)


@pytest.mark.postgres
@pytest.mark.slow
def test_a_short_restart_is_ridden_out_and_every_node_runs_once(
        tmp_path: Path, pg_schema: tuple[str, str]) -> None:
    """Restart the server mid-run: the run completes by itself, each body ran exactly once,
    and the checkpoints are exactly one per node plus one run_end."""
    url, schema = pg_schema
    version, name = cluster(url)
    store_url = f"{url}?schema={schema}&retry_seconds=60"
    effects = tmp_path / "effects"
    workflow = write_workflow(tmp_path / "w.yaml")
    child = start_child(tmp_path, store_url, effects, "run", str(workflow))
    wait_for_rows(url, schema, 3)
    ctl("restart", version, name)
    out, err = child.communicate(timeout=180)
    assert child.returncode == 0, err
    assert out.split()[1] == "completed"
    rows = committed(url, schema)
    assert rows == [(f"n{i}", "completed") for i in range(NODES)] + [("run_end", "completed")]
    assert sorted(int(x) for x in effects.read_text().split()) == list(range(NODES))


@pytest.mark.postgres
@pytest.mark.slow
def test_an_outage_longer_than_the_retry_window_fails_cleanly_and_resume_completes(
        tmp_path: Path, pg_schema: tuple[str, str]) -> None:
    """Stop the server mid-run for longer than the retry window: the run fails with
    StoreUnavailable (no traceback); after the restart a new process resumes it to completion;
    nothing committed before the outage is lost and no committed node runs again."""
    url, schema = pg_schema
    version, name = cluster(url)
    store_url = f"{url}?schema={schema}&retry_seconds=1"
    effects = tmp_path / "effects"
    workflow = write_workflow(tmp_path / "w.yaml")
    child = start_child(tmp_path, store_url, effects, "run", str(workflow))
    wait_for_rows(url, schema, 3)
    before = committed(url, schema)
    try:
        ctl("stop", version, name)
        out, err = child.communicate(timeout=120)
    finally:
        ctl("start", version, name)
        wait_ready(url)
    assert child.returncode == 5, err
    assert "unavailable" in err and "Traceback" not in err
    after_outage = committed(url, schema)
    assert after_outage[: len(before)] == before
    assert ("run_end", "completed") not in after_outage
    execution_id = _execution_id(url, schema)
    resumer = start_child(tmp_path, f"{url}?schema={schema}", effects, "resume", "-",
                          execution_id)
    out, err = resumer.communicate(timeout=180)
    assert resumer.returncode == 0, err
    assert out.split() == [execution_id, "completed"]
    rows = committed(url, schema)
    nodes = [n for n, s in rows if n.startswith("n") and s == "completed"]
    assert sorted(nodes, key=lambda n: int(n[1:])) == [f"n{i}" for i in range(NODES)]
    assert rows.count(("run_end", "completed")) == 1
    runs = [int(x) for x in effects.read_text().split()]
    committed_before = {int(n[1:]) for n, _ in after_outage if n.startswith("n")}
    for i in range(NODES):  # a node committed before the outage never ran again
        assert runs.count(i) == 1 or (i not in committed_before and runs.count(i) == 2)


def _execution_id(url: str, schema: str) -> str:
    import psycopg

    with psycopg.connect(url) as connection:
        row = connection.execute(f'SELECT execution_id FROM "{schema}".runs').fetchone()
    assert row is not None
    return str(row[0])
