"""Ids are data, not paths: a real ``tether serve`` is asked, with the exact bytes an
attacker sends (``http.client``, no client-side normalisation), for paths that hide route
words in ids (``x%2Flive``), dot segments (``%2e%2e``), encoded separators and unicode
look-alikes. Routes match the raw path: every such request reaches the run the id names or
is a clean 404, never another run's page or fragment."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from web_support import Project, Server, served

from tether.runtime import submission as submission_module
from tether.runtime.ids import check_id
from tether.web.urls import approval_url, routing_path, run_url

OLD_IDS = ("p/approvals/q", "x/live", "..", "a%2Fb", "sp ace")


@pytest.fixture(scope="module")
def hostile(module_project: Project) -> Iterator[tuple[Server, dict[str, str]]]:
    """A console over runs ``x`` and ``p`` (paused) and runs whose ids an older tether
    accepted (``p/approvals/q``, ``x/live``, ``..``): id -> its interrupted checkpoint."""
    made = {}
    for eid in ("x", "p"):
        result = module_project.runner().run({"amount": 5}, execution_id=eid)
        made[eid] = result.pending[0].checkpoint_id
    saved = submission_module.check_execution_id  # (the check of a new run's id)
    submission_module.check_execution_id = lambda text, what="": check_id(
        text, "an execution id")
    try:  # the rule of an older tether: any printable id
        for eid in OLD_IDS:
            made[eid] = module_project.runner().run({"amount": 7},
                                                    execution_id=eid).pending[0].checkpoint_id
    finally:
        submission_module.check_execution_id = saved
    yield from ((server, made) for server in served(module_project, auth=True))


def raw(server: Server, method: str, path: str, user: str = "alice") -> tuple[int, str]:
    """Send ``path`` exactly as written; the status and the body."""
    from web_support import TOKENS
    parts = urlsplit(server.url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.putrequest(method, path, skip_accept_encoding=True)
        connection.putheader("Authorization", f"Bearer {TOKENS[user]}")
        connection.putheader("Content-Length", "0")
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        connection.close()


def test_an_encoded_slash_never_reaches_another_runs_fragment_or_page(
        hostile: tuple[Server, dict[str, str]]) -> None:
    server, made = hostile
    status, body = raw(server, "GET", "/runs/x%2Flive")
    assert status == 200 and "x/live" in body  # the run named x/live, whole
    assert made["x/live"] in body and made["x"] not in body
    status, body = raw(server, "GET", "/api/runs/x%2Flive")
    assert status == 200 and '"execution_id":"x/live"' in body
    status, _ = raw(server, "GET", "/runs/y%2Flive")  # no run y/live: not run y's fragment
    assert status == 404
    status, body = raw(server, "GET", "/api/runs/x%2fresume")  # lower case too
    assert status == 404 and "x/resume" in body


def test_an_old_id_holding_route_words_is_reachable_on_every_route(
        hostile: tuple[Server, dict[str, str]]) -> None:
    server, made = hostile
    eid, cid = "p/approvals/q", made["p/approvals/q"]
    status, body = raw(server, "GET", "/api" + run_url(eid))
    assert status == 200 and '"execution_id":"p/approvals/q"' in body
    status, body = raw(server, "GET", "/api" + approval_url(eid, cid))
    assert status == 200 and f'"checkpoint_id":"{cid}"' in body
    status, body = raw(server, "GET", approval_url(eid, cid))
    assert status == 200 and approval_url(eid, cid) in body  # the form posts to it, encoded
    status, body = raw(server, "GET", run_url(eid) + "/live")
    assert status == 200 and cid in body and made["p"] not in body
    status, _ = raw(server, "GET", "/api" + approval_url("p", cid))  # p has no such pause
    assert status == 404


@pytest.mark.parametrize("path", [
    "/runs/%2e%2e", "/runs/%2E%2E/live", "/api/runs/%2e%2e/checkpoints",
    "/runs/..%2Fx", "/api/runs/x%2F..%2Fp", "/runs/x%5Clive", "/runs/x%EF%BC%8Flive",
    "/runs/x%E2%88%95live", "/api/runs/%2Fx", "/runs/x/%2e%2e/live", "/runs/x%00",
    "/api/runs/x%252Flive",
])
def test_dot_segments_separators_and_look_alikes_are_data_or_404(
        hostile: tuple[Server, dict[str, str]], path: str) -> None:
    """None of these shows run x's or run p's page: each names one id, and only the old run
    literally named ``..`` is found (as itself)."""
    server, made = hostile
    status, body = raw(server, "GET", path)
    assert status in (200, 404), (path, status, body)
    assert made["x"] not in body and made["p"] not in body, path
    if status == 200:
        assert path.endswith(("%2e%2e", "%2E%2E/live", "%2e%2e/checkpoints")), path
        assert made[".."] in body or "/checkpoints" in path


def test_links_encode_every_id_whole(hostile: tuple[Server, dict[str, str]]) -> None:
    """The runs list links each odd id as one encoded segment (``..`` too)."""
    server, _ = hostile
    status, body = raw(server, "GET", "/runs")
    assert status == 200
    for eid in OLD_IDS:
        assert f'href="{run_url(eid)}"' in body, eid
    assert run_url("..") == "/runs/%2E%2E" and run_url("p/approvals/q") == \
        "/runs/p%2Fapprovals%2Fq"


def test_a_post_to_an_encoded_route_word_acts_on_the_id_it_names(
        hostile: tuple[Server, dict[str, str]]) -> None:
    """POST /api/runs/x%2Fcancel cancels nothing of run x: it is the address of run
    ``x/cancel``'s page, which takes no POST (405); x%2Fcancel/cancel is run x/cancel's."""
    server, _ = hostile
    status, _ = raw(server, "POST", "/api/runs/x%2Fcancel")
    assert status == 405
    status, body = raw(server, "POST", "/api/runs/x%2Fcancel/cancel")
    assert status == 404 and "x/cancel" in body
    status, body = raw(server, "GET", "/api/runs/x")
    assert status == 200 and '"status":"paused"' in body


def test_routing_path_keeps_separators_of_a_segment_encoded() -> None:
    assert routing_path(b"/runs/x%2Flive") == "/runs/x%2Flive"
    assert routing_path(b"/runs/%2e%2e/live") == "/runs/../live"
    assert routing_path(b"/runs/a%25b%5Cc%C3%A9") == "/runs/a%25b%5Cc\u00e9"
    assert routing_path(b"/runs/\xff") == "/runs/\ufffd"


@settings(max_examples=500, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60))
def test_every_id_goes_through_a_link_and_back_whole(execution_id: str) -> None:
    """Any id (old stores hold any printable text): its link is one path segment, and the
    router gives the handler exactly that id back (route words and dots included)."""
    from tether.web.urls import IdConvertor

    path = run_url(execution_id) + "/live"
    assert path.count("/") == 3
    routed = routing_path(path.encode("ascii"))
    _, runs, segment, live = routed.split("/")
    assert (runs, live) == ("runs", "live")
    assert IdConvertor().convert(segment) == execution_id
