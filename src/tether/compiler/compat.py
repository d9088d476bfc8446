"""Whether a live run can move to a new plan: the static half of ``tether compat``.

A run's *position* is what its checkpoints committed to: the nodes it started (and whether
they finished), the approvals it is paused at, the loops it is inside, the for_each nodes with
elements done, and the same inside each started sub-workflow. Two runs on one plan at one
position get the same verdict, so :mod:`tether.runtime.compat` groups runs by (fingerprint,
position) and asks :func:`findings` once per group.

A finding is a change of the new plan that the position cannot follow (codes C110-C117);
:func:`notes` lists the changes every position can follow (info lines).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tether.compiler.plan import (
    Plan,
    PlanNode,
    canonical_json,
)
from tether.compiler.plan_rules import renames as renames
from tether.kinds import NodeKind
from tether.status import FINISHED, UnitStatus

_NOT_BEHAVIOUR = frozenset({"index", "generation", "waits_for", "title", "renamed_from", "needs"})
"""Node fields whose change a started node follows: its place in the order, its title, the
ids it had, and its upstream nodes (they already ran or the scheduler waits for them)."""


@dataclass(frozen=True)
class Position:
    """What a run's checkpoints committed to, as far as a plan change matters."""

    started: Mapping[str, str] = field(default_factory=dict)
    """Node id -> its unit status, for every node with an entry in the run state."""
    counters: frozenset[str] = frozenset()
    """The loop-closing nodes whose loop the run is inside."""
    fanned: frozenset[str] = frozenset()
    """Nodes with for_each (or matrix) elements recorded."""
    subs: Mapping[str, Position] = field(default_factory=dict)
    """The position of each started sub-workflow node's sub-run."""

    @classmethod
    def of_state(cls, state: Mapping[str, Any] | None) -> Position:
        """The position of a run state (``{"nodes": ..., "counters": ...}``; None: queued)."""
        if not state:
            return cls()
        nodes: Mapping[str, Any] = state.get("nodes") or {}
        started = {node_id: str((unit or {}).get("status") or UnitStatus.PENDING.value)
                   for node_id, unit in nodes.items()}
        fanned = frozenset(node_id for node_id, unit in nodes.items()
                           if isinstance(unit, dict) and unit.get("items"))
        subs = {node_id: cls.of_state(unit["sub"]) for node_id, unit in nodes.items()
                if isinstance(unit, dict) and isinstance(unit.get("sub"), dict)}
        return cls(started, frozenset(state.get("counters") or {}), fanned, subs)

    def key(self) -> str:
        """A canonical text: equal for positions every plan change treats alike."""
        return canonical_json(self._data())

    def _data(self) -> dict[str, Any]:
        return {"s": dict(self.started), "c": sorted(self.counters), "f": sorted(self.fanned),
                "u": {k: v._data() for k, v in self.subs.items()}}

    def finished(self, node_id: str) -> bool:
        return self.started.get(node_id) in FINISHED

    def paused(self, node_id: str) -> bool:
        return self.started.get(node_id) == UnitStatus.INTERRUPTED.value


@dataclass(frozen=True)
class Finding:
    """A change a position cannot follow: a C1xx code, the node of the NEW plan it is
    reported at (None: the workflow's inputs), the message and the help."""

    code: str
    node_id: str | None
    message: str
    help: str | None = None
    input_name: str | None = None
    """The input of the new plan the finding is about (C114)."""


def _definition(node: PlanNode, renamed: Mapping[str, str] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = node.model_dump(mode="json", by_alias=True,
                                           exclude=set(_NOT_BEHAVIOUR))
    if node.kind is NodeKind.WORKFLOW:
        data["workflow"] = {"path": node.workflow.path, "plan": node.workflow.plan.fingerprint}
    if renamed:  # the old node as the new plan spells it: the ids it names renamed
        data = _renaming(data, renamed)
        agent = data.get("agent")
        if isinstance(agent, dict) and agent.get("id") in renamed:  # an inline agent's id
            agent["id"] = renamed[agent["id"]]
        if isinstance(data.get("loops"), list):  # the loops it is a member of, by closer
            data["loops"] = [renamed.get(closer, closer) for closer in data["loops"]]
        loop = data.get("loop")
        if isinstance(loop, dict):
            loop["to"] = renamed.get(loop["to"], loop["to"])
            loop["body"] = [renamed.get(member, member) for member in loop["body"]]
    return data


def _renaming(value: Any, renamed: Mapping[str, str]) -> Any:
    """``value`` with every template reference ``nodes.<old>`` naming the new id."""
    if isinstance(value, str):
        if "nodes." not in value:
            return value
        return re.sub(r"\bnodes\.([A-Za-z_][\w-]*)",
                      lambda m: f"nodes.{renamed.get(m.group(1), m.group(1))}", value)
    if isinstance(value, dict):
        return {key: _renaming(item, renamed) for key, item in value.items()}
    if isinstance(value, list):
        return [_renaming(item, renamed) for item in value]
    return value


def changed_fields(old: PlanNode, new: PlanNode,
                   renamed: Mapping[str, str] | None = None) -> list[str]:
    """The keys of the node's definition that differ (``kind`` first when it does), the old
    node's references to renamed ids (``renamed``, old -> new) read as the new ids."""
    before, after = _definition(old, renamed), _definition(new)
    keys = [key for key in sorted(set(before) | set(after)) if before.get(key) != after.get(key)]
    return sorted(keys, key=lambda key: key != "kind")


def renamed_to(new: Plan, old_id: str) -> str | None:
    """The node of ``new`` that says ``renamed_from: old_id``, if any."""
    return next((node.id for node in new.nodes if old_id in node.renamed_from), None)


def findings(old: Plan, new: Plan, position: Position) -> list[Finding]:
    """Every change of ``new`` that a run of ``old`` at ``position`` cannot follow."""
    found: list[Finding] = []
    renamed = renames(new)
    for node_id in position.counters:
        found.extend(_loop(old, new, node_id, renamed))
    changed_loops = {finding.node_id for finding in found}
    for node_id in position.started:
        if renamed.get(node_id, node_id) not in changed_loops:  # a changed loop: once, C116
            found.extend(_started(old, new, position, node_id, renamed))
    return found


def _started(old: Plan, new: Plan, position: Position, node_id: str,
             renamed: Mapping[str, str]) -> list[Finding]:
    before = old.by_id.get(node_id)
    if before is None:  # a state entry the plan does not know: leave it to the runtime
        return []
    after = new.by_id.get(node_id)
    if after is None:
        target = renamed_to(new, node_id)
        if target is not None:
            return _renamed(before, new.by_id[target], renamed)
        return [Finding("C111", None, f"node `{node_id}`, which the runs started, is removed "
                        "or renamed without `renamed_from:`",
                        f"if it was renamed, add `renamed_from: {node_id}` to the new node")]
    fields = changed_fields(before, after, renamed)
    if not fields:
        return []
    what = ", ".join(f"`{key}`" for key in fields)
    if before.kind is NodeKind.APPROVAL and position.paused(node_id):
        return [Finding("C112", node_id, f"runs are paused at approval `{node_id}`, whose "
                        f"{what} changed: the pending answer was asked with the old form",
                        "answer these runs first, or keep the approval as it was")]
    if after.kind.value == "agent" and before.kind == after.kind and \
            not position.finished(node_id):
        return [Finding("C113", node_id, f"runs are inside agent `{node_id}`'s loop, and its "
                        f"{what} changed", "let these runs finish the agent on their plan")]
    if before.kind is NodeKind.WORKFLOW and after.kind is NodeKind.WORKFLOW and \
            fields == ["workflow"] and node_id in position.subs:
        inner = findings(before.workflow.plan, after.workflow.plan, position.subs[node_id])
        if not inner:
            return []
        return [Finding("C117", node_id, f"sub-workflow `{node_id}` ({after.workflow.path}) "
                        f"changed where its sub-runs already are: {inner[0].message}",
                        inner[0].help)]
    if node_id in position.fanned and position.started[node_id] != UnitStatus.COMPLETED and \
            ({"for_each", "matrix"} & set(fields)):
        return [Finding("C116", node_id, f"runs have elements of `{node_id}` done, and its "
                        f"{what} changed: the elements done would mean others",
                        "let these runs finish the node on their plan")]
    if position.finished(node_id) and _only_output_schema(before, after):
        readers = [node.id for node in new.nodes if node.id not in position.started
                   and f"nodes.{node_id}." in canonical_json(_definition(node))]
        if not readers:
            return []  # its output is read by no node still to run: nothing to mismatch
        return [Finding("C115", node_id, f"the output schema of `{node_id}` changed, and "
                        f"`{readers[0]}`, still to run, reads its output (the runs hold the "
                        "old shape)", "let these runs finish on their plan")]
    return [Finding("C110", node_id, f"node `{node_id}`, which the runs started, changed: "
                    f"{what}", "change a node no run has started, or add a new node")]


def _renamed(before: PlanNode, after: PlanNode, renamed: Mapping[str, str]) -> list[Finding]:
    """A started node renamed with ``renamed_from``: its checkpoint, pending interrupts,
    loop counters, ``for_each`` progress and agent state follow it
    (:func:`tether.runtime.renaming.rename_state`, wherever the run is in it), provided it is
    otherwise defined alike."""
    fields = [key for key in changed_fields(before, after, renamed) if key != "id"]
    if fields:
        what = ", ".join(f"`{key}`" for key in fields)
        return [Finding("C110", after.id, f"node `{after.id}` (renamed from `{before.id}`, "
                        f"which the runs started) changed: {what}",
                        "rename the node, or change it, not both in one deploy")]
    return []


def _only_output_schema(before: PlanNode, after: PlanNode) -> bool:
    """Whether the only difference of two agent nodes is their declared output schema."""
    if not (before.kind is NodeKind.AGENT and after.kind is NodeKind.AGENT):
        return False
    return before.agent.output != after.agent.output and \
        before.agent.model_copy(update={"output": None}) == \
        after.agent.model_copy(update={"output": None}) and \
        changed_fields(before, after) == ["agent"]


def _loop(old: Plan, new: Plan, closer: str, renamed: Mapping[str, str]) -> list[Finding]:
    before, after = old.by_id.get(closer), new.by_id.get(renamed.get(closer, closer))
    if before is None or before.loop is None:
        return []
    if after is None or after.loop is None:
        return [Finding("C116", after.id if after else None, f"runs are inside the loop "
                        f"closed by `{closer}`, which the new plan no longer has",
                        "let these runs leave the loop on their plan")]
    if _definition(before, renamed).get("loop") != _definition(after).get("loop"):
        return [Finding("C116", after.id, f"runs are inside the loop closed by `{closer}`, "
                        "whose bounds or body changed: their counter would mean another pass",
                        "keep the loop as it was until these runs leave it")]
    return []


def notes(old: Plan, new: Plan) -> list[str]:
    """The changes from ``old`` to ``new``, each as one line (what compat prints as info)."""
    lines: list[str] = []
    renamed = renames(new)
    for node in new.nodes:
        before = old.by_id.get(node.id)
        if before is None:
            origin = next((o for o in node.renamed_from if o in old.by_id), None)
            lines.append(f"node `{node.id}` renamed from `{origin}`" if origin
                         else f"node `{node.id}` added")
        elif fields := changed_fields(before, node, renamed):
            lines.append(f"node `{node.id}` changed: " + ", ".join(f"`{k}`" for k in fields))
        elif before.title != node.title:
            lines.append(f"node `{node.id}`: title changed")
    lines.extend(f"node `{node.id}` removed" for node in old.nodes
                 if node.id not in new.by_id and renamed_to(new, node.id) is None)
    old_inputs = {spec.name: spec for spec in old.inputs}
    for spec in new.inputs:
        if spec.name not in old_inputs:
            required = spec.required and spec.default is None
            lines.append(f"input `{spec.name}` added ({'required' if required else 'optional'})")
    return lines


def input_problem(new: Plan, inputs: Any) -> Finding | None:
    """C114 when the run's inputs lack a required input of ``new`` without a default."""
    given = inputs if isinstance(inputs, dict) else {}
    missing = [spec.name for spec in new.inputs
               if spec.required and spec.default is None and spec.name not in given]
    if not missing:
        return None
    names = ", ".join(f"`{name}`" for name in missing)
    return Finding("C114", None, f"the new plan requires input {names}, which the runs were "
                   "not started with (no default)", "give the input a default, or make it "
                   "optional, to let these runs move", input_name=missing[0])
