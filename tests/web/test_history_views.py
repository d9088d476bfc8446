"""One history, seen the same everywhere: ``tether show --json`` (a subprocess), the API's
``GET /api/runs/{id}/history`` and the console's run page (its embedded data and its table)
of one run, paused, answered through the API and continued, are the same document."""

from __future__ import annotations

import re

from web_support import Project, Server, approval_path, cli_history, page_history

from tether.web.urls import run_url


def test_the_cli_the_api_and_the_run_page_show_one_history(
        auth_server: Server, module_project: Project) -> None:
    eid, cid = module_project.pause(amount=75, note="history")
    answered = auth_server.post(approval_path(eid, cid),
                                {"decision": "approve", "values": {"limit": 9},
                                 "comment": "fine"}, user="bob")
    assert answered.status_code == 200, answered.text
    done = module_project.runner().resume(eid)
    assert done.status == "completed", done

    api = auth_server.get(f"/api{run_url(eid)}/history")
    assert api.status_code == 200, api.text
    from_api = api.json()
    from_cli = cli_history(module_project, eid)
    from_page, page = page_history(auth_server, eid)
    assert from_cli == from_api == from_page

    kinds = [e["kind"] for e in from_api["events"]]
    assert kinds[0] == "run_created" and kinds[-1] == "run_ended"
    answer = next(e for e in from_api["events"] if e["kind"] == "answered")
    assert (answer["actor"], answer["channel"], answer["comment"], answer["node"]) == \
        ("bob", "api", "fine", "review")
    claims = [e for e in from_api["events"] if e["kind"] == "claimed"]
    assert [c["reason"] for c in claims] == ["started", "resumed"]
    assert all(c["pid"] and c["host"] for c in claims)
    assert [e["kind"] for e in from_api["events"]].count("released") == 1  # the pause
    assert {n: v["state"] for n, v in from_api["nodes"].items()} == {
        "prepare": "completed", "review": "completed", "finish": "completed"}
    # the page's table is drawn from the same events: one row each, the answer with its
    # channel and comment
    assert page.count('class="ev-row ') == len(from_api["events"])
    graph = dict((node, state) for state, node in re.findall(
        r'<g class="node st-([a-z_]+) k-[a-z]+" data-node="([^"]+)"', page))
    assert graph == {n: v["state"] for n, v in from_api["nodes"].items()}
    assert 'data-channel="api"' in page and "fine" in page


def test_the_history_route_is_in_the_openapi_document_and_404s_for_no_run(
        auth_server: Server) -> None:
    document = auth_server.get("/api/openapi.json", user=None).json()
    route = document["paths"]["/api/runs/{execution_id}/history"]["get"]
    assert route["responses"]["200"]["content"]["application/json"]["schema"]["$ref"] \
        .endswith("/History")
    assert "HistoryEvent" in document["components"]["schemas"]
    missing = auth_server.get("/api/runs/no-such-run/history")
    assert missing.status_code == 404
