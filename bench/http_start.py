"""Starting runs over HTTP (issue 26): runs per second accepted by one ``tether serve`` with
``POST /api/workflows/{name}/runs`` and an ``Idempotency-Key`` on every request.

Run: .venv/bin/python bench/http_start.py [--db URL] [--requests 4000] [--clients 8]
[--repeat 0.1]

``--clients`` client processes (8 by default: a server's capacity is measured with requests
in flight while others are answered; 4 senders each waiting for its answer measure their
round trip as much), each with one keep-alive connection (http.client, so the server is
what is measured), send ``--requests`` starts in all (bounded in count; each
request times out after 10 s); a ``--repeat`` share of them reuse a key already sent (a
sender's retry), which must answer 200 with the first run. After the timing, the store must
hold exactly one run per distinct key. Also reported: the server process's CPU time (user +
system, ``/proc/PID/stat``) per start over the same interval. ``--db`` is a PostgreSQL URL
(the issue's target: at least 500 runs per second); without it, a SQLite file in a temporary
directory.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "web"))

from web_support import Project, Server, tasks_file  # noqa: E402

BODY = json.dumps({"inputs": {"amount": 12.5}}).encode()


def _client(port: int, index: int, count: int, repeat: float, ready: Any, out: Any) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    unexpected = 0
    sent: list[str] = []

    def start(key: str) -> int:
        connection.request("POST", "/api/workflows/review/runs", body=BODY, headers={
            "Content-Type": "application/json", "Idempotency-Key": key})
        response = connection.getresponse()
        response.read()
        return response.status

    start(f"warm-{index}")
    ready.wait()
    every = int(1 / repeat) if repeat > 0 else 0
    for n in range(count):
        if every and n % every == every - 1 and sent:
            unexpected += start(sent[-1]) != 200
        else:
            key = f"c{index}-{n}"
            sent.append(key)
            unexpected += start(key) != 201
    out.put((unexpected, len(sent)))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(url: str, requests: int, clients: int, repeat: float,
            pid: int) -> tuple[float, int, int, float]:
    """Starts per second, answers that were not the expected 201/200, distinct keys sent,
    and the server's CPU seconds per start."""
    ready = multiprocessing.Barrier(clients + 1)
    out: multiprocessing.Queue[tuple[int, int]] = multiprocessing.Queue()
    port = int(url.rsplit(":", 1)[1])
    per = requests // clients
    workers = [multiprocessing.Process(target=_client, args=(port, i, per, repeat, ready, out))
               for i in range(clients)]
    for worker in workers:
        worker.start()
    ready.wait()
    began, cpu = time.perf_counter(), cpu_seconds(pid)
    results = [out.get(timeout=600) for _ in workers]
    elapsed, cpu = time.perf_counter() - began, cpu_seconds(pid) - cpu
    for worker in workers:
        worker.join()
    return (per * clients / elapsed, sum(r[0] for r in results), sum(r[1] for r in results),
            cpu / (per * clients))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="a PostgreSQL URL (default: SQLite in a temporary dir)")
    parser.add_argument("--requests", type=int, default=4_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--repeat", type=float, default=0.1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        project = Project(root, tasks_file(root), args.db)
        server = Server(project, "--workflows", str(root / "review.yaml"))
        try:
            rate, unexpected, keys, cpu = measure(server.url, args.requests, args.clients,
                                                  args.repeat, server.process.pid)
        finally:
            server.stop()
        stored = len(project.store.find_runs(workflow="review", limit=args.requests * 2))
        project.close()
    print(f"HTTP start, {args.clients} clients: {rate:7.0f} runs/s accepted, server CPU "
          f"{cpu * 1e6:,.0f} µs per start ({unexpected} unexpected answers; {stored:,} runs "
          f"stored for {keys:,} keys "
          f"+ {args.clients} warm-up; target >= 500/s on PostgreSQL)")
    if unexpected or stored != keys + args.clients:
        sys.exit(1)


if __name__ == "__main__":
    main()
