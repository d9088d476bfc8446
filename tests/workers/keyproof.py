"""Shared pieces of the concurrency-key proofs across PID namespaces, SIGSTOP and network
namespaces (``test_keys_namespaces.py``, ``test_keys_partition.py``): the keyed workflow,
a sampler of the store, the ledger the task bodies write (``keyed_tasks.py``), a snapshot
of what the store holds about runs, and a submitting child (``python -m keyproof``).

The ledger's lines are ``start RID NODE WORKER`` / ``end RID NODE WORKER`` in the order
they happened, plus the test's own ``lost WORKER`` when it stops a worker or cuts its link:
from then on the bodies that worker had open are *stale* (in flight in a process that no
longer holds its runs; one may still end later, and nothing of it is committed).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

NODES = ("n0", "n1", "n2")
KEY = "main"

WORKFLOW = """\
tether: 1
name: keyproof
inputs:
  rid: {{type: string}}
  branch: {{type: string}}
concurrency: {{key: "{{{{ inputs.branch }}}}", limit: 1, on_conflict: {policy}}}
nodes:
  n0: {{task: keyed_step, with: {{rid: "{{{{ inputs.rid }}}}", node: n0}}}}
  n1: {{task: keyed_step, needs: n0, with: {{rid: "{{{{ inputs.rid }}}}", node: n1}}}}
  n2: {{task: keyed_step, needs: n1, with: {{rid: "{{{{ inputs.rid }}}}", node: n2}}}}
"""


def workflow(directory: Path, policy: str) -> Path:
    path = directory / f"keyproof_{policy}.yaml"
    path.write_text(WORKFLOW.format(policy=policy), encoding="utf-8")
    return path


class Sampler(threading.Thread):
    """Reads the runs of key ``main`` that are ``running`` until stopped (``halt``);
    ``most``: the largest count seen in one reading."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.most = 0
        self.samples = 0
        self.halt = threading.Event()

    def run(self) -> None:
        from tether.stores.open import open_checkpointer

        store = open_checkpointer(self.url, create=False)
        try:
            while not self.halt.is_set():
                running = [r for r in store.find_runs(status="running", limit=200)
                           if r.concurrency_key == KEY]
                self.most = max(self.most, len(running))
                self.samples += 1
                time.sleep(0.01)
        finally:
            store.close()

    def stop(self) -> None:
        self.halt.set()
        self.join(30)


def mark(ledger: Path | str, line: str) -> None:
    """Append one line to the ledger: one unbuffered write to a file opened O_APPEND, so
    lines of concurrent processes never interleave."""
    with open(ledger, "ab", buffering=0) as out:
        out.write(line.encode() + b"\n")


def lines(ledger: Path) -> list[list[str]]:
    return [line.split() for line in ledger.read_text(encoding="utf-8").splitlines()] \
        if ledger.exists() else []


def stale(ledger: Path) -> set[tuple[str, str, str]]:
    """The bodies (rid, node, worker) open in a worker when the test marked it lost."""
    open_now: set[tuple[str, str, str]] = set()
    found: set[tuple[str, str, str]] = set()
    for kind, *rest in lines(ledger):
        if kind == "lost":
            found |= {body for body in open_now if body[2] == rest[0]}
        elif kind == "start":
            open_now.add((rest[0], rest[1], rest[2]))
        else:
            open_now.discard((rest[0], rest[1], rest[2]))
    return found


def most_runs_open(ledger: Path) -> int:
    """The most runs with a body open at once, stale bodies left out from when the worker
    was marked lost."""
    open_now: Counter[tuple[str, str, str]] = Counter()
    most = 0
    for kind, *rest in lines(ledger):
        if kind == "lost":
            for body in [b for b in open_now if b[2] == rest[0]]:
                del open_now[body]
            continue
        body = (rest[0], rest[1], rest[2])
        if kind == "start":
            open_now[body] += 1
        elif open_now[body]:  # a stale body ending later was already left out
            open_now[body] -= 1
        most = max(most, len({b[0] for b, n in open_now.items() if n}))
    return most


def ends(ledger: Path) -> Counter[tuple[str, str]]:
    """How many times each (rid, node) body ended, in any worker."""
    return Counter((rest[0], rest[1]) for kind, *rest in lines(ledger) if kind == "end")


def by_worker(ledger: Path, kind: str, worker: str) -> list[tuple[str, str]]:
    return [(rest[0], rest[1]) for k, *rest in lines(ledger) if k == kind and rest[2] == worker]


def snapshot(url: str, ids: list[str]) -> dict[str, Any]:
    """Everything the store holds about the runs that a late write could change: each
    checkpoint row (id, node, step type, status) and each run row (status, owner, attempt,
    lease, error, when it last changed)."""
    from tether.stores.open import open_checkpointer

    store = open_checkpointer(url, create=False)
    try:
        found: dict[str, Any] = {}
        for eid in ids:
            run = store.get_run(eid)
            assert run is not None, eid
            found[eid] = (
                sorted((r.checkpoint_id, r.node_id, r.step_type, r.status)
                       for r in store.rows(eid)),
                (str(run.status), run.owner, run.attempt, run.lease_until,
                 json.dumps(run.error, sort_keys=True), run.updated_at))
        return found
    finally:
        store.close()


def completed_nodes(url: str, eid: str) -> Counter[str]:
    from tether.stores.open import open_checkpointer

    store = open_checkpointer(url, create=False)
    try:
        return Counter(r.node_id for r in store.rows(eid) if r.status == "completed"
                       and r.step_type in ("node", "run_end"))
    finally:
        store.close()


def statuses(url: str, ids: list[str]) -> dict[str, str]:
    from tether.stores.open import open_checkpointer

    store = open_checkpointer(url, create=False)
    try:
        return {eid: str(run.status) for eid in ids if (run := store.get_run(eid)) is not None}
    finally:
        store.close()


def _child() -> None:
    """``python -m keyproof URL WORKFLOW RID BRANCH [DEDUP]``: open the store, compile,
    print ``{"ready": pid}``, wait for ``{"start_at": t}`` on stdin, submit once and print
    ``{"id", "created", "status"}`` or ``{"rejected": message}``."""
    from tether.errors import ConcurrencyLimitReached
    from tether.runtime.runner import Runner
    from tether.stores.open import open_checkpointer

    url, path, rid, branch, *dedup = sys.argv[1:]
    store = open_checkpointer(url, create=False)
    runner = Runner(Path(path), store, {})
    print(json.dumps({"ready": os.getpid()}), flush=True)
    start_at = float(json.loads(sys.stdin.readline())["start_at"])
    time.sleep(max(0.0, start_at - time.time()))
    try:
        done = runner.submit_run({"rid": rid, "branch": branch},
                                 dedup_key=dedup[0] if dedup else None)
        out: dict[str, Any] = {"id": done.execution_id, "created": done.created,
                               "status": str(done.status)}
    except ConcurrencyLimitReached as exc:
        out = {"rejected": str(exc)}
    finally:
        store.close()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    _child()
