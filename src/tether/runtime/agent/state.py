"""The state of an agent loop: the typed owner of the JSON an agent unit holds.

Stored in the agent node's unit entry under ``agent`` (a worker's state is nested in the call
of its supervisor that asked it)::

    {"agent": "<agent id holding the conversation>", "path": "<its agent_path>",
     "messages": [...], "turn": N, "start": S, "phase": "model" | "tools" | "final",
     "active": "<call id being dispatched>", "pause": "approval" | "tool",
     "calls": {"<call id>": {"decision": {...}, "answers": [...], "resumed": true,
                             "result": <its ToolResult>,
                             "worker": <state of the worker asked>}},
     "tool_calls": {"<agent id>": <tool calls asked of it so far>},
     "consumed": <answers of the unit delivered so far>, "exhausted": <turn>}

``turn`` is the model call in progress (``<agent>/turn:N``); ``phase`` says what comes next:
the call itself, the dispatch of its tool calls, or the check of its final answer. ``start``
is the turn the current budget of ``max_turns`` counts from (a resumed failed agent gets a
new budget from the turn it stopped at, ``exhausted``).

Storage stays linear in the calls made: during a turn's dispatch ``messages`` ends with the
model's reply and each answered call keeps its result in its own ``calls`` entry; the
conversation is those messages plus the results, in the reply's order, and the results are
folded into ``messages`` only when the next turn begins. Every change is recorded in a
:class:`Changes` shared by a loop and the workers it asks, so a checkpoint stores just the
paths that changed (a tool call's row: its entry, a few scalars), never the conversation
again. Keys are set to ``None`` rather than removed, because a delta can only set a path.
"""

from __future__ import annotations

from typing import Any, Literal

from tether.agents.conversation import AssistantMessage, Conversation, ToolResult, UserMessage
from tether.paths import StatePath

Phase = Literal["model", "tools", "final"]
PauseKind = Literal["approval", "tool"]


class Changes:
    """The paths of agent state changed since the last checkpoint (relative to the unit's
    entry), without a path whose ancestor is already listed."""

    __slots__ = ("paths",)

    def __init__(self) -> None:
        self.paths: dict[StatePath, None] = {}

    def add(self, path: StatePath) -> None:
        if any(path[:i] in self.paths for i in range(1, len(path))):
            return
        n = len(path)
        for listed in [p for p in self.paths if len(p) > n and p[:n] == path]:
            del self.paths[listed]
        self.paths[path] = None

    def take(self) -> list[StatePath]:
        """The changed paths, forgotten here (they go into the next checkpoint)."""
        paths, self.paths = list(self.paths), {}
        return paths


class AgentState:
    """A view over one agent loop's stored mapping (see the module docstring); ``where`` is
    its place in the unit's entry."""

    __slots__ = ("changes", "data", "where")

    def __init__(self, data: dict[str, Any], where: StatePath = ("agent",),
                 changes: Changes | None = None) -> None:
        self.data = data
        self.where = where
        self.changes = changes if changes is not None else Changes()

    @classmethod
    def new(cls, agent: str, path: str, prompt: str | None) -> AgentState:
        messages = [UserMessage(content=prompt).model_dump(mode="json")] if prompt else []
        return cls({"agent": agent, "path": path, "messages": messages, "turn": 0, "start": 0,
                    "phase": "model", "calls": {}})

    def _set(self, **values: Any) -> None:
        for key, value in values.items():
            self.data[key] = value
            self.changes.add((*self.where, key))

    # -- where the loop is -----------------------------------------------------------------
    @property
    def agent(self) -> str:
        return str(self.data["agent"])

    @property
    def path(self) -> str:
        return str(self.data["path"])

    @property
    def turn(self) -> int:
        return int(self.data.get("turn", 0))

    @property
    def messages(self) -> list[Any]:
        """The stored messages (the state's own list: what a turn row's snapshot shows)."""
        messages: list[Any] = self.data["messages"]
        return messages

    @property
    def start(self) -> int:
        return int(self.data.get("start", 0))

    @property
    def phase(self) -> Phase:
        phase = self.data.get("phase", "model")
        return phase if phase in ("model", "tools", "final") else "model"

    def next_turn(self) -> None:
        """The model is called again: the next turn begins, its calls forgotten (their
        results now part of the messages)."""
        self.set_conversation(self.conversation)
        self._set(turn=self.turn + 1, phase="model", calls={}, active=None)

    def set_phase(self, phase: Phase) -> None:
        self._set(phase=phase)

    def hand_over(self, agent: str, path: str) -> None:
        """Another agent holds the conversation from now on, with its own turns."""
        self.set_conversation(self.conversation)
        self._set(agent=agent, path=path, turn=0, start=0, phase="model", calls={},
                  active=None)

    def renew_budget(self) -> None:
        """A failed agent run again: ``max_turns`` more calls from the turn it stopped at,
        and its tool calls counted afresh."""
        exhausted = self.data.get("exhausted")
        if exhausted is not None:
            self._set(start=int(exhausted), exhausted=None)
        if self.data.get("limited"):
            self._set(tool_calls={}, limited=None)

    def exhaust(self) -> None:
        self._set(exhausted=self.turn)

    @property
    def problem(self) -> str | None:
        """The last answer's mismatch with ``output``, if it did not match."""
        problem = self.data.get("problem")
        return None if problem is None else str(problem)

    def set_problem(self, problem: str | None) -> None:
        """The last answer's mismatch with ``output`` (None: it matched)."""
        if problem is not None or self.data.get("problem") is not None:
            self._set(problem=problem)

    # -- tool call limits ------------------------------------------------------------------
    def tool_calls(self, agent: str) -> int:
        """The tool calls ``agent`` asked for in this loop so far."""
        counts = self.data.get("tool_calls")
        return int(counts.get(agent, 0)) if isinstance(counts, dict) else 0

    def count_tool_calls(self, agent: str, calls: int) -> None:
        counts = dict(self.data.get("tool_calls") or {})
        counts[agent] = counts.get(agent, 0) + calls
        self._set(tool_calls=counts)

    def limited(self) -> None:
        """A limit on tool calls failed the node: a resume counts afresh."""
        self._set(limited=True)

    # -- the conversation --------------------------------------------------------------------
    @property
    def conversation(self) -> Conversation:
        """The messages, then the results of the current reply's answered calls."""
        history = Conversation.from_data(self.data.get("messages", []))
        calls = self.data.get("calls") or {}
        if not calls:
            return history
        reply = next((m for m in reversed(history.messages) if isinstance(m, AssistantMessage)),
                     None)
        if reply is None:
            return history
        results = [ToolResult.model_validate(calls[c.id]["result"]) for c in reply.tool_calls
                   if isinstance(calls.get(c.id), dict) and calls[c.id].get("result")]
        return history.append(*results) if results else history

    def reply(self) -> AssistantMessage:
        """The model's last reply (whose tool calls are being dispatched)."""
        for data in reversed(self.data.get("messages", [])):
            if isinstance(data, dict) and data.get("role") == "assistant":
                return AssistantMessage.model_validate(data)
        raise ValueError("the agent's history holds no reply of the model")

    def set_conversation(self, conversation: Conversation) -> None:
        """Replace the messages (the results kept in the calls' entries are dropped: they
        are in ``conversation`` now)."""
        self._set(messages=conversation.to_data())
        for call_id, entry in (self.data.get("calls") or {}).items():
            if isinstance(entry, dict) and entry.get("result") is not None:
                entry["result"] = None
                self.changes.add((*self.where, "calls", call_id))

    def answer(self, result: ToolResult) -> None:
        """Answer a call of the current reply (stored in the call's entry only)."""
        self.call(result.call_id)["result"] = result.model_dump(mode="json")

    # -- tool calls of the turn ----------------------------------------------------------------
    def call(self, call_id: str) -> dict[str, Any]:
        """The record of a tool call of this turn (created empty), counted as changed."""
        calls: dict[str, Any] = self.data.setdefault("calls", {})
        entry: dict[str, Any] = calls.setdefault(call_id, {})
        self.changes.add((*self.where, "calls", call_id))
        return entry

    def answered(self, call_id: str) -> bool:
        """Whether the current reply's call ``call_id`` has its result (in its entry, or, as
        earlier releases stored it, in the messages after the reply)."""
        entry = (self.data.get("calls") or {}).get(call_id)
        if isinstance(entry, dict) and entry.get("result") is not None:
            return True
        for data in reversed(self.data.get("messages", [])):  # (none after the reply now)
            if not isinstance(data, dict) or data.get("role") != "tool":
                return False
            if data.get("call_id") == call_id:
                return True
        return False

    @property
    def active(self) -> str | None:
        value = self.data.get("active")
        return str(value) if value is not None else None

    def activate(self, call_id: str | None) -> None:
        self._set(active=call_id)

    @property
    def pause(self) -> PauseKind | None:
        value = self.data.get("pause")
        return value if value in ("approval", "tool") else None

    def set_pause(self, kind: PauseKind | None) -> None:
        self._set(pause=kind)

    def worker(self, call_id: str) -> AgentState | None:
        """The state of the worker agent the call ``call_id`` asks, if it started."""
        data = self.call(call_id).get("worker")
        if not isinstance(data, dict):
            return None
        return AgentState(data, (*self.where, "calls", call_id, "worker"), self.changes)

    def start_worker(self, call_id: str, worker: AgentState) -> AgentState:
        """Nest a new worker's state in the call that asks it (returned, tracked here)."""
        self.call(call_id)["worker"] = worker.data
        return AgentState(worker.data, (*self.where, "calls", call_id, "worker"),
                          self.changes)

    def deliver(self, fresh: list[Any]) -> bool:
        """Give the answers of a resume to the call this loop (or a worker it asked) paused
        at; True when something was paused here. Without answers (a fork forgot them) the
        paused call asks again."""
        call_id = self.active
        if call_id is None:
            return False
        entry = self.call(call_id)
        worker = self.worker(call_id)
        if worker is not None and worker.deliver(fresh):
            entry["resumed"] = True
            return True
        kind = self.pause
        if kind is None:
            return False
        self.set_pause(None)
        if not fresh:
            entry.pop("decision", None)
            entry.pop("answers", None)
        elif kind == "approval":
            entry["decision"] = fresh[-1]
        else:
            entry.setdefault("answers", []).extend(fresh)
            entry["resumed"] = True
        return True

    def fresh_answers(self, answers: list[Any]) -> list[Any]:
        """The unit's answers not delivered yet (all of them after a fork forgot some)."""
        consumed = int(self.data.get("consumed", 0))
        fresh = answers[consumed:] if consumed <= len(answers) else list(answers)
        self._set(consumed=len(answers))
        return fresh
