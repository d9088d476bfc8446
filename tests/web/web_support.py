"""Shared by the console tests: workflow files, their tasks, and ``tether serve`` as a real
subprocess on a port the kernel picks (``--port 0``; the URL is read from its first line).

Nothing here stands in for the console: the server is the ``tether`` command, the runs are
made by the library against the same store file (another process than the server), and the
HTTP calls are real requests on loopback.
"""

from __future__ import annotations

import html
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from tether.runtime.runner import Runner
from tether.stores.open import open_checkpointer

SECRET = "test-console-secret-0123456789"
WEBHOOK_SECRET = "test-webhook-secret-abcdef"
TOKENS = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789",
          "vera": "vera-token-0123456789"}
TOKENS_ENV = "alice:alice-token-0123456789,bob:bob-token-0123456789," \
             "vera:vera-token-0123456789:viewer"

TASKS = '''
import time
from pathlib import Path

from tether import task


@task("t.prepare")
def prepare(amount: float, note: str = "") -> dict:
    return {"big": amount > 100, "note": note}


@task("t.finish")
def finish(approved: bool, note: str = "") -> dict:
    if note.startswith("fail-until:") and not Path(note[len("fail-until:"):]).exists():
        raise RuntimeError("finish failed on purpose")
    return {"done": True, "approved": approved}


@task("t.gate")
def gate(path: str) -> dict:
    deadline = time.monotonic() + 60
    while not Path(path).exists():  # the test creates the file: an event, not a delay
        if time.monotonic() > deadline:
            raise TimeoutError(path)
        time.sleep(0.02)
    return {"opened": path}
'''

REVIEW = '''
tether: 1
name: review
inputs:
  amount: {type: number}
  note: {type: string, default: ""}
nodes:
  prepare:
    task: t.prepare
    with: {amount: "{{ inputs.amount }}", note: "{{ inputs.note }}"}
  review:
    needs: [prepare]
    approval:
      reason: manager_approval
      context:
        amount: "{{ inputs.amount }}"
        note: "{{ inputs.note }}"
        big: "{{ nodes.prepare.output.big }}"
      form:
        approved: {type: boolean}
        limit: {type: integer}
        remark: {type: string, default: ""}
  finish:
    needs: [review]
    task: t.finish
    with: {approved: "{{ nodes.review.output.approved }}", note: "{{ inputs.note }}"}
output:
  approved: "{{ nodes.review.output.approved }}"
  limit: "{{ nodes.review.output.limit }}"
'''

SLOW = '''
tether: 1
name: slow
inputs:
  gate: {type: string}
nodes:
  first:
    task: t.prepare
    with: {amount: 1}
  gate:
    needs: [first]
    task: t.gate
    with: {path: "{{ inputs.gate }}"}
  last:
    needs: [gate]
    task: t.prepare
    with: {amount: 2}
'''

URL_LINE = re.compile(r"tether console on (http://\S+)")


_TASKS_FILE: list[Path] = []


def tasks_file(base: Path) -> Path:
    """The tasks module, written once per test session (a task name has one definition)."""
    if not _TASKS_FILE:
        path = base / "web_tasks_module" / "web_tasks.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(TASKS, encoding="utf-8")
        from tether.runtime.registry import import_tasks
        import_tasks([str(path)], None)
        _TASKS_FILE.append(path)
    return _TASKS_FILE[0]


class Project:
    """A directory with the workflows and a SQLite store; ``tasks`` is the tasks module."""

    def __init__(self, root: Path, tasks: Path, db_url: str | None = None) -> None:
        self.root = root
        self.tasks = tasks
        (root / "review.yaml").write_text(textwrap.dedent(REVIEW), encoding="utf-8")
        (root / "slow.yaml").write_text(textwrap.dedent(SLOW), encoding="utf-8")
        self.db = db_url or f"sqlite:///{root / 'tether.db'}"
        self.store = open_checkpointer(self.db)

    def runner(self, workflow: str = "review.yaml") -> Runner:
        return Runner(self.root / workflow, self.store)

    def pause(self, amount: float = 250, note: str = "") -> tuple[str, str]:
        """Start a review run (it pauses); its execution id and interrupted checkpoint."""
        result = self.runner().run({"amount": amount, "note": note})
        assert result.status == "paused", result
        pending = result.pending[0]
        return result.execution_id, pending.checkpoint_id

    def close(self) -> None:
        self.store.close()


class Server:
    """``tether serve`` in a subprocess; stopped with SIGTERM (then SIGKILL)."""

    def __init__(self, project: Project, *args: str, env: Mapping[str, str] | None = None,
                 auth: bool = False) -> None:
        command = [sys.executable, "-m", "tether", "serve", "--db", project.db, "--port", "0",
                   *(["--auth", "token"] if auth else []), *args]
        environment = {**os.environ, "TETHER_CONSOLE_SECRET": SECRET,
                       "TETHER_TOKENS": TOKENS_ENV, "TETHER_WEBHOOK_SECRET": WEBHOOK_SECRET,
                       **(env or {})}
        self.auth = auth
        self.process = subprocess.Popen(command, cwd=project.root, env=environment,
                                        stderr=subprocess.PIPE, text=True)
        self.url = self._read_url()
        self.client = httpx.Client(base_url=self.url, timeout=20)
        self.wait_ready()

    def _read_url(self) -> str:
        assert self.process.stderr is not None
        lines = []
        for line in self.process.stderr:
            lines.append(line)
            found = URL_LINE.search(line)
            if found:
                return found.group(1)
        raise AssertionError("tether serve exited before serving: " + "".join(lines))

    def headers(self, user: str | None = "alice") -> dict[str, str]:
        if not self.auth or user is None:
            return {}
        return {"Authorization": f"Bearer {TOKENS[user]}"}

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if self.client.get("/api/me", headers=self.headers()).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise AssertionError("tether serve did not answer within 30 s")

    def get(self, path: str, user: str | None = "alice", **kwargs: Any) -> httpx.Response:
        return self.client.get(path, headers={**self.headers(user),
                                              **kwargs.pop("headers", {})}, **kwargs)

    def post(self, path: str, body: Any = None, user: str | None = "alice",
             **kwargs: Any) -> httpx.Response:
        return self.client.post(path, json=body if body is not None else {},
                                headers={**self.headers(user), **kwargs.pop("headers", {})},
                                **kwargs)

    def stop(self) -> None:
        self.client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stderr is not None:
            self.process.stderr.close()


def wait_for(predicate: Any, what: str, seconds: float = 30.0) -> Any:
    """Poll ``predicate`` until it returns something truthy (or fail after ``seconds``)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def approval_path(execution_id: str, checkpoint_id: str, api: bool = True) -> str:
    from tether.web.urls import approval_url
    return ("/api" if api else "") + approval_url(execution_id, checkpoint_id)


def cli_history(project: Project, eid: str) -> dict[str, Any]:
    """``tether show ID --json`` in a subprocess, parsed."""
    shown = subprocess.run([sys.executable, "-m", "tether", "show", eid, "--json", "--db",
                            project.db], cwd=project.root, capture_output=True, text=True,
                           timeout=120, check=False, env=dict(os.environ))
    assert shown.returncode == 0, shown.stderr
    found: dict[str, Any] = json.loads(shown.stdout)
    return found


def page_history(server: Server, eid: str) -> tuple[dict[str, Any], str]:
    """The history the console's run page embeds, and the page's HTML."""
    from tether.web.urls import run_url

    page = server.get(run_url(eid))
    assert page.status_code == 200, page.text
    found = re.search(r'id="history-data" hidden data-json="([^"]*)"', page.text)
    assert found is not None, "the run page embeds its history"
    return json.loads(html.unescape(found.group(1))), page.text


def project_with(root: Path, base: Path, db_url: str, files: Mapping[str, str]) -> Project:
    """A project in ``root`` on the store at ``db_url`` holding ``files`` (name -> text)
    beside the console tests' tasks (written once in ``base``)."""
    found = Project(root, tasks_file(base), db_url)
    for name, text in files.items():
        (root / name).write_text(text)
    return found


def one_history(project: Project, eid: str) -> tuple[dict[str, Any], str]:
    """The run's history from ``tether show --json``, the API and the console's run page
    (a ``tether serve`` process), which must be one document whose graph draws each
    top-level node in its state; and the page's HTML."""
    from tether.web.urls import run_url

    from_cli = cli_history(project, eid)
    server = Server(project, auth=True)
    try:
        api = server.get(f"/api{run_url(eid)}/history")
        assert api.status_code == 200, api.text
        from_page, page = page_history(server, eid)
    finally:
        server.stop()
    assert from_cli == api.json() == from_page
    graph = {node: state for state, node in re.findall(
        r'<g class="node st-([a-z_]+) k-[a-z]+" data-node="([^"]+)"', page)}
    assert graph == {node: view["state"] for node, view in from_cli["nodes"].items()}
    return from_cli, page


def served(project: Project, *args: str, **kwargs: Any) -> Iterator[Server]:
    server = Server(project, *args, **kwargs)
    try:
        yield server
    finally:
        server.stop()
