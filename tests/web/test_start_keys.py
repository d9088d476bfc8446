"""Concurrency keys over HTTP: ``POST /api/workflows/{name}/runs`` of a workflow whose key
is at its limit answers 409 (``reject``, nothing stored) or 201 with the run ``cancelled``
(``cancel_new``), and so does a signed webhook delivery (a replayed delivery still gets its
first run, 200), against a real ``tether serve`` on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from web_support import TOKENS_ENV, Project, Server, served, tasks_file

SUBMITTER = "sam-token-0123456789"
KEYED = """\
tether: 1
name: {name}
inputs:
  branch: {{type: string}}
concurrency: {{key: "{{{{ inputs.branch }}}}", on_conflict: {policy}}}
nodes:
  build: {{task: prepare, with: {{amount: 1}}}}
"""


HOOK_SECRET = "keys-hook-secret-0123"
HOOKED = """\
tether: 1
name: hooked
inputs:
  branch: {type: string}
concurrency: {key: "{{ inputs.branch }}", on_conflict: reject}
on:
  webhook:
    verify: github
    secret: TEST_KEYS_HOOK_SECRET
    inputs: {branch: "{{ trigger.payload.ref }}"}
nodes:
  build: {task: prepare, with: {amount: 1}}
"""


@pytest.fixture
def server(shared_url: str, tmp_path: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Project]]:
    project = Project(tmp_path, tasks_file(tmp_path_factory.getbasetemp()), shared_url)
    for policy in ("reject", "cancel_new"):
        (tmp_path / f"{policy}.yaml").write_text(KEYED.format(name=policy, policy=policy),
                                                 encoding="utf-8")
    (tmp_path / "hooked.yaml").write_text(HOOKED, encoding="utf-8")
    try:
        for running in served(project, "--workflows", str(project.root), auth=True,
                              env={"TETHER_TOKENS": TOKENS_ENV + f",sam:{SUBMITTER}:submitter",
                                   "TEST_KEYS_HOOK_SECRET": HOOK_SECRET}):
            yield running, project
    finally:
        project.close()


def _start(server: Server, name: str, branch: str) -> tuple[int, dict[str, object]]:
    response = server.client.post(f"/api/workflows/{name}/runs",
                                  headers={"Authorization": f"Bearer {SUBMITTER}"},
                                  json={"inputs": {"branch": branch}})
    return response.status_code, response.json()


def test_reject_answers_409_naming_the_key_and_stores_nothing(
        server: tuple[Server, Project]) -> None:
    running, project = server
    code, first = _start(running, "reject", "main")
    assert (code, first["status"]) == (201, "queued")
    code, refused = _start(running, "reject", "main")
    assert code == 409
    assert "concurrency key 'main'" in str(refused["detail"])
    assert str(first["execution_id"]) in str(refused["detail"])
    assert _start(running, "reject", "dev")[0] == 201
    runs = project.store.find_runs(workflow="reject", limit=10)
    assert sorted(r.concurrency_key or "" for r in runs) == ["dev", "main"]


def test_cancel_new_answers_201_with_the_run_cancelled_and_why(
        server: tuple[Server, Project]) -> None:
    running, project = server
    assert _start(running, "cancel_new", "main")[0] == 201
    code, second = _start(running, "cancel_new", "main")
    assert (code, second["status"]) == (201, "cancelled")
    run = project.store.get_run(str(second["execution_id"]))
    assert run is not None and run.status == "cancelled"
    assert "on_conflict: cancel_new" in run.error["message"]


def _deliver(server: Server, delivery: str, ref: str) -> tuple[int, dict[str, object]]:
    body = json.dumps({"ref": ref}).encode()
    signature = hmac.new(HOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()
    response = server.client.post("/hooks/hooked", content=body, headers={
        "Content-Type": "application/json", "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": f"sha256={signature}"})
    return response.status_code, response.json()


def test_a_webhook_delivery_meets_the_key_as_an_api_start_does(
        server: tuple[Server, Project]) -> None:
    """``reject``: a new delivery for a key held by a queued run answers 409 and stores
    nothing; the first delivery replayed answers 200 with its run (the delivery id is looked
    up before the key decides); another key's delivery starts its run; the refused delivery
    sent again once the key has room starts its run."""
    running, project = server
    code, first = _deliver(running, "d-1", "main")
    assert (code, first["status"], first["created"]) == (201, "queued", True)
    code, refused = _deliver(running, "d-2", "main")
    assert code == 409, refused
    assert "concurrency key 'main'" in str(refused["detail"])
    code, replayed = _deliver(running, "d-1", "main")
    assert (code, replayed["execution_id"], replayed["created"]) == (
        200, first["execution_id"], False)
    assert _deliver(running, "d-3", "dev")[0] == 201
    runs = project.store.find_runs(workflow="hooked", limit=10)
    assert sorted((r.execution_id, r.concurrency_key) for r in runs) == [
        ("hooked:d-1", "main"), ("hooked:d-3", "dev")]
    project.store.request_cancel("hooked:d-1", time.time())  # the key has room again:
    code, later = _deliver(running, "d-2", "main")  # the refused delivery, sent again
    assert (code, later["execution_id"], later["created"]) == (201, "hooked:d-2", True)
