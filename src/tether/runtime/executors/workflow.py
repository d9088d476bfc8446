"""``workflow`` nodes: run another workflow's plan as a sub-run of the same execution."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.runtime.invoke import NodeFailure, check_values
from tether.runtime.render import render
from tether.runtime.state import NodeError
from tether.runtime.units import Unit, UnitResult
from tether.runtime.values import dumps, to_json
from tether.status import UnitStatus

if TYPE_CHECKING:
    from tether.compiler.plan import WorkflowNode


class WorkflowExecutor:
    """Runs the embedded plan in the unit's ``sub`` state; its checkpoints carry the nested
    ``agent_path`` (``workflow:<parent>/node:<node>[/item:<i>]``)."""

    async def run(self, unit: Unit, node: WorkflowNode) -> UnitResult:
        level = unit.level
        plan = node.workflow.plan
        given = render(node.args, unit.names(), "with", level.session.budget)
        inputs, problems = check_values(plan.inputs, given, "input")
        if problems:
            raise NodeFailure(NodeError(
                "InputError", f"sub-workflow '{plan.name}': " + "; ".join(problems), node.id))
        to_json(inputs, f"the inputs of sub-workflow node '{node.id}'", node_id=node.id)
        sub = level.state.sub(unit.path, inputs)
        level.state.at(unit.path).status = UnitStatus.RUNNING
        level.mark(unit.path)
        segment = f"workflow:{level.plan.name}/node:{node.id}"
        if unit.has_item:
            segment += f"/item:{unit.path[-1]}"
        agent_path = f"{level.agent_path}/{segment}" if level.agent_path else segment
        output = await level.child(plan, sub, (*unit.path, "sub"), agent_path).run()
        return UnitResult(output, dumps(output), inputs)
