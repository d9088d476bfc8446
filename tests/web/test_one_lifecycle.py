"""One lifecycle (issue 21): every run belongs to a queue, and whoever claims it continues it.

Real processes on SQLite and PostgreSQL: ``tether serve`` without a worker of its own, a
standalone ``tether worker`` subprocess, runs started by ``tether run`` (a subprocess), by
``tether submit`` and by ``Runner.run`` (this process). The console's answer is recorded, and
the standalone worker, nothing else, continues each run. The hints tether prints are then
followed literally in a fresh shell (``bash -c`` on the printed text), with and without a
live worker: each finishes the job or exits non-zero naming what to run.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from web_support import Project, Server, approval_path, served, tasks_file, wait_for

from tether.web.urls import run_url

ANSWER = {"decision": "approve", "values": {"limit": 3}}


@pytest.fixture
def lc_project(shared_url: str, tmp_path: Path,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    found = Project(tmp_path, tasks_file(tmp_path_factory.getbasetemp()), db_url=shared_url)
    yield found
    found.close()


@pytest.fixture
def console(lc_project: Project) -> Iterator[Server]:
    """``tether serve`` with no worker: it records answers and runs nothing."""
    yield from served(lc_project)


def _env() -> dict[str, str]:
    return {**os.environ, "TETHER_LEASE_SECONDS": "5"}


def _tether(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tether", *args], cwd=project.root,
                          env=_env(), capture_output=True, text=True, timeout=120)


def _shell_env(project: Project) -> dict[str, str]:
    """A user's environment: ``tether`` on the PATH (this interpreter's)."""
    bindir = project.root / "bin"
    bindir.mkdir(exist_ok=True)
    launcher = bindir / "tether"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tether "$@"\n')
    launcher.chmod(0o755)
    return {**_env(), "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}


def _shell(project: Project, command: str) -> subprocess.CompletedProcess[str]:
    """``command`` exactly as printed, in a fresh shell in the project's directory."""
    return subprocess.run(["bash", "-c", command], cwd=project.root, env=_shell_env(project),
                          capture_output=True, text=True, timeout=120)


class _Worker:
    """A standalone ``tether worker`` of queue ``default`` with the tasks module."""

    def __init__(self, project: Project) -> None:
        self.log = project.root / "worker.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tether", "worker", "--db", project.db, "--tasks",
                 str(project.tasks), "--poll", "0.1"], cwd=project.root, env=_env(),
                stdout=out, stderr=subprocess.STDOUT)
        wait_for(lambda: project.store.list_workers(), "the worker to register", 60)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(60) == 0, self.log.read_text()


@pytest.fixture
def worker(lc_project: Project) -> Iterator[_Worker]:
    started = _Worker(lc_project)
    yield started
    started.stop()


def _status(project: Project, execution_id: str) -> str | None:
    run = project.store.get_run(execution_id)
    return run.status if run is not None else None


def _paused_id(output: str) -> str:
    found = re.search(r"paused run (\S+) at node", output)
    assert found, output
    return found.group(1)


def test_the_consoles_answer_is_continued_by_a_standalone_worker(
        lc_project: Project, console: Server, worker: _Worker) -> None:
    """Runs started by `tether run`, by `tether submit` and by `Runner.run` all belong to
    queue `default`; answered through the console's API (which runs nothing), each is
    continued to completion by the standalone worker."""
    started = _tether(lc_project, "run", "review.yaml", "--input", "amount=250",
                      "--tasks", str(lc_project.tasks), "--db", lc_project.db, "-q")
    assert started.returncode == 4, started.stderr
    by_run = _paused_id(started.stdout)
    submitted = _tether(lc_project, "submit", "review.yaml", "--input", "amount=40",
                        "--db", lc_project.db)
    assert submitted.returncode == 0, submitted.stderr
    by_submit = submitted.stdout.strip().split()[-1]
    by_runner, _ = lc_project.pause(amount=7)
    ids = [by_run, by_submit, by_runner]
    wait_for(lambda: all(_status(lc_project, e) == "paused" for e in ids),
             "every run to pause", 60)
    for eid in ids:
        run = lc_project.store.get_run(eid)
        assert run is not None and run.queue == "default", eid
        [pending] = lc_project.store.list_pending(eid)
        answered = console.post(approval_path(eid, pending.checkpoint_id), ANSWER)
        assert answered.status_code == 200, answered.text
        assert answered.json()["continued"] is False  # the console runs nothing itself
    wait_for(lambda: all(_status(lc_project, e) == "completed" for e in ids),
             "the standalone worker to continue every answered run", 90)
    for eid in ids:
        detail = console.get(f"/api{run_url(eid)}").json()
        assert detail["output"] == {"approved": True, "limit": 3}, eid
    log = worker.log.read_text()
    assert all(f"run {eid} (answered): completed" in log for eid in ids), log


def _paused_by_tether_run(project: Project) -> tuple[str, str]:
    started = _tether(project, "run", "review.yaml", "--input", "amount=250",
                      "--tasks", str(project.tasks), "--db", project.db, "-q")
    assert started.returncode == 4, started.stderr
    hint = next(line for line in started.stdout.splitlines() if "resume with: " in line)
    return _paused_id(started.stdout), hint.partition("resume with: ")[2]


def test_the_pause_hint_followed_literally_finishes_the_run(lc_project: Project) -> None:
    """`tether run`'s hint names the task modules and the store it was given: run as printed
    in a fresh shell (no worker anywhere), it continues the run here to completion."""
    eid, hint = _paused_by_tether_run(lc_project)
    assert "--tasks" in hint and "--db" in hint
    done = _shell(lc_project, hint)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"completed run {eid}" in done.stdout
    assert _status(lc_project, eid) == "completed"


def test_the_pending_hint_without_tasks_or_worker_exits_5_naming_what_to_run(
        lc_project: Project) -> None:
    """`tether pending`'s hint run as printed where no task module is importable and no
    worker is live: the answer is recorded, the command exits 5 naming the two commands
    that continue the run, `tether pending` shows the run as answered (not hidden), and the
    named command (MODULE filled in) finishes it."""
    eid, _ = _paused_by_tether_run(lc_project)
    listed = _tether(lc_project, "pending", "--db", lc_project.db)
    hint = next(line for line in listed.stdout.splitlines()
                if eid in line and "answer: " in line).partition("answer: ")[2]
    refused = _shell(lc_project, hint)
    assert refused.returncode == 5, refused.stdout + refused.stderr
    assert "Traceback" not in refused.stderr
    assert "no live worker serves queue 'default'" in refused.stderr
    assert "the answer to 'review' is recorded" in refused.stderr
    commands = [line.partition("continue it with: ")[2] for line in refused.stderr.splitlines()
                if line.startswith("continue it with: ")]
    assert [c.split()[:2] for c in commands] == [["tether", "resume"], ["tether", "worker"]]
    assert _status(lc_project, eid) == "paused"
    again = _tether(lc_project, "pending", "--db", lc_project.db)
    assert f"{eid}  review  answered" in again.stdout and "not continued yet" in again.stdout
    runs = _tether(lc_project, "runs", "--status", "paused", "--db", lc_project.db)
    assert eid in runs.stdout
    finish = commands[0].replace("MODULE", str(lc_project.tasks))
    done = _shell(lc_project, finish)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _status(lc_project, eid) == "completed"
    assert "no paused runs" in _tether(lc_project, "pending", "--db", lc_project.db).stdout


def test_the_pending_hint_with_a_live_worker_leaves_the_run_to_it(
        lc_project: Project, worker: _Worker) -> None:
    """The same hint where a worker of the run's queue is live: exit 0, the run is left to
    that worker (named), and it completes."""
    eid, _ = _paused_by_tether_run(lc_project)
    listed = _tether(lc_project, "pending", "--db", lc_project.db)
    hint = next(line for line in listed.stdout.splitlines()
                if eid in line and "answer: " in line).partition("answer: ")[2]
    left = _shell(lc_project, hint)
    assert left.returncode == 0, left.stdout + left.stderr
    assert "left to the workers of queue 'default' to continue (1 live: " in left.stdout
    wait_for(lambda: _status(lc_project, eid) == "completed", "the worker to finish it", 90)


def test_a_failed_resume_hint_and_the_consoles_resume_reach_a_worker(
        lc_project: Project, console: Server, worker: _Worker, tmp_path: Path) -> None:
    """A run that failed after its answer: the console's Resume records the request (202,
    naming the live worker), and the standalone worker resumes it to completion."""
    gate = tmp_path / "fixed"
    eid, cid = lc_project.pause(note=f"fail-until:{gate}")
    assert console.post(approval_path(eid, cid), ANSWER).status_code == 200
    wait_for(lambda: _status(lc_project, eid) == "failed", "the run to fail", 90)
    gate.write_text("fixed")
    resumed = console.post(f"/api{run_url(eid)}/resume")
    assert resumed.status_code == 202, resumed.text
    assert "A live worker of queue 'default' continues the run" in resumed.json()["detail"]
    wait_for(lambda: _status(lc_project, eid) == "completed", "the worker to resume it", 90)


def test_the_console_says_who_continues_an_answered_run_and_a_worker_started_later_does(
        lc_project: Project, console: Server) -> None:
    """Answered in a console with no worker anywhere: the run page says no live worker
    serves queue `default` and names the command to start; that command, started later as
    printed (MODULE filled in), continues the run."""
    eid, cid = lc_project.pause(amount=12)
    assert console.post(approval_path(eid, cid), ANSWER).status_code == 200
    page = console.get(run_url(eid)).text
    assert "Answered; waiting to be continued." in page
    assert "No live worker serves queue &#39;default&#39;" in page
    command = "tether worker --queue default --tasks MODULE"
    assert command in page
    assert _status(lc_project, eid) == "paused"
    log = (lc_project.root / "late-worker.log").open("wb")
    late = subprocess.Popen(["bash", "-c", "exec " + command.replace(
        "MODULE", str(lc_project.tasks)) + f" --db '{lc_project.db}' --poll 0.1"],
        cwd=lc_project.root, env=_shell_env(lc_project), stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: _status(lc_project, eid) == "completed" or late.poll() is not None,
                 "the late worker", 90)
        assert _status(lc_project, eid) == "completed", \
            (lc_project.root / "late-worker.log").read_text()
    finally:
        late.send_signal(signal.SIGTERM)
        late.wait(60)
        log.close()


def test_a_run_started_on_another_queue_names_that_queue_in_its_hints(
        lc_project: Project) -> None:
    """`tether run --queue urgent`: the run belongs to `urgent`; resumed where its tasks are
    not importable and no worker of `urgent` is live, it exits 5 naming a worker of that
    queue (a live worker of `default` would not do)."""
    started = _tether(lc_project, "run", "review.yaml", "--input", "amount=250", "--queue",
                      "urgent", "--tasks", str(lc_project.tasks), "--db", lc_project.db, "-q")
    assert started.returncode == 4, started.stderr
    eid = _paused_id(started.stdout)
    run = lc_project.store.get_run(eid)
    assert run is not None and run.queue == "urgent"
    refused = _tether(lc_project, "resume", eid, "--value", '{"approved": true, "limit": 1}',
                      "--db", lc_project.db)
    assert refused.returncode == 5, refused.stderr
    assert "tether worker --queue urgent --tasks MODULE" in refused.stderr
    empty = _tether(lc_project, "run", "review.yaml", "--input", "amount=1", "--queue", " ",
                    "--db", lc_project.db)
    assert empty.returncode == 2 and "queue name cannot be empty" in empty.stderr


def test_a_tether_run_killed_mid_node_is_continued_by_a_worker_of_its_queue(
        lc_project: Project, tmp_path: Path) -> None:
    """`tether run` is SIGKILLed while its second node runs: the run (queue `default`, as
    every run) is claimed by a standalone worker once the dead owner's lease expires and
    finished; the committed first node never runs again."""
    gate = tmp_path / "open"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tether", "run", "slow.yaml", "--input", f"gate={gate}",
         "--tasks", str(lc_project.tasks), "--db", lc_project.db, "--execution-id",
         "killed-1", "-q"], cwd=lc_project.root, env=_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: [r.node_id for r in lc_project.store.page("killed-1", None, 10)]
                 == ["first"], "the run to reach its gate", 60)
    finally:
        proc.kill()
        proc.wait(30)
    run = lc_project.store.get_run("killed-1")
    assert run is not None and run.status == "running" and run.queue == "default"
    worker = _Worker(lc_project)
    try:
        gate.write_text("open")
        wait_for(lambda: _status(lc_project, "killed-1") == "completed",
                 "a worker to recover the killed run", 120)
    finally:
        worker.stop()
    nodes = [r.node_id for r in lc_project.store.page("killed-1", None, 20)]
    assert nodes.count("first") == 1 and nodes.count("last") == 1, nodes
    assert "(recovered): completed" in worker.log.read_text()


def test_the_pause_hint_with_a_live_worker_finishes_the_run(
        lc_project: Project, worker: _Worker) -> None:
    """`tether run`'s hint run as printed in a fresh shell while a worker of the run's queue
    is live: it exits 0 and the run completes (here, where the hint's task modules are, or by
    that worker: never left paused)."""
    eid, hint = _paused_by_tether_run(lc_project)
    done = _shell(lc_project, hint)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"completed run {eid}" in done.stdout or \
        "left to the workers of queue 'default'" in done.stdout, done.stdout
    wait_for(lambda: _status(lc_project, eid) == "completed", "the run to complete", 90)


@pytest.mark.parametrize("live_worker", [False, True], ids=["no-worker", "live-worker"])
def test_the_failed_run_hint_followed_literally_finishes_the_run(
        lc_project: Project, tmp_path: Path, live_worker: bool) -> None:
    """A run whose last task fails after its answer: the pause hint run as printed answers
    it, the task fails, and `fix the cause, then: tether resume ID ...` is printed; the cause
    fixed, that line run as printed in a fresh shell finishes the run, with no worker
    anywhere and with a live worker of its queue."""
    gate = tmp_path / "fixed"
    started = _tether(lc_project, "run", "review.yaml", "--input", "amount=250", "--input",
                      f"note=fail-until:{gate}", "--tasks", str(lc_project.tasks), "--db",
                      lc_project.db, "-q")
    assert started.returncode == 4, started.stderr
    eid = _paused_id(started.stdout)
    hint = next(line for line in started.stdout.splitlines() if "resume with: " in line)
    failed = _shell(lc_project, hint.partition("resume with: ")[2])
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert f"failed run {eid} at node 'finish'" in failed.stdout
    fix = next(line for line in failed.stderr.splitlines()
               if line.startswith("fix the cause, then: "))
    assert _status(lc_project, eid) == "failed"
    running = _Worker(lc_project) if live_worker else None
    try:
        gate.write_text("fixed")
        done = _shell(lc_project, fix.partition("fix the cause, then: ")[2])
        assert done.returncode == 0, done.stdout + done.stderr
        wait_for(lambda: _status(lc_project, eid) == "completed", "the run to complete", 90)
    finally:
        if running is not None:
            running.stop()


def test_the_worker_command_of_a_refused_resume_followed_literally_finishes_the_run(
        lc_project: Project) -> None:
    """Exit 5's second command (`tether worker --queue default --tasks MODULE ...`), run as
    printed in a fresh shell with MODULE filled in: that worker continues the answered run."""
    eid, _ = _paused_by_tether_run(lc_project)
    refused = _tether(lc_project, "resume", eid, "--value", '{"approved": true, "limit": 2}',
                      "--db", lc_project.db)
    assert refused.returncode == 5, refused.stdout + refused.stderr
    commands = [line.partition("continue it with: ")[2] for line in refused.stderr.splitlines()
                if line.startswith("continue it with: ")]
    command = next(c for c in commands if c.startswith("tether worker "))
    assert shlex.split(command)[-2:] == ["--db", lc_project.db]
    with (lc_project.root / "hinted-worker.log").open("wb") as log:
        started = subprocess.Popen(
            ["bash", "-c", "exec " + command.replace("MODULE", str(lc_project.tasks))],
            cwd=lc_project.root, env=_shell_env(lc_project), stdout=log,
            stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: _status(lc_project, eid) == "completed" or started.poll() is not None,
                 "the hinted worker", 90)
        assert _status(lc_project, eid) == "completed", \
            (lc_project.root / "hinted-worker.log").read_text()
    finally:
        started.send_signal(signal.SIGTERM)
        started.wait(60)
