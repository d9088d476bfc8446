"""Fixtures of the worker proofs: a 10-node workflow, worker subprocesses, effect files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent
NODES = 10


def chain_workflow(directory: Path, nodes: int = NODES) -> Path:
    lines = ["tether: 1", "name: chain", "inputs:", "  rid: {type: string}", "nodes:"]
    for i in range(nodes):
        lines.append(f"  n{i}:")
        if i:
            lines.append(f"    needs: [n{i - 1}]")
        x = f'"{{{{ nodes.n{i - 1}.output }}}}"' if i else "0"
        lines.append('    task: step')
        lines.append(f'    with: {{rid: "{{{{ inputs.rid }}}}", node: n{i}, x: {x}}}')
    lines.append(f'output: "{{{{ nodes.n{nodes - 1}.output }}}}"')
    path = directory / "chain.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


class Fleet:
    """Worker subprocesses of one test, and the files their tasks write."""

    def __init__(self, url: str, directory: Path) -> None:
        self.url = url
        self.directory = directory
        self.effects = directory / "effects.txt"
        self.idempotent = directory / "idempotent.txt"
        self.gate = directory / "gate"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.env = {**os.environ, "TETHER_TEST_EFFECTS": str(self.effects),
                    "TETHER_TEST_IDEMPOTENT": str(self.idempotent),
                    "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
                    "TETHER_LEASE_SECONDS": "2"}

    def start(self, count: int = 1, *, concurrency: int = 4, gated: bool = False,
              tasks: tuple[str, ...] = ("fleet_tasks",), queues: tuple[str, ...] = (),
              options: tuple[str, ...] = ()) -> list[subprocess.Popen[bytes]]:
        """``count`` workers (``options``: more ``tether worker`` options)."""
        env = {**self.env, **({"TETHER_TEST_GATE": str(self.gate)} if gated else {})}
        options = (*(x for t in tasks for x in ("--tasks", t)),
                   *(x for q in queues for x in ("--queue", q)), *options)
        started = []
        for _ in range(count):
            log = open(self.directory / f"worker{len(self.procs)}.log", "wb")  # noqa: SIM115
            proc = subprocess.Popen(
                [sys.executable, "-m", "tether", "worker", "--db", self.url, *options,
                 "--concurrency", str(concurrency), "--poll", "0.1"],
                env=env, cwd=self.directory, stdout=log, stderr=subprocess.STDOUT)
            self.procs.append(proc)
            started.append(proc)
        return started

    def wait_registered(self, count: int) -> None:
        """Until ``count`` workers have registered (their signal handlers are installed)."""
        from tether.stores.open import open_checkpointer

        store = open_checkpointer(self.url)
        try:
            wait_for(lambda: len(store.list_workers()) >= count, 60,
                     f"{count} worker(s) to register")
        finally:
            store.close()

    def lines(self, path: Path) -> Counter[str]:
        if not path.exists():
            return Counter()
        return Counter(path.read_text(encoding="utf-8").splitlines())

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    """Poll ``condition`` until it holds (a deadline, not an ordering sleep)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds:g} s waiting for {what}")
        time.sleep(0.05)


def wait_stuck(fleet: Fleet, eid: str, reason: str) -> None:
    """Wait until a worker left run ``eid`` queued (never claimed) with ``reason`` in its
    blocked reason, and check `tether runs --stuck` (a real CLI) shows it."""
    from tether.stores.open import open_checkpointer

    with open_checkpointer(fleet.url) as store:
        def blocked() -> str | None:
            run = store.get_run(eid)
            return run.blocked_reason if run is not None else None

        wait_for(lambda: blocked() is not None, 60, "the worker to record why it waits")
        run = store.get_run(eid)
    assert run is not None and (run.status, run.attempt) == ("queued", 0)
    assert reason in (run.blocked_reason or ""), run.blocked_reason
    stuck = subprocess.run([sys.executable, "-m", "tether", "runs", "--stuck", "--json",
                            "--db", fleet.url], env=fleet.env, cwd=fleet.directory,
                           capture_output=True, text=True, timeout=60, check=False)
    assert stuck.returncode == 0, stuck.stderr
    [shown] = json.loads(stuck.stdout)
    assert shown["execution_id"] == eid
    assert any(reason in r for r in shown["reasons"]), shown["reasons"]


@pytest.fixture
def fleet_of(tmp_path: Path) -> Iterator[Callable[[str], Fleet]]:
    made: list[Fleet] = []

    def make(url: str) -> Fleet:
        fleet = Fleet(url, tmp_path)
        made.append(fleet)
        return fleet

    yield make
    for fleet in made:
        fleet.stop_all()
