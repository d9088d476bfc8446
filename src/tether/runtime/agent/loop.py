"""The agent loop: turns, model calls, tool calls, pauses, handoffs and workers, durably.

One :class:`AgentLoop` runs one agent's conversation (a worker asked by a supervisor runs in
a loop of its own, nested in the supervisor's call). Everything runs in the event loop task
of the agent's unit: model calls are awaited (the SDKs' async clients), sync tool bodies run
in worker threads (``Bodies``), one call at a time, in the order the model gave them.

Checkpoints (through the run's journal, fenced on the attempt's lease):

- before every model request: ``<agent>/turn:N`` (``llm_call``, ``node_index`` N, the agent's
  ``agent_path``); the run state then also holds ``messages`` and ``turn`` at its top, so the
  row's snapshot is the ``{messages, turn}`` the request is made from;
- before every tool invocation: ``<agent>/turn:N/tool:<name as written>`` (``tool_call``,
  ``node_input`` the exact arguments, ``agent_path`` ``<agent path>/tool:<name>``);
- a pause (a tool's ``interrupt()``, or the approval of a listed tool): an interrupted
  ``hitl_pause`` row with that tool's address, and a pending row, in one transaction;
- a handoff: a ``handoff`` row, after which the target's rows are written under its path.

The loop's place (:class:`~tether.runtime.agent.state.AgentState`) is part of every row's
snapshot, so whichever process resumes continues exactly there: a crash mid-inference calls
the model again with the same history, a crash inside a tool calls that tool again (not the
model), a resumed pause runs the paused call with the answer, and answers its siblings of
the turn with "did not run".
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from tether.agents.conversation import AssistantMessage, ToolCall, ToolResult, UserMessage
from tether.agents.errors import AgentError, ModelError, ToolArgumentsError
from tether.agents.providers import DEFAULT_TIMEOUT, Model, open_model
from tether.agents.tools import ToolKind, ToolSpec
from tether.compiler.plan import AgentNode, Plan, PlanAgent
from tether.errors import InterruptSignal, NotJSONError
from tether.observability.observer import agent_tool, agent_turn
from tether.runtime.agent.answers import APPROVAL_REASON
from tether.runtime.agent.output import check_answer
from tether.runtime.agent.state import AgentState
from tether.runtime.agent.tools import (
    HANDED_OVER,
    INTERRUPTED,
    SIBLING_PAUSED,
    agent_tools,
    call_tool,
    did_not_run,
    error_result,
    result_text,
    without_tool_blocks,
)
from tether.runtime.context import UnitScope
from tether.runtime.invoke import NodeFailure
from tether.runtime.render import render
from tether.runtime.state import NodeError, RunState
from tether.runtime.units import Suspended, Unit
from tether.runtime.values import dumps, to_json
from tether.status import CheckpointStatus, StepType

DEFAULT_ATTEMPTS = 3
"""Model calls per turn when the node gives no ``retry:`` (timeouts, 429, 5xx are retried)."""
DEFAULT_BACKOFF = 1.0
MAX_WAIT = 600.0
REASK = ("Your answer is not valid: {problem}. Answer again with only a JSON value that "
         "matches the required schema.")


def render_text(unit: Unit, names: dict[str, Any], template: str | None,
                field_name: str) -> str:
    """A prompt or instructions rendered as text (a value that is not a string as JSON)."""
    if template is None:
        return ""
    value = render(template, names, field_name, unit.level.session.budget)
    return value if isinstance(value, str) else dumps(value)


@dataclass
class AgentRun:
    """What every loop of one agent unit shares: the unit, its node, the models opened."""

    unit: Unit
    node: AgentNode
    names: dict[str, Any]
    models: dict[str, Model] = field(default_factory=dict)
    unit_written: bool = False

    @property
    def plan(self) -> Plan:
        return self.unit.level.plan

    def agent(self, agent_id: str) -> PlanAgent:
        return self.plan.agents_by_id[agent_id]

    def model_for(self, agent: PlanAgent) -> Model:
        key = agent.model.model_dump_json()
        if key not in self.models:
            timeout = self.node.timeout or DEFAULT_TIMEOUT
            try:
                self.models[key] = open_model(agent.model.model_dump(exclude_none=True),
                                              timeout=timeout)
            except AgentError as exc:
                raise NodeFailure(NodeError(type(exc).__name__, str(exc), self.node.id)) \
                    from None
        return self.models[key]

    async def close(self) -> None:
        for model in self.models.values():
            await model.aclose()

    def render(self, template: str | None, field_name: str) -> str:
        return render_text(self.unit, self.names, template, field_name)

    # -- checkpoints -------------------------------------------------------------------------
    def row(self, state: AgentState, address: str, step: StepType, agent_path: str, *,
            status: CheckpointStatus = CheckpointStatus.COMPLETED, node_input: Any = None,
            output: Any = None, view: bool = False) -> None:
        """Write one checkpoint of the loop (``view``: a turn row, whose snapshot shows the
        messages and turn the model is called with)."""
        level = self.unit.level
        journal = level.session.journal
        if journal is None:
            return
        self._mark(state)
        if view:
            RunState(journal.state).show_turn(state.messages, state.turn)
            journal.mark(("messages",))
            journal.mark(("turn",))
        journal.put(node_id=address, node_index=state.turn, step_type=step, status=status,
                    agent_path=agent_path, counters=level.state.counters,
                    node_input=node_input,
                    node_output_json=None if output is None else dumps(output))

    def _mark(self, state: AgentState) -> None:
        """Mark what changed for the next row: the whole unit on this process's first row,
        then only the unit's own keys and the agent state's changed paths (a tool call's
        row is its call's entry and a few scalars, never the conversation again)."""
        level = self.unit.level
        changed = state.changes.take()
        if not self.unit_written:
            self.unit_written = True
            level.mark(self.unit.path)
            return
        for key in level.state.at(self.unit.path).stored_keys():
            if key != "agent":
                level.mark((*self.unit.path, key))
        for path in changed:
            level.mark((*self.unit.path, *path))

    def record_usage(self, state: AgentState, input_tokens: int, output_tokens: int) -> None:
        """Count a model call's tokens in the run state's ``usage``: the run's totals, and
        one entry per call (node, agent, turn), so every later checkpoint shows them."""
        level = self.unit.level
        journal = level.session.journal
        root = RunState(journal.state) if journal is not None else level.state
        root.add_usage({"node": self.node.id, "agent": state.agent, "turn": state.turn,
                        "input_tokens": input_tokens, "output_tokens": output_tokens})
        if journal is not None:
            journal.mark(("usage",))

    def suspend(self, state: AgentState, signal: InterruptSignal, address: str,
                agent_path: str) -> None:
        """Record the pause of a call (its row and pending row, one transaction); raises
        :class:`Suspended` (or the signal itself when the run has no store)."""
        level = self.unit.level
        level.suspend(self.node, self.unit.path, address, signal, agent_path=agent_path,
                      node_index=state.turn)
        raise Suspended()


@dataclass(frozen=True)
class _Handoff:
    target: str
    call: ToolCall
    address: str
    agent_path: str


class AgentLoop:
    """One agent's conversation, from wherever its state stands to its final answer."""

    def __init__(self, run: AgentRun, state: AgentState) -> None:
        self.run = run
        self.state = state

    @property
    def agent(self) -> PlanAgent:
        return self.run.agent(self.state.agent)

    def _specs(self, agent: PlanAgent) -> dict[str, ToolSpec]:
        session = self.run.unit.level.session
        try:
            return agent_tools(agent, session.tasks, self.run.plan.agents_by_id)
        except AgentError as exc:
            raise NodeFailure(NodeError(type(exc).__name__, str(exc), self.run.node.id)) \
                from None

    async def run_to_end(self) -> Any:
        """The final answer (text, or the value validated against ``output``)."""
        while True:
            agent = self.agent
            phase = self.state.phase
            if phase == "model":
                await self._model_turn(agent)
            elif phase == "tools":
                if not await self._tools(agent):
                    self.state.next_turn()
            else:
                done, value = self._final(agent)
                if done:
                    return value
                self.state.next_turn()

    # -- the model ---------------------------------------------------------------------------
    async def _model_turn(self, agent: PlanAgent) -> None:
        state = self.state
        history = state.conversation.answer_unanswered(lambda c: did_not_run(c, INTERRUPTED))
        state.set_conversation(history)
        if state.turn - state.start >= agent.max_turns:
            self._fail_after_loop(agent)
        specs = self._specs(agent)
        model = self.run.model_for(agent)
        system = self.run.render(agent.instructions, "agent.instructions")
        retry = self.run.node.retry
        attempts = retry.max_attempts if retry else DEFAULT_ATTEMPTS
        backoff = retry.backoff if retry else DEFAULT_BACKOFF
        address = f"{state.agent}/turn:{state.turn}"
        sent = history if specs else without_tool_blocks(history)
        for attempt in range(1, attempts + 1):
            self.run.row(state, address, StepType.LLM_CALL, state.path, view=True,
                         node_input={"model": f"{agent.model.provider}:{agent.model.name}",
                                     "attempt": attempt})
            try:
                with agent_turn(self.run.unit.level.session.observer, agent.model.provider,
                                agent.model.name, state.agent, state.turn) as traced:
                    reply = await model.complete(system=system, messages=sent.messages,
                                                 tools=list(specs.values()))
                    traced.usage(reply.usage.input_tokens, reply.usage.output_tokens,
                                 reply.stop_reason)
                break
            except ModelError as exc:
                if not exc.retryable or attempt == attempts:
                    raise NodeFailure(NodeError("ModelError", str(exc), self.run.node.id,
                                                attempt if attempt > 1 else None)) from None
                wait = max(backoff * 2 ** (attempt - 1), exc.retry_after or 0.0)
                await asyncio.sleep(min(wait, MAX_WAIT))
        self.run.record_usage(state, reply.usage.input_tokens, reply.usage.output_tokens)
        self._check_tool_calls(agent, len(reply.tool_calls))
        state.set_conversation(history.append(reply.message))
        if reply.tool_calls:
            state.count_tool_calls(agent.id, len(reply.tool_calls))
        state.set_phase("tools" if reply.tool_calls else "final")

    def _check_tool_calls(self, agent: PlanAgent, asked: int) -> None:
        """Refuse a reply asking for more tool calls than ``max_tool_calls`` allows, before
        any of them runs (the reply is not kept: a resume asks the model again, with the
        calls counted afresh)."""
        limits = agent.max_tool_calls
        state = self.state
        made = state.tool_calls(agent.id)
        if asked > limits.per_turn:
            message = (f"agent '{agent.id}' asked for {asked} tool calls in one reply (turn "
                       f"{state.turn}); the limit is {limits.per_turn} "
                       "(max_tool_calls.per_turn)")
        elif limits.per_run is not None and made + asked > limits.per_run:
            message = (f"agent '{agent.id}' asked for {asked} more tool calls at turn "
                       f"{state.turn}, after {made}: {made + asked} in this run; the limit "
                       f"is {limits.per_run} (max_tool_calls.per_run)")
        else:
            return
        state.limited()
        raise NodeFailure(NodeError("ToolCallLimit", message, self.run.node.id))

    def _fail_after_loop(self, agent: PlanAgent) -> None:
        """``max_turns`` used up: a boundary row one past the last turn (so a resume asks
        the model again rather than re-running a tool), then the node fails."""
        state = self.state
        problem = state.problem
        state.exhaust()
        self.run.row(state, f"{state.agent}/turn:{state.turn}", StepType.LLM_CALL, state.path,
                     status=CheckpointStatus.FAILED, view=True)
        if problem:
            error = NodeError("OutputValidationError", f"agent '{agent.id}' gave no answer "
                              f"matching its `output` within max_turns ({agent.max_turns}): "
                              f"{problem}", self.run.node.id)
        else:
            error = NodeError("MaxTurnsExceeded", f"agent '{agent.id}' used its "
                              f"{agent.max_turns} turns (max_turns) without a final answer",
                              self.run.node.id)
        raise NodeFailure(error)

    def _final(self, agent: PlanAgent) -> tuple[bool, Any]:
        state = self.state
        history = state.conversation
        last = history.messages[-1]
        text = last.text if isinstance(last, AssistantMessage) else ""
        if agent.output is None:
            return True, text
        value, problem = check_answer(text, agent.output)
        state.set_problem(problem)
        if problem is None:
            return True, value
        state.set_conversation(history.append(UserMessage(content=REASK.format(
            problem=problem))))
        return False, None

    # -- the tools of a turn -------------------------------------------------------------------
    async def _tools(self, agent: PlanAgent) -> bool:
        """Dispatch the turn's calls not answered yet; True when the conversation was handed
        over (the next agent's turn comes next)."""
        state = self.state
        message = state.reply()
        specs = self._specs(agent)
        skip: str | None = None
        handoff: _Handoff | None = None
        for call in message.tool_calls:
            if state.answered(call.id):
                continue
            if skip is not None:
                self._answer(did_not_run(call, skip))
                continue
            state.activate(call.id)
            with agent_tool(self.run.unit.level.session.observer, state.agent, call.name,
                            call.id):
                outcome = await self._dispatch(agent, specs, call)
            if isinstance(outcome, _Handoff):
                self._answer(ToolResult(call_id=call.id, tool_name=call.name,
                                        content=f"Transferred to {outcome.target}."))
                skip = HANDED_OVER
                handoff = outcome
                continue
            self._answer(outcome)
            if state.call(call.id).get("resumed"):
                skip = SIBLING_PAUSED
        state.activate(None)
        if handoff is not None:
            self._hand_over(handoff)
            return True
        return False

    def _answer(self, result: ToolResult) -> None:
        self.state.answer(result)

    def _hand_over(self, handoff: _Handoff) -> None:
        state = self.state
        old = state.agent
        turn = state.turn
        prefix, _, _ = state.path.rpartition(":")
        state.hand_over(handoff.target, f"{prefix}:{handoff.target}")
        self.run.row(state, handoff.address, StepType.HANDOFF, handoff.agent_path,
                     node_input=dict(handoff.call.arguments),
                     output={"from": old, "to": handoff.target, "turn": turn})

    async def _dispatch(self, agent: PlanAgent, specs: dict[str, ToolSpec],
                        call: ToolCall) -> ToolResult | _Handoff:
        state = self.state
        spec = specs.get(call.name)
        if spec is None:
            return error_result(call, f"There is no tool '{call.name}'; the tools are: "
                                + ", ".join(specs))
        if call.invalid_arguments is not None:
            return error_result(call, f"The arguments of '{call.name}' are not a JSON object: "
                                f"{call.invalid_arguments[:200]}")
        name = spec.name_as_written
        address = f"{state.agent}/turn:{state.turn}/tool:{name}"
        tool_path = f"{state.path}/tool:{name}"
        if spec.kind is ToolKind.HANDOFF:
            assert spec.target is not None
            return _Handoff(spec.target, call, address, tool_path)
        arguments: dict[str, Any] = dict(call.arguments)
        entry = state.call(call.id)
        if name in agent.approve_tools:
            decision = entry.get("decision")
            if not isinstance(decision, dict):
                self._ask_approval(call, name, address, tool_path, spec.parameters)
                raise AssertionError("unreachable")  # pragma: no cover
            if decision.get("approved") is False:
                message = decision.get("message") or "The call was not approved."
                return ToolResult(call_id=call.id, tool_name=call.name, content=str(message))
            if isinstance(decision.get("arguments"), dict):
                arguments = dict(decision["arguments"])
        try:
            kwargs = spec.bind(arguments)
        except ToolArgumentsError as exc:
            return error_result(call, exc.text)
        if spec.kind is ToolKind.WORKER:
            return await self._ask_worker(call, spec, address, tool_path, arguments)
        return await self._call_task(call, name, kwargs, arguments, address, tool_path)

    def _ask_approval(self, call: ToolCall, name: str, address: str, tool_path: str,
                      parameters: dict[str, Any]) -> None:
        self.state.set_pause("approval")
        context, _ = to_json({"call_id": call.id, "tool": name, "tool_name": name,
                              "arguments": dict(call.arguments),
                              "parameters": parameters}, "the approval's context")
        signal = InterruptSignal(APPROVAL_REASON, context, node_id=address,
                                 agent_path=tool_path)
        self.run.suspend(self.state, signal, address, tool_path)

    async def _call_task(self, call: ToolCall, name: str, kwargs: dict[str, Any],
                         arguments: dict[str, Any], address: str,
                         tool_path: str) -> ToolResult:
        state = self.state
        session = self.run.unit.level.session
        self.run.row(state, address, StepType.TOOL_CALL, tool_path, node_input=arguments)
        scope = UnitScope(address, tool_path, list(state.call(call.id).get("answers") or ()))
        try:
            value = await call_tool(session.tasks[name], kwargs, scope, session.bodies)
        except InterruptSignal as signal:
            state.set_pause("tool")
            self.run.suspend(state, signal, address, tool_path)
            raise AssertionError("unreachable") from None  # pragma: no cover
        except (KeyboardInterrupt, asyncio.CancelledError):
            raise
        except Exception as exc:
            return error_result(call, f"The tool '{name}' failed: {type(exc).__name__}: {exc}")
        try:
            text = result_text(value, f"the result of tool '{name}'")
        except NotJSONError as exc:
            return error_result(call, f"The tool '{name}' returned a value with no JSON "
                                f"form: {exc}")
        return ToolResult(call_id=call.id, tool_name=call.name, content=text)

    async def _ask_worker(self, call: ToolCall, spec: ToolSpec, address: str, tool_path: str,
                          arguments: dict[str, Any]) -> ToolResult:
        state = self.state
        target = spec.target
        assert target is not None
        worker = state.worker(call.id)
        if worker is None:
            self.run.row(state, address, StepType.TOOL_CALL, tool_path, node_input=arguments)
            worker = state.start_worker(call.id, AgentState.new(
                target, f"{state.path}/worker:{target}", str(arguments.get("request", ""))))
        try:
            value = await AgentLoop(self.run, worker).run_to_end()
        except NodeFailure as failure:
            return error_result(call, f"The agent '{target}' failed: {failure.error.message}")
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return ToolResult(call_id=call.id, tool_name=call.name, content=text)
