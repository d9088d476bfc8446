"""Issue 22's secret attacks, run as an attacker would: real `python -m tether` processes on
SQLite and PostgreSQL, then every byte the run left behind is searched.

A secret read from a file ends in a newline, so workflows transform it (``| trim``,
``| upper``, ``| replace``, slices joined, ``.strip()``); none of those forms may reach the
SQLite file (and its -wal), a ``pg_dump`` of the run's schema, ``tether show --json``,
``tether runs --json``, or anything the commands print, even when a task echoes its argument
in its result or its error. The tasks write what they received to a file outside the store,
which proves each form really was rendered (and that the search would find it).

The masker cases (a PIN ``1234``, secrets ``true``, ``null`` and one equal to a key name)
leave every stored value intact and valid; a resumed and a forked run render their secret
inputs again from the environment, and fail clearly (without running the task) when the
variable is gone.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

SECRET = "sk-live-Abc123xyz-9876\n"
FORMS = {
    "trim": SECRET.strip(),
    "upper": SECRET.upper(),
    "replace": SECRET.replace("-", "_"),
    "sliced": (SECRET[:10] + "." + SECRET[10:]).strip(),
    "method": SECRET.strip().lower(),
}
NEEDLES = ("c123xyz", "live-ab", "live_ab", "abc123")
"""Lower-case fragments of every form (each slice included): none may appear anywhere."""

LEAK = """\
tether: 1
name: leak
secrets: [API_KEY]
nodes:
  trim: {task: leak.echo, with: {form: trim, value: "{{ secrets.API_KEY | trim }}"}}
  upper:
    task: leak.echo
    with:
      form: upper
      value: "{{ secrets.API_KEY | upper }}"
      nested: {list: ["{{ secrets.API_KEY | replace('-', '_') }}", plain]}
  sliced:
    task: leak.echo
    with: {form: sliced, value: "{{ (secrets.API_KEY[:10] ~ '.' ~ secrets.API_KEY[10:]) | trim }}"}
  method: {task: leak.echo, with: {form: method, value: "{{ secrets.API_KEY.strip().lower() }}"}}
  boom:
    needs: [trim, upper, sliced, method]
    task: leak.boom
    with: {value: "{{ secrets.API_KEY | trim | upper }}"}
output:
  done: "{{ nodes.boom.output }}"
"""

TASKS = """\
import json
import os
from tether import task


def _received(name, value):
    with open(os.environ["RECEIVED"], "a", encoding="utf-8") as file:
        file.write(json.dumps({"name": name, "value": value}) + "\\n")


@task("leak.echo")
def echo(form, value, nested=None):
    _received(form, value)
    if nested is not None:
        _received("replace", nested["list"][0])
    return {"got": value, "nested": nested, "note": f"used {value}"}


@task("leak.boom")
def boom(value):
    _received("boom", value)
    if os.environ.get("BOOM"):
        raise ValueError(f"rejected key {value}")
    return {"accepted": value}
"""


def _env(project: Path, **extra: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TETHER_DB", "API_KEY", "BOOM")}
    env.update({"API_KEY": SECRET, "RECEIVED": str(project / "received.jsonl")})
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _tether(project: Path, url: str, *args: str, env: dict[str, str],
            log: list[str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "tether", *args, "--db", url], cwd=project,
                          env=env, capture_output=True, text=True, timeout=180, check=False)
    log.extend([done.stdout, done.stderr])
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _received(project: Path) -> list[dict[str, str]]:
    path = project / "received.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [json.loads(line) for line in lines]


def _stored_bytes(url: str) -> bytes:
    """Every byte the store holds: the SQLite file and its -wal, or a pg_dump of the schema."""
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())
    parts = urlsplit(url)
    schema = parse_qs(parts.query)["schema"][0]
    server = parts._replace(query="").geturl()
    dump = subprocess.run(["pg_dump", "--schema", schema, "--data-only", "--inserts", server],
                          capture_output=True, timeout=120, check=True)
    assert f"{schema}".encode() in dump.stdout and b"INSERT INTO" in dump.stdout
    return dump.stdout


def _leaks(data: str | bytes) -> list[str]:
    text = (data.decode("utf-8", "replace") if isinstance(data, bytes) else data).lower()
    return [needle for needle in NEEDLES if needle in text]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "leak.yaml").write_text(LEAK, encoding="utf-8")
    (tmp_path / "leak_tasks.py").write_text(TASKS, encoding="utf-8")
    return tmp_path


def _run(shown: dict[str, Any]) -> dict[str, Any]:
    """The run's fields in `show --json` (at the top, or under "run")."""
    return dict(shown.get("run", shown))


def _checkpoints(url: str, run_id: str) -> list[dict[str, Any]]:
    """The run's checkpoint rows as the store returns them (inputs and outputs included)."""
    from tether.stores.open import open_checkpointer

    store = open_checkpointer(url)
    try:
        return [{"node_id": c.node_id, "node_input": c.node_input,
                 "node_output": c.node_output} for c in store.list(run_id)]
    finally:
        store.close()


def _id(project: Path, url: str, env: dict[str, str], log: list[str]) -> str:
    runs = json.loads(_tether(project, url, "runs", "--json", env=env, log=log).stdout)
    return str(runs[0]["execution_id"])


def test_no_transformed_secret_reaches_any_byte_stored_or_printed(project: Path,
                                                                   shared_url: str) -> None:
    """Run (a task error echoing the key fails it), resume (it completes), fork: the tasks
    got every form, and no form is in the store, `show --json`, `runs --json` or any output."""
    log: list[str] = []
    env = _env(project, BOOM="1")
    failed = _tether(project, shared_url, "run", "leak.yaml", "--tasks", "leak_tasks.py", "-q",
                     env=env, log=log)
    assert failed.returncode == 1, failed.stderr
    assert "rejected key ***" in failed.stderr + failed.stdout
    run_id = _id(project, shared_url, env, log)
    got = {entry["name"]: entry["value"] for entry in _received(project)}
    assert got == {**FORMS, "boom": SECRET.strip().upper()}  # each form really was rendered
    assert _leaks(json.dumps(got)) == list(NEEDLES)  # and the search finds each one

    shown = _tether(project, shared_url, "show", run_id, "--json", env=env, log=log)
    data = json.loads(shown.stdout)
    assert _run(data)["error"]["message"] == "rejected key ***", _run(data)["error"]
    rows = _checkpoints(shared_url, run_id)
    inputs = {c["node_id"]: c["node_input"] for c in rows if c["node_input"]}
    assert inputs["trim"] == {"form": "trim",
                              "value": "<secret: {{ secrets.API_KEY | trim }}>"}
    assert inputs["upper"]["nested"]["list"] == [
        "<secret: {{ secrets.API_KEY | replace('-', '_') }}>", "plain"]
    outputs = {c["node_id"]: c["node_output"] for c in rows}
    assert outputs["trim"] == {"got": "***", "nested": None, "note": "used ***"}

    resumed = _tether(project, shared_url, "resume", run_id, "--tasks", "leak_tasks.py", "-q",
                      "--json", env=_env(project), log=log)
    assert json.loads(resumed.stdout)["status"] == "completed", resumed.stderr
    assert json.loads(resumed.stdout)["output"] == {"done": {"accepted": "***"}}
    forked = _tether(project, shared_url, "fork", run_id, "--tasks", "leak_tasks.py", "--json",
                     env=_env(project), log=log)
    assert forked.returncode == 0, forked.stderr
    for command in (("show", run_id, "--json"), ("runs", "--json"),
                    ("show", json.loads(forked.stdout)["execution_id"], "--json")):
        _tether(project, shared_url, *command, env=env, log=log)

    assert _leaks("\n".join(log)) == []
    assert _leaks(_stored_bytes(shared_url)) == []


MASKER_CASES = """\
tether: 1
name: pins
secrets: [CARD_PIN, FLAG, NOTHING, KEYNAME]
inputs:
  amount: {type: number}
nodes:
  values:
    task: pins.values
    with:
      pin: "{{ secrets.CARD_PIN }}"
      others: ["{{ secrets.FLAG }}", "{{ secrets.NOTHING }}", "{{ secrets.KEYNAME }}"]
      amount: "{{ inputs.amount }}"
  review:
    needs: [values]
    approval:
      reason: check
      context: {values: "{{ nodes.values.output }}"}
  after:
    needs: [review]
    task: pins.values
    with: {pin: "{{ secrets.CARD_PIN }}", others: [], amount: "{{ inputs.amount }}"}
output:
  values: "{{ nodes.values.output }}"
  after: "{{ nodes.after.output }}"
"""

PIN_TASKS = """\
from tether import task


@task("pins.values")
def values(pin, others, amount):
    assert pin == "1234" and amount == 12345
    return {"amount": amount, "pin": 1234, "flag": True, "none": None, "order": "order-12345",
            "nested": {"amount": [1234, True, None, "order-12345", 12345.5]},
            "said": f"pin {pin}"}
"""

INTACT = {"amount": 12345, "pin": 1234, "flag": True, "none": None, "order": "order-12345",
          "nested": {"amount": [1234, True, None, "order-12345", 12345.5]}, "said": "pin ***"}


def test_the_masker_cases_keep_every_value_intact_and_the_run_resumes(
        tmp_path: Path, shared_url: str) -> None:
    """CARD_PIN=1234 with amount=12345, secrets `true`, `null` and one equal to a key name:
    the run is created, pauses, resumes and completes; every stored value is valid JSON and
    unchanged (only the string that echoes the PIN is masked)."""
    (tmp_path / "pins.yaml").write_text(MASKER_CASES, encoding="utf-8")
    (tmp_path / "pin_tasks.py").write_text(PIN_TASKS, encoding="utf-8")
    env = _env(tmp_path, CARD_PIN="1234", FLAG="true", NOTHING="null", KEYNAME="amount")
    log: list[str] = []
    paused = _tether(tmp_path, shared_url, "run", "pins.yaml", "--tasks", "pin_tasks.py",
                     "--input", "amount=12345", "--json", env=env, log=log)
    assert paused.returncode == 4, paused.stdout + paused.stderr
    run_id = json.loads(paused.stdout)["execution_id"]
    answered = _tether(tmp_path, shared_url, "resume", run_id, "--tasks", "pin_tasks.py",
                       "--value", '{"approved": true}', "--json", env=env, log=log)
    assert answered.returncode == 0, answered.stdout + answered.stderr
    result = json.loads(answered.stdout)
    assert result["output"] == {"values": INTACT, "after": INTACT}
    shown = json.loads(_tether(tmp_path, shared_url, "show", run_id, "--json", env=env,
                               log=log).stdout)
    assert _run(shown)["inputs"] == {"amount": 12345}
    review = [c["node_input"] for c in _checkpoints(shared_url, run_id)
              if c["node_id"] == "review" and c["node_input"] is not None]
    assert review == [{"values": INTACT}]
    if shared_url.startswith("sqlite:///"):  # every stored JSON text parses, as written
        with sqlite3.connect(shared_url.removeprefix("sqlite:///")) as db:
            texts = db.execute("SELECT state, node_input, node_output, interrupt_context "
                               "FROM checkpoints").fetchall()
        for row in texts:
            for text in row:
                if text is not None:
                    json.loads(text)


RESUMED = """\
tether: 1
name: again
secrets: [API_KEY]
nodes:
  first: {task: leak.echo, with: {form: first, value: "{{ secrets.API_KEY | trim }}"}}
  use:
    needs: [first]
    task: leak.boom
    with: {value: "{{ secrets.API_KEY | trim | upper }}"}
"""


def test_resume_and_fork_render_secrets_again_and_fail_clearly_without_them(
        project: Path, shared_url: str) -> None:
    """The stored input is a placeholder, so a resumed or forked node renders the secret from
    the environment it runs in (a rotated key is used as it is now); with the variable gone,
    the node fails naming the secret and the node, and the task is not called."""
    (project / "again.yaml").write_text(RESUMED, encoding="utf-8")
    log: list[str] = []
    failed = _tether(project, shared_url, "run", "again.yaml", "--tasks", "leak_tasks.py",
                     "--json", env=_env(project, BOOM="1"), log=log)
    run_id = json.loads(failed.stdout)["execution_id"]
    assert json.loads(failed.stdout)["status"] == "failed"
    calls = len(_received(project))

    for args in (("resume", run_id), ("fork", run_id)):
        gone = _tether(project, shared_url, *args, "--tasks", "leak_tasks.py", "--json",
                       env=_env(project, API_KEY=None), log=log)
        error = json.loads(gone.stdout)["error"]
        assert gone.returncode == 1 and error["type"] == "SecretMissing", gone.stdout
        assert error["node_id"] == "use" and "'API_KEY'" in error["message"], error
        assert "node 'use'" in error["message"] and "did not run" in error["message"]
        assert len(_received(project)) == calls  # the task never ran with a wrong value

    rotated = "sk-rotated-Key-5555\n"
    for args in (("fork", run_id), ("resume", run_id)):
        done = _tether(project, shared_url, *args, "--tasks", "leak_tasks.py", "--json",
                       env=_env(project, API_KEY=rotated), log=log)
        assert json.loads(done.stdout)["status"] == "completed", done.stdout + done.stderr
        assert _received(project)[-1] == {"name": "boom", "value": rotated.strip().upper()}
    assert _leaks("\n".join(log)) == [] and "rotated" not in "\n".join(log).lower()
    stored = _stored_bytes(shared_url).decode("utf-8", "replace").lower()
    assert _leaks(stored) == [] and "rotated-key" not in stored


IN_PROCESS = """\
tether: 1
name: asks
secrets: [API_KEY]
nodes:
  ask: {task: asks.ask, with: {key: "{{ secrets.API_KEY | trim | upper }}"}}
output:
  answer: "{{ nodes.ask.output }}"
"""


def test_interrupts_and_idempotent_results_echoing_a_derived_secret_are_masked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: Any) -> None:
    """A task that asks a human with its key in the reason and context, and caches a result
    holding it (@idempotent): the pending row, the cache entry and every checkpoint hold
    `***` in those strings, and the answer still reaches the task on resume."""
    import tether
    from tether import Runner, idempotent, interrupt

    monkeypatch.setenv("API_KEY", SECRET)
    derived = SECRET.strip().upper()

    @idempotent
    def remember(key: str) -> dict[str, Any]:
        return {"cached": key, "n": 1234}

    def ask(key: str) -> Any:
        assert key == derived  # the real value, rendered again on resume
        kept = remember(key)
        answer = interrupt(f"is {key} right?", {"key": key, "amount": 12345})
        return {"kept": kept, "approved": answer["approved"]}

    (tmp_path / "asks.yaml").write_text(IN_PROCESS, encoding="utf-8")
    plan = tether.compile(tmp_path / "asks.yaml")
    paused = Runner(plan, store, {"asks.ask": ask}).run({})
    assert paused.status == "paused"
    (pending,) = store.list_pending(paused.execution_id)
    assert (pending.reason, pending.context) == ("is *** right?", {"key": "***",
                                                                   "amount": 12345})
    done = Runner(plan, store, {"asks.ask": ask}).resume(
        paused.execution_id, tether.Resume(approved=True))
    assert done.status == "completed", done.error
    assert done.output == {"answer": {"kept": {"cached": "***", "n": 1234}, "approved": True}}
    stored = "\n".join(repr(row) for row in store.rows(paused.execution_id)).lower()
    assert _leaks(stored) == []
