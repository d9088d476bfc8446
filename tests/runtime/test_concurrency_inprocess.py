"""Exactly-once resume under concurrency inside ONE process (issue 8, measured item 1).

The multi-process races are in ``test_concurrency.py``; here the racers share a process, so
they share its pid, its start time and its host: only the owner token of each attempt
(``stores/owners.py``, a fresh random token per ``run``/``resume``/``fork``) tells them apart.

* 16 threads, each with its own ``Runner`` and its own store object (``open_checkpointer``
  on one SQLite file, or one PostgreSQL schema), resume one paused run at the same instant
  (a ``threading.Barrier``), 50 trials per backend.
* 16 asyncio tasks in one event loop, each with its own ``Runner`` and store object, do the
  same with ``Runner.aresume`` (an ``asyncio.Barrier``).

Every trial: exactly one resume completes, the 15 others raise ``AlreadyResumed``, the code
after ``interrupt()`` (and the idempotent node after it) ran exactly once, counted by a line
appended under a lock to a file by the task body itself; the run has one ``run_end``.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import WORKFLOWS, checks

import tether
from tether import AlreadyResumed, Resume, Runner, interrupt, open_checkpointer
from tether.runtime.context import current_execution_id
from tether.stores.base import Checkpointer

RACERS = 16
TRIALS = 50
APPROVAL = tether.compile(WORKFLOWS / "approval.yaml")


class Effects:
    """A file of side effects: one line per execution of a body, appended under a lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()

    def record(self, task: str, **fields: Any) -> None:
        line = json.dumps({"task": task, "eid": current_execution_id(), **fields})
        with self.lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def count(self, execution_id: str) -> Counter[str]:
        if not self.path.exists():
            return Counter()
        lines = [json.loads(text) for text in self.path.read_text().splitlines()]
        return Counter(line["task"] for line in lines if line["eid"] == execution_id)

    def answers(self, execution_id: str) -> list[dict[str, Any]]:
        lines = [json.loads(text) for text in self.path.read_text().splitlines()]
        return [line["answer"] for line in lines
                if line["eid"] == execution_id and line["task"] == "h.ask"]

    def tasks(self) -> dict[str, Callable[..., Any]]:
        def step(name: str) -> dict[str, Any]:
            return {"name": name, "done": True}

        def ask(subject: str) -> dict[str, Any]:
            answer = interrupt("approve", {"subject": subject})
            self.record("h.ask", answer=dict(answer))  # the code after interrupt()
            return {"subject": subject, **dict(answer)}

        def apply(decision: dict[str, Any]) -> dict[str, Any]:
            self.record("h.apply")
            return {"applied": decision.get("approved"), "by": decision.get("by")}

        return {"h.step": step, "h.ask": ask, "h.apply": apply}


def _value(racer: int) -> Resume:
    return Resume(approved=racer % 2 == 0, by=f"racer-{racer}")


@pytest.fixture
def racers(shared_url: str, tmp_path: Path) -> Iterator[tuple[Effects, list[Runner]]]:
    """The effects file, and one Runner per racer, each over its own store object."""
    effects = Effects(tmp_path / "effects.jsonl")
    stores: list[Checkpointer] = [open_checkpointer(shared_url) for _ in range(RACERS + 1)]
    runners = [Runner(APPROVAL, store, effects.tasks()) for store in stores]
    try:
        yield effects, runners
    finally:
        for store in stores:
            store.close()


def _check_trial(trial: int, execution_id: str, outcomes: list[Any], effects: Effects,
                 store: Checkpointer) -> None:
    kinds = Counter(type(o).__name__ if isinstance(o, BaseException) else o.status
                    for o in outcomes)
    where = f"trial {trial}, run {execution_id}: {outcomes}"
    assert kinds == {"completed": 1, "AlreadyResumed": RACERS - 1}, where
    winner = next(i for i, o in enumerate(outcomes) if not isinstance(o, BaseException))
    assert all(isinstance(o, AlreadyResumed) for i, o in enumerate(outcomes) if i != winner)
    assert effects.count(execution_id) == {"h.ask": 1, "h.apply": 1}, where
    assert effects.answers(execution_id) == [dict(_value(winner))], where
    assert outcomes[winner].output["decision"] == {"subject": f"trial {trial}",
                                                   **dict(_value(winner))}, where
    assert checks.run_ends(store, execution_id) == ["completed"], checks.describe(
        store, execution_id)
    assert store.get_pending(execution_id) is None


@pytest.mark.slow
def test_sixteen_threads_resume_one_paused_run_exactly_one_wins_fifty_times(
        racers: tuple[Effects, list[Runner]]) -> None:
    """16 threads of one process, each with its own Runner and store object, resume the same
    paused run at the same instant, 50 trials: one completes, 15 raise AlreadyResumed, the
    code after interrupt() runs once per trial."""
    effects, runners = racers
    starter, racing = runners[RACERS], runners[:RACERS]
    for trial in range(TRIALS):
        paused = starter.run({"subject": f"trial {trial}"})
        assert paused.status == "paused", paused
        eid = paused.execution_id
        barrier = threading.Barrier(RACERS)
        outcomes: list[Any] = [None] * RACERS

        def race(i: int, eid: str = eid, barrier: threading.Barrier = barrier,
                 outcomes: list[Any] = outcomes) -> None:
            barrier.wait(timeout=60)
            try:
                outcomes[i] = racing[i].resume(eid, _value(i))
            except tether.TetherError as exc:
                outcomes[i] = exc

        threads = [threading.Thread(target=race, args=(i,)) for i in range(RACERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
            assert not thread.is_alive(), f"trial {trial}: a resumer hung"
        assert starter.checkpointer is not None
        _check_trial(trial, eid, outcomes, effects, starter.checkpointer)


@pytest.mark.slow
def test_sixteen_asyncio_tasks_resume_one_paused_run_exactly_one_wins_fifty_times(
        racers: tuple[Effects, list[Runner]]) -> None:
    """16 asyncio tasks in one event loop, each with its own Runner and store object, resume
    the same paused run at once with Runner.aresume, 50 trials: one completes, 15 raise
    AlreadyResumed, the code after interrupt() runs once per trial."""
    effects, runners = racers
    starter, racing = runners[RACERS], runners[:RACERS]

    async def trials() -> None:
        for trial in range(TRIALS):
            paused = await starter.arun({"subject": f"trial {trial}"})
            assert paused.status == "paused", paused
            eid = paused.execution_id
            barrier = asyncio.Barrier(RACERS)

            async def race(i: int, eid: str = eid, barrier: asyncio.Barrier = barrier) -> Any:
                await barrier.wait()
                return await racing[i].aresume(eid, _value(i))

            outcomes = await asyncio.wait_for(
                asyncio.gather(*(race(i) for i in range(RACERS)), return_exceptions=True),
                timeout=120)
            assert starter.checkpointer is not None
            _check_trial(trial, eid, list(outcomes), effects, starter.checkpointer)

    asyncio.run(trials())
