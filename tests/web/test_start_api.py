"""Starting runs over HTTP (issue 26): ``POST /api/workflows/{name}/runs`` against a real
``tether serve`` subprocess, on SQLite and PostgreSQL.

Proves: a start queues a run with the given inputs, queue and priority (201), as ``tether
submit`` does; the same ``Idempotency-Key`` returns the same run (200), also when 16 requests
race; the role ``submitter`` may start runs but not answer approvals, a viewer may not start;
unknown workflows, bad inputs and a key of another workflow's run get clear 4xx; the route
and its header are in the OpenAPI document; a broken ``--workflows`` file stops the server
with a usage error naming it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from web_support import TOKENS_ENV, Project, Server, approval_path, served, tasks_file

SUBMITTER = "sam-token-0123456789"
VIEWER = "vera-token-0123456789"
APPROVER = "alice-token-0123456789"
RACERS = 16


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def shared_project(shared_url: str, tmp_path: Path,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    found = Project(tmp_path, tasks_file(tmp_path_factory.getbasetemp()), shared_url)
    yield found
    found.close()


@pytest.fixture
def server(shared_project: Project) -> Iterator[Server]:
    yield from served(shared_project, "--workflows", str(shared_project.root), auth=True,
                      env={"TETHER_TOKENS": TOKENS_ENV + f",sam:{SUBMITTER}:submitter"})


def test_start_queues_a_run_like_submit(server: Server, shared_project: Project) -> None:
    response = server.client.post("/api/workflows/review/runs", headers=bearer(SUBMITTER),
                                  json={"inputs": {"amount": 12.5}, "queue": "q1",
                                        "priority": 7})
    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["workflow"], body["status"], body["created"]) == ("review", "queued", True)
    run = shared_project.store.get_run(body["execution_id"])
    assert run is not None
    assert (run.status, run.queue, run.priority) == ("queued", "q1", 7)
    assert run.inputs == {"amount": 12.5, "note": ""}
    assert run.trigger is not None  # who started it: the token's user, over the API
    assert (run.trigger.kind, run.trigger.actor) == ("api", "sam")
    view = server.client.get(f"/api/runs/{run.execution_id}", headers=bearer(VIEWER)).json()
    assert view["trigger"]["kind"] == "api" and view["trigger"]["actor"] == "sam"
    assert view["trigger"]["description"] == "api by sam"
    listed = server.client.get("/api/workflows", headers=bearer(VIEWER)).json()
    review = next(w for w in listed["items"] if w["name"] == "review")
    assert [(i["name"], i["type"], i["required"]) for i in review["inputs"]] == [
        ("amount", "number", True), ("note", "string", False)]


def test_the_same_key_returns_the_same_run(server: Server, shared_project: Project) -> None:
    def start(amount: float) -> httpx.Response:
        return server.client.post("/api/workflows/review/runs", json={
            "inputs": {"amount": amount}}, headers={**bearer(SUBMITTER),
                                                    "Idempotency-Key": "order-1234"})

    first, second = start(1), start(2)
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["execution_id"] == second.json()["execution_id"] == "order-1234"
    assert second.json()["created"] is False
    runs = shared_project.store.find_runs(workflow="review", limit=10)
    assert [(r.execution_id, r.inputs["amount"]) for r in runs] == [("order-1234", 1)]
    other = server.client.post("/api/workflows/slow/runs", json={"inputs": {"gate": "x"}},
                               headers={**bearer(SUBMITTER), "Idempotency-Key": "order-1234"})
    assert other.status_code == 409
    assert "already names a run of workflow 'review'" in other.json()["detail"]


def test_sixteen_concurrent_starts_with_one_key_make_one_run(
        server: Server, shared_project: Project) -> None:
    barrier = threading.Barrier(RACERS)
    codes: list[int] = []
    ids: set[str] = set()
    lock = threading.Lock()

    def start(n: int) -> None:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            barrier.wait(60)
            response = client.post("/api/workflows/review/runs", json={
                "inputs": {"amount": n}}, headers={**bearer(SUBMITTER),
                                                   "Idempotency-Key": "race-0001"})
        with lock:
            codes.append(response.status_code)
            ids.add(response.json().get("execution_id", response.text))

    threads = [threading.Thread(target=start, args=(n,)) for n in range(RACERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(codes) == [200] * (RACERS - 1) + [201]
    assert ids == {"race-0001"}
    assert [r.execution_id for r in shared_project.store.find_runs(workflow="review",
                                                                   limit=50)] == ["race-0001"]


def test_roles_and_refusals(server: Server, shared_project: Project) -> None:
    path = "/api/workflows/review/runs"
    body = {"inputs": {"amount": 1}}
    assert server.client.post(path, json=body).status_code == 401
    viewer = server.client.post(path, json=body, headers=bearer(VIEWER))
    assert viewer.status_code == 403 and "may not start runs" in viewer.json()["detail"]
    assert server.client.post(path, json=body, headers=bearer(APPROVER)).status_code == 201
    unknown = server.client.post("/api/workflows/nope/runs", json=body,
                                 headers=bearer(SUBMITTER))
    assert unknown.status_code == 404
    assert "no workflow named 'nope'" in unknown.json()["detail"]
    assert "review" in unknown.json()["detail"]
    bad = server.client.post(path, json={"inputs": {"amount": "lots"}},
                             headers=bearer(SUBMITTER))
    assert bad.status_code == 422 and "amount" in bad.json()["detail"]
    missing = server.client.post(path, json={"inputs": {}}, headers=bearer(SUBMITTER))
    assert missing.status_code == 422
    bad_key = server.client.post(path, json=body, headers={**bearer(SUBMITTER),
                                                            "Idempotency-Key": "k" * 201})
    assert bad_key.status_code == 422 and "dedup key" in bad_key.json()["detail"]
    # a submitter may start runs, never answer them
    execution_id, checkpoint_id = shared_project.pause()
    answer = server.client.post(approval_path(execution_id, checkpoint_id),
                                json={"decision": "approve", "values": {"limit": 1}},
                                headers=bearer(SUBMITTER))
    assert answer.status_code == 403
    assert shared_project.store.list_pending(execution_id)


def test_openapi_documents_the_route(server: Server) -> None:
    document = server.client.get("/api/openapi.json").json()
    operation = document["paths"]["/api/workflows/{name}/runs"]["post"]
    assert {"200", "201", "404", "409", "422"} <= set(operation["responses"])
    assert "idempotency-key" in {p["name"].lower() for p in operation["parameters"]}


def test_a_broken_workflow_file_stops_serve(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("tether: 1\nname: bad\nnodes:\n  a: {task: }\n",
                                       encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "tether", "serve", "--db",
                           f"sqlite:///{tmp_path / 't.db'}", "--port", "0", "--workflows",
                           str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={**os.environ})
    assert done.returncode == 2, done.stderr
    assert "bad.yaml" in done.stderr and "Traceback" not in done.stderr
