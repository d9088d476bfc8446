"""``GET /metrics`` on ``tether serve``: Prometheus text, behind the console's own auth."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from web_support import URL_LINE, Project, Server, served, wait_for


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


def test_log_format_json_makes_every_log_line_of_serve_one_json_object(
        tmp_path: Path, pg_schema: tuple[str, str]) -> None:
    """A line the console logs (a store failure answering a request: its schema was dropped
    under it) is one JSON object with time, level, logger and message."""
    import psycopg

    url, schema = pg_schema
    db = f"{url}?schema={schema}"
    log = tmp_path / "serve.log"
    with open(log, "w") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "tether", "serve", "--db", db, "--port", "0",
             "--log-format", "json"], stderr=errors, cwd=tmp_path,
            env={**os.environ, "TETHER_CONSOLE_SECRET": "s" * 40})
    try:
        found = wait_for(lambda: URL_LINE.search(log.read_text()), "the console's address",
                         60)
        base = found.group(1)
        assert httpx.get(f"{base}/api/runs", timeout=20).status_code == 200
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA "{schema}" CASCADE')
        assert httpx.get(f"{base}/api/runs", timeout=20).status_code >= 500
        logged = wait_for(lambda: [json.loads(line) for line in log.read_text().splitlines()
                                   if line.startswith("{")], "a JSON log line", 60)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert all({"time", "level", "logger", "message"} <= set(entry) for entry in logged)
    assert any(entry["level"] == "warning" and "/api/runs" in entry["message"]
               for entry in logged), logged
    text = [line for line in log.read_text().splitlines()
            if line.strip() and not line.startswith("{") and not URL_LINE.search(line)]
    assert text == []  # every log line is JSON (the address line is the command's output)
