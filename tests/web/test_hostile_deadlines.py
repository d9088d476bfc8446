"""Deadlines hold on every channel of a real ``tether serve``: once an approval's deadline
passed, the API's answer, the console's answer form and a signed link are refused (409,
naming the run, the approval and the moment), both while the timeout waits for a worker to
apply it and after it was applied; nothing is recorded."""

from __future__ import annotations

import textwrap
import time

import httpx
from itsdangerous import URLSafeTimedSerializer
from web_support import SECRET, TOKENS, Project, Server, approval_path, wait_for

from tether.runtime.timers import fire_due

SIGNER = URLSafeTimedSerializer(SECRET.encode(), salt="tether-approval-link")

TIMED = """
tether: 1
name: timed
nodes:
  review:
    approval:
      reason: ship it?
      form: {approved: {type: boolean}}
      timeout: 1s
      on_timeout: ON_TIMEOUT
"""


def _timed_out_pause(project: Project, on_timeout: str) -> tuple[str, str]:
    path = project.root / f"timed_{len(on_timeout)}.yaml"
    path.write_text(textwrap.dedent(TIMED.replace("ON_TIMEOUT", on_timeout)))
    result = project.runner(path.name).run()
    row = result.pending[0]
    assert row.due_at is not None
    wait_for(lambda: time.time() >= row.due_at + 0.01, "the deadline")  # type: ignore[operator]
    return result.execution_id, row.checkpoint_id


def _signed_in(server: Server) -> httpx.Client:
    client = httpx.Client(base_url=server.url, timeout=20)
    token = client.get("/login").text.split('name="csrf_token" value="')[1].split('"')[0]
    client.post("/login", data={"csrf_token": token, "token": TOKENS["bob"]})
    return client


def _csrf(client: httpx.Client, path: str) -> str:
    return client.get(path).text.split('name="csrf_token" value="')[1].split('"')[0]


def _every_channel_refuses(server: Server, project: Project, eid: str, cid: str,
                           browser: tuple[httpx.Client, str],
                           stranger: tuple[httpx.Client, str, str]) -> None:
    """The API (bearer token), the signed-in console form and the signed link: 409."""
    api = server.post(approval_path(eid, cid), {"decision": "approve"})
    assert api.status_code == 409, api.text
    detail = api.json()["detail"]
    assert f"run {eid}" in detail and "approval 'review' timed out at 20" in detail
    client, csrf = browser
    posted = client.post(approval_path(eid, cid, api=False),
                         data={"csrf_token": csrf, "decision": "approve"})
    assert posted.status_code == 409 and "timed out at" in posted.text, posted.text
    outsider, link, csrf = stranger
    posted = outsider.post(link, data={"csrf_token": csrf, "decision": "approve"})
    assert posted.status_code == 409 and "timed out at" in posted.text, posted.text


def test_an_answer_after_the_deadline_is_refused_before_and_after_the_timeout_applies(
        auth_server: Server, module_project: Project) -> None:
    """The attacker holds valid CSRF tokens (taken from a pause without a deadline: a token
    belongs to a browser, not to a page) and posts anyway; the pages themselves show the
    refusal instead of a form."""
    browser = _signed_in(auth_server)
    outsider = httpx.Client(base_url=auth_server.url, timeout=20)
    try:
        open_eid, open_cid = module_project.pause()
        open_link = auth_server.post(approval_path(open_eid, open_cid) + "/link", {})
        mine = _csrf(browser, approval_path(open_eid, open_cid, api=False))
        theirs = _csrf(outsider, open_link.json()["url"][len(auth_server.url):])
        for on_timeout in ("fail", "skip", "{approved: false}"):
            eid, cid = _timed_out_pause(module_project, on_timeout)
            minted = auth_server.post(approval_path(eid, cid) + "/link", {"recipient": "Eve"})
            assert minted.status_code == 409 and "timed out at" in minted.json()["detail"]
            # a link minted before the deadline (signed with the console's key, as it was)
            link = "/a/" + SIGNER.dumps([eid, cid, "Eve"])
            channels = ((browser, mine), (outsider, link, theirs))
            # the deadline passed, no worker applied the timeout yet: the row still waits
            assert module_project.store.list_pending(eid)
            shown = outsider.get(link).text
            assert 'id="timed-out"' in shown and 'class="answer"' not in shown
            _every_channel_refuses(auth_server, module_project, eid, cid, *channels)
            assert module_project.store.decisions(eid) == []
            fire_due(module_project.store)  # the timeout applies: fail, skip or its answer
            [decision] = module_project.store.decisions(eid)
            assert decision.resolver == "timeout"
            shown = browser.get(approval_path(eid, cid, api=False)).text
            assert "timed out at" in shown and 'class="answer"' not in shown
            _every_channel_refuses(auth_server, module_project, eid, cid, *channels)
            assert module_project.store.decisions(eid) == [decision]
    finally:
        browser.close()
        outsider.close()
