"""``approval`` nodes: a built-in pause for a human, answered with the node's form.

With ``timeout``, the pause is also a timer: its pending row is due ``timeout`` after the node
first asked, and firing it (:func:`tether.runtime.timers.fire_due`, or ``tether resume`` after
the deadline) answers it with ``on_timeout``: the marker ``{"$timeout": "fail"|"skip"}``, or
the configured answer (recorded with resolver ``timeout``). A ``timeout`` given as a template
over the inputs (``"{{ inputs.approval_timeout }}"``) is rendered when the approval starts and
read as a duration text or a number of seconds; a value that is neither fails the node.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from tether.errors import InterruptSignal
from tether.runtime.context import UNIT, Resume, UnitScope, interrupt
from tether.runtime.invoke import NodeFailure, check_values
from tether.runtime.render import render
from tether.runtime.settings import seconds_setting
from tether.runtime.state import NodeError
from tether.runtime.units import Suspended, Unit, UnitResult, UnitSkipped
from tether.runtime.values import to_json

if TYPE_CHECKING:
    from tether.compiler.plan import ApprovalNode

TIMEOUT_KEY = "$timeout"
"""The key of the answer a timed-out approval gets for ``on_timeout: fail`` or ``skip``."""


def seconds_text(seconds: float) -> str:
    """``259200`` -> ``3d``: a timeout as it is usually written."""
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


class ApprovalExecutor:
    """Asks (``interrupt()`` with the rendered reason and frozen context); on resume, returns
    the answer, checked against the form."""

    async def run(self, unit: Unit, node: ApprovalNode) -> UnitResult:
        level = unit.level
        approval = node.approval
        names = unit.names()
        budget = level.session.budget
        timeout = seconds_setting(approval.timeout, names, "approval.timeout", budget)
        reason = render(approval.reason, names, "approval.reason", budget)
        context = render(approval.context, names, "approval.context", budget)
        answers = level.answers(unit.path)
        token = UNIT.set(UnitScope(unit.address, level.agent_path, answers))
        try:
            answer = self._ask(unit, node, str(reason), context, timeout)
        finally:
            UNIT.reset(token)
        values = dict(answer)
        if TIMEOUT_KEY in values and timeout is not None:
            after = seconds_text(timeout)
            if values[TIMEOUT_KEY] == "skip":
                raise UnitSkipped(f"approval '{node.id}' timed out after {after}")
            raise NodeFailure(NodeError("ApprovalTimeout",
                                        f"approval '{node.id}' timed out after {after}",
                                        node.id))
        if approval.form is not None:
            values, problems = check_values(approval.form, values, "field")
            if problems:
                raise NodeFailure(NodeError("ResumeValueError", "; ".join(problems), node.id))
        output, text = to_json(values, f"the answer of approval '{node.id}'", node_id=node.id)
        return UnitResult(output, text, context)

    @staticmethod
    def _ask(unit: Unit, node: ApprovalNode, reason: str, context: object,
             timeout: float | None) -> Resume:
        """The answer; without one, record the pause (a timer too, with ``timeout``)."""
        try:
            return interrupt(reason, context)
        except InterruptSignal as signal:
            if timeout is None or unit.level.session.journal is None:
                raise
            unit.level.suspend(node, unit.path, unit.address, signal,
                               due_at=time.time() + timeout)
        raise Suspended()
