"""Metrics, end to end: a real Prometheus (Debian's ``prometheus``) scrapes a fleet of two
``tether worker --metrics-port`` processes draining one queue (PostgreSQL when
``TETHER_TEST_POSTGRES_URL`` is set, else SQLite), evaluates the alert rules of
``docs/operations/alerts.yml``, and the test asks its HTTP API what it saw."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tether.runtime.runner import Runner
from tether.stores.open import open_checkpointer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
ALERTS = ROOT / "docs" / "operations" / "alerts.yml"
DASHBOARD = ROOT / "docs" / "operations" / "dashboard.json"
TASKS = str(HERE / "trace_tasks.py")
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
WAIT = 180.0

FLOW = """\
tether: 1
name: drained
nodes:
  a:
    task: t.slow
    with: {seconds: 0.3}
  b:
    needs: [a]
    task: t.meet
    with: {parties: 2}
"""


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_port(port: int, process: subprocess.Popen[Any], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{what} exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{what} never listened on {port}")


def _stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Prom:
    """A Prometheus server scraping ``targets`` with the test copy of the alert rules."""

    def __init__(self, tmp: Path, targets: list[str], interval: str = "1s") -> None:
        self.port = _port()
        rules = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
        for group in rules["groups"]:  # the docs' rules wait 5-10 min: 1 s in this copy
            for rule in group["rules"]:
                if "for" in rule:
                    rule["for"] = "1s"
        (tmp / "rules.yml").write_text(yaml.safe_dump(rules), encoding="utf-8")
        config = {"global": {"scrape_interval": interval, "evaluation_interval": interval},
                  "rule_files": [str(tmp / "rules.yml")],
                  "scrape_configs": [{"job_name": "tether-workers",
                                      "static_configs": [{"targets": targets}]}]}
        (tmp / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
        self.process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={tmp / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=open(tmp / "prometheus.log", "w"))  # noqa: SIM115
        _wait_port(self.port, self.process, "prometheus")

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(
            {"query": expr})
        deadline = time.monotonic() + WAIT
        while True:  # a Prometheus starved of CPU answers 503 for a while: asked again
            try:
                with urllib.request.urlopen(url, timeout=30) as response:
                    body = json.load(response)
                break
            except urllib.error.HTTPError as exc:
                if exc.code != 503 or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def until(self, expr: str, check: Any, what: str) -> list[dict[str, Any]]:
        deadline = time.monotonic() + WAIT
        while True:
            found = self.query(expr)
            if check(found):
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: {expr} gave {found}")
            time.sleep(0.5)


def _value(result: list[dict[str, Any]]) -> float:
    return float(result[0]["value"][1]) if result else float("nan")


@pytest.fixture
def fleet_db(tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """The fleet's one store: a fresh PostgreSQL schema when the test server is configured,
    else a SQLite file (the workers share it as processes on one host)."""
    if os.environ.get("TETHER_TEST_POSTGRES_URL"):
        url, schema = request.getfixturevalue("pg_schema")
        return f"{url}?schema={schema}"
    return f"sqlite:///{tmp_path / 'fleet.db'}"


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[Any]]]:
    processes: list[subprocess.Popen[Any]] = []
    yield processes
    for process in reversed(processes):
        _stop(process)


RUNS = 16
"""Runs the fleet drains: each sleeps 0.3 s in its first node, one at a time per worker, so
the queue stays non-empty over several 0.5 s scrapes; the second node is a barrier that
holds each worker's first run until the other worker is in one too (so both drain some,
however the machine schedules them)."""


def _worker(tmp_path: Path, db: str, name: str, port: int) -> subprocess.Popen[Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["TRACE_GATE"] = str(tmp_path / "gate")
    with open(tmp_path / f"{name}.log", "w") as log:  # (the child keeps its own copy)
        return subprocess.Popen(
            [sys.executable, "-m", "tether", "worker", "--tasks", TASKS, "--db", db,
             "--metrics-port", str(port), "--concurrency", "1", "--poll", "0.2",
             "--queue", "default"], stdout=subprocess.DEVNULL, stderr=log, env=env)


def test_prometheus_scrapes_a_fleet_draining_one_queue_and_the_stuck_run_alert_fires(
        tmp_path: Path, fleet_db: str, started: list[subprocess.Popen[Any]]) -> None:
    flow = tmp_path / "drained.yaml"
    flow.write_text(FLOW, encoding="utf-8")
    gate = tmp_path / "gate"  # each worker's first run waits in t.meet for the other's
    gate.mkdir()
    open_checkpointer(fleet_db).close()  # the store exists before its workers
    ports = [_port(), _port()]
    for index, port in enumerate(ports):
        started.append(_worker(tmp_path, fleet_db, f"worker{index}", port))
    for index, port in enumerate(ports):
        _wait_port(port, started[index], f"worker {index}'s metrics endpoint")
    prom = Prom(tmp_path, [f"127.0.0.1:{port}" for port in ports], interval="500ms")
    started.append(prom.process)
    prom.until('sum(up{job="tether-workers"})', lambda r: _value(r) == 2.0,
               "both workers are up")

    # the runs arrive once the fleet is watched: the depth rises, then drains to zero
    store = open_checkpointer(fleet_db)
    try:
        runner = Runner(flow, store, {})
        ids = [runner.submit(queue="default") for _ in range(RUNS)]
        runner.submit(queue="orphans")  # no worker serves this queue: a stuck run
    finally:
        store.close()
    prom.until('max(max_over_time(tether_queue_depth{queue="default"}[10m]))',
               lambda r: _value(r) > 0, "the queue's depth was seen above zero")
    prom.until('sum(tether_runs_finished_total{workflow="drained",status="completed"})',
               lambda r: _value(r) == len(ids), "every run completed")
    prom.until('max(tether_queue_depth{queue="default"})', lambda r: _value(r) == 0.0,
               "the queue drained")
    # both workers report the same store gauge (alert rules take max, not sum)
    orphans = prom.until('tether_queue_depth{queue="orphans"}', lambda r: len(r) == 2,
                         "both workers report the orphans queue")
    assert [_value([one]) for one in orphans] == [1.0, 1.0]

    # node duration histograms from both workers: each drained some runs, all add up
    by_worker = prom.until(
        'sum by (instance) (tether_node_duration_seconds_count{workflow="drained",'
        'status="completed"})', lambda r: sum(_value([one]) for one in r) == 2 * len(ids),
        "node durations")
    assert sorted(one["metric"]["instance"] for one in by_worker) == sorted(
        f"127.0.0.1:{port}" for port in ports)
    assert all(_value([one]) >= 2 for one in by_worker), by_worker  # a run at least each
    assert len(list(gate.iterdir())) == 2  # (the barrier met both workers)
    buckets = prom.query('sum by (instance, le) (tether_node_duration_seconds_bucket{'
                         'workflow="drained",kind="task",le="0.1"})')
    assert len(buckets) == 2  # the histogram's buckets, per worker
    slow = prom.query('sum(tether_node_duration_seconds_sum{workflow="drained"})')
    assert _value(slow) >= 0.3 * len(ids)  # the 0.3 s sleeps were measured
    p90 = prom.query('histogram_quantile(0.9, sum by (le) (rate('
                     'tether_node_duration_seconds_bucket{workflow="drained"}[5m])))')
    # half the nodes sleep 0.3 s, so the 90th percentile is at least the bucket below 0.3 s;
    # its upper end depends on how long a loaded machine takes to wake a 0.3 s sleep
    assert 0.1 <= _value(p90) < WAIT, p90
    assert _value(prom.query('sum(tether_runs_started_total{workflow="drained"})')) == len(ids)
    assert _value(prom.query("sum(tether_claim_latency_seconds_count)")) == len(ids)

    firing = prom.until('ALERTS{alertname="TetherStuckRuns",alertstate="firing"}',
                        lambda r: bool(r), "the stuck-run alert fires")
    assert [a["metric"]["reason"] for a in firing] == ["no_worker"]
    # nothing else fires: the drained queue is not stuck, no timer is late
    others = prom.query('ALERTS{alertstate="firing",alertname!="TetherStuckRuns"}')
    assert others == []


def test_the_alert_rules_pass_promtool() -> None:
    result = subprocess.run([PROMTOOL, "check", "rules", str(ALERTS)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 6 rules found" in result.stdout


def test_the_dashboard_parses_and_uses_only_metrics_tether_exports() -> None:
    import re

    from prometheus_client import CollectorRegistry

    from tether.observability.metrics import Metrics, StoreCollector

    registry = CollectorRegistry()
    counted = Metrics(registry)  # one sample of each labelled metric, for its series names
    counted.run_started("w")
    counted.run_finished("w", "completed")
    counted.node_finished("w", "task", "completed", 0.1)
    counted.tokens("model", 1, 1)
    names = set()
    for family in registry.collect():
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
    names.update(f.name for f in StoreCollector(lambda: open_checkpointer("memory://"),
                                                30.0).collect())
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", ())]
    assert len(exprs) >= 8
    used = {m for e in exprs for m in re.findall(r"\btether_[a-z_]+", e)}
    assert used and used <= names, used - names
    assert {"tether_queue_depth", "tether_stuck_runs", "tether_node_duration_seconds_bucket",
            "tether_agent_tokens_total", "tether_worker_slots_busy"} <= used


def test_a_metrics_port_in_use_is_a_clear_usage_error(tmp_path: Path) -> None:
    open_checkpointer(f"sqlite:///{tmp_path / 'tether.db'}").close()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "tether", "worker", "--tasks", TASKS, "--db",
             f"sqlite:///{tmp_path / 'tether.db'}", "--metrics-port", str(port)],
            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr
