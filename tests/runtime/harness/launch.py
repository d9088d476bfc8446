"""The parent side: starting children, reading what they did, and reference runs."""

from __future__ import annotations

import itertools
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import tether
from harness import RUNTIME_TESTS, WORKFLOWS
from tether import InMemoryCheckpointer, Resume, Runner
from tether.compiler.plan import Plan

TIMEOUT = 120.0
_COUNTER = itertools.count()


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child: ``harness`` importable, output unbuffered."""
    path = os.pathsep.join(p for p in (str(RUNTIME_TESTS), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", **extra}


@dataclass(frozen=True)
class Exit:
    """How a child ended: its exit status (-9: SIGKILL), its result (None if it died)."""

    returncode: int
    result: dict[str, Any] | None
    pid: int = 0
    stderr: str = ""

    @property
    def killed(self) -> bool:
        return self.returncode == -9

    def describe(self) -> str:
        return (f"child {self.pid} exited {self.returncode}; result={self.result}; "
                f"stderr: {self.stderr[-3000:]}")


def _job_files(job: dict[str, Any], folder: Path) -> tuple[dict[str, Any], Path]:
    folder.mkdir(parents=True, exist_ok=True)
    result = folder / f"result-{os.getpid()}-{next(_COUNTER)}.json"
    return {**job, "result": str(result)}, result


def _read(result: Path) -> dict[str, Any] | None:
    if not result.exists():
        return None
    payload: dict[str, Any] = json.loads(result.read_text())
    return payload


def run_fresh(job: dict[str, Any], folder: Path, timeout: float = TIMEOUT) -> Exit:
    """Run a job in a new interpreter: ``python -m harness.child JOB``."""
    job, result = _job_files(job, folder)
    done = subprocess.run([sys.executable, "-m", "harness.child", json.dumps(job)],
                          env=child_env(), capture_output=True, text=True, timeout=timeout)
    return Exit(done.returncode, _read(result), 0, done.stderr)


def start_fresh(job: dict[str, Any], folder: Path) -> tuple[subprocess.Popen[str], Path]:
    """Start a job in a new interpreter without waiting for it."""
    job, result = _job_files(job, folder)
    process = subprocess.Popen([sys.executable, "-m", "harness.child", json.dumps(job)],
                               env=child_env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    return process, result


def start_together(jobs: list[dict[str, Any]], folder: Path,
                   delay: float = 0.3) -> list[Exit]:
    """Start one new interpreter per job; once every one is imported and ready, give them all
    the same start time (a barrier), and wait for them."""
    started = []
    for job in jobs:
        job, result = _job_files({**job, "barrier": True}, folder)
        process = subprocess.Popen([sys.executable, "-m", "harness.child", json.dumps(job)],
                                   env=child_env(), stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append((process, result))
    for process, _ in started:
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert "ready" in ready, process.communicate(timeout=TIMEOUT)
    go = json.dumps({"start_at": time.time() + delay}) + "\n"
    for process, _ in started:
        assert process.stdin is not None
        process.stdin.write(go)
        process.stdin.flush()
    return [finish(process, result) for process, result in started]


def finish(process: subprocess.Popen[str], result: Path, timeout: float = TIMEOUT) -> Exit:
    """Wait for a child started with :func:`start_fresh` (killed if it outlives timeout)."""
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
        raise AssertionError(f"child {process.pid} hung for {timeout}s: {stderr[-3000:]}") \
            from None
    return Exit(process.returncode, _read(result), process.pid, stderr)


class Zygote:
    """A pre-imported process that forks a new child per job (see :mod:`harness.zygote`)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.log_path = folder / f"zygote-{next(_COUNTER)}.log"
        self._log: IO[str] = self.log_path.open("w")
        self.process = subprocess.Popen([sys.executable, "-m", "harness.zygote"],
                                        env=child_env(), stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self._log, text=True)
        self.answers: queue.Queue[str] = queue.Queue()
        threading.Thread(target=_pump, args=(self.process, self.answers), daemon=True).start()
        ready = self._line()
        assert "ready" in ready, ready

    def _line(self, timeout: float = TIMEOUT) -> dict[str, Any]:
        line = self.answers.get(timeout=timeout)
        if not line:
            raise RuntimeError(f"the zygote died: {self.log_path.read_text()[-3000:]}")
        payload: dict[str, Any] = json.loads(line)
        return payload

    def run(self, job: dict[str, Any]) -> Exit:
        """Fork a child for ``job`` and wait for it."""
        job, result = _job_files(job, self.folder)
        assert self.process.stdin is not None
        mark = self.log_path.stat().st_size
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        pid = int(self._line()["forked"])
        try:
            answer = self._line()
        except queue.Empty:
            os.kill(pid, signal.SIGKILL)  # the child we forked hangs: end it, then fail
            self._line()
            raise AssertionError(f"child {pid} hung for {TIMEOUT}s: {job}") from None
        self._log.flush()
        with self.log_path.open() as log:
            log.seek(mark)
            stderr = log.read()
        return Exit(int(answer["status"]), _read(result), int(answer["pid"]), stderr)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        _wait_or_kill(self.process)
        self._log.close()


class Workers:
    """Long-lived worker children (``race``/``batch``) that answer one line per request.

    A thread per worker moves its answers into a queue, so reading has a timeout: a worker
    that hangs (a deadlock) fails the test instead of hanging it.
    """

    def __init__(self, count: int, job: dict[str, Any], folder: Path,
                 timeout: float = TIMEOUT) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self.logs = [folder / f"worker-{i}-{next(_COUNTER)}.log" for i in range(count)]
        self._files = [p.open("w") for p in self.logs]
        self.processes = [
            subprocess.Popen([sys.executable, "-m", "harness.child", json.dumps(job)],
                             env=child_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=log, text=True)
            for log in self._files]
        self.queues: list[queue.Queue[str]] = [queue.Queue() for _ in self.processes]
        for process, answers in zip(self.processes, self.queues, strict=True):
            threading.Thread(target=_pump, args=(process, answers), daemon=True).start()
        self.pids = [self.read(i)["ready"] for i in range(count)]

    def send(self, index: int, request: Mapping[str, Any]) -> None:
        stdin = self.processes[index].stdin
        assert stdin is not None
        stdin.write(json.dumps(dict(request)) + "\n")
        stdin.flush()

    def read(self, index: int) -> dict[str, Any]:
        """The worker's next answer (fails after the timeout, or if the worker died)."""
        try:
            line = self.queues[index].get(timeout=self.timeout)
        except queue.Empty:
            raise AssertionError(f"worker {index} answered nothing in {self.timeout}s "
                                 f"(deadlock?): {self.logs[index].read_text()[-3000:]}") \
                from None
        if not line:
            raise RuntimeError(f"worker {index} died: {self.logs[index].read_text()[-3000:]}")
        payload: dict[str, Any] = json.loads(line)
        return payload

    def close(self) -> list[int]:
        """End of input: the workers exit; one that does not within a minute is killed."""
        for process in self.processes:
            if process.stdin is not None:
                process.stdin.close()
        codes = [_wait_or_kill(process) for process in self.processes]
        for handle in self._files:
            handle.close()
        return codes


def _wait_or_kill(process: subprocess.Popen[str], timeout: float = 60) -> int:
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


def _pump(process: subprocess.Popen[str], answers: queue.Queue[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        answers.put(line)
    answers.put("")  # end of output: the worker exited


# -- plans and reference runs -------------------------------------------------------------------
def compile_to(workflow: str | Path, folder: Path) -> tuple[Plan, str]:
    """Compile a workflow (a name in harness/workflows, or a path) to a plan JSON file."""
    path = Path(workflow)
    if not path.is_absolute():
        path = WORKFLOWS / path
    plan = tether.compile(path)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{plan.name}-{plan.fingerprint[:12]}.json"
    target.write_text(plan.to_json())
    return plan, str(target)


def reference_run(plan: Plan, tasks: Mapping[str, Any], inputs: Mapping[str, Any],
                  value: Mapping[str, Any] | None = None) -> tuple[tether.RunResult, Any]:
    """The uninterrupted run (in memory, this process), answering any pause with ``value``;
    returns its result and its store."""
    store = InMemoryCheckpointer()
    runner = Runner(plan, store, tasks)
    result = runner.run(dict(inputs))
    while result.status == "paused":
        assert value is not None, "the reference run paused and no value was given"
        result = runner.resume(result.execution_id, Resume(**value))
    assert result.status == "completed", result
    return result, store
