"""``switch`` nodes: evaluate ``on`` and choose a case; the scheduler skips the others."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.runtime.render import render
from tether.runtime.units import Unit, UnitResult
from tether.runtime.values import to_json

if TYPE_CHECKING:
    from tether.compiler.plan import SwitchNode


class SwitchExecutor:
    """Outputs ``{"case": <the chosen case, or null for the default>, "value": <on>}``; the
    nodes of the other cases are skipped when their turn comes (``runtime/triggers.py``)."""

    async def run(self, unit: Unit, node: SwitchNode) -> UnitResult:
        value = render(node.switch.on, unit.names(), "switch.on", unit.level.session.budget)
        output, text = to_json({"case": node.switch.chosen(value), "value": value},
                               f"the output of switch '{node.id}'", node_id=node.id)
        return UnitResult(output, text, None)
