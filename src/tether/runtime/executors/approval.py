"""``approval`` nodes: a built-in pause for a human, answered with the node's form."""

from __future__ import annotations

from tether.compiler.plan import ApprovalNode
from tether.runtime.context import UNIT, UnitScope, interrupt
from tether.runtime.invoke import NodeFailure, check_values
from tether.runtime.render import render
from tether.runtime.state import NodeError
from tether.runtime.units import Unit, UnitResult
from tether.runtime.values import to_json


class ApprovalExecutor:
    """Asks (``interrupt()`` with the rendered reason and frozen context); on resume, returns
    the answer, checked against the form."""

    async def run(self, unit: Unit, node: ApprovalNode) -> UnitResult:
        level = unit.level
        approval = node.approval
        names = unit.names()
        budget = level.session.budget
        reason = render(approval.reason, names, "approval.reason", budget)
        context = render(approval.context, names, "approval.context", budget)
        answers = level.answers(unit.path)
        token = UNIT.set(UnitScope(unit.address, level.agent_path, answers))
        try:
            answer = interrupt(str(reason), context)
        finally:
            UNIT.reset(token)
        values = dict(answer)
        if approval.form is not None:
            values, problems = check_values(approval.form, values, "field")
            if problems:
                raise NodeFailure(NodeError("ResumeValueError", "; ".join(problems), node.id))
        output, text = to_json(values, f"the answer of approval '{node.id}'", node_id=node.id)
        return UnitResult(output, text, context)
