"""Task module of bench/workers.py, imported by the worker processes (``--tasks
worker_tasks`` with ``bench/`` on ``PYTHONPATH``): plain ``def`` bodies as users write
them, an ``async def`` twin, and one that records when it started (claim latency)."""

from __future__ import annotations

import os
import time

import tether


@tether.task
def bench_step() -> dict[str, int]:
    return {"ok": 1}


@tether.task
async def bench_astep() -> dict[str, int]:
    return {"ok": 1}


@tether.task
def bench_stamp(rid: str) -> float:
    """Append ``rid started-at`` (Unix time) to $TETHER_BENCH_STAMPS: one write per line."""
    now = time.time()
    fd = os.open(os.environ["TETHER_BENCH_STAMPS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                 0o644)
    try:
        os.write(fd, f"{rid} {now!r}\n".encode())
    finally:
        os.close(fd)
    return now
