"""Issue 22's secret attacks against the console: a run whose tasks received every transformed
form of a secret (``| trim``, ``| upper``, ``| replace``, slices joined, ``.strip()``) and
whose failing task echoed its key in its error. Neither the secret nor any form may appear
in the API's JSON, the console's HTML, the signed ``run.failed`` webhook body, or the logs of
``tether serve``; the attack itself is ``tests/runtime/test_secret_leaks.py``'s workflow,
run by a real `python -m tether run` process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_worker_notify import Receiver
from web_support import Project, Server, wait_for

from tether.web.urls import run_url

SECRET = "sk-live-Abc123xyz-9876\n"
NEEDLES = ("c123xyz", "live-ab", "live_ab", "abc123")

LEAK = """\
tether: 1
name: leak
secrets: [API_KEY]
nodes:
  trim: {task: leakweb.echo, with: {value: "{{ secrets.API_KEY | trim }}"}}
  upper:
    task: leakweb.echo
    with: {value: "{{ secrets.API_KEY | upper }}",
           more: ["{{ secrets.API_KEY | replace('-', '_') }}"]}
  sliced:
    task: leakweb.echo
    with: {value: "{{ (secrets.API_KEY[:10] ~ '.' ~ secrets.API_KEY[10:]) | trim }}"}
  method: {task: leakweb.echo, with: {value: "{{ secrets.API_KEY.strip().lower() }}"}}
  boom:
    needs: [trim, upper, sliced, method]
    task: leakweb.boom
    with: {value: "{{ secrets.API_KEY | trim | upper }}"}
"""

TASKS = """\
import json
import os
from tether import task


@task("leakweb.echo")
def echo(value, more=None):
    with open(os.environ["RECEIVED"], "a", encoding="utf-8") as file:
        file.write(json.dumps([value, more]) + "\\n")
    return {"got": value, "more": more}


@task("leakweb.boom")
def boom(value):
    raise ValueError(f"rejected key {value}")
"""


def _leaks(text: str) -> list[str]:
    return [needle for needle in NEEDLES if needle in text.lower()]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver(failures=0)
    yield found
    found.http.shutdown()


def test_no_form_of_a_secret_reaches_the_api_the_console_the_webhook_or_the_logs(
        tmp_path: Path, receiver: Receiver) -> None:
    (tmp_path / "leak.yaml").write_text(LEAK, encoding="utf-8")
    tasks = tmp_path / "leakweb_tasks.py"
    tasks.write_text(TASKS, encoding="utf-8")
    project = Project(tmp_path, tasks)
    env = {**os.environ, "API_KEY": SECRET, "RECEIVED": str(tmp_path / "received.jsonl")}
    env.pop("TETHER_DB", None)
    server = Server(project, "--worker", "--tasks", str(tasks), "--notify-url", receiver.url,
                    env={"API_KEY": SECRET, "RECEIVED": str(tmp_path / "worker.jsonl")})
    try:
        run = subprocess.run([sys.executable, "-m", "tether", "run", "leak.yaml", "--tasks",
                              str(tasks), "--db", project.db, "--json"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=180, check=False)
        assert run.returncode == 1, run.stdout + run.stderr
        eid = json.loads(run.stdout)["execution_id"]
        received = (tmp_path / "received.jsonl").read_text(encoding="utf-8")
        assert _leaks(received) == list(NEEDLES)  # every form was rendered, and is findable

        failed = wait_for(lambda: receiver.event(eid, "run.failed"), "the run.failed event",
                          seconds=120)
        assert failed["error"]["message"] == "rejected key ***", failed["error"]
        # the same run submitted: the console's embedded worker renders the secrets from its
        # own environment, and its logs are searched below
        submitted = subprocess.run([sys.executable, "-m", "tether", "submit", "leak.yaml",
                                    "--db", project.db], cwd=tmp_path, env=env,
                                   capture_output=True, text=True, timeout=180, check=False)
        assert submitted.returncode == 0, submitted.stderr
        worked = submitted.stdout.strip().split()[-1]
        by_worker = wait_for(lambda: receiver.event(worked, "run.failed"), "the worker's run",
                             seconds=120)
        assert by_worker["error"]["message"] == "rejected key ***", by_worker["error"]
        assert _leaks((tmp_path / "worker.jsonl").read_text(encoding="utf-8")) == list(NEEDLES)
        pages = [server.get(path) for path in (
            f"/api{run_url(eid)}", f"/api{run_url(eid)}/checkpoints", "/api/runs",
            run_url(eid), f"{run_url(eid)}/live", "/runs", "/inbox")]
        for page in pages:
            assert page.status_code == 200, (page.url, page.status_code)
        detail = pages[0].json()
        assert detail["error"]["message"] == "rejected key ***"
        assert "<secret: {{ secrets.API_KEY | trim }}>" in json.dumps(pages[1].json())
        assert "rejected key ***" in pages[3].text  # the run page shows the masked error
        with receiver.lock:
            bodies = b"\n".join(body for body, _ in receiver.attempts).decode()
        pages.append(server.get(f"/api{run_url(worked)}/checkpoints"))
        texts = [run.stdout, run.stderr, submitted.stdout, submitted.stderr, bodies,
                 *(page.text for page in pages)]
    finally:
        server.client.close()
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(20)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()
        assert server.process.stderr is not None
        logs = server.process.stderr.read()
        server.process.stderr.close()
        project.close()
    assert _leaks("\n".join([*texts, logs])) == []
