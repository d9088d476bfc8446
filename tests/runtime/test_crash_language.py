"""The language's durable constructs under crash and resume, on every backend.

SQLite and PostgreSQL: each step is a new process (forked from a pre-imported zygote) that is
SIGKILLed at a chosen boundary (``harness.crash``); the next step is another new process.
In-memory (one process by nature): the same steps in this process, the armed boundary raising
``Crash`` (Ctrl-C) instead of SIGKILL. What the tests prove:

* several pending approvals in one run, answered one by one from new processes, one of them
  killed right after the node its answer fed committed: every answer is applied once;
* a ``switch`` killed right after its checkpoint keeps the case it chose (its ``on`` would
  choose another case if evaluated again): the other branches never run;
* ``until`` polling killed mid-way resumes with the next attempt: checkpointed attempts are
  not repeated, and an ``@idempotent`` body whose result was cached is not called again.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conformance_helpers import Crash
from harness import checks, child, crash, launch, tasks
from harness.tasks import read_effects

from tether import open_checkpointer
from tether.stores.base import Checkpointer

Step = Callable[..., launch.Exit]


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[launch.Zygote]:
    """One pre-imported process for the module: every step forks a new child from it."""
    started = launch.Zygote(tmp_path_factory.mktemp("children"))
    yield started
    started.close()


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The compiled plan file of each harness workflow these tests run."""
    folder = tmp_path_factory.mktemp("plans")
    return {name: launch.compile_to(name, folder)[1]
            for name in ("approvals.yaml", "switch.yaml", "poll.yaml")}


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def steps(request: pytest.FixtureRequest, tmp_path: Path, url_of: Callable[[str], str],
          plans: dict[str, str],
          monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Step, Checkpointer, Path]]:
    """``(step, store, effects)``: ``step(**job)`` runs one job as a new process (or, for
    memory, in this process) against one store; ``store`` reads that store back."""
    effects = tmp_path / "effects.jsonl"

    def plan_of(job: dict[str, Any]) -> dict[str, Any]:
        if "workflow" in job:
            job["plan"] = plans[job.pop("workflow")]
        return {"effects": str(effects), **job}

    if request.param == "memory":
        store = open_checkpointer("memory://")

        def raise_crash() -> None:
            raise Crash()

        monkeypatch.setattr(crash, "die", raise_crash)
        monkeypatch.setattr(tasks, "EFFECTS", effects)

        def in_process(**job: Any) -> launch.Exit:
            job = plan_of(job)
            crash.ARMED = crash.Crash.parse(job["crash"]) if job.get("crash") else None
            if crash.ARMED is not None:
                crash.ARMED.arm(store)
            try:
                return launch.Exit(0, child._outcome(child.perform(job, store, tasks.TASKS)))
            except Crash:
                return launch.Exit(-9, None)
            except Exception as exc:  # a TetherError is a result, as in the child
                return launch.Exit(0, child._error(exc))
            finally:
                crash.ARMED = None
                for name in (*crash.WRITES, "claim", "put_idempotent"):
                    store.__dict__.pop(name, None)

        yield in_process, store, effects
        store.close()
        return
    url = url_of(request.param)
    forked = request.getfixturevalue("zygote")
    store = open_checkpointer(url)

    def fresh(**job: Any) -> launch.Exit:
        return forked.run({"url": url, **plan_of(job)})

    yield fresh, store, effects
    store.close()


def _ran(effects: Path, eid: str) -> Counter[str]:
    """How often each body ran, by task and arguments."""
    return Counter(f"{task} {args}" for (task, args), n in
                   checks.executions(read_effects(effects), eid=eid).items() for _ in range(n))


def _ok(step: launch.Exit) -> dict[str, Any]:
    assert step.returncode == 0 and step.result is not None, step.describe()
    return step.result


def test_several_pending_approvals_are_answered_one_by_one_across_crashes(
        steps: tuple[Step, Checkpointer, Path]) -> None:
    """Three approvals pause one run together; each answer, from a new process, resumes its
    own branch; a kill right after one branch committed loses nothing and repeats nothing."""
    step, store, effects = steps
    eid = str(uuid.uuid4())
    first = _ok(step(action="run", workflow="approvals.yaml", execution_id=eid))
    assert first["outcome"] == "paused"
    assert sorted(first["pending_nodes"]) == ["finance", "legal", "security"]

    legal = _ok(step(action="resume", execution_id=eid, node="legal",
                     value={"approved": True, "by": "ann"}))
    assert (legal["outcome"], sorted(legal["pending_nodes"])) == (
        "paused", ["finance", "security"])
    killed = step(action="resume", execution_id=eid, node="finance",
                  value={"approved": False, "by": "bob"}, crash="after:record-finance")
    assert killed.killed, killed.describe()
    assert [p.node_id for p in store.list_pending(eid)] == ["security"]
    last = _ok(step(action="resume", execution_id=eid, node="security",
                    value={"approved": True, "by": "cy"}))
    assert last["outcome"] == "completed", last
    assert last["output"] == {"legal": {"applied": True, "by": "ann"},
                              "finance": {"applied": False, "by": "bob"},
                              "security": {"applied": True, "by": "cy"}}
    ran = _ran(effects, eid)
    assert ran == Counter({
        'h.step {"name":"prepare"}': 1, 'h.step {"name":"done"}': 1,
        'h.apply {"decision":{"approved":true,"by":"ann"}}': 1,
        'h.apply {"decision":{"approved":false,"by":"bob"}}': 1,
        'h.apply {"decision":{"approved":true,"by":"cy"}}': 1}), ran
    assert store.list_pending(eid) == []
    assert checks.run_ends(store, eid) == ["completed"]


def test_a_switch_keeps_its_chosen_case_after_a_kill_right_after_its_checkpoint(
        steps: tuple[Step, Checkpointer, Path]) -> None:
    """``on`` reads ``run.attempt``, so evaluating it again on resume would choose ``again``:
    the stored choice (``first``) is what the resumed run follows."""
    step, store, effects = steps
    eid = str(uuid.uuid4())
    killed = step(action="run", workflow="switch.yaml", execution_id=eid, crash="after:route")
    assert killed.killed, killed.describe()
    done = _ok(step(action="resume", execution_id=eid))
    assert (done["outcome"], done["output"]) == (
        "completed", {"route": "first", "finish": "finish"}), done
    assert _ran(effects, eid) == Counter({'h.step {"name":"classify"}': 1,
                                          'h.step {"name":"first-try"}': 1,
                                          'h.step {"name":"finish"}': 1})
    statuses = {n: done["state"]["nodes"][n]["status"] for n in ("retried", "manual")}
    assert statuses == {"retried": "skipped", "manual": "skipped"}
    assert [r.node_id for r in store.rows(eid)].count("route") == 1


@pytest.mark.parametrize("spec", ["after:wait/attempt:2", "after:idem#3"])
def test_until_polling_resumes_mid_way_without_repeating_checkpointed_attempts(
        steps: tuple[Step, Checkpointer, Path], spec: str) -> None:
    """Killed after the plain poll's 2nd attempt was checkpointed, or after the
    ``@idempotent`` poll's 3rd result was cached (before its checkpoint): the resumed run
    goes on from there; every attempt's body ran exactly once, each node stops at its 4th."""
    step, store, effects = steps
    eid = str(uuid.uuid4())
    killed = step(action="run", workflow="poll.yaml", execution_id=eid, crash=spec)
    assert killed.killed, killed.describe()
    done = _ok(step(action="resume", execution_id=eid))
    assert (done["outcome"], done["output"]) == (
        "completed", {"wait": {"n": 4, "done": True}, "once": {"n": 4, "done": True}}), done
    expected = Counter({'h.step {"name":"start"}': 1})
    for task in ("h.poll", "h.poll_once"):
        expected.update({f'{task} {{"n":{n},"target":4}}': 1 for n in range(1, 5)})
    assert _ran(effects, eid) == expected
    attempts = [r.node_id for r in store.rows(eid) if "/attempt:" in r.node_id]
    assert attempts == [f"{node}/attempt:{n}" for node in ("wait", "wait-once")
                        for n in (1, 2, 3)]
