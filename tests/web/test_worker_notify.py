"""``tether serve --worker --notify-url``: the embedded worker continues answered, resumed and
forked runs, and every pause, failure and completion, made by whichever process, reaches a
webhook receiver as a signed event, retried until the receiver takes it."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from web_support import WEBHOOK_SECRET, Project, Server, approval_path, served, wait_for

from tether.web.urls import run_url


class Receiver:
    """A webhook receiver on loopback that refuses the first ``failures`` deliveries."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.attempts: list[tuple[bytes, str]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.lock:
                    receiver.attempts.append((body, self.headers["X-Tether-Signature"]))
                    refuse = len(receiver.attempts) <= receiver.failures
                self.send_response(503 if refuse else 204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    def events(self) -> list[dict[str, Any]]:
        """The events delivered (the accepted attempts), in order."""
        with self.lock:
            taken = self.attempts[self.failures:]
        return [json.loads(body) for body, _ in taken]

    def event(self, execution_id: str, name: str) -> dict[str, Any] | None:
        return next((e for e in self.events() if e["execution_id"] == execution_id
                     and e["event"] == name), None)


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    found = Receiver(failures=2)
    yield found
    found.http.shutdown()


@pytest.fixture(scope="module")
def worker(module_project: Project, receiver: Receiver) -> Iterator[Server]:
    yield from served(module_project, "--worker", "--tasks", str(module_project.tasks),
                      "--notify-url", receiver.url)


def _status(server: Server, execution_id: str) -> str:
    return str(server.get(f"/api{run_url(execution_id)}").json()["status"])


def test_events_are_signed_retried_and_carry_a_working_approval_link(
        worker: Server, module_project: Project, receiver: Receiver) -> None:
    eid, cid = module_project.pause(amount=500, note="ship it")  # this process, not the console
    paused = wait_for(lambda: receiver.event(eid, "run.paused"), "the run.paused event")
    with receiver.lock:
        attempts = list(receiver.attempts)
    assert len(attempts) >= 3  # two refused, then taken: the same bytes each time
    assert len({body for body, _ in attempts[:3]}) == 1
    for body, signature in attempts:
        expected = hmac.new(WEBHOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert signature == f"sha256={expected}"
    assert (paused["workflow"], paused["status"]) == ("review", "paused")
    assert paused["url"] == worker.url + run_url(eid)
    [asked] = paused["pending"]
    assert (asked["node_id"], asked["checkpoint_id"], asked["reason"]) == \
        ("review", cid, "manager_approval")
    assert asked["context"] == {"amount": 500, "note": "ship it", "big": True}
    path = asked["approval_url"][len(worker.url):]
    with httpx.Client(base_url=worker.url, timeout=20) as person:
        page = person.get(path)
        csrf = page.text.split('name="csrf_token" value="')[1].split('"')[0]
        done = person.post(path, data={"csrf_token": csrf, "decision": "approve",
                                       "field.limit": "7", "comment": "fine"})
        assert done.status_code == 200 and "Your answer was recorded" in done.text
    completed = wait_for(lambda: receiver.event(eid, "run.completed"), "run.completed")
    assert completed["output"] == {"approved": True, "limit": 7}
    assert _status(worker, eid) == "completed"


def test_the_worker_continues_an_answer_recorded_by_another_process(
        worker: Server, module_project: Project) -> None:
    eid, _ = module_project.pause()
    [pending] = module_project.store.list_pending(eid)
    assert module_project.store.claim(pending, {"approved": True, "limit": 2},
                                      resolver="another console") is not None
    wait_for(lambda: _status(worker, eid) == "completed", "the sweep to continue the run")


def test_a_failed_run_is_reported_and_resumed_from_the_console(
        worker: Server, module_project: Project, receiver: Receiver, tmp_path: Path) -> None:
    gate = tmp_path / "fixed"
    eid, cid = module_project.pause(note=f"fail-until:{gate}")
    answered = worker.post(approval_path(eid, cid), {"decision": "approve",
                                                     "values": {"limit": 1}})
    assert answered.status_code == 200 and answered.json()["continued"] is True
    failed = wait_for(lambda: receiver.event(eid, "run.failed"), "the run.failed event")
    assert "finish failed on purpose" in json.dumps(failed["error"])
    gate.write_text("fixed")
    assert worker.post(f"/api{run_url(eid)}/resume").status_code == 202
    wait_for(lambda: _status(worker, eid) == "completed", "the resumed run to complete")
    assert worker.post(f"/api{run_url(eid)}/resume").status_code == 409


def test_a_fork_with_a_state_patch_runs_as_a_new_branch(worker: Server,
                                                       module_project: Project) -> None:
    eid, _ = module_project.pause(amount=50)
    [first] = module_project.store.page(eid, None, 1)
    response = worker.post(f"/api{run_url(eid)}/fork", {
        "checkpoint_id": first.checkpoint_id, "patch": {"inputs": {"amount": 900}}})
    assert response.status_code == 202, response.text
    branch = response.json()["execution_id"]
    assert branch and branch != eid
    wait_for(lambda: _status(worker, branch) == "paused", "the branch to pause")
    detail = worker.get(f"/api{run_url(branch)}").json()
    assert detail["parent_execution_id"] == eid
    assert detail["pending"][0]["context"]["amount"] == 900
    assert _status(worker, eid) == "paused"  # the original is untouched


def test_a_patch_the_plan_cannot_run_is_422_naming_the_patch(worker: Server,
                                                             module_project: Project) -> None:
    eid, _ = module_project.pause()
    for patch in ({"nodes": None}, {"inputs": {"amount": "lots"}}):
        response = worker.post(f"/api{run_url(eid)}/fork", {"patch": patch})
        assert response.status_code == 422, response.text
        assert response.json()["errors"][0]["field"] == "patch"


def test_the_embedded_worker_runs_submitted_runs_like_tether_worker(
        worker: Server, module_project: Project) -> None:
    """`tether serve --worker` is a worker of the `default` queue too: a run submitted by
    another process (nothing executes it there) is claimed and run to its pause."""
    eid = module_project.runner().submit({"amount": 30, "note": "queued"})
    wait_for(lambda: _status(worker, eid) == "paused", "the embedded worker to run it")
    [pending] = module_project.store.list_pending(eid)
    assert pending.context == {"amount": 30, "note": "queued", "big": False}


def test_a_run_the_embedded_worker_holds_stops_at_its_next_node_when_cancelled(
        worker: Server, module_project: Project, tmp_path: Path) -> None:
    """Cancel from the console while the embedded worker runs the `gate` node: the request
    is accepted (202, requested), the node in flight finishes, `last` never starts and the
    run ends cancelled."""
    gate = tmp_path / "open"
    eid = module_project.runner("slow.yaml").submit({"gate": str(gate)})

    def at_gate() -> bool:
        rows = module_project.store.page(eid, None, 10)
        return [r.node_id for r in rows] == ["first"] and _status(worker, eid) == "running"

    wait_for(at_gate, "the worker to reach the gate")
    cancelled = worker.post(f"/api{run_url(eid)}/cancel")
    assert cancelled.status_code == 202, cancelled.text
    gate.write_text("open")
    wait_for(lambda: _status(worker, eid) == "cancelled", "the run to stop at its boundary")
    nodes = [r.node_id for r in module_project.store.page(eid, None, 10)]
    assert "last" not in nodes and nodes[:2] == ["first", "gate"]
