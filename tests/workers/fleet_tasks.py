"""Task module for the worker proofs: every node body appends one line to an effects file
(O_APPEND, one write per line, so concurrent processes never interleave), and calls an
@idempotent function that appends to a second file."""

from __future__ import annotations

import os
import time
from pathlib import Path

import tether


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode() + b"\n")
    finally:
        os.close(fd)


@tether.idempotent
def charge(rid: str, node: str) -> str:
    _append(os.environ["TETHER_TEST_IDEMPOTENT"], f"{rid} {node}")
    return f"{rid}:{node}"


@tether.task
def step(rid: str, node: str, x: int = 0) -> int:
    gate = os.environ.get("TETHER_TEST_GATE")
    if gate and node == "n5":  # park here until the test opens the gate
        started = Path(gate + ".started")
        _append(str(started), rid)
        while not Path(gate).exists():
            time.sleep(0.01)
    charge(rid, node)
    _append(os.environ["TETHER_TEST_EFFECTS"], f"{rid} {node}")
    return x + 1


@tether.task
def hold(rid: str, wf: str = "") -> str:
    """Record the body's start and end (one O_APPEND line each: the file's order is the order
    the events happened across processes) and hold the run a while in between."""
    path = os.environ["TETHER_TEST_EFFECTS"]
    _append(path, f"start {rid} {wf}")
    time.sleep(float(os.environ.get("TETHER_TEST_HOLD", "0.2")))
    _append(path, f"end {rid} {wf}")
    return rid


@tether.task
def fail_once(rid: str, node: str) -> str:
    """Fail on the first call for ``rid`` (a marker file remembers it), then record the body
    like ``step`` does."""
    marker = Path(os.environ["TETHER_TEST_EFFECTS"] + f".failed-{rid}")
    if not marker.exists():
        marker.touch()
        raise RuntimeError(f"{rid}: the first call fails")
    _append(os.environ["TETHER_TEST_EFFECTS"], f"{rid} {node}")
    return rid


@tether.task
def keyed_hold(rid: str, node: str) -> str:
    """Like :func:`hold`, the worker's pid on each line (a killed worker's unfinished body
    is told apart): ``start RID NODE PID`` ... ``end RID NODE PID``."""
    path = os.environ["TETHER_TEST_EFFECTS"]
    _append(path, f"start {rid} {node} {os.getpid()}")
    time.sleep(float(os.environ.get("TETHER_TEST_HOLD", "0.2")))
    _append(path, f"end {rid} {node} {os.getpid()}")
    return rid
