"""Where a run's plan comes from: a Plan, a plan file, a workflow file, or the store."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from tether.errors import TaskError, TetherError, UsageError
from tether.files import NotRegularFile, read_regular_file
from tether.kinds import NodeKind
from tether.stores.base import Checkpointer
from tether.stores.records import RunRecord

if TYPE_CHECKING:
    from tether.compiler.plan import Plan

PlanSource: TypeAlias = "Plan | str | os.PathLike[str]"

_PLANS: dict[str, Plan] = {}  # plans by fingerprint: a fingerprint names one plan for good
_CACHE_SIZE = 256


def load_plan(source: PlanSource) -> Plan:
    """A Plan from a Plan, a plan JSON file (validated), or a workflow file (compiled)."""
    if not isinstance(source, str | os.PathLike):
        return source
    from tether.compiler.plan import Plan

    path = Path(source)
    if path.suffix.lower() == ".json":
        try:
            return Plan.from_json(read_regular_file(path))
        except NotRegularFile as exc:
            raise TetherError(f"cannot read plan {path}: it {exc}") from None
        except OSError as exc:
            raise TetherError(f"cannot read plan {path}: {exc.strerror}") from None
    from tether.compiler import compile as compile_workflow

    return compile_workflow(path)


WORKFLOW_SUFFIXES = (".flow", ".yaml", ".yml")


def workflow_files(paths: Iterable[str]) -> list[Path]:
    """The files ``paths`` name: each a workflow or plan file, or a directory whose
    ``*.flow``, ``*.yaml`` and ``*.yml`` files (sorted) are each a workflow."""
    found: list[Path] = []
    for text in paths:
        path = Path(text)
        if path.is_dir():
            found.extend(sorted(p for p in path.iterdir()
                                if p.suffix.lower() in WORKFLOW_SUFFIXES and p.is_file()))
        elif path.is_file():
            found.append(path)
        else:
            raise UsageError(f"{text} is neither a workflow file nor a directory")
    return found


def load_plans(paths: Iterable[str]) -> list[tuple[Path, Plan]]:
    """Every file under ``paths`` (:func:`workflow_files`) with its plan, compiled; a
    :class:`~tether.errors.UsageError` names the first file that cannot be used."""
    loaded: list[tuple[Path, Plan]] = []
    for path in workflow_files(paths):
        try:
            loaded.append((path, load_plan(path)))
        except TetherError as exc:
            raise UsageError(f"{path}: {exc}") from None
    return loaded


def remember(plan: Plan) -> None:
    """Keep ``plan`` for runs that name its fingerprint (bounded)."""
    if len(_PLANS) >= _CACHE_SIZE:
        _PLANS.pop(next(iter(_PLANS)))
    _PLANS[plan.fingerprint] = plan


def stored_plan(store: Checkpointer, run: RunRecord, *, light: bool = False) -> Plan:
    """The plan a run was started with (parsed once per process and fingerprint).

    ``light``: read it into the light classes of :mod:`tether.compiler.plan_light` (no
    pydantic), if this process has not read it yet: ``tether resume`` in place does, before
    anything else reads it, so the resume runs the light plan.
    """
    plan = _PLANS.get(run.plan_fingerprint)
    if plan is None:
        text = store.get_plan(run.plan_fingerprint)
        if text is None:
            raise TetherError(f"run {run.execution_id}: its plan {run.plan_fingerprint[:12]} "
                              "is missing from the store")
        if light:
            from tether.compiler.plan_light import read_light

            plan = read_light(text)
        else:
            from tether.compiler.plan import Plan

            plan = Plan.from_json(text)
        remember(plan)
    return plan


def task_names(plan: Plan) -> set[str]:
    """Every task a plan (and its sub-plans) calls, agents' tools included."""
    names = {n.task for n in plan.nodes if n.kind is NodeKind.TASK}
    names |= {tool.name for agent in plan.agents_by_id.values() for tool in agent.tools
              if tool.kind == "task"}
    for node in plan.nodes:
        if node.kind is NodeKind.WORKFLOW:
            names |= task_names(node.workflow.plan)
    return names


def check_tasks(plan: Plan, tasks: set[str] | frozenset[str]) -> None:
    """Refuse a plan that calls tasks not registered in this process."""
    missing = sorted(task_names(plan) - set(tasks))
    if missing:
        raise TaskError("the plan calls tasks that are not registered: " + ", ".join(missing)
                        + " (import the modules that define them: --tasks MODULE or "
                        "[tool.tether] tasks in pyproject.toml on the command line, tasks= "
                        "for a Runner)", task=missing[0])
