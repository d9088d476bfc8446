"""One lifecycle (issue 21), proved in a real browser: the console's approval is continued by
a standalone ``tether worker``, on SQLite and on PostgreSQL, for runs started by
``tether run`` (a subprocess that pauses and exits 4), by ``tether submit`` (a worker runs
it to the pause) and by ``Runner.run`` (this process).

Every case signs in to a ``tether serve --auth token`` with no worker of its own, fills the
approval form in Debian's Chromium and clicks Approve. The standalone worker (started before
the click for some starts, after it for others) continues the run; the run page follows it
to ``completed`` without a reload, the store holds the output and alice's decision, and the
run's history (``tether show ID --json``) has the ``answered`` event of channel ``console``.
The API variant is tests/web/test_one_lifecycle.py, whose helpers this file imports.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect
from test_browser import CHROMIUM, FLAGS, _sign_in, in_thread, playwright_sync
from test_one_lifecycle import _env, _paused_id, _status, _tether
from web_support import Project, Server, served, tasks_file, wait_for

from tether.web.urls import approval_url, run_url

# (how the run starts, whether the standalone worker starts before the click): both orders.
STARTS = [("tether-run", False), ("tether-submit", True), ("runner-run", False)]
OUTPUT = {"approved": True, "limit": 7}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with playwright_sync.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def bl_project(shared_url: str, tmp_path: Path,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    found = Project(tmp_path, tasks_file(tmp_path_factory.getbasetemp()), db_url=shared_url)
    yield found
    found.close()


@pytest.fixture
def auth_console(bl_project: Project) -> Iterator[Server]:
    """``tether serve --auth token`` with no worker: it records answers and runs nothing."""
    yield from served(bl_project, auth=True)


class _QueueWorker:
    """``tether worker --queue default --tasks MODULE`` as a user starts it, in a subprocess."""

    def __init__(self, project: Project) -> None:
        self.log = project.root / f"worker-{len(list(project.root.glob('worker-*')))}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tether", "worker", "--queue", "default", "--tasks",
                 str(project.tasks), "--db", project.db, "--poll", "0.1"],
                cwd=project.root, env=_env(), stdout=out, stderr=subprocess.STDOUT)
        wait_for(lambda: project.store.list_workers() or self.proc.poll() is not None,
                 "the worker to register", 60)
        assert self.proc.poll() is None, self.log.read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


def _start(project: Project, how: str) -> str:
    """Start a review run ``how``; its execution id (it may still be on its way to pause)."""
    if how == "tether-run":
        started = _tether(project, "run", "review.yaml", "--input", "amount=250", "--tasks",
                          str(project.tasks), "--db", project.db, "-q")
        assert started.returncode == 4, started.stdout + started.stderr
        return _paused_id(started.stdout)
    if how == "tether-submit":
        submitted = _tether(project, "submit", "review.yaml", "--input", "amount=40",
                            "--db", project.db)
        assert submitted.returncode == 0, submitted.stderr
        return submitted.stdout.strip().split()[-1]
    assert how == "runner-run", how
    execution_id, _ = in_thread(lambda: project.pause(amount=7))
    return execution_id


def _events(project: Project, execution_id: str) -> list[dict[str, Any]]:
    shown = _tether(project, "show", execution_id, "--db", project.db, "--json")
    assert shown.returncode == 0, shown.stderr
    events: list[dict[str, Any]] = json.loads(shown.stdout)["events"]
    return events


@pytest.mark.parametrize(("how", "worker_first"), STARTS, ids=[s[0] for s in STARTS])
def test_an_approval_in_the_browser_is_continued_by_a_standalone_worker(
        bl_project: Project, auth_console: Server, browser: Browser, how: str,
        worker_first: bool) -> None:
    """Approve in Chromium (signed in as alice); the standalone worker, and nothing else,
    continues the run to ``completed`` with the answer in its output."""
    workers: list[_QueueWorker] = []
    page = None
    try:
        if worker_first:
            workers.append(_QueueWorker(bl_project))
        eid = _start(bl_project, how)
        wait_for(lambda: _status(bl_project, eid) == "paused", "the run to pause", 90)
        run = bl_project.store.get_run(eid)
        assert run is not None and run.queue == "default"
        [pending] = bl_project.store.list_pending(eid)
        page = _sign_in(browser, auth_console, "alice")
        page.goto(auth_console.url + approval_url(eid, pending.checkpoint_id))
        page.fill('[name="field.limit"]', "7")
        page.fill("#comment", f"approved in the browser ({how})")
        page.get_by_role("button", name="Approve").click()
        expect(page).to_have_url(re.compile(re.escape(run_url(eid)) + r"\?done=answered$"))
        expect(page.locator("#done")).to_contain_text("Your answer was recorded")
        if not worker_first:
            # Nobody continues it yet: the console ran nothing itself.
            expect(page.locator("#run-status")).to_have_text("paused")
            assert _status(bl_project, eid) == "paused"
            workers.append(_QueueWorker(bl_project))
        expect(page.locator("#run-status")).to_have_text("completed", timeout=120_000)
        wait_for(lambda: _status(bl_project, eid) == "completed", "the run to complete", 120)
        events = _events(bl_project, eid)  # read from the store by another process
        assert (events[-1]["kind"], events[-1]["status"]) == ("run_ended", "completed")
        assert events[-1]["detail"] == OUTPUT, events[-1]
        [decision] = bl_project.store.decisions(eid)
        assert decision.resolver == "alice" and decision.value["limit"] == 7
        assert decision.comment == f"approved in the browser ({how})"
        answered = [e for e in events if e["kind"] == "answered"]
        assert [(e["channel"], e["actor"]) for e in answered] == [("console", "alice")], \
            answered
        log = workers[0].log.read_text()
        assert f"run {eid} (answered): completed" in log, log
    finally:
        if page is not None:
            page.context.close()
        for worker in workers:
            worker.stop()
