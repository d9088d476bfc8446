"""Webhooks (issue 26): ``on: webhook`` workflows served by a real ``tether serve`` process
(``--workflows``), sent real HMAC-signed requests over loopback.

Proves: a GitHub-style signed delivery starts exactly one run with the payload's fields as its
inputs; a replayed delivery (the same ``X-GitHub-Delivery``), also 16 at once, starts none and
gets the first run; a wrong or missing signature starts nothing (401); a Stripe-style delivery
with a stale or future timestamp starts nothing (400) even correctly signed; a generic HMAC
hook with a timestamp likewise; an unknown hook is 404, a missing server secret 503, a payload
without a mapped field 422; the secret is never written to the store.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from web_support import Project, Server, served, tasks_file, wait_for

GITHUB_SECRET = "gh-secret-for-tests-0123"
STRIPE_SECRET = "whsec_stripe_for_tests_4567"
HMAC_SECRET = "plain-hmac-secret-89ab"

GITHUB = """
tether: 1
name: on-push
inputs:
  ref: {type: string}
  sha: {type: string}
  event: {type: string, default: ""}
on:
  webhook:
    verify: github
    secret: TEST_GITHUB_SECRET
    headers: [X-GitHub-Event]
    inputs:
      ref: "{{ trigger.payload.ref }}"
      sha: "{{ trigger.payload.after }}"
      event: "{{ trigger.headers['x-github-event'] }}"
nodes:
  go: {task: t.prepare, with: {amount: 1, note: "{{ inputs.ref }}"}}
"""

STRIPE = """
tether: 1
name: billing
inputs:
  customer: {type: string}
on:
  webhook:
    verify: stripe
    secret: TEST_STRIPE_SECRET
    path: stripe-events
    inputs: {customer: "{{ trigger.payload.data.object.customer }}"}
nodes:
  go: {task: t.prepare, with: {amount: 2}}
"""

GENERIC = """
tether: 1
name: generic
inputs:
  n: {type: integer}
on:
  webhook:
    verify: hmac
    secret: TEST_HMAC_SECRET
    header: X-Signature
    timestamp_header: X-Timestamp
    delivery_header: X-Delivery
    tolerance: 2m
    inputs: {n: "{{ trigger.payload.n }}"}
nodes:
  go: {task: t.prepare, with: {amount: 3}}
"""

UNSET = """
tether: 1
name: unset
on:
  webhook: {verify: github, secret: TEST_NEVER_SET_SECRET}
nodes:
  go: {task: t.prepare, with: {amount: 4}}
"""


SECRETS = {"TEST_GITHUB_SECRET": GITHUB_SECRET, "TEST_STRIPE_SECRET": STRIPE_SECRET,
           "TEST_HMAC_SECRET": HMAC_SECRET}


def hooks_dir(tmp_path: Path) -> Path:
    hooks = tmp_path / "hooks"
    hooks.mkdir(exist_ok=True)
    for name, text in (("push", GITHUB), ("billing", STRIPE), ("generic", GENERIC),
                       ("unset", UNSET)):
        (hooks / f"{name}.yaml").write_text(text, encoding="utf-8")
    return hooks


@pytest.fixture
def shared_project(shared_url: str, tmp_path: Path,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    """A project on SQLite, then on PostgreSQL (a schema of its own)."""
    found = Project(tmp_path, tasks_file(tmp_path_factory.getbasetemp()), shared_url)
    yield found
    found.close()


@pytest.fixture
def server(shared_project: Project, tmp_path: Path) -> Iterator[Server]:
    yield from served(shared_project, "--workflows", str(hooks_dir(tmp_path)), auth=True,
                      env=SECRETS)


def sign(secret: str, data: bytes) -> str:
    return hmac.new(secret.encode(), data, hashlib.sha256).hexdigest()


def github(server: Server, payload: dict[str, object], delivery: str, *,
           secret: str = GITHUB_SECRET, client: httpx.Client | None = None) -> httpx.Response:
    body = json.dumps(payload).encode()
    return (client or server.client).post("/hooks/on-push", content=body, headers={
        "Content-Type": "application/json", "X-GitHub-Event": "push",
        "X-GitHub-Delivery": delivery, "X-Hub-Signature-256": "sha256=" + sign(secret, body)})


def runs(project: Project, workflow: str) -> list[tuple[str, object]]:
    return [(r.execution_id, r.inputs)
            for r in project.store.find_runs(workflow=workflow, limit=100)]


PUSH = {"ref": "refs/heads/main", "after": "4f1c2a9", "pusher": {"name": "ada"}}


def test_a_signed_github_delivery_starts_one_run(server: Server, shared_project: Project) -> None:
    first = github(server, PUSH, "72d3162e-cc78-11e3-81ab-4c9367dc0958")
    assert first.status_code == 201, first.text
    body = first.json()
    assert body["created"] is True and body["workflow"] == "on-push"
    assert runs(shared_project, "on-push") == [(body["execution_id"], {
        "ref": "refs/heads/main", "sha": "4f1c2a9", "event": "push"})]
    replay = github(server, PUSH, "72d3162e-cc78-11e3-81ab-4c9367dc0958")
    assert replay.status_code == 200
    assert (replay.json()["execution_id"], replay.json()["created"]) == (
        body["execution_id"], False)
    assert len(runs(shared_project, "on-push")) == 1
    # another delivery is another run
    assert github(server, {**PUSH, "after": "beef"}, "delivery-2").status_code == 201
    assert len(runs(shared_project, "on-push")) == 2


def test_wrong_or_missing_signatures_start_nothing(server: Server, shared_project: Project) -> None:
    wrong = github(server, PUSH, "d-1", secret="not-the-secret-at-all")
    assert wrong.status_code == 401 and "X-Hub-Signature-256" in wrong.json()["detail"]
    body = json.dumps(PUSH).encode()
    tampered = server.client.post("/hooks/on-push", content=body + b" ", headers={
        "X-GitHub-Delivery": "d-2", "X-Hub-Signature-256": "sha256=" + sign(GITHUB_SECRET,
                                                                             body)})
    assert tampered.status_code == 401
    unsigned = server.client.post("/hooks/on-push", content=body,
                                  headers={"X-GitHub-Delivery": "d-3"})
    assert unsigned.status_code == 401
    assert runs(shared_project, "on-push") == []
    listed = server.get("/api/workflows").json()["items"]
    assert {w["name"]: w["webhook"] for w in listed}["billing"] == "/hooks/stripe-events"
    unknown = server.client.post("/hooks/nope", content=body)
    assert unknown.status_code == 404
    unset = server.client.post("/hooks/unset", content=b"{}")
    assert unset.status_code == 503 and "TEST_NEVER_SET_SECRET" in unset.json()["detail"]
    lacking = github(server, {"ref": "x"}, "d-4")  # no "after": sha cannot be given
    assert lacking.status_code == 422
    assert runs(shared_project, "on-push") == []


def test_sixteen_replays_at_once_start_one_run(server: Server, shared_project: Project) -> None:
    barrier = threading.Barrier(16)
    codes: list[int] = []
    ids: set[str] = set()
    lock = threading.Lock()

    def send() -> None:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            barrier.wait(60)
            response = github(server, PUSH, "same-delivery-1", client=client)
        with lock:
            codes.append(response.status_code)
            ids.add(response.json()["execution_id"])

    threads = [threading.Thread(target=send) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(codes) == [200] * 15 + [201]
    assert len(ids) == 1 and len(runs(shared_project, "on-push")) == 1


def stripe(server: Server, event: dict[str, object], stamp: int,
           secret: str = STRIPE_SECRET) -> httpx.Response:
    body = json.dumps(event).encode()
    signature = sign(secret, str(stamp).encode() + b"." + body)
    return server.client.post("/hooks/stripe-events", content=body, headers={
        "Stripe-Signature": f"t={stamp},v1={signature}"})


def test_stripe_timestamps_outside_the_tolerance_start_nothing(
        server: Server, shared_project: Project) -> None:
    event = {"id": "evt_1", "type": "invoice.paid",
             "data": {"object": {"customer": "cus_42"}}}
    now = int(time.time())
    stale = stripe(server, event, now - 3600)
    assert stale.status_code == 400 and "stale" in stale.json()["detail"]
    future = stripe(server, event, now + 3600)
    assert future.status_code == 400
    assert stripe(server, event, now, secret="whsec_wrong").status_code == 401
    assert runs(shared_project, "billing") == []
    fresh = stripe(server, event, int(time.time()))
    assert fresh.status_code == 201, fresh.text
    assert runs(shared_project, "billing") == [(fresh.json()["execution_id"],
                                                {"customer": "cus_42"})]
    again = stripe(server, event, int(time.time()))  # Stripe's retry: the same event id
    assert again.status_code == 200 and len(runs(shared_project, "billing")) == 1


def test_a_generic_hmac_hook_with_a_timestamp(server: Server, shared_project: Project) -> None:
    def send(n: int, stamp: int, delivery: str) -> httpx.Response:
        body = json.dumps({"n": n}).encode()
        return server.client.post("/hooks/generic", content=body, headers={
            "X-Timestamp": str(stamp), "X-Delivery": delivery,
            "X-Signature": "sha256=" + sign(HMAC_SECRET, str(stamp).encode() + b"." + body)})

    assert send(1, int(time.time()) - 600, "g-1").status_code == 400
    ok = send(1, int(time.time()), "g-1")
    assert ok.status_code == 201, ok.text
    assert send(1, int(time.time()), "g-1").status_code == 200
    assert runs(shared_project, "generic") == [(ok.json()["execution_id"], {"n": 1})]


def test_the_secret_is_never_stored(project: Project, tmp_path: Path) -> None:
    for server in served(project, "--workflows", str(hooks_dir(tmp_path)), env=SECRETS):
        assert github(server, PUSH, "d-secret").status_code == 201
    project.store.close()
    stored = b"".join(p.read_bytes() for p in project.root.glob("tether.db*"))
    for secret in (GITHUB_SECRET, STRIPE_SECRET, HMAC_SECRET):
        assert secret.encode() not in stored
    assert b"TEST_GITHUB_SECRET" in stored  # the plan names the variable, and only that


def test_a_delivery_runs_to_completion_with_the_embedded_worker(
        project: Project, tmp_path: Path) -> None:
    """End to end: the delivery's run is executed by ``tether serve --worker`` and its node
    sees the payload's field through the run's inputs."""
    for _, execution_id in delivered(project, tmp_path, GITHUB, "e2e-delivery"):
        outputs = {c.node_id: c.node_output for c in project.store.list(execution_id)}
        assert outputs["go"] == {"big": False, "note": "refs/heads/main"}


def delivered(project: Project, tmp_path: Path, workflow: str,
              delivery: str) -> Iterator[tuple[Server, str]]:
    """``tether serve --worker`` with ``workflow`` as its one webhook: a signed delivery of
    ``PUSH``, and the server and the run once that run completed."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "push.yaml").write_text(workflow, encoding="utf-8")
    for server in served(project, "--workflows", str(hooks), "--worker", "--tasks",
                         str(project.tasks), env={"TEST_GITHUB_SECRET": GITHUB_SECRET}):
        started = github(server, PUSH, delivery)
        assert started.status_code == 201, started.text
        execution_id = started.json()["execution_id"]

        def completed(run_id: str = execution_id) -> bool:
            run = project.store.get_run(run_id)
            return run is not None and run.status == "completed"

        wait_for(completed, "the webhook's run to complete", 60)
        yield server, execution_id


READS_TRIGGER = GITHUB.replace(
    'go: {task: t.prepare, with: {amount: 1, note: "{{ inputs.ref }}"}}',
    'go: {task: t.prepare, with: {amount: 1, note: "{{ trigger.kind }} {{ trigger.actor }} '
    '{{ trigger.payload.pusher.name }} {{ trigger.headers[\'x-github-event\'] }} '
    '{{ trigger.delivery }} {{ trigger.verify }}"}}')


def test_the_runs_nodes_read_what_started_it_as_trigger(
        project: Project, tmp_path: Path) -> None:
    """A node of the delivery's run reads ``trigger.*`` (the payload, an allowed header, the
    delivery id), executed by a worker after the request was answered; the run stores only
    the headers the workflow lists, never the signature."""
    assert 'trigger.payload.pusher.name' in READS_TRIGGER
    for server, execution_id in delivered(project, tmp_path, READS_TRIGGER,
                                          "trigger-delivery"):
        outputs = {c.node_id: c.node_output for c in project.store.list(execution_id)}
        assert outputs["go"] == {"big": False, "note": "webhook webhook:on-push ada push "
                                 "trigger-delivery github"}
        run = project.store.get_run(execution_id)
        assert run is not None and run.trigger is not None
        assert run.trigger.payload == PUSH
        assert dict(run.trigger.headers) == {"x-github-event": "push"}
        view = server.client.get(f"/api/runs/{execution_id}").json()
        assert view["trigger"]["payload"] == PUSH
        assert view["trigger"]["description"] == \
            "webhook:on-push (delivery trigger-delivery)"


def test_github_form_encoded_deliveries(server: Server, shared_project: Project) -> None:
    """GitHub's default content type: the JSON is the form field ``payload``, and the
    signature is over the form body as sent."""
    from urllib.parse import urlencode

    body = urlencode({"payload": json.dumps(PUSH)}).encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded", "X-GitHub-Event": "push",
               "X-GitHub-Delivery": "form-1",
               "X-Hub-Signature-256": "sha256=" + sign(GITHUB_SECRET, body)}
    sent = server.client.post("/hooks/on-push", content=body, headers=headers)
    assert sent.status_code == 201, sent.text
    assert runs(shared_project, "on-push")[0][1] == {"ref": "refs/heads/main",
                                                     "sha": "4f1c2a9", "event": "push"}
    garbage = b"payload=%7Bnot-json"
    refused = server.client.post("/hooks/on-push", content=garbage, headers={
        **headers, "X-GitHub-Delivery": "form-2",
        "X-Hub-Signature-256": "sha256=" + sign(GITHUB_SECRET, garbage)})
    assert refused.status_code == 400 and "not JSON" in refused.json()["detail"]
