"""Fault injection over the examples: SIGKILL at random boundaries, resume until done.

Each trial starts one example in a new process armed to SIGKILL itself at a random boundary
(before or after the n-th checkpoint write, right after the claim of an interrupt, right after
an idempotent result is cached, inside a non-idempotent task body), then resumes it from new
processes (answering the approval when one is pending, as an operator would), killing some of
those too, until the run is done. After every trial:

* the final state and output equal the uninterrupted run's;
* every idempotent body (``idempotent: true`` nodes, ``@idempotent`` functions) ran exactly
  once, and the refund ledger has exactly one refund when one is due;
* no unit whose checkpoint was committed ran again in a later process;
* no pending_interrupts row is left, and the run has exactly one (completed) run_end.

(The refund example's rejected case is not a scenario: its run ends ``failed``, because the
workflow's output reads ``nodes.refund.output.id`` of a skipped node.)

Trials are reproducible: the crash armed in process ``k`` of trial ``t`` comes from
``Random(f"{SEED}:{t}")`` (``k`` = 0) or ``Random(f"{SEED}:{t}:{k}")``, drawn among the
boundaries the run has left (so parallel branches finishing in another order can change a
later draw, never the first). A failure prints and names the seed, trial, scenario and
crash plan; ``TETHER_FAULT_SEED`` and ``TETHER_FAULT_TRIALS`` replay or widen the search.

Kills are *quiescent* (see :class:`harness.crash.Crash`): a kill that falls due while an
idempotent body is between its side effect and its cached result is deferred to the next
boundary, since no runtime can make an external side effect and its cache row atomic. That
window (a body killed before its result was cached runs again) is proven in test_crash.

Processes are forked from a pre-imported zygote (``harness.zygote``): each is a new process
with its own store connection, killed with a real SIGKILL; the zygote only saves the
interpreter start-up, which would otherwise dominate hundreds of trials.
"""

from __future__ import annotations

import json
import os
import random
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from harness import EXAMPLES, checks, launch, tasks
from harness.tasks import read_effects

from tether import open_checkpointer
from tether.compiler.plan import Plan

SEED = int(os.environ.get("TETHER_FAULT_SEED", "20240607"))
TRIALS = int(os.environ.get("TETHER_FAULT_TRIALS", "100"))
MAX_KILLS = 4


@dataclass(frozen=True)
class Scenario:
    name: str
    workflow: str
    inputs: dict[str, Any]
    value: dict[str, Any] | None = None


SCENARIOS = [
    Scenario("refund-approved", "refund/refund.yaml", {"amount": 250, "account": "ACC-42"},
             {"approved": True, "note": "ok by Grace"}),
    Scenario("refund-small", "refund/refund.yaml", {"amount": 50, "account": "ACC-7"}),
    Scenario("refund-large", "refund/refund.yaml", {"amount": 900, "account": "ACC-7"},
             {"approved": True}),
    Scenario("review_loop", "review_loop/review_loop.yaml", {"topic": "Durable workflows"}),
    Scenario("enrichment", "enrichment/enrichment.yaml", {"campaign": "q4", "limit": 9}),
    Scenario("fulfilment-small", "fulfilment/fulfilment.yaml", {"order_id": "O-17", "total": 250}),
    Scenario("fulfilment-large", "fulfilment/fulfilment.yaml",
             {"order_id": "O-18", "total": 2500}),
    Scenario("order", "order/order.yaml", {"order_id": "O-1", "address": "1 Main St"}),
]


@dataclass
class Boundaries:
    """The boundaries one process can meet: checkpoint writes, idempotent results cached,
    executions of each non-idempotent task (a crash spec is drawn from these)."""

    writes: int
    idempotent_puts: int
    plain_tasks: list[tuple[str, int]]


@dataclass
class Prepared:
    """A scenario compiled, with its uninterrupted run and its boundaries: those of the
    first process (up to the pause, if the run pauses) and those of the whole run."""

    scenario: Scenario
    plan: Plan
    plan_file: str
    reference: Any
    units: Counter[tuple[str, str]]
    idempotent: set[str]
    first: Boundaries
    whole: Boundaries


def _boundaries(plan: Plan, rows: list[Any], idempotent: set[str]) -> Boundaries:
    units = [u for u in (checks.unit_of(plan, row) for row in rows) if u is not None]
    plain = Counter(task for task, _ in units if task not in idempotent)
    return Boundaries(len(rows), sum(1 for task, _ in units if task in idempotent),
                      sorted(plain.items()))


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Prepared]:
    folder = tmp_path_factory.mktemp("fault-plans")
    previous = os.environ.get("TETHER_EXAMPLE_LEDGER")
    os.environ["TETHER_EXAMPLE_LEDGER"] = str(folder / "reference-ledger.jsonl")
    try:
        task_map = tasks.example_tasks()
        result = {}
        for scenario in SCENARIOS:
            plan, plan_file = launch.compile_to(EXAMPLES / scenario.workflow, folder)
            reference, store = launch.reference_run(plan, task_map, scenario.inputs,
                                                    scenario.value)
            rows = list(store.rows(reference.execution_id))
            pause = next((i for i, row in enumerate(rows) if row.step_type == "hitl_pause"),
                         len(rows) - 1)
            idempotent = tasks.idempotent_tasks_of(plan)
            result[scenario.name] = Prepared(
                scenario, plan, plan_file, reference,
                checks.committed_units(store, plan, reference.execution_id), idempotent,
                _boundaries(plan, rows[:pause + 1], idempotent),
                _boundaries(plan, rows, idempotent))
        return result
    finally:
        if previous is None:
            os.environ.pop("TETHER_EXAMPLE_LEDGER", None)
        else:
            os.environ["TETHER_EXAMPLE_LEDGER"] = previous


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[launch.Zygote]:
    process = launch.Zygote(tmp_path_factory.mktemp("zygote"))
    yield process
    process.close()


def pick_crash(rng: random.Random, where: Boundaries, claim: bool) -> str:
    """A random boundary among ``where`` (see harness.crash for the spec syntax); the claim
    of an interrupt too when ``claim``."""
    roll = rng.random()
    if roll < 0.15 and claim:
        return "after:claim"
    if roll < 0.25 and where.idempotent_puts:
        return f"after:idem#{rng.randint(1, where.idempotent_puts)}"
    if roll < 0.4 and where.plain_tasks:
        task, count = rng.choice(where.plain_tasks)
        return f"task:{task}#{rng.randint(1, count)}"
    return f"{rng.choice(['before', 'after'])}:#{rng.randint(1, where.writes)}"


def first_crash(trial: int, prepared: dict[str, Prepared]) -> str:
    """The crash the first process of ``trial`` is armed with (it always fires)."""
    case = prepared[SCENARIOS[trial % len(SCENARIOS)].name]
    return pick_crash(random.Random(f"{SEED}:{trial}"), case.first, claim=False)


def _trial(trial: int, url: str, folder: Path, zygote: launch.Zygote,
           prepared: dict[str, Prepared]) -> int:
    """One trial; returns how many processes were killed."""
    rng = random.Random(f"{SEED}:{trial}")
    case = prepared[SCENARIOS[trial % len(SCENARIOS)].name]
    first = pick_crash(rng, case.first, claim=False)
    scenario = case.scenario
    eid = str(uuid.uuid4())
    effects, ledger = folder / f"effects-{trial}.jsonl", folder / f"ledger-{trial}.jsonl"
    common = {"url": url, "tasks": "examples", "execution_id": eid, "effects": str(effects),
              "value": scenario.value, "env": {"TETHER_EXAMPLE_LEDGER": str(ledger)},
              "quiescent": True, "idempotent_tasks": sorted(case.idempotent)}
    job = {**common, "action": "run", "plan": case.plan_file, "inputs": scenario.inputs,
           "crash": first}
    history: list[str] = []
    committed_before: dict[int, Counter[tuple[str, str]]] = {}
    store = open_checkpointer(url)
    where = ""
    try:
        for _ in range(MAX_KILLS + 4):
            committed = checks.committed_units(store, case.plan, eid) \
                if job["action"] != "run" else Counter()
            done = zygote.run(job)
            history.append(f"{job['action']}[{job['crash']}] -> "
                           f"{'SIGKILL' if done.killed else (done.result or {}).get('outcome')}")
            where = (f"seed {SEED} trial {trial} ({scenario.name}, run {eid}): "
                     f"{' | '.join(history)}")
            assert done.returncode in (0, -9), f"{where}\n{done.describe()}"
            assert done.killed or job["action"] != "run", f"{where}: the first crash missed"
            committed_before[done.pid] = committed
            result = done.result
            if result is not None and result["outcome"] == "error":
                assert result["error_type"] == "AlreadyResumed", f"{where}: {result}"
            if result is not None and result["outcome"] in ("completed", "error"):
                break
            kills = sum("SIGKILL" in h for h in history)
            rng = random.Random(f"{SEED}:{trial}:{len(history)}")
            armed = kills < MAX_KILLS and rng.random() < 0.6
            remaining = Boundaries(max(1, case.whole.writes - len(store.rows(eid))),
                                   case.whole.idempotent_puts, case.whole.plain_tasks)
            crash = pick_crash(rng, remaining, claim=case.scenario.value is not None)
            job = {**common, "action": "drive", "crash": crash if armed else None}
        else:
            raise AssertionError(f"{where}: the run never finished")
        _check(case, store, eid, effects, ledger, committed_before, result, where)
        return sum("SIGKILL" in h for h in history)
    finally:
        store.close()


def _check(case: Prepared, store: Any, eid: str, effects: Path, ledger: Path,
           committed_before: dict[int, Counter[tuple[str, str]]], result: dict[str, Any],
           where: str) -> None:
    reference = case.reference
    if result["outcome"] == "completed":
        assert result["state"] == reference.state, where
        assert result["output"] == reference.output, where
    last = store.get_last(eid)
    assert last is not None and last.node_id == "run_end", where
    assert last.state_snapshot == reference.state, where
    assert last.node_output == reference.output, where
    assert checks.run_ends(store, eid) == ["completed"], f"{where}\n{checks.describe(store, eid)}"
    assert store.get_pending(eid) is None, where
    assert all(p.execution_id != eid for p in store.list_pending()), where
    run = store.get_run(eid)
    assert run is not None and run.status == "completed" and run.owner is None, where

    lines = read_effects(effects)
    ran = checks.executions(lines)
    assert set(ran) <= set(case.units), (where, set(ran) - set(case.units))
    for unit in case.units:
        assert ran[unit] >= 1, (where, unit)
        if unit[0] in case.idempotent:
            assert ran[unit] == 1, (f"idempotent body ran {ran[unit]} times", unit, where)
    for pid, committed in committed_before.items():
        again = checks.executions(lines, pids={pid})
        repeated = [unit for unit in committed if again[unit]]
        assert not repeated, (f"process {pid} re-ran committed units", repeated, where)
    refunds = [json.loads(line) for line in ledger.read_text().splitlines()] \
        if ledger.exists() else []
    expected = 1 if reference.state["nodes"].get("refund", {}).get("status") == "completed" \
        else 0
    assert [r["kind"] for r in refunds].count("refund") == (
        expected if case.scenario.workflow.startswith("refund") else 0), (where, refunds)


@pytest.mark.slow
def test_random_sigkill_crashes_over_the_examples_converge_to_the_uninterrupted_run(
        shared_url: str, tmp_path: Path, zygote: launch.Zygote,
        prepared: dict[str, Prepared]) -> None:
    """100 seeded trials per backend over refund (two approved, one under the threshold),
    review_loop,
    enrichment, fulfilment (both guards) and order (sub-workflow): random SIGKILLs, resumed
    from new processes until done: same state and output as the uninterrupted run, idempotent
    bodies exactly once, committed units never re-run, no orphan pending row, one run_end."""
    failures, kills = [], Counter[int]()
    for trial in range(TRIALS):
        try:
            kills[_trial(trial, shared_url, tmp_path, zygote, prepared)] += 1
        except AssertionError as exc:
            print(f"FAILED seed={SEED} trial={trial}: {exc}")
            failures.append(f"trial {trial}: {str(exc)[:1500]}")
            if len(failures) >= 3:
                break
    print(f"seed {SEED}: {TRIALS} trials, trials by number of SIGKILLs: {sorted(kills.items())}")
    assert not failures, f"seed {SEED}: " + "\n".join(failures)
    with open_checkpointer(shared_url) as store:  # nothing left behind by any trial
        assert store.list_pending() == []
        assert {run.status for run in store.list_runs(limit=10 * TRIALS)} == {"completed"}
    assert min(kills) >= 1 and sum(k * n for k, n in kills.items()) > TRIALS


def test_the_crash_plans_are_reproducible_and_cover_every_kind_of_boundary(
        prepared: dict[str, Prepared]) -> None:
    """The same seed gives the same crash plans; over 100 trials the first crashes hit
    before and after checkpoint writes, idempotent results and task bodies, in every
    scenario (the resumers' crashes add the claim)."""
    plans = [first_crash(t, prepared) for t in range(100)]
    assert plans == [first_crash(t, prepared) for t in range(100)]
    kinds = {spec.split(":")[0] + (":idem" if ":idem" in spec else "") for spec in plans}
    assert kinds == {"before", "after", "after:idem", "task"}
    assert {s.workflow.split("/")[0] for s in SCENARIOS} == {
        "refund", "review_loop", "enrichment", "fulfilment", "order"}
    assert any(s.value for s in SCENARIOS)  # a pausing scenario: resumers may crash at claims
