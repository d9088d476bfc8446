"""``GET /metrics`` on ``tether serve``: Prometheus text, behind the console's own auth."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from web_support import Project, Server, served


@pytest.fixture
def open_server(project: Project) -> Iterator[Server]:
    yield from served(project)


def test_metrics_need_a_token_like_every_route_and_any_user_may_read_them(
        auth_server: Server, module_project: Project) -> None:
    module_project.runner("slow.yaml").submit({"gate": "g"}, queue="metrics-q")
    refused = auth_server.get("/metrics", user=None)
    assert refused.status_code == 401
    wrong = auth_server.get("/metrics", user=None,
                            headers={"Authorization": "Bearer not-a-token-0123456789"})
    assert wrong.status_code == 401
    read = auth_server.get("/metrics", user="vera")  # a viewer may read them
    assert read.status_code == 200
    assert read.headers["content-type"].startswith("text/plain")
    text = read.text
    assert 'tether_queue_depth{queue="metrics-q"} 1.0' in text
    assert 'tether_stuck_runs{reason="no_worker"}' in text
    assert "tether_timers_due" in text
    assert "tether_node_duration_seconds" in text  # the process's own (empty) metrics


def test_without_auth_the_local_console_serves_metrics(open_server: Server,
                                                       project: Project) -> None:
    execution_id, _ = project.pause()
    read = open_server.get("/metrics", user=None)
    assert read.status_code == 200
    assert "# TYPE tether_queue_depth gauge" in read.text
    assert execution_id not in read.text and "execution_id" not in read.text  # no such label
