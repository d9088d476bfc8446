"""``tether compat`` and ``tether upgrade``: what a new plan does to the live runs of its
workflow, and moving the runs that can follow it.

Runs are grouped by (fingerprint, position) (:class:`tether.compiler.compat.Position`): each
group is judged once, so a backlog of many runs at few positions costs one read per run and
one plan comparison per group. A run moves by one compare-and-set on its row
(:meth:`~tether.stores.base.Checkpointer.move_run_plan`) that succeeds only while no attempt
holds it, so a run is never switched under a worker in the middle of a node: a held run is
reported and moved by a later ``upgrade`` once released (workers load the plan from the run
row at each claim, so they pick the new plan up without a restart).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tether.compiler.compat import (
    Finding,
    Position,
    findings,
    input_problem,
    notes,
)
from tether.errors import PlanError
from tether.runtime.renaming import readdress, rename_state, renames_anywhere
from tether.stores.base import Checkpointer
from tether.stores.records import LIVE_STATUSES, RunCursor, RunRecord

if TYPE_CHECKING:
    from tether.compiler.plan import Plan

_PAGE = 1000


@dataclass(frozen=True)
class Blocked:
    """One finding and the live runs it keeps pinned."""

    finding: Finding
    runs: tuple[str, ...]


@dataclass
class Report:
    """The verdict of a new plan on the live runs of its workflow."""

    workflow: str
    fingerprint: str
    movable: list[str] = field(default_factory=list)
    """Runs that can move (on another plan now)."""
    current: list[str] = field(default_factory=list)
    """Runs already on the new plan."""
    held: list[str] = field(default_factory=list)
    """Movable runs an attempt holds now: ``upgrade`` leaves them for a later pass."""
    pinned: dict[str, list[Finding]] = field(default_factory=dict)
    """Runs that cannot move, with why."""
    notes: list[str] = field(default_factory=list)
    """The changes of the new plan from the plans of the live runs (info lines)."""
    moved: list[str] = field(default_factory=list)
    """Runs ``upgrade`` moved."""

    @property
    def blocked(self) -> list[Blocked]:
        """Each distinct finding with the runs it pins, in first-seen order."""
        by: dict[Finding, list[str]] = {}
        for run_id, found in self.pinned.items():
            for finding in found:
                by.setdefault(finding, []).append(run_id)
        return [Blocked(finding, tuple(runs)) for finding, runs in by.items()]


def live_runs(store: Checkpointer, workflow: str,
              statuses: Sequence[str] = LIVE_STATUSES) -> Iterable[RunRecord]:
    """Every run of ``workflow`` with one of ``statuses``, page by page."""
    for status in statuses:
        before: RunCursor | None = None
        while True:
            page = store.find_runs(status=status, workflow=workflow, before=before,
                                   limit=_PAGE)
            yield from page
            if len(page) < _PAGE:
                break
            before = RunCursor.created(page[-1])


def position_of(store: Checkpointer, run: RunRecord, plan: Plan | None = None) -> Position:
    """Where the run's checkpoints have it (an empty position before its first node), by the
    ids of ``plan``, the run's plan: a run moved to a plan that renamed nodes, and not loaded
    since, still has checkpoints under the old ids."""
    _, checkpoint = store.resume_point(run.execution_id)
    state = checkpoint.state_snapshot if checkpoint is not None else None
    if state and plan is not None and renames_anywhere(plan):
        state = copy.deepcopy(state)
        rename_state(plan, state)
    return Position.of_state(state)


def check(store: Checkpointer, new: Plan, *, statuses: Sequence[str] = LIVE_STATUSES,
          runs: Sequence[str] | None = None) -> Report:
    """The verdict of ``new`` on the live runs of its workflow (or on the runs ``runs``)."""
    report = Report(new.name, new.fingerprint)
    plans: dict[str, Plan] = {}
    verdicts: dict[tuple[str, str], list[Finding]] = {}
    for run in _selected(store, new.name, statuses, runs):
        if run.plan_fingerprint == new.fingerprint:
            report.current.append(run.execution_id)
            continue
        old = plans.get(run.plan_fingerprint)
        if old is None:
            old = plans[run.plan_fingerprint] = _plan(store, run.plan_fingerprint)
            report.notes.extend(line for line in notes(old, new) if line not in report.notes)
        position = position_of(store, run, old)
        key = (run.plan_fingerprint, position.key())
        found = verdicts.get(key)
        if found is None:
            found = verdicts[key] = findings(old, new, position)
        problem = input_problem(new, run.inputs)
        found = [*found, problem] if problem is not None else found
        if found:
            report.pinned[run.execution_id] = found
        elif run.owner is not None:
            report.held.append(run.execution_id)
        else:
            report.movable.append(run.execution_id)
    return report


def upgrade(store: Checkpointer, new: Plan, *, statuses: Sequence[str] = LIVE_STATUSES,
            runs: Sequence[str] | None = None) -> Report:
    """Move every run :func:`check` finds movable to ``new``; each move is atomic and
    refused while an attempt holds the run (then it is reported held)."""
    report = check(store, new, statuses=statuses, runs=runs)
    plan_json = new.to_json()
    renaming = renames_anywhere(new)
    for run_id in list(report.movable):
        run = store.get_run(run_id)
        # a pause in a renamed node answers to its new id (its rows readdressed in the move's
        # transaction, with the `upgraded` event); the run's state follows at its next load
        places = readdress(new, store.list_pending(run_id), store.decisions(run_id)) \
            if renaming else []
        if run is not None and store.move_run_plan(run_id, run.plan_fingerprint,
                                                   new.fingerprint, plan_json, places):
            report.moved.append(run_id)
        else:
            report.held.append(run_id)
    report.movable = []  # each was moved or is held now
    return report


def _selected(store: Checkpointer, workflow: str, statuses: Sequence[str],
              runs: Sequence[str] | None) -> Iterable[RunRecord]:
    if runs is None:
        yield from live_runs(store, workflow, statuses)
        return
    for run_id in runs:
        run = store.get_run(store.resolve_execution_id(run_id))
        if run is not None and run.workflow == workflow and run.status in statuses:
            yield run


def _plan(store: Checkpointer, fingerprint: str) -> Plan:
    text = store.get_plan(fingerprint)
    if text is None:  # a store always holds the plan of its runs; refuse, not guess
        raise PlanError(f"the store has no plan {fingerprint[:12]} (its runs cannot be checked)")
    from tether.compiler.plan import Plan

    return Plan.from_json(text)
