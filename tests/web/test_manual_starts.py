"""``on: manual``: who may start a workflow by hand, over the API and in the console.

A workflow without ``on:`` may be started by hand by any approver or submitter (as before
``on:`` existed); one whose ``on:`` does not list ``manual`` is refused (403, saying why) and
listed without a form; ``on.manual.users`` narrows who may. A real ``tether serve`` with
token auth, on SQLite. And a console with an embedded worker (``--worker``) declares the
schedules of the workflows it serves, as any worker loading them does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from web_support import TOKENS, Project, Server, served

HOOK_ONLY = """
tether: 1
name: hook-only
on:
  webhook: {verify: github, secret: TEST_GITHUB_SECRET}
nodes:
  go: {task: t.prepare, with: {amount: 1}}
"""

BOB_ONLY = """
tether: 1
name: bob-only
on:
  manual: {users: [bob]}
  webhook: {verify: github, secret: TEST_GITHUB_SECRET, path: bob}
nodes:
  go: {task: t.prepare, with: {amount: 2}}
"""

ANYONE = """
tether: 1
name: anyone
nodes:
  go: {task: t.prepare, with: {amount: 3}}
"""

MANUAL_FLOW = """workflow by-hand
on {manual: true}

task go = t.prepare(amount: 4)
"""


def bearer(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[user]}"}


@pytest.fixture
def server(project: Project, tmp_path: Path) -> Iterator[Server]:
    flows = tmp_path / "flows"
    flows.mkdir()
    for name, text in (("hook-only.yaml", HOOK_ONLY), ("bob-only.yaml", BOB_ONLY),
                       ("anyone.yaml", ANYONE), ("by-hand.flow", MANUAL_FLOW)):
        (flows / name).write_text(text, encoding="utf-8")
    yield from served(project, "--workflows", str(flows), auth=True,
                      env={"TEST_GITHUB_SECRET": "s3cret-for-tests"})


def start(server: Server, workflow: str, user: str) -> tuple[int, str]:
    response = server.client.post(f"/api/workflows/{workflow}/runs", headers=bearer(user),
                                  json={"inputs": {}})
    return response.status_code, response.json().get("detail", "")


def test_the_api_starts_by_hand_only_what_on_manual_allows(server: Server,
                                                           project: Project) -> None:
    status, detail = start(server, "hook-only", "alice")
    assert status == 403
    assert detail == ("workflow 'hook-only' is not started by hand: its `on:` does not list "
                      "`manual` (add `manual: true` to `on:` to allow it)")
    assert project.store.find_runs(workflow="hook-only", limit=5) == []
    status, detail = start(server, "bob-only", "alice")
    assert (status, detail) == (403, "alice may not start workflow 'bob-only' by hand "
                                "(on.manual.users)")
    assert start(server, "bob-only", "bob")[0] == 201
    assert start(server, "anyone", "alice")[0] == 201  # no `on:`: as before
    assert start(server, "by-hand", "alice")[0] == 201  # `on {manual: true}` in .flow
    listed = {w["name"]: w["manual"] for w in server.client.get(
        "/api/workflows", headers=bearer("alice")).json()["items"]}
    assert listed == {"anyone": True, "bob-only": False, "by-hand": True, "hook-only": False}
    assert [r.trigger.actor for r in project.store.find_runs(workflow="bob-only", limit=5)
            if r.trigger] == ["bob"]


def test_the_console_gives_no_form_for_a_workflow_not_started_by_hand(
        server: Server) -> None:
    page = server.client.get("/workflows/hook-only/start", headers=bearer("alice"))
    assert page.status_code == 403 and "does not list `manual`" in page.text
    assert server.client.get("/workflows/anyone/start",
                             headers=bearer("alice")).status_code == 200
    listing = server.client.get("/workflows", headers=bearer("alice")).text
    assert 'href="/workflows/anyone/start"' in listing
    assert 'href="/workflows/hook-only/start"' not in listing
    assert "(not started by hand)" in listing


def test_a_console_with_a_worker_declares_the_schedules_it_serves(
        project: Project, tmp_path: Path) -> None:
    flows = tmp_path / "scheduled"
    flows.mkdir()
    (flows / "nightly.yaml").write_text(ANYONE.replace("name: anyone", "name: nightly").replace(
        "nodes:", "on:\n  manual: true\n  schedule: {cron: '0 3 * * *'}\nnodes:"),
        encoding="utf-8")
    for server in served(project, "--workflows", str(flows), "--worker", "--tasks",
                         str(project.tasks)):
        assert server.client.get("/api/workflows").status_code == 200
        [found] = project.store.list_schedules()
        assert (found.name, found.cron, found.queue) == ("nightly", "0 3 * * *", "default")
