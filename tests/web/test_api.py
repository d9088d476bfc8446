"""The JSON API of a real ``tether serve`` (--auth token) over a real SQLite store: every
endpoint, the auth failures (401/403), CSRF and origin checks, 422 naming the field, 404 for
unknown ids, and the approval race with 16 concurrent requests."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from itsdangerous import TimestampSigner, URLSafeTimedSerializer
from web_support import SECRET, TOKENS, Project, Server, approval_path

from tether.web.urls import run_url


def _answer(server: Server, eid: str, cid: str, user: str = "alice", **body: object,
            ) -> httpx.Response:
    return server.post(approval_path(eid, cid), body or {"decision": "approve",
                                                         "values": {"limit": 5}}, user=user)


def test_openapi_document_lists_every_endpoint(auth_server: Server) -> None:
    document = auth_server.get("/api/openapi.json", user=None).json()
    paths = set(document["paths"])
    assert {"/api/pending", "/api/runs", "/api/me",
            "/api/runs/{execution_id}/approvals/{checkpoint_id}",
            "/api/runs/{execution_id}/approvals/{checkpoint_id}/link",
            "/api/runs/{execution_id}/checkpoints", "/api/runs/{execution_id}/resume",
            "/api/runs/{execution_id}/fork", "/api/runs/{execution_id}/cancel",
            "/api/runs/{execution_id}"} <= paths
    assert not any(p.startswith(("/inbox", "/runs", "/a/")) for p in paths)


def test_no_token_is_401_and_a_wrong_one_too(auth_server: Server) -> None:
    for path in ("/api/pending", "/api/runs", "/api/me"):
        response = auth_server.get(path, user=None)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
    wrong = auth_server.get("/api/pending", user=None,
                            headers={"Authorization": "Bearer not-a-token-at-all-x"})
    assert wrong.status_code == 401
    assert auth_server.get("/api/me", headers={"Authorization": "Basic x"}, user=None) \
        .status_code == 401
    assert auth_server.get("/api/me", user="bob").json() == \
        {"name": "bob", "role": "approver", "via": "token"}


def test_a_viewer_reads_but_may_not_act(auth_server: Server,
                                        module_project: Project) -> None:
    eid, cid = module_project.pause()
    assert auth_server.get("/api/pending", user="vera").status_code == 200
    refused = _answer(auth_server, eid, cid, user="vera")
    assert refused.status_code == 403
    assert "vera may look but not act" in refused.json()["detail"]
    assert module_project.store.list_pending(eid)  # nothing was claimed


def test_pending_lists_newest_first_a_page_at_a_time(auth_server: Server,
                                                     module_project: Project) -> None:
    made = [module_project.pause(amount=300 + i) for i in range(3)]
    first = auth_server.get("/api/pending", params={"limit": 2}).json()
    assert [i["checkpoint_id"] for i in first["items"]] == [made[2][1], made[1][1]]
    item = first["items"][0]
    assert (item["workflow"], item["node_id"], item["reason"]) == \
        ("review", "review", "manager_approval")
    assert item["context"] == {"amount": 302, "note": "", "big": True}
    second = auth_server.get("/api/pending", params={"limit": 2, "before": first["next"]})
    assert second.json()["items"][0]["checkpoint_id"] == made[0][1]
    assert auth_server.get("/api/pending", params={"before": "garbage"}).status_code == 422
    assert auth_server.get("/api/pending", params={"limit": 0}).status_code == 422


def test_an_approval_shows_its_form_and_frozen_context(auth_server: Server,
                                                       module_project: Project) -> None:
    eid, cid = module_project.pause(amount=120, note="urgent")
    body = auth_server.get(approval_path(eid, cid)).json()
    assert body["state"] == "pending" and body["buttons"] is True
    assert body["pending"]["context"] == {"amount": 120, "note": "urgent", "big": True}
    assert [(f["name"], f["type"], f["required"]) for f in body["form"]] == \
        [("approved", "boolean", True), ("limit", "integer", True),
         ("remark", "string", False)]


@pytest.mark.parametrize(("values", "field", "words"), [
    ({"limit": "five"}, "limit", "field 'limit' must be an integer, not a string"),
    ({}, "limit", "missing required field 'limit'"),
    ({"limit": 5, "colour": "red"}, "colour",
     "unknown field 'colour' (declared: approved, limit, remark)"),
])
def test_values_that_do_not_fit_the_form_are_422_naming_the_field(
        auth_server: Server, module_project: Project, values: dict[str, object], field: str,
        words: str) -> None:
    eid, cid = module_project.pause()
    response = _answer(auth_server, eid, cid, decision="approve", values=values)
    assert response.status_code == 422
    errors = response.json()["errors"]
    assert {"field": field, "message": words} in errors
    assert module_project.store.list_pending(eid)  # still waiting


def test_a_body_that_does_not_match_the_api_is_422(auth_server: Server,
                                                   module_project: Project) -> None:
    eid, cid = module_project.pause()
    response = _answer(auth_server, eid, cid, decision="maybe")
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "decision"


def test_unknown_runs_pauses_and_checkpoints_are_404(auth_server: Server,
                                                     module_project: Project) -> None:
    eid, cid = module_project.pause()
    assert auth_server.get("/api/runs/no-such-run").status_code == 404
    assert auth_server.get(approval_path("no-such-run", cid)).status_code == 404
    assert auth_server.get(approval_path(eid, "no-such-checkpoint")).status_code == 404
    assert _answer(auth_server, eid, "no-such-checkpoint").status_code == 404
    assert auth_server.get("/api/runs/no-such-run/checkpoints").status_code == 404
    assert auth_server.post(f"/api{run_url('nope-nope')}/resume").status_code == 404
    fork = auth_server.post(f"/api{run_url(eid)}/fork", {"checkpoint_id": "nope-nope"})
    assert fork.status_code == 404
    # under 8 characters, no exact id, but ids start with it: a usage error, not a lookup
    short = auth_server.post(f"/api{run_url(eid[:4])}/resume")
    assert short.status_code == 422 and "at least 8 characters" in short.json()["detail"]
    # under 8 characters and nothing starts with it: simply not found
    assert auth_server.post(f"/api{run_url('nope')}/resume").status_code == 404
    assert auth_server.post(f"/api{run_url(eid)}/fork",
                            {"checkpoint_id": "nope"}).status_code == 404


def test_answering_records_the_resolver_and_comment_and_a_second_answer_is_409(
        auth_server: Server, module_project: Project) -> None:
    eid, cid = module_project.pause()
    done = _answer(auth_server, eid, cid, user="bob", decision="reject",
                   values={"limit": 0}, comment="not this quarter")
    assert done.status_code == 200, done.text
    decision = done.json()["decision"]
    assert (decision["resolver"], decision["comment"], decision["value"]) == \
        ("bob", "not this quarter", {"approved": False, "limit": 0})
    assert done.json()["continued"] is False  # no worker here: it waits in the store
    [stored] = module_project.store.decisions(eid)
    assert (stored.resolver, stored.comment) == ("bob", "not this quarter")
    again = _answer(auth_server, eid, cid, user="alice")
    assert again.status_code == 409
    assert again.json()["answered_by"] == "bob"
    assert again.json()["detail"].startswith("already answered by bob at ")
    answered = auth_server.get(approval_path(eid, cid)).json()
    assert answered["state"] == "answered" and answered["decision"]["resolver"] == "bob"
    timeline = auth_server.get(f"/api{run_url(eid)}/checkpoints").json()["items"]
    [asked] = [c for c in timeline if c["status"] == "interrupted"]
    assert asked["decision"]["comment"] == "not this quarter"


def test_sixteen_concurrent_answers_record_exactly_one(auth_server: Server,
                                                       module_project: Project) -> None:
    """16 threads, released together, answer one pause through the API: one 200, fifteen
    409 naming the winner; the store holds one decision, and the pause is gone."""
    eid, cid = module_project.pause()
    barrier = threading.Barrier(16)
    users = ["alice", "bob"] * 8

    def answer(user: str) -> tuple[int, dict[str, object]]:
        with httpx.Client(base_url=auth_server.url, timeout=30) as client:
            barrier.wait()
            response = client.post(approval_path(eid, cid), json={
                "decision": "approve", "values": {"limit": 1}, "comment": user},
                headers={"Authorization": f"Bearer {TOKENS[user]}"})
            return response.status_code, response.json()

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(answer, users))
    codes = sorted(code for code, _ in results)
    assert codes == [200] + [409] * 15
    [winner] = [body for code, body in results if code == 200]
    name = winner["decision"]["resolver"]  # type: ignore[index]
    assert all(body["answered_by"] == name for code, body in results if code == 409)
    assert len(module_project.store.decisions(eid)) == 1
    assert module_project.store.list_pending(eid) == []


def test_runs_filter_by_status_and_workflow_and_show_one_run(
        auth_server: Server, module_project: Project) -> None:
    eid, _ = module_project.pause(amount=10)
    paused = auth_server.get("/api/runs", params={"status": "paused",
                                                  "workflow": "review"}).json()["items"]
    assert eid in [r["execution_id"] for r in paused]
    assert all(r["status"] == "paused" and r["workflow"] == "review" for r in paused)
    assert auth_server.get("/api/runs", params={"workflow": "other"}).json()["items"] == []
    assert auth_server.get("/api/runs", params={"status": "sleepy"}).status_code == 422
    detail = auth_server.get(f"/api{run_url(eid)}").json()
    assert detail["inputs"] == {"amount": 10, "note": ""}
    assert detail["nodes"] == {"prepare": "completed", "review": "interrupted",
                               "finish": "pending"}  # every node of the plan
    assert [p["node_id"] for p in detail["pending"]] == ["review"]
    page = auth_server.get(f"/api{run_url(eid)}/checkpoints", params={"limit": 1}).json()
    assert [c["node_id"] for c in page["items"]] == ["prepare"]
    rest = auth_server.get(f"/api{run_url(eid)}/checkpoints",
                           params={"after": page["next"]}).json()
    assert [c["node_id"] for c in rest["items"]] == ["review"] and rest["next"] is None


def test_resume_and_fork_are_recorded_for_the_workers_cancel_is_at_once(
        auth_server: Server, module_project: Project) -> None:
    """Without a worker in the console, a fork is recorded (202): the branch exists with its
    origin, runs nothing here, waits for a worker of the original's queue, and the answer
    names what to run. Cancel is a store write: a paused run nothing executes ends
    cancelled at once, its pending pause dropped; again is 409."""
    eid, _ = module_project.pause()
    assert auth_server.post(f"/api{run_url(eid)}/resume").status_code == 409  # not failed
    fork = auth_server.post(f"/api{run_url(eid)}/fork", {"patch": {"inputs": {"amount": 1}}})
    assert fork.status_code == 202, fork.text
    detail = fork.json()["detail"]
    assert "No live worker serves queue 'default'" in detail
    assert "tether worker --queue default --tasks MODULE" in detail
    branch = module_project.store.get_run(fork.json()["execution_id"])
    assert branch is not None and branch.parent_execution_id == eid
    assert (branch.queue, branch.owner) == ("default", None)  # left to a worker's claim
    assert [r.step_type for r in module_project.store.page(branch.execution_id, None, 10)] \
        == ["fork_origin"]
    assert auth_server.post(f"/api{run_url(eid)}/fork", {"patch": [1]}).status_code == 422
    cancelled = auth_server.post(f"/api{run_url(eid)}/cancel")
    assert cancelled.status_code == 202, cancelled.text
    assert cancelled.json()["detail"] == "cancelled"
    assert module_project.store.get_run(eid).status == "cancelled"  # type: ignore[union-attr]
    assert module_project.store.list_pending(eid) == []
    again = auth_server.post(f"/api{run_url(eid)}/cancel")
    assert again.status_code == 409 and "already ended" in again.json()["detail"]
    assert auth_server.post(f"/api{run_url('no-such-run')}/cancel").status_code == 404


def test_a_session_cookie_write_needs_the_csrf_header(auth_server: Server,
                                                      module_project: Project) -> None:
    """A browser signed in with a cookie must send X-CSRF-Token on API writes (403
    without); a cross-site Origin is refused even with a bearer token."""
    eid, cid = module_project.pause()
    with httpx.Client(base_url=auth_server.url, timeout=20) as browser:
        login_page = browser.get("/login")
        csrf = login_page.text.split('name="csrf_token" value="')[1].split('"')[0]
        signed_in = browser.post("/login", data={"csrf_token": csrf,
                                                 "token": TOKENS["alice"], "next": "/inbox"})
        assert signed_in.status_code == 303 and "tether_session" in browser.cookies
        assert browser.get("/api/me").json()["via"] == "session"
        body = {"decision": "approve", "values": {"limit": 1}}
        refused = browser.post(approval_path(eid, cid), json=body)
        assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
        forged = browser.post(approval_path(eid, cid), json=body,
                              headers={"X-CSRF-Token": "forged"})
        assert forged.status_code == 403
        accepted = browser.post(approval_path(eid, cid), json=body,
                                headers={"X-CSRF-Token": csrf})
        assert accepted.status_code == 200
        assert accepted.json()["decision"]["resolver"] == "alice"
    eid2, cid2 = module_project.pause()
    cross = auth_server.post(approval_path(eid2, cid2), {"decision": "approve"},
                             headers={"Origin": "https://evil.example"})
    assert cross.status_code == 403


class _EightDaysAgo(TimestampSigner):
    """Signs as a console did 8 days ago (past the default --link-max-age of 7 days)."""

    def get_timestamp(self) -> int:
        return int(time.time()) - 8 * 86400


def test_signed_links_show_on_get_act_once_on_post_and_expire(
        auth_server: Server, module_project: Project) -> None:
    eid, cid = module_project.pause()
    minted = auth_server.post(approval_path(eid, cid) + "/link", {"recipient": "Grace"})
    assert minted.status_code == 200
    url = minted.json()["url"]
    path = url[len(auth_server.url):]
    with httpx.Client(base_url=auth_server.url, timeout=20) as stranger:
        shown = stranger.get(path)
        assert shown.status_code == 200 and "manager_approval" in shown.text
        assert shown.headers["cache-control"] == "no-store"
        assert module_project.store.list_pending(eid)  # GET only shows
        csrf = shown.text.split('name="csrf_token" value="')[1].split('"')[0]
        no_csrf = stranger.post(path, data={"decision": "approve", "field.limit": "3"})
        assert no_csrf.status_code == 403
        done = stranger.post(path, data={"csrf_token": csrf, "decision": "approve",
                                         "field.limit": "3"})
        assert done.status_code == 200 and "Your answer was recorded" in done.text
        [decision] = module_project.store.decisions(eid)
        assert decision.resolver == "Grace (approval link)"
        again = stranger.post(path, data={"csrf_token": csrf, "decision": "reject",
                                          "field.limit": "3"})
        assert again.status_code == 200 and "Already answered by" in again.text
        assert len(module_project.store.decisions(eid)) == 1
        assert stranger.get("/a/not-a-link").status_code == 404
        # a signer of its own: patching ``old.default_signer`` would patch the class
        # TimestampSigner for the whole test process, and every later test's link would be
        # signed 8 days ago (test_hostile_deadlines saw "expired" in a larger run)
        old = URLSafeTimedSerializer(SECRET.encode(), salt="tether-approval-link",
                                     signer=_EightDaysAgo)
        eid2, cid2 = module_project.pause()
        expired = stranger.get("/a/" + old.dumps([eid2, cid2, None]))
        assert expired.status_code == 410 and "expired" in expired.text
        fresh = URLSafeTimedSerializer(SECRET.encode(), salt="tether-approval-link")
        shown = stranger.get("/a/" + fresh.dumps([eid2, cid2, None]))
        assert shown.status_code == 200 and "expired" not in shown.text


def test_pages_carry_security_headers_and_refuse_a_foreign_host(auth_server: Server) -> None:
    page = auth_server.get("/login", user=None)
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert auth_server.get("/static/console.css", user=None).status_code == 200
    foreign = auth_server.get("/api/openapi.json", user=None,
                              headers={"Host": "evil.example:80"})
    assert foreign.status_code == 421


def test_pages_without_a_session_go_to_the_login_page(auth_server: Server) -> None:
    response = auth_server.get("/inbox", user=None, follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"].startswith("/login?next=")


def test_page_forms_refuse_a_missing_or_foreign_csrf_token(auth_server: Server,
                                                           module_project: Project) -> None:
    """The approval form of a signed-in browser: no token, another browser's token, or a
    foreign Origin is 403 and records nothing; its own token is accepted."""
    eid, cid = module_project.pause()
    page = approval_path(eid, cid, api=False)
    form = {"decision": "approve", "field.limit": "4"}

    def signed_in() -> tuple[httpx.Client, str]:
        client = httpx.Client(base_url=auth_server.url, timeout=20)
        token = client.get("/login").text.split('name="csrf_token" value="')[1].split('"')[0]
        client.post("/login", data={"csrf_token": token, "token": TOKENS["bob"]})
        shown = client.get(page).text
        return client, shown.split('name="csrf_token" value="')[1].split('"')[0]

    first, mine = signed_in()
    second, theirs = signed_in()
    second.close()
    try:
        assert first.post(page, data=form).status_code == 403
        assert first.post(page, data={**form, "csrf_token": theirs}).status_code == 403
        assert first.post(page, data={**form, "csrf_token": mine},
                          headers={"Origin": "http://evil.example"}).status_code == 403
        assert module_project.store.list_pending(eid)
        done = first.post(page, data={**form, "csrf_token": mine})
        assert done.status_code == 303 and done.headers["location"].endswith("?done=answered")
    finally:
        first.close()
    assert module_project.store.decisions(eid)[0].resolver == "bob"
