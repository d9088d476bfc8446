"""Arming a crash inside a child process: SIGKILL at one chosen boundary.

A spec names one boundary:

``before:<address>[#k]`` / ``after:<address>[#k]``
    right before / right after the k-th (default 1st) write, in this process, of a checkpoint
    whose ``node_id`` is ``address`` (``left``, ``fan/item:1``, ``judge``, ``run_end``,
    ``ask``...). Every checkpoint goes through ``put``, ``record_interrupt`` or ``finish_run``
    (whose ``last_node`` row, the run's last node written with its end, is a boundary of
    that write too: ``before:finish`` and ``before:run_end`` then kill at the same point).
``before:#n`` / ``after:#n``
    around the n-th checkpoint write of any kind in this process.
``after:claim``
    right after ``claim`` returned (the claim is committed).
``after:idem[#k]``
    right after the k-th ``put_idempotent`` committed a cached result.
``task:<label>[#k]``
    inside the k-th execution of the task body labelled ``label``, after its side effect was
    recorded and before it returns.
``block:<label>``
    not a crash: the task body labelled ``label`` writes ``<gate>/blocked`` and waits until
    the parent kills the process (to kill a resumer while it holds the run), or stops and
    resumes it, then creates ``<gate>/release`` (the body then returns normally).

Only the child's store object is wrapped (instance attributes); production code is untouched.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WRITES = ("put", "record_interrupt", "finish_run")


def die() -> None:
    """SIGKILL this process: no cleanup, no flush, no atexit; exactly like a kill -9."""
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)  # never reached


@dataclass
class Crash:
    """One armed boundary (see the module docstring).

    With ``quiescent``, a kill that falls due while an idempotent body is between its side
    effect and its cached result is deferred to the next boundary where none is: kills then
    never cut an idempotent body in half, the fault model under which every idempotent body
    must run exactly once. (Without it, such a body may run once more per kill that cut it;
    test_crash proves that case on its own.)
    """

    when: str
    target: str
    nth: int = 1
    gate: Path | None = None
    quiescent: bool = False
    seen: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    open_bodies: int = 0
    due: bool = False

    @classmethod
    def parse(cls, spec: str, gate: str | None = None, quiescent: bool = False) -> Crash:
        when, _, rest = spec.partition(":")
        if when not in ("before", "after", "task", "block"):
            raise ValueError(f"bad crash spec {spec!r}")
        target, _, count = rest.rpartition("#") if "#" in rest else (rest, "", "1")
        return cls(when, target, int(count or 1), Path(gate) if gate else None, quiescent)

    def _hit(self, key: str) -> bool:
        with self.lock:
            self.seen[key] += 1
            return self.seen[key] == self.nth

    def fire(self) -> None:
        """Kill now; with ``quiescent``, as soon as no idempotent body is open."""
        with self.lock:  # held while dying: no body can record a side effect meanwhile
            if self.quiescent and self.open_bodies > 0:
                self.due = True
                return
            die()

    def boundary(self) -> None:
        """Every boundary: a deferred kill fires at the first one with no open body."""
        with self.lock:
            if self.due and self.open_bodies == 0:
                die()

    def body_started(self) -> None:
        """An idempotent body is about to record its side effect."""
        with self.lock:
            self.open_bodies += 1

    # -- store boundaries --------------------------------------------------------------------
    def arm(self, store: Any) -> None:
        """Wrap this store object's writing methods so the boundary kills the process."""
        for name in WRITES:
            setattr(store, name, self._checkpoint_write(getattr(store, name)))
        store.claim = self._after_named(
            "claim", store.claim)
        store.put_idempotent = self._after_named("idem", store.put_idempotent)

    def _matches(self, row: Any) -> bool:
        if self.when not in ("before", "after"):
            return False
        if self.target == "":  # before:#n / after:#n
            return self._hit("#")
        return row.node_id == self.target and self._hit(row.node_id)

    def _checkpoint_write(self, method: Any) -> Any:
        def wrapper(row: Any, *args: Any, **kwargs: Any) -> Any:
            self.boundary()
            last_node = kwargs.get("last_node")
            matched = self._matches(last_node) if last_node is not None else False
            matched = self._matches(row) or matched  # (both counted: no short circuit)
            if matched and self.when == "before":
                self.fire()
            result = method(row, *args, **kwargs)
            if matched and self.when == "after":
                self.fire()
            self.boundary()
            return result
        return wrapper

    def _after_named(self, name: str, method: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            if name == "idem":
                with self.lock:  # the body's result is cached: its window is closed
                    self.open_bodies = max(0, self.open_bodies - 1)
            if self.when == "after" and self.target == name and self._hit(name):
                self.fire()
            self.boundary()
            return result
        return wrapper

    # -- task bodies -------------------------------------------------------------------------
    def in_task(self, label: str) -> None:
        """Called by every test task body after it recorded its side effect."""
        if self.target != label:
            return
        if self.when == "task" and self._hit(label):
            self.fire()
        if self.when == "block":
            assert self.gate is not None
            self.gate.mkdir(parents=True, exist_ok=True)
            (self.gate / "blocked").write_text(str(os.getpid()))
            while not (self.gate / "release").exists():  # the parent kills or releases us
                time.sleep(0.05)


ARMED: Crash | None = None


def task_hook(label: str) -> None:
    """The hook task bodies call (does nothing unless a task crash is armed)."""
    if ARMED is not None:
        ARMED.in_task(label)


def body_started() -> None:
    """Called by the recorder before an idempotent body records its side effect."""
    if ARMED is not None:
        ARMED.body_started()
