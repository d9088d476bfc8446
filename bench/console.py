"""The console's speed (issue 12): page renders and the pending-list API, measured against
a real ``tether serve`` on loopback, over a SQLite store this script fills.

Run: .venv/bin/python bench/console.py [--runs 10000] [--requests 4000] [--clients 8]

- inbox: GET /inbox (50 newest of the pending pauses), median of 60 requests;
- run page: GET /runs/<id> of a run with 1,000 checkpoints (a 1,000-element for_each; the
  page shows the graph, the state and a 100-checkpoint timeline page), median of 60;
- pending API: GET /api/pending?limit=50 with ``--runs`` paused runs in the store, from
  ``--clients`` keep-alive connections in ``--clients`` client processes, ``--requests`` in
  all (bounded in count; each request also times out after 10 s): requests per second.

Figures are printed; the command and a run's numbers are recorded in docs/performance.md.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "web"))

from web_support import REVIEW, Project, Server, tasks_file  # noqa: E402

FANOUT = """
tether: 1
name: fanout
nodes:
  items:
    task: t.prepare
    with: {amount: 1}
  each:
    needs: [items]
    for_each: "{{ range(999) | list }}"
    concurrency: 16
    task: t.prepare
    with: {amount: "{{ item }}"}
"""


def fill(project: Project, runs: int) -> str:
    """``runs`` paused review runs (written as the runtime writes them, through the store's
    own calls, so filling takes seconds), and one 1,000-checkpoint run; its id."""
    from tether.compiler import compile as compile_workflow
    from tether.runtime.ids import new_checkpoint_id, new_execution_id
    from tether.runtime.runner import Runner
    from tether.stores.records import CheckpointRow, PendingInterrupt, RunRecord

    plan = compile_workflow(project.root / "review.yaml")
    store = project.store
    now = time.time()
    for i in range(runs):
        eid = new_execution_id()
        moment = datetime.fromtimestamp(now - runs + i, tz=UTC)
        store.create_run(RunRecord(eid, "review", plan.fingerprint, "running",
                                   {"amount": i, "note": ""}, moment, moment), plan.to_json())
        cid = new_checkpoint_id()
        state = ('{"nodes": {"prepare": {"status": "completed", "output": {"big": true}}, '
                 f'"review": {{"status": "interrupted", "waiting": "{cid}"}}}}, '
                 '"counters": {}}')
        row = CheckpointRow(eid, cid, None, "review", 1, "hitl_pause", "interrupted", cid,
                            True, state, None, None, "{}", "manager_approval",
                            f'{{"amount": {i}}}', "", moment.timestamp())
        store.record_interrupt(row, PendingInterrupt(eid, cid, "review", "", "manager_approval",
                                                     {"amount": i}, moment), None)
        store.pause_run(eid, None, [cid])
    (project.root / "fanout.yaml").write_text(FANOUT, encoding="utf-8")
    result = Runner(project.root / "fanout.yaml", store).run({})
    assert result.status == "completed", result
    assert len(store.rows(result.execution_id)) >= 1000
    return result.execution_id


def median_ms(client: httpx.Client, path: str, count: int = 60) -> float:
    times = []
    for _ in range(count + 5):
        start = time.perf_counter()
        response = client.get(path)
        times.append(time.perf_counter() - start)
        assert response.status_code == 200, response.status_code
    return statistics.median(times[5:]) * 1000


def _client(port: int, count: int, ready: Any, out: Any) -> None:
    """One keep-alive connection (http.client: a light client, so the server is measured)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def once() -> int:
        connection.request("GET", "/api/pending?limit=50")
        response = connection.getresponse()
        response.read()
        return response.status

    once()
    ready.wait()
    out.put(sum(once() != 200 for _ in range(count)))


def throughput(url: str, requests: int, clients: int) -> tuple[float, int]:
    ready = multiprocessing.Barrier(clients + 1)
    out: multiprocessing.Queue[int] = multiprocessing.Queue()
    port = int(url.rsplit(":", 1)[1])
    workers = [multiprocessing.Process(target=_client, args=(port, requests // clients, ready,
                                                               out)) for _ in range(clients)]
    for worker in workers:
        worker.start()
    ready.wait()
    start = time.perf_counter()
    errors = sum(out.get(timeout=600) for _ in workers)
    elapsed = time.perf_counter() - start
    for worker in workers:
        worker.join()
    return (requests // clients) * clients / elapsed, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=4_000)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        project = Project(root / "p" if (root / "p").mkdir() is None else root,
                          tasks_file(root))
        assert REVIEW
        started = time.perf_counter()
        big = fill(project, args.runs)
        print(f"filled {args.runs:,} paused runs and a 1,000-checkpoint run in "
              f"{time.perf_counter() - started:.1f} s")
        server = Server(project)
        try:
            with httpx.Client(base_url=server.url, timeout=10) as client:
                from tether.web.urls import run_url
                inbox = median_ms(client, "/inbox")
                page = median_ms(client, run_url(big))
                api = median_ms(client, "/api/pending?limit=50")
            rate, errors = throughput(server.url, args.requests, args.clients)
        finally:
            server.stop()
    print(f"inbox page:                 {inbox:7.1f} ms median (target < 100 ms)")
    print(f"run page, 1,000 checkpoints: {page:7.1f} ms median (target < 100 ms)")
    print(f"pending API, one client:    {api:7.1f} ms median")
    print(f"pending API, {args.clients} clients:     {rate:7.0f} requests/s with "
          f"{args.runs:,} runs ({errors} errors; target >= 500/s)")



if __name__ == "__main__":
    main()
