"""Every answer channel the history names is asserted somewhere with a real answer; this
file holds the two not asserted elsewhere: a signed approval link answered over HTTP on a
real ``tether serve`` (channel ``link``) and ``Runner.resume`` in a program (``python``).
The others: ``cli`` in tests/cli/test_operator.py, ``console`` in
tests/web/test_browser_lifecycle.py, ``api`` in tests/web/test_history_views.py, ``timer``
in tests/cli/test_history.py."""

from __future__ import annotations

from typing import Any

import httpx
from web_support import Project, Server, approval_path, cli_history, page_history

from tether.web.urls import run_url


def _answers(history: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in history["events"] if e["kind"] == "answered"]


def test_an_answer_through_a_signed_link_is_recorded_with_channel_link(
        auth_server: Server, module_project: Project) -> None:
    """Alice mints a link for Grace; Grace, with no console account, opens it and approves
    (its form, with the CSRF token it carries). The history's answer says channel ``link``,
    who answered and the value, the same in the CLI, the API and the run page; the run then
    continues from that answer."""
    eid, cid = module_project.pause(amount=40, note="by link")
    minted = auth_server.post(approval_path(eid, cid) + "/link", {"recipient": "Grace"})
    assert minted.status_code == 200, minted.text
    path = minted.json()["url"][len(auth_server.url):]
    with httpx.Client(base_url=auth_server.url, timeout=20) as stranger:
        shown = stranger.get(path)
        assert shown.status_code == 200, shown.text
        csrf = shown.text.split('name="csrf_token" value="')[1].split('"')[0]
        done = stranger.post(path, data={"csrf_token": csrf, "decision": "approve",
                                         "field.limit": "7", "comment": "ok from the link"})
        assert done.status_code == 200 and "Your answer was recorded" in done.text

    from_cli = cli_history(module_project, eid)
    (answer,) = _answers(from_cli)
    assert (answer["channel"], answer["actor"], answer["node"], answer["checkpoint_id"]) == \
        ("link", "Grace (approval link)", "review", cid)
    assert answer["detail"]["approved"] is True and answer["detail"]["limit"] == 7
    assert answer["comment"] == "ok from the link"
    api = auth_server.get(f"/api{run_url(eid)}/history")
    assert api.status_code == 200, api.text
    from_page, page = page_history(auth_server, eid)
    assert from_cli == api.json() == from_page
    assert 'data-channel="link"' in page

    done_run = module_project.runner().resume(eid)  # continues from the link's answer
    assert done_run.status == "completed" and done_run.output["limit"] == 7
    assert _answers(cli_history(module_project, eid)) == [answer]


def test_an_answer_through_runner_resume_is_recorded_with_channel_python(
        module_project: Project) -> None:
    """``Runner.resume(ID, value)`` in a program: channel ``python``; no resolver named."""
    eid, cid = module_project.pause(amount=41)
    done = module_project.runner().resume(eid, {"approved": False, "limit": 1})
    assert done.status == "completed"
    (answer,) = _answers(cli_history(module_project, eid))
    assert (answer["channel"], answer["node"], answer["checkpoint_id"]) == \
        ("python", "review", cid)
    assert answer["detail"]["approved"] is False
