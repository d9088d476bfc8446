"""The child process: ``python -m harness.child '<job as JSON>'``.

A job is a JSON object:

``url``          the store URL (opened with ``tether.open_checkpointer`` in this process)
``action``       ``run`` | ``resume`` | ``fork`` | ``drive`` | ``setup`` | ``race`` | ``batch``
``plan``         a plan JSON file (``run`` and ``batch`` only; resume and fork use the stored plan)
``tasks``        ``harness`` (default) or ``examples``
``execution_id`` the run to start (optional for ``run``), resume, drive or fork
``inputs``       run inputs; ``value`` the resume values (or null); ``node`` the pending
                 interrupt a ``resume`` answers (when several are pending)
``checkpoint_id`` for ``fork``
``crash``        a crash spec (see :mod:`harness.crash`), ``gate`` its directory for ``block:``,
``quiescent``    defer kills out of idempotent bodies (``idempotent_tasks`` names them)
``effects``      the effects file; ``result`` where to write the outcome as JSON
``start_at``     wall-clock time to wait for before starting
``barrier``      print ``{"ready": pid}`` once imported, then read the start time from stdin
``lease_seconds`` the Runner's lease length
``env``          environment variables to set first (the examples' ledger file)

``drive`` resumes a run the way an operator would: with ``value`` when the run has a pending
interrupt, without a value otherwise. ``race`` and ``batch`` are worker loops reading one
request per line on stdin and answering one JSON line per request on stdout.

Exit status: 0 with a result written (TetherErrors are results), 1 on an unexpected error,
-9 (SIGKILL) when the armed crash fired.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from harness import crash, tasks
from tether import Resume, Runner, TetherError, open_checkpointer
from tether.stores.base import Checkpointer


def _outcome(result: Any) -> dict[str, Any]:
    return {"outcome": result.status, "execution_id": result.execution_id,
            "state": result.state, "output": result.output,
            "pending": dict(result.pending[0]) if result.pending else None,
            "pending_nodes": [p["node_id"] for p in result.pending],
            "error": dict(result.error) if result.error else None}


def _error(exc: BaseException) -> dict[str, Any]:
    return {"outcome": "error", "error_type": type(exc).__name__, "message": str(exc)}


def _task_map(job: dict[str, Any]) -> dict[str, Any]:
    return tasks.example_tasks() if job.get("tasks") == "examples" else dict(tasks.TASKS)


def _value(job: dict[str, Any]) -> Resume | None:
    value = job.get("value")
    return Resume(**value) if value is not None else None


def perform(job: dict[str, Any], store: Checkpointer, task_map: dict[str, Any]) -> Any:
    """Carry out one run/resume/fork/drive action; return its RunResult."""
    action = job["action"]
    lease = float(job.get("lease_seconds", 30.0))
    if action == "run":
        runner = Runner(job["plan"], store, task_map, lease_seconds=lease)
        return runner.run(job.get("inputs") or {}, execution_id=job.get("execution_id"))
    runner = Runner(None, store, task_map, lease_seconds=lease)
    if action == "resume":
        return runner.resume(job["execution_id"], _value(job), node=job.get("node"))
    if action == "drive":
        pending = store.get_pending(job["execution_id"])
        return runner.resume(job["execution_id"], _value(job) if pending else None)
    if action == "fork":
        return runner.fork(job["execution_id"], job.get("checkpoint_id"))
    raise ValueError(f"unknown action {action!r}")


def _wait_until(start_at: float | None) -> None:
    if start_at is not None:
        delay = start_at - time.time()
        if delay > 0:
            time.sleep(delay)


def _write(path: str | None, payload: dict[str, Any]) -> None:
    if path is None:
        print(json.dumps(payload), flush=True)
        return
    target = Path(path)
    temporary = target.with_suffix(".tmp")
    temporary.write_text(json.dumps(payload))
    os.replace(temporary, target)


def one_job(job: dict[str, Any]) -> int:
    """Run one job; write its result; return the exit status."""
    os.environ.update(job.get("env") or {})
    if job.get("effects"):
        tasks.EFFECTS = Path(job["effects"])
    tasks.IDEMPOTENT = set(job.get("idempotent_tasks") or ())
    if job.get("crash"):
        crash.ARMED = crash.Crash.parse(job["crash"], job.get("gate"),
                                        bool(job.get("quiescent")))
    task_map = _task_map(job)
    if job.get("barrier"):  # tell the parent we are ready, wait for its go (a start time)
        print(json.dumps({"ready": os.getpid()}), flush=True)
        job["start_at"] = json.loads(sys.stdin.readline())["start_at"]
    _wait_until(job.get("start_at"))
    opened = time.time()
    try:
        store = open_checkpointer(job["url"])
    except TetherError as exc:
        _write(job.get("result"), _error(exc))
        return 0
    try:
        if job["action"] == "setup":
            _write(job.get("result"), {"outcome": "ok", "pid": os.getpid(), "began": opened,
                                       "ended": time.time()})
            return 0
        if crash.ARMED is not None:
            crash.ARMED.arm(store)
        try:
            payload = _outcome(perform(job, store, task_map))
        except TetherError as exc:
            payload = _error(exc)
        payload["pid"] = os.getpid()
        _write(job.get("result"), payload)
        return 0
    finally:
        store.close()


def worker(job: dict[str, Any]) -> int:
    """A worker loop (``race``/``batch``): one request per stdin line, one answer per line.

    A request is a JSON object merged over the job (``action``, ``execution_id``, ``value``,
    ``start_at``...); the answer carries the request's ``tag``. The store and the task map are
    opened once and reused across requests, as a long-lived worker would.
    """
    if job.get("effects"):
        tasks.EFFECTS = Path(job["effects"])
    task_map = _task_map(job)
    store = open_checkpointer(job["url"])
    print(json.dumps({"ready": os.getpid()}), flush=True)
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            request = {**job, **json.loads(line)}
            _wait_until(request.get("start_at"))
            started = time.perf_counter()
            try:
                payload = _outcome(perform(request, store, task_map))
            except TetherError as exc:
                payload = _error(exc)
            except Exception as exc:  # a driver error must reach the test, not kill the loop
                payload = {**_error(exc), "traceback": traceback.format_exc()}
            payload.update(tag=request.get("tag"), pid=os.getpid(),
                           seconds=time.perf_counter() - started)
            print(json.dumps(payload), flush=True)
    finally:
        store.close()
    return 0


def main(argv: list[str]) -> int:
    job = json.loads(argv[0])
    if job["action"] in ("race", "batch"):
        return worker(job)
    return one_job(job)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
