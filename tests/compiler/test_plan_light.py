"""A stored plan read by pydantic-core alone (``tether resume`` in place) reads, checks, writes
and runs as the pydantic models do.

:mod:`tether.compiler.plan_light` validates a plan's JSON with the core schema generated from
:mod:`tether.compiler.plan` and light classes in place of the models. Proved here: the
generated schema is current; every plan compiled from an example or a golden file, and
thousands of mutations of a set of them, read both ways give the same error or objects with
the same classes' names, fields (set), dumps, JSON, fingerprint and indexes; and every plan
that can run without a model provider runs the same both ways (status, output, error, every
checkpoint, every run event), on SQLite.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import tether
from tether.compiler import plan_light, plan_schema
from tether.compiler.plan import Plan, fingerprint_of
from tether.compiler.plan_schema_gen import TARGET, generate
from tether.dsl.document_light import LightModel
from tether.dsl.loader import syntax_of
from tether.errors import PlanError, TetherError, TimerNotDue
from tether.kinds import NodeKind
from tether.runtime import plans
from tether.runtime.registry import REGISTRY, import_tasks

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(p for p in [*(ROOT / "tests").rglob("*"), *(ROOT / "examples").rglob("*")]
               if p.is_file() and syntax_of(p) is not None)
STORED = sorted((ROOT / "tests" / "compiler" / "plans_v1").glob("*.plan.json"))
"""Plans stored by release 0.1 (format 1 with every key of every kind)."""
TASK_MODULES = [*sorted(str(p) for p in (ROOT / "examples").glob("*/tasks.py")),
                str(ROOT / "tests" / "golden" / "golden_tasks.py")]


@functools.cache
def compiled() -> dict[str, Plan]:
    """Every file of tests/ and examples/ that compiles, by its path under the repository
    (tests/compiler/light/ holds what no other has: a schedule, a webhook, a key)."""
    found: dict[str, Plan] = {}
    for path in FILES:
        try:
            found[str(path.relative_to(ROOT))] = tether.compile(path)
        except TetherError:
            continue
    return found


def test_the_generated_schema_is_current() -> None:
    """Regenerate with ``python -m tether.compiler.plan_schema_gen`` when this fails."""
    assert TARGET.read_text(encoding="utf-8") == generate()


def test_the_plans_are_many_and_of_every_kind() -> None:
    """The corpus covers every node kind, sub-plans, agents, schedules and webhooks."""
    plans_ = list(compiled().values())
    assert len(plans_) >= 45
    kinds = {node.kind for plan in plans_ for node in plan.nodes}
    assert kinds == set(NodeKind)
    assert any(plan.schedule for plan in plans_) and any(plan.webhook for plan in plans_)
    assert any(plan.agents_by_id for plan in plans_) and any(plan.concurrency for plan in plans_)


def assert_same(light: Any, model: Any, where: str = "plan") -> None:
    """``light`` stands for ``model``: the same classes' names, fields set and values, all
    the way down."""
    if isinstance(model, BaseModel):
        assert isinstance(light, LightModel), where
        assert type(light).__name__ == type(model).__name__, where
        assert light.model_fields_set == model.model_fields_set, where
        assert list(light.__dict__)[:len(type(model).model_fields)] == list(
            type(model).model_fields), where
        for name in type(model).model_fields:
            assert_same(getattr(light, name), getattr(model, name), f"{where}.{name}")
    elif isinstance(model, dict):
        assert type(light) is dict and list(light) == list(model), where
        for key in model:
            assert_same(light[key], model[key], f"{where}[{key!r}]")
    elif isinstance(model, tuple | list):
        assert type(light) is type(model) and len(light) == len(model), where
        for index, (a, b) in enumerate(zip(light, model, strict=True)):
            assert_same(a, b, f"{where}[{index}]")
    else:
        assert type(light) is type(model) and light == model, where


DUMPS: list[dict[str, Any]] = [
    {}, {"mode": "json"}, {"mode": "json", "by_alias": True}, {"exclude_none": True},
    {"exclude_unset": True, "by_alias": True},
    {"mode": "json", "by_alias": True, "exclude": {"index", "generation", "waits_for"}},
]


def assert_behaves_the_same(light: Any, model: Plan, depth: int = 0) -> None:
    """What the runtime asks of a plan gives the same answers (of its sub-plans too, two
    levels down: a golden file embeds 13 MB of them)."""
    if depth == 0:
        assert_same(light, model)
    assert light.to_json() == model.to_json()
    assert light.content_fingerprint() == model.content_fingerprint() == model.fingerprint
    for options in DUMPS:
        assert light.model_dump(**options) == model.model_dump(**options), options
    assert list(light.by_id) == list(model.by_id)
    assert light.dependents == model.dependents and light.gates == model.gates
    assert {k: a.model_dump_json() for k, a in light.agents_by_id.items()} == {
        k: a.model_dump_json() for k, a in model.agents_by_id.items()}
    for mine, theirs in zip(light.nodes, model.nodes, strict=True):
        for options in DUMPS:
            assert mine.model_dump(**options) == theirs.model_dump(**options), options
        assert mine.model_dump_json() == theirs.model_dump_json()
        if mine.kind in (NodeKind.TASK, NodeKind.WORKFLOW):
            assert mine.fans_out == theirs.fans_out
        if mine.kind in (NodeKind.TASK, NodeKind.AGENT) and mine.retry is not None:
            assert [mine.retry.delay(n) for n in (1, 2, 5)] == [
                theirs.retry.delay(n) for n in (1, 2, 5)]
        if mine.kind is NodeKind.SWITCH:
            for value in ("a", 1, 2.5, True, None, [1]):
                assert mine.switch.chosen(value) == theirs.switch.chosen(value)
        if mine.kind is NodeKind.WORKFLOW and depth < 2:
            assert_behaves_the_same(mine.workflow.plan, theirs.workflow.plan, depth + 1)
    # the indexes, once cached in the object, are not written with it
    assert light.to_json() == model.to_json()


def test_every_compiled_plan_reads_the_same_both_ways() -> None:
    for name, plan in compiled().items():
        text = plan.to_json()
        light = plan_light.read_light(text)
        assert type(light) is plan_light.Plan, name
        model = Plan.from_json(text)
        if len(text) > 1_000_000:  # sub-workflows fanned out to 13 MB: the plan's own answers
            assert_same(light, model)
            assert light.to_json() == text and light.content_fingerprint() == plan.fingerprint
        else:
            assert_behaves_the_same(light, model)


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.name)
def test_plans_stored_by_release_0_1_read_the_same_both_ways(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert_behaves_the_same(plan_light.read_light(text), Plan.from_json(text))


def _outcome(read: Any, text: str) -> Any:
    try:
        return read(text)
    except PlanError as exc:
        return f"PlanError: {exc}"


REPLACEMENTS: list[Any] = [None, 0, -1, 2.5, "x", "", True, [], {}, ["a"], {"k": 1},
                           "task", "fixed", 1e400]


def _paths(data: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _paths(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _paths(value, (*path, index))


def _mutations(data: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Each value replaced by each of :data:`REPLACEMENTS`, each mapping's key removed and an
    unknown key added; each with its fingerprint as stored and as recomputed."""
    for path in _paths(data):
        if not path:
            continue
        parent_path, last = path[:-1], path[-1]
        variants: list[Any] = list(REPLACEMENTS)
        for value in [*variants, "remove", "unknown"]:
            mutated = copy.deepcopy(data)
            parent = mutated
            for step in parent_path:
                parent = parent[step]
            if value == "remove" and isinstance(parent, dict):
                del parent[last]
            elif value == "unknown" and isinstance(parent, dict):
                parent["unknown_key"] = 1
            elif value not in ("remove", "unknown"):
                parent[last] = value
            else:
                continue
            yield mutated


def _refingerprinted(data: dict[str, Any]) -> dict[str, Any] | None:
    try:
        model = Plan.model_validate(data)
        return {**data, "fingerprint": fingerprint_of(model)}
    except Exception:  # not a plan: the stored fingerprint stays
        return None


MUTATED = ("tests/compiler/light/triggered.yaml", "examples/refund/refund.yaml",
           "examples/order/order.yaml", "examples/release/release.yaml",
           "examples/payments/payments.yaml",
           "tests/golden/cases/flow_switch_default.flow")


@pytest.mark.parametrize("name", MUTATED)
def test_mutated_plans_read_the_same_both_ways(name: str) -> None:
    """Every mutation gives the same PlanError both ways, or the same plan."""
    plan = compiled().get(name)
    if plan is None:
        pytest.skip(f"{name} is not in the corpus")
    data = json.loads(plan.to_json())
    checked = 0
    for mutated in _mutations(data):
        again = _refingerprinted(mutated)
        for each in (mutated, again) if again is not None else (mutated,):
            text = json.dumps(each)
            light, model = _outcome(plan_light.read_light, text), _outcome(Plan.from_json, text)
            if isinstance(model, str):
                assert light == model, text
            else:
                assert_behaves_the_same(light, model)
            checked += 1
    assert checked > 500


def test_a_plan_too_deep_or_not_json_is_refused_the_same_way() -> None:
    for text in ("[", "{}", '{"tether_plan": 2, "name": "x", "nodes": []}', "[" * 100_000):
        assert _outcome(plan_light.read_light, text) == _outcome(Plan.from_json, text)


def test_another_pydantic_core_reads_with_the_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """The schema is pinned to the pydantic-core it was made with; with another the plan is
    read by the models."""
    text = compiled()["examples/refund/refund.yaml"].to_json()
    plan_light._validator.cache_clear()
    monkeypatch.setattr(plan_schema, "PYDANTIC_CORE_VERSION", "0.0.0")
    try:
        assert not plan_light.available()
        assert type(plan_light.read_light(text)) is Plan
    finally:
        plan_light._validator.cache_clear()
    monkeypatch.undo()
    assert plan_light.available() and type(plan_light.read_light(text)) is plan_light.Plan


# -- runs ------------------------------------------------------------------------------------


def _example_inputs(plan: Plan) -> dict[str, Any]:
    values = {"string": "ACC-42", "number": 250, "integer": 3, "boolean": True,
              "object": {}, "array": [1, 2]}
    return {i.name: (i.enum[0] if i.enum else values.get(i.type)) for i in plan.inputs
            if i.required}


def _answer(store: tether.Checkpointer, execution_id: str) -> dict[str, Any] | None:
    from tether.cli.operator import answer_example

    pending = store.list_pending(execution_id)
    if not pending:
        return None
    return dict(json.loads(answer_example(store, pending[0])))


def _runnable(plan: Plan) -> bool:
    def agents(p: Plan) -> bool:
        return bool(p.agents_by_id) or any(agents(n.workflow.plan) for n in p.nodes
                                           if n.kind is NodeKind.WORKFLOW)
    return not agents(plan) and plans.task_names(plan) <= set(REGISTRY)


def _strip(value: Any) -> Any:
    """A record without what differs between two runs by nature (ids, times, owners)."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items()
                if not (k.endswith(("_at", "_id", "seconds", "owner", "token", "worker"))
                        or k in ("at", "attempt_owner", "started", "finished", "elapsed"))}
    if isinstance(value, list | tuple):
        return [_strip(v) for v in value]
    if isinstance(value, str):
        return _ID.sub("<id>", value)
    return value


_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _record(store: tether.Checkpointer, execution_id: str, results: list[Any]) -> Any:
    checkpoints = [
        _strip({"node": c.node_id, "index": c.node_index, "step": str(c.step_type),
                "status": str(c.status), "state": c.state_snapshot, "input": c.node_input,
                "output": c.node_output, "counters": c.iteration_counters,
                "reason": c.interrupt_reason, "context": c.interrupt_context,
                "agent_path": c.agent_path})
        for c in store.list(execution_id)]
    events = [_strip({"kind": str(e.kind), "actor": e.actor, "channel": e.channel,
                      "data": e.data}) for e in store.events(execution_id)]
    return {"results": results, "checkpoints": checkpoints, "events": events}


def _run(plan: Plan, light: bool, workdir: Path, monkeypatch: pytest.MonkeyPatch,
         concurrency: int) -> Any:
    """Run ``plan`` (as a light plan when ``light``) on a fresh SQLite file, answering each
    pause, each resume reading the stored plan afresh (light when ``light``, as
    ``tether resume`` in place does), at most ``concurrency`` units at once; the run's
    record."""
    monkeypatch.setenv("TETHER_EXAMPLE_LEDGER", str(workdir / "ledger.jsonl"))
    monkeypatch.setattr(plans, "_PLANS", {})
    store = tether.SQLiteCheckpointer(workdir / "runs.db")
    runs = plan_light.read_light(plan.to_json()) if light else plan
    result = tether.Runner(runs, store, REGISTRY, max_concurrency=concurrency).run(
        _example_inputs(plan), "run-1")
    results = [[result.status, result.output, result.error and result.error.to_json()]]
    for turn in range(6):
        answer = _answer(store, "run-1") if result.status == "paused" else None
        if answer is None and not (result.status == "failed" and turn == 0):
            break  # a failed run is continued once (it fails again, the same way)
        monkeypatch.setattr(plans, "_PLANS", {})
        record = store.get_run("run-1")
        assert record is not None
        stored = plans.stored_plan(store, record, light=light)
        assert (type(stored) is plan_light.Plan) is light
        try:
            result = tether.Runner(None, store, REGISTRY, max_concurrency=concurrency).resume(
                "run-1", tether.Resume(**answer) if answer is not None else None)
        except TimerNotDue:
            break
        results.append([result.status, result.output,
                        result.error and result.error.to_json()])
    return _record(store, "run-1", results)


def _recorded(plan: Plan, light: bool, workdir: Path, monkeypatch: pytest.MonkeyPatch,
              concurrency: int) -> Any:
    workdir.mkdir()
    with monkeypatch.context() as patch:
        record = _run(plan, light, workdir, patch, concurrency)
    # a task may print its working directory (the ledger's path in an error)
    return json.loads(json.dumps(record).replace(str(workdir), "<dir>"))


def _unordered(record: Any) -> Any:
    """What a run did whatever the order its independent nodes ended in: the final status,
    and each checkpoint and event (without the state snapshot, which holds what ended
    before it), as a sorted list."""
    return {"status": record["results"][-1][0],
            "checkpoints": sorted(json.dumps({k: v for k, v in c.items() if k != "state"},
                                             sort_keys=True) for c in record["checkpoints"]),
            "events": sorted(json.dumps(e, sort_keys=True) for e in record["events"])}


def test_every_runnable_plan_runs_the_same_both_ways(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """One unit at a time (the order fixed), the light run equals the model run: results,
    every checkpoint and every event. At the default concurrency, where independent nodes
    may end in either order by either route, the same checkpoints and events, in any
    order."""
    import_tasks(TASK_MODULES)
    ran = 0
    for name, plan in compiled().items():
        if not _runnable(plan):
            continue
        light, model = (_recorded(plan, route, tmp_path / f"{ran}-{route}-serial",
                                  monkeypatch, 1) for route in (True, False))
        assert light == model, name
        light, model = (_recorded(plan, route, tmp_path / f"{ran}-{route}", monkeypatch, 16)
                        for route in (True, False))
        assert _unordered(light) == _unordered(model), name
        ran += 1
    assert ran >= 20
