"""Terminal output never interprets data (issue 8, item 10).

Execution ids, workflow names, task outputs and error messages holding rich markup (`[/]`,
`[/docs]`, `[link=...]`), ANSI escapes, line breaks and bidi overrides go through the real
`tether` command in a subprocess: every command exits with its usual code (never 3), prints the
markup literally, shows control characters as escapes, and quotes the command hints it prints
so that a real shell reads them back as the exact arguments.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tether.cli.terminal import dumps, printable, shell_quote
from tether.stores.records import RunRecord
from tether.stores.sqlite import SQLiteCheckpointer

MARKUP = "[/][/docs][link=https://evil.example]click[/link][bold]"
ANSI = "\x1b[31mred\x1b[0m"
HOSTILE = f"{MARKUP} {ANSI}\nsecond line \u202eevil\x07"
RUN_ID = "[/]$(touch PWNED)`id`;'q'[link=x]"

WORKFLOW = """\
tether: 1
name: hostile
nodes:
  a:
    task: t.hostile
  review:
    needs: [a]
    approval:
      reason: "[/] check"
      context: {said: "{{ nodes.a.output }}"}
      form: {approved: {type: boolean}}
  b:
    needs: [review]
    task: t.fail
output:
  o: "{{ nodes.a.output }}"
"""

TASKS = f"""\
from tether import task

@task("t.hostile")
def hostile():
    return {HOSTILE!r}

@task("t.fail")
def fail():
    raise RuntimeError({HOSTILE!r})
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "w.yaml").write_text(WORKFLOW)
    (tmp_path / "hostile_tasks.py").write_text(TASKS)
    return tmp_path


def tether(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TETHER_DB", "TETHER_DEBUG")}
    env["TETHER_DB"] = f"sqlite:///{project / 't.db'}"
    return subprocess.run([sys.executable, "-m", "tether", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def assert_inert(result: subprocess.CompletedProcess[str]) -> None:
    """No traceback, no internal error, no raw control character on either stream."""
    both = result.stdout + result.stderr
    assert result.returncode != 3 and "Traceback" not in both, both
    raw = [c for c in both if c not in "\n" and (ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0
                                                  or c in "\u202e\u2028\u2029")]
    assert raw == [], both


def stored_by_an_older_tether(project: Path, execution_id: str) -> None:
    """Start a run (it pauses) with an id only the rule of an older tether accepted."""
    from tether.runtime import submission as submission_module
    from tether.runtime.ids import check_id
    from tether.runtime.runner import Runner

    saved = submission_module.check_execution_id  # (the check of a new run's id)
    submission_module.check_execution_id = lambda text, what="": check_id(
        text, "an execution id")
    try:
        with SQLiteCheckpointer(project / "t.db") as store:
            tasks = {"t.hostile": lambda: HOSTILE, "t.fail": lambda: None}
            result = Runner(project / "w.yaml", store, tasks).run(
                {}, execution_id=execution_id)
            assert result.status == "paused"
    finally:
        submission_module.check_execution_id = saved


def hint_arguments(line: str, prefix: str) -> list[str]:
    """What a real shell makes of a printed command hint (`$(...)` must stay literal)."""
    command = line.split(prefix, 1)[1]
    shell = subprocess.run(["bash", "-c", f"printf '%s\\0' {command}"], capture_output=True,
                           text=True, check=True, cwd="/")
    return shell.stdout.split("\0")[:-1]


def test_hostile_ids_outputs_and_errors_print_literally_through_every_command(
        project: Path) -> None:
    """A new run may not have such an id (exit 2, nothing made); one an older tether stored
    goes through pending, resume (failed), runs, show, show --json: all inert, markup
    literal, hints quoted; the `$(touch PWNED)` in the id never runs."""
    refused = tether(project, "run", "w.yaml", "--tasks", "hostile_tasks.py",
                     "--execution-id", RUN_ID)
    assert refused.returncode == 2, refused.stderr
    assert_inert(refused)
    assert "may hold only ASCII letters, digits and - _ . : @ + =; this one holds '['" \
        in refused.stderr
    stored_by_an_older_tether(project, RUN_ID)

    pending = tether(project, "pending")
    assert_inert(pending)
    assert pending.stdout.startswith(f"{RUN_ID}  review  [/] check  since ")

    failed = tether(project, "resume", RUN_ID, "--tasks", "hostile_tasks.py",
                    "--value", '{"approved": true}')
    assert failed.returncode == 1
    assert_inert(failed)
    assert f"failed run {RUN_ID} at node 'b': RuntimeError: {printable(HOSTILE)}" \
        in failed.stdout
    hint = next(line for line in failed.stderr.splitlines() if "fix the cause" in line)
    assert hint_arguments(hint, "fix the cause, then: ") == [
        "tether", "resume", RUN_ID, "--tasks", "hostile_tasks.py"]

    runs = tether(project, "runs")
    assert_inert(runs)
    assert RUN_ID in runs.stdout and "hostile" in runs.stdout

    show = tether(project, "show", RUN_ID)
    assert_inert(show)
    assert f"run {RUN_ID}  workflow hostile  status failed" in show.stdout
    assert "[/docs][link=https://evil.example]" in show.stdout
    as_json = tether(project, "show", RUN_ID, "--json")
    assert_inert(as_json)
    record = json.loads(as_json.stdout)
    assert next(e for e in record["events"] if e["kind"] == "node_completed")["detail"] \
        == HOSTILE
    assert not (project / "PWNED").exists()


def test_stored_ids_and_names_with_control_characters_are_listed_escaped(
        project: Path) -> None:
    """Runs written by other programs (ids with newlines, ANSI, NUL; markup names): `runs`
    and `pending` list each on one line, escaped; neither exits 3."""
    store = SQLiteCheckpointer(project / "t.db")
    now = datetime.now(tz=UTC)
    odd_id = "x\n\x1b[2J\x00[/]"
    for execution_id, workflow in ((odd_id, MARKUP), ("plain", f"{ANSI}\r\u2028")):
        store.create_run(RunRecord(execution_id=execution_id, workflow=workflow,
                                   plan_fingerprint="f" * 64, status="paused", inputs={},
                                   created_at=now, updated_at=now), "{}")
    store.close()
    with SQLiteCheckpointer(project / "t.db") as store:
        from sqlalchemy import insert

        from tether.stores.schema import pending_interrupts
        with store.engine.begin() as connection:
            connection.execute(insert(pending_interrupts).values(
                execution_id=odd_id, checkpoint_id="c1", node_id="n\x1b]8;;x\x07",
                agent_path="", reason=MARKUP, context=json.dumps({"k": HOSTILE}),
                created_at=time.time()))
    runs = tether(project, "runs")
    assert runs.returncode == 0
    assert_inert(runs)
    assert "x\\n\\x1b[2J\\x00[/]" in runs.stdout and MARKUP in runs.stdout
    assert "\\x1b[31mred\\x1b[0m\\r\\u2028" in runs.stdout
    assert len(runs.stdout.splitlines()) == 3
    listed = tether(project, "runs", "--json")
    assert {r["execution_id"] for r in json.loads(listed.stdout)} == {odd_id, "plain"}
    pending = tether(project, "pending")
    assert_inert(pending)
    assert pending.stdout.startswith(
        f"x\\n\\x1b[2J\\x00[/]  n\\x1b]8;;x\\x07  {MARKUP}  since ")


def test_execution_ids_that_no_run_may_have_are_usage_errors(project: Path) -> None:
    """--execution-id (and the ID of resume, fork, show) must be 1 to 200 printable
    characters: exit 2 with the reason, nothing created."""
    cases = {"": "cannot be empty", "a" * 201: "at most 200 characters",
             "a\x1bb": "holds '\\x1b' at position 2", "a\nb": "holds '\\n'",
             "\u202eabc": "holds '\\u202e'"}
    for bad, reason in cases.items():
        result = tether(project, "run", "w.yaml", "--tasks", "hostile_tasks.py",
                        "--execution-id", bad)
        assert result.returncode == 2, result.stderr
        assert_inert(result)
        assert "Invalid value for '--execution-id': an execution id" in result.stderr
        assert reason in result.stderr
        for command in ("resume", "fork", "show"):
            other = tether(project, command, bad)
            assert other.returncode == 2 and reason in other.stderr, other.stderr
    assert not (project / "t.db").exists()


def test_new_ids_are_data_not_paths(project: Path) -> None:
    """A new run's id holds only ASCII letters, digits and -_.:@+= (no leading '.', no
    '..'): separators, dot segments, whitespace and look-alikes are usage errors (exit 2, one
    line naming the character), nothing is stored; reading commands still accept them."""
    cases = {"a/b": "holds '/' at position 2", "a\\b": "holds '\\\\'", "..": "'.'",
             "x..y": "may not hold '..'", ".hidden": "may not start with '.'",
             "a b": "holds ' '", "a\uff0fb": "holds '\\uff0f'",
             "a\u2215b": "holds '\\u2215'", "caf\u00e9": "holds '\\xe9'",
             "%2F": "holds '%'"}
    for bad, reason in cases.items():
        for command in (["run", "w.yaml", "--execution-id", bad],
                        ["submit", "w.yaml", "--id", bad]):
            result = tether(project, *command)
            assert result.returncode == 2, (bad, result.stderr)
            assert_inert(result)
            assert reason in result.stderr, (bad, result.stderr)
            assert "Traceback" not in result.stderr and len(
                result.stderr.strip().splitlines()) <= 4, result.stderr
        assert tether(project, "show", bad).returncode == 1  # no such run: not a usage error
    assert not (project / "t.db").exists()
    ok = tether(project, "run", "w.yaml", "--tasks", "hostile_tasks.py", "--execution-id",
                "order-17:eu@2026+retry=2_a.b")
    assert ok.returncode == 4, ok.stderr


@pytest.mark.parametrize("value", [
    "plain", RUN_ID, "a\x1b[31mb\nc\t\x00", "\u202e\u2066\ud800", "😀 ok", "\x7f\x9b",
])
def test_terminal_helpers_escape_exactly_the_hidden_characters(value: str) -> None:
    """printable: visible characters kept, control/format ones escaped; dumps: valid JSON
    that reads back to the value; shell_quote: a shell reads back the argument."""
    shown = printable(value)
    assert all(c.isprintable() for c in shown)
    assert json.loads(dumps({"v": value})) == {"v": value}
    assert all(c.isprintable() or c in "\n " for c in dumps({"v": value}, indent=2))
    if value.isprintable():
        assert shown == value
        assert shlex.split(shell_quote(value)) == [value]
