"""``agent`` nodes: an LLM loop with tools, checkpointed per turn and per tool call."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.runtime.agent.loop import AgentLoop, AgentRun, render_text
from tether.runtime.agent.state import AgentState
from tether.runtime.units import Unit, UnitResult
from tether.runtime.values import to_json
from tether.status import UnitStatus

if TYPE_CHECKING:
    from tether.compiler.plan import AgentNode


class AgentExecutor:
    """Runs the node's agent from wherever its state stands (a new conversation, a resumed
    pause, a crash) to its final answer; see :mod:`tether.runtime.agent.loop`."""

    async def run(self, unit: Unit, node: AgentNode) -> UnitResult:
        level = unit.level
        entry = level.state.at(unit.path)
        names = unit.names()
        data = entry.agent
        if data is None:
            path = f"{level.agent_path}/agent:{node.id}" if level.agent_path else \
                f"agent:{node.id}"
            prompt = render_text(unit, names, node.agent.prompt, "agent.prompt")
            data = AgentState.new(node.id, path, prompt).data
            entry.begin_agent(data)
        state = AgentState(data)
        entry.status = UnitStatus.RUNNING
        state.deliver(state.fresh_answers(entry.answers))
        state.renew_budget()
        run = AgentRun(unit, node, names)
        try:
            answer = await AgentLoop(run, state).run_to_end()
        finally:
            await run.close()
        output, text = to_json(answer, f"the answer of agent '{node.id}'", node_id=node.id)
        return UnitResult(output, text)
