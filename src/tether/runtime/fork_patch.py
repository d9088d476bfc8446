"""Whether a fork's state patch can change what the branch does, decided before anything is
written.

A patch is merged into the state the branch starts from; it takes effect only through a node
the branch runs. So a fork with a patch is refused (:class:`~tether.errors.IneffectivePatch`)
when:

- no node is left to run (the origin is the run's last checkpoint and every node finished):
  the branch would end at once with the same node outputs;
- a top-level key is not part of a run's state (``inputs``, ``nodes``, ``counters``);
- ``inputs.NAME`` names no input of the plan, or no node left to run reads it;
- ``nodes.ID`` leaves node ``ID`` finished (a patched output) while no node left to run is
  downstream of it, so nothing reads the patched output.

Which inputs a node reads is found in its templates: ``inputs.NAME``, ``inputs['NAME']``;
any other use of ``inputs`` (``inputs.items()``, ``inputs | tojson``) reads them all, so the
check never refuses a patch a template could read.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from tether.errors import IneffectivePatch
from tether.runtime.state import RunState
from tether.stores.base import Checkpointer
from tether.stores.records import RunRecord

if TYPE_CHECKING:
    from tether.compiler.plan import Plan

STATE_KEYS = ("inputs", "nodes", "counters")

_INPUTS = re.compile(r"\binputs\b(?:\s*\.\s*([A-Za-z_]\w*)|\s*\[\s*['\"]([^'\"]*)['\"]\s*\])?")


def merge_patch(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """Merge ``patch`` into ``target`` as a fork does: objects key by key, other values
    replaced (copied)."""
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), dict):
            merge_patch(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def refuse_ineffective_fork(store: Checkpointer, run: RunRecord, plan: Plan,
                            checkpoint_id: str | None, patch: Mapping[str, Any]) -> None:
    """What ``Runner.afork`` decides about ``patch``, decided without a runner or tasks (for
    the console, which hands forks to a worker): raises :class:`IneffectivePatch`. A patch
    that breaks the state's shape is left to the fork itself to report."""
    execution_id = run.execution_id
    origin = store.get(execution_id, checkpoint_id) if checkpoint_id \
        else store.latest_forkable(execution_id)
    state = RunState.from_snapshot(origin.state_snapshot) if origin is not None \
        else RunState.new(copy.deepcopy(run.inputs or {}))
    merge_patch(state.data, patch)
    if state.problems(plan):
        return
    state.reopen(plan, forget_answers=True)
    check_patch_effect(plan, state, patch, execution_id=execution_id,
                       origin=origin.checkpoint_id if origin is not None else None)


def check_patch_effect(plan: Plan, state: RunState, patch: Mapping[str, Any], *,
                       execution_id: str, origin: str | None) -> None:
    """Raise :class:`IneffectivePatch` unless every part of ``patch`` can change what the
    branch runs; ``state`` is the branch's state after the patch and the reopening of failed
    nodes, ``origin`` the checkpoint forked from."""
    to_run = [node.id for node in plan.nodes if not state.finished(node.id)]
    if not to_run:
        where = f"checkpoint {origin}" if origin else "its start"
        raise IneffectivePatch(
            execution_id, f"every node has finished at {where}, so the branch would run "
            "nothing and the patch would change nothing; fork from an earlier checkpoint "
            "(tether show lists them) or patch a node's status to run it again",
            list(patch))
    for key, value in patch.items():
        _check_key(plan, state, key, value, to_run, execution_id)


def _check_key(plan: Plan, state: RunState, key: str, value: Any, to_run: list[str],
               execution_id: str) -> None:
    if key not in STATE_KEYS:
        raise IneffectivePatch(execution_id, f"'{key}' is not part of a run's state (a patch "
                               "sets " + ", ".join(STATE_KEYS) + ")", [key])
    if key == "inputs" and isinstance(value, Mapping):
        _check_inputs(plan, list(value), to_run, execution_id)
    if key == "nodes" and isinstance(value, Mapping):
        for node_id in value:
            _check_node(plan, state, str(node_id), to_run, execution_id)


def _check_inputs(plan: Plan, names: list[str], to_run: list[str], execution_id: str) -> None:
    declared = [i.name for i in plan.inputs]
    read: set[str] = set()
    for node_id in to_run:
        read |= reads_inputs(plan.by_id[node_id].model_dump(mode="json"), declared)
    for name in names:
        if name not in declared:
            raise IneffectivePatch(execution_id, f"'inputs.{name}' is not an input of the plan"
                                   f" (its inputs: {', '.join(declared) or 'none'})",
                                   [f"inputs.{name}"])
        if name not in read:
            raise IneffectivePatch(execution_id, f"no node left to run ({', '.join(to_run)}) "
                                   f"reads 'inputs.{name}'", [f"inputs.{name}"])


def _check_node(plan: Plan, state: RunState, node_id: str, to_run: list[str],
                execution_id: str) -> None:
    if node_id not in plan.by_id or not state.finished(node_id):
        return  # an unknown node is a ForkError already; one left to run uses its patch
    readers = downstream(plan, node_id) & set(to_run)
    if not readers:
        raise IneffectivePatch(execution_id, f"'nodes.{node_id}' stays finished and no node "
                               "left to run reads it (none is downstream of it)",
                               [f"nodes.{node_id}"])


def downstream(plan: Plan, node_id: str) -> set[str]:
    """The nodes that wait, directly or not, for ``node_id``."""
    found: set[str] = set()
    frontier = [node_id]
    while frontier:
        current = frontier.pop()
        for node in plan.nodes:
            if node.id not in found and current in (*node.needs, *node.waits_for):
                found.add(node.id)
                frontier.append(node.id)
    return found


def reads_inputs(data: Any, declared: list[str]) -> set[str]:
    """The declared inputs the templates in ``data`` (a node's JSON) may read: all of them
    when one uses ``inputs`` otherwise than by a declared name."""
    read: set[str] = set()
    for text in _strings(data):
        for match in _INPUTS.finditer(text):
            name = match.group(1) or match.group(2)
            if name is None or name not in declared:
                return set(declared)
            read.add(name)
    return read


def _strings(data: Any) -> Iterator[str]:
    if isinstance(data, str):
        yield data
    elif isinstance(data, Mapping):
        for value in data.values():
            yield from _strings(value)
    elif isinstance(data, list | tuple):
        for value in data:
            yield from _strings(value)
