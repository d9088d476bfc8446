"""``on: schedule`` and ``tether deploy`` (issue 26): a schedule under ``on:`` is the very
schedule of the top-level key (the same plan, fingerprint included); both at once is E236;
``tether deploy`` (a real subprocess) registers each file's schedule in the store and names
each webhook, and registers nothing when any file has errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tether.compiler import compile as compile_workflow
from tether.compiler.compile import Compiler
from tether.stores.open import open_checkpointer

BODY = """nodes:
  a: {task: t, with: {r: "{{ inputs.region }}"}}
"""
HEAD = "tether: 1\nname: nightly\ninputs:\n  region: {type: string}\n"
ON = HEAD + 'on:\n  schedule: {cron: "0 3 * * *", timezone: Europe/Paris, inputs: {region: eu}}\n'
TOP = HEAD + 'schedule: {cron: "0 3 * * *", timezone: Europe/Paris, inputs: {region: eu}}\n'
HOOK = """tether: 1
name: on-push
inputs:
  ref: {type: string}
on:
  webhook:
    verify: github
    secret: GITHUB_WEBHOOK_SECRET
    inputs: {ref: "{{ trigger.payload.ref }}"}
nodes:
  a: {task: t, with: {r: "{{ inputs.ref }}"}}
"""


def tether(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tether", *args], cwd=cwd, text=True,
                          capture_output=True, timeout=120, env={**os.environ})


def test_on_schedule_is_the_schedule(tmp_path: Path) -> None:
    (tmp_path / "on.yaml").write_text(ON + BODY, encoding="utf-8")
    (tmp_path / "top.yaml").write_text(TOP + BODY, encoding="utf-8")
    on, top = compile_workflow(tmp_path / "on.yaml"), compile_workflow(tmp_path / "top.yaml")
    assert on.schedule is not None and on.schedule == top.schedule
    assert on.fingerprint == top.fingerprint
    both = tmp_path / "both.yaml"
    both.write_text(TOP + ON[len(HEAD):] + BODY, encoding="utf-8")
    assert [(d.code, d.span.line) for d in Compiler().check_file(both)
            if d.code.startswith("E")] == [("E236", 7)]
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(ON.replace("0 3 * * *", "0 25 * * *") + BODY, encoding="utf-8")
    assert [(d.code, d.span.line) for d in Compiler().check_file(wrong)
            if d.code.startswith("E")] == [("E870", 6)]


def test_deploy_registers_schedules_and_names_webhooks(tmp_path: Path) -> None:
    (tmp_path / "nightly.yaml").write_text(ON + BODY, encoding="utf-8")
    (tmp_path / "push.yaml").write_text(HOOK, encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'tether.db'}"
    done = tether("deploy", "nightly.yaml", "push.yaml", "--db", db, "--queue", "cron",
                  cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "registered schedule nightly: 0 3 * * * (Europe/Paris)" in done.stdout
    assert "webhook on-push: POST /hooks/on-push (github, secret from " \
        "$GITHUB_WEBHOOK_SECRET)" in done.stdout
    store = open_checkpointer(db)
    try:
        found = store.get_schedule("nightly")
        assert found is not None
        assert (found.cron, found.timezone, found.inputs, found.queue) == (
            "0 3 * * *", "Europe/Paris", {"region": "eu"}, "cron")
        assert store.get_schedule("on-push") is None
    finally:
        store.close()
    again = tether("deploy", "nightly.yaml", "--db", db, cwd=tmp_path)
    assert again.returncode == 0 and "unchanged schedule nightly" in again.stdout


def test_deploy_with_an_error_registers_nothing(tmp_path: Path) -> None:
    (tmp_path / "nightly.yaml").write_text(ON + BODY, encoding="utf-8")
    (tmp_path / "bad.yaml").write_text(HOOK.replace("GITHUB_WEBHOOK_SECRET", "oops"),
                                       encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'tether.db'}"
    done = tether("deploy", "nightly.yaml", "bad.yaml", "--db", db, cwd=tmp_path)
    assert done.returncode == 1
    assert "E231" in done.stdout + done.stderr and "Traceback" not in done.stderr
    if (tmp_path / "tether.db").exists():
        store = open_checkpointer(db)
        try:
            assert store.get_schedule("nightly") is None
        finally:
            store.close()
