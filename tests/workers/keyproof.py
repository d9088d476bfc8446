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

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
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


def worker_env(directory: Path, worker: str = "test") -> dict[str, str]:
    """The environment of a worker (or submitter) of these proofs: the ledger in
    ``directory``, the worker's name, this folder importable."""
    env = {**os.environ, "TETHER_TEST_EFFECTS": str(directory / "ledger.txt"),
           "TETHER_TEST_WORKER": worker, "TETHER_TEST_HOLD": "0.05",
           "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("TETHER_LEASE_SECONDS", None)  # the lease comes from --lease
    return env


def spawn_worker(wrap: Callable[[list[str]], list[str]], url: str, directory: Path,
                 name: str, gate: Path | None, new_session: bool = False,
                 ) -> tuple[subprocess.Popen[bytes], Path]:
    """A `tether worker` of these proofs (lease 2 s, concurrency 2, ``keyed_tasks``) named
    ``name``, its command line wrapped by ``wrap`` (a namespace), its output in
    ``NAME.log``; with ``gate``, its body of ``n1`` waits for that file."""
    env = worker_env(directory, name)
    if gate is not None:
        env["TETHER_TEST_GATE"] = str(gate)
    log = directory / f"{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(wrap([
            sys.executable, "-m", "tether", "worker", "--db", url, "--tasks", "keyed_tasks",
            "--concurrency", "2", "--lease", "2", "--poll", "0.1"]), env=env, cwd=directory,
            stdout=out, stderr=subprocess.STDOUT, start_new_session=new_session)
    return proc, log


UNSHARE = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]


def namespace_refused() -> str | None:
    """Why a PID namespace cannot be made here (None when it can)."""
    if shutil.which("unshare") is None:
        return "the unshare command is not installed"
    try:
        done = subprocess.run([*UNSHARE, "true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare failed: {exc}"
    return None if done.returncode == 0 else \
        f"the kernel refuses a new PID namespace: {done.stderr.strip()}"


class Namespaced:
    """Worker processes of one test, each the leader of a process group with its
    ``unshare`` (signals go to the group: ``unshare`` itself and the process it runs), each
    pid 1 of its own PID namespace; with ``isolate=False`` (a kernel that refuses
    namespaces, for a proof that does not need them) plain processes."""

    def __init__(self, directory: Path, isolate: bool = True) -> None:
        self.directory = directory
        self.wrap = UNSHARE if isolate else []
        self.procs: list[subprocess.Popen[bytes]] = []

    def worker(self, url: str, name: str, gate: Path | None = None,
               ) -> tuple[subprocess.Popen[bytes], Path]:
        proc, log = spawn_worker(lambda argv: [*self.wrap, *argv], url, self.directory, name,
                                 gate, new_session=True)
        self.procs.append(proc)
        return proc, log

    def signal(self, proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        os.killpg(proc.pid, sig)

    def stop(self, proc: subprocess.Popen[bytes]) -> int:
        """SIGTERM to the worker (pid 1 of its namespace: it has a handler), then wait."""
        self.signal(proc, signal.SIGCONT)
        self.signal(proc, signal.SIGTERM)
        return proc.wait(60)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGCONT)
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)


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


def events_of(url: str, ids: list[str]) -> dict[str, str]:
    """Each history event of the runs: its id and kind."""
    from tether.stores.open import open_checkpointer

    store = open_checkpointer(url, create=False)
    try:
        return {e.event_id: str(e.kind.value) for eid in ids for e in store.events(eid)}
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


def check_outcome(url: str, ledger: Path, ids: dict[str, str], policy: str,
                  ran_by_b: list[tuple[str, str]], sampler: Sampler) -> None:
    """The common checks of the proofs where worker A, holding ``r1`` inside ``n1``, is
    lost (stopped, or cut off) and worker B goes on: never more than one run of the key
    running (the store) or with a body open (the ledger, A's stale body left out); what B
    ran; each node's body ended once per run but the one in flight in A (``queue``: B ran
    it again); ``cancel_running``: r1 stopped at the boundary after ``n0``."""
    assert sampler.samples > 10 and sampler.most <= 1, (sampler.samples, sampler.most)
    assert most_runs_open(ledger) <= 1, lines(ledger)
    assert stale(ledger) == {("r1", "n1", "A")}
    done = statuses(url, list(ids.values()))
    counted = ends(ledger)
    if policy == "queue":
        assert done == {eid: "completed" for eid in ids.values()}
        assert ran_by_b == [("r1", "n1"), ("r1", "n2"), *[(rid, n) for rid in ("r2", "r3")
                                                          for n in NODES]]
        assert counted == {**{(rid, n): 1 for rid in [*ids, "late"] for n in NODES},
                           ("r1", "n1"): 2}  # A's uncommitted n1, and B's
    else:
        assert done == {ids["r1"]: "cancelled", ids["r2"]: "completed"}
        assert ran_by_b == [("r2", n) for n in NODES]  # r1 stopped before n1 ran again
        assert completed_nodes(url, ids["r1"]) == {"n0": 1}
        assert counted == {**{(rid, n): 1 for rid in ("r2", "late") for n in NODES},
                           ("r1", "n0"): 1, ("r1", "n1"): 1}  # n1: A's, never committed
    for rid in [r for r in ids if r != "r1"]:
        assert completed_nodes(url, ids[rid]) == {**{n: 1 for n in NODES}, "run_end": 1}


Proc = subprocess.Popen[bytes]


@dataclass
class LostHolder:
    """The scenario both proofs share: worker A holds ``r1`` of key ``main`` inside ``n1``
    (its gate closed) and is lost; worker B goes on; A comes back. How A is started, lost
    and brought back is the test's (``start(name, gate)``: a worker and its log;
    ``lose(a)``: stop it or cut it off; ``regain(a)``: continue it or restore its link;
    ``stop(worker)``: its exit status). B starts once A is lost (so B cannot take the run
    over before, should a loaded A miss a renewal). ``while_lost(log_a)``: what to wait
    for from A before the store is snapshotted.
    ``queue``: r2, r3 queued behind r1; ``cancel_running``: r2 submitted once A is lost.
    After A is back, the store's rows of these runs are as before; the only history events
    added are ``lease_lost`` notes (A saying, by design, that it found its lease gone)."""

    url: str
    directory: Path
    policy: str
    start: Callable[[str, Path | None], tuple[Proc, Path]]
    lose: Callable[[Proc], None]
    regain: Callable[[Proc], None]
    stop: Callable[[Proc], int]
    while_lost: Callable[[Path], None] = lambda log: None

    def prove(self, wait_for: Callable[[Callable[[], bool], float, str], None]) -> None:
        from tether.runtime.runner import Runner
        from tether.stores.open import open_checkpointer

        ledger, gate = self.directory / "ledger.txt", self.directory / "gate"
        store = open_checkpointer(self.url)
        runner = Runner(workflow(self.directory, self.policy), store, {})
        rids = ["r1", "r2", "r3"] if self.policy == "queue" else ["r1"]
        ids = {rid: runner.submit({"rid": rid, "branch": KEY}) for rid in rids}
        sampler = Sampler(self.url)
        sampler.start()
        try:
            worker_a, log_a = self.start("A", gate)
            wait_for(lambda: Path(f"{gate}.started").exists(), 90, "A to hold r1 in n1")
            assert Path(f"{gate}.started").read_text().split() == ["r1"]
            self.lose(worker_a)
            mark(ledger, "lost A")
            worker_b, _ = self.start("B", None)
            if self.policy == "cancel_running":  # a newer run asks the held one to stop
                ids["r2"] = runner.submit({"rid": "r2", "branch": KEY})
                held = store.get_run(ids["r1"])
                assert held is not None and held.status == "running"
                assert held.cancel_requested_at is not None
            wait_for(lambda: set(statuses(self.url, list(ids.values())).values()) <= {
                "completed", "cancelled"}, 180, "B to take over and end every run")
            self.while_lost(log_a)
            sampler.stop()
            before = snapshot(self.url, list(ids.values()))
            noted = events_of(self.url, list(ids.values()))
            ran_by_b = by_worker(ledger, "start", "B")
        finally:
            sampler.stop()
        gate.write_text("open")  # A's parked body returns once A runs again
        self.regain(worker_a)
        wait_for(lambda: ("r1", "n1") in by_worker(ledger, "end", "A"), 60,
                 "A's stale body of n1 to return")
        wait_for(lambda: "lost its lease" in log_a.read_text(), 60, "A to report its lease lost")
        assert self.stop(worker_b) == 0
        late = runner.submit({"rid": "late", "branch": KEY})  # A alone: A runs it
        wait_for(lambda: statuses(self.url, [late]) == {late: "completed"}, 120,
                 "A to claim and finish a new run of the key")
        assert by_worker(ledger, "end", "A")[-3:] == [("late", n) for n in NODES]
        assert snapshot(self.url, list(ids.values())) == before, \
            "worker A wrote to the store after its lease was taken over"
        added = {k for e, k in events_of(self.url, list(ids.values())).items() if e not in noted}
        assert added <= {"lease_lost"}, added  # A may only note in the history that it lost
        assert self.stop(worker_a) == 0
        store.close()
        check_outcome(self.url, ledger, ids, self.policy, ran_by_b, sampler)


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
