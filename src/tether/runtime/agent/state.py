"""The state of an agent loop: the typed owner of the JSON an agent unit holds.

Stored in the agent node's unit entry under ``agent`` (a worker's state is nested in the call
of its supervisor that asked it)::

    {"agent": "<agent id holding the conversation>", "path": "<its agent_path>",
     "messages": [...], "turn": N, "start": S, "phase": "model" | "tools" | "final",
     "active": "<call id being dispatched>", "pause": "approval" | "tool",
     "calls": {"<call id>": {"decision": {...}, "answers": [...], "resumed": true,
                             "worker": <state of the worker asked>}},
     "consumed": <answers of the unit delivered so far>, "exhausted": <turn>}

``turn`` is the model call in progress (``<agent>/turn:N``); ``phase`` says what comes next:
the call itself, the dispatch of its tool calls, or the check of its final answer. ``start``
is the turn the current budget of ``max_turns`` counts from (a resumed failed agent gets a
new budget from the turn it stopped at, ``exhausted``).
"""

from __future__ import annotations

from typing import Any, Literal

from tether.agents.conversation import Conversation, UserMessage

Phase = Literal["model", "tools", "final"]
PauseKind = Literal["approval", "tool"]


class AgentState:
    """A view over one agent loop's stored mapping (see the module docstring)."""

    __slots__ = ("data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    @classmethod
    def new(cls, agent: str, path: str, prompt: str | None) -> AgentState:
        messages = [UserMessage(content=prompt).model_dump(mode="json")] if prompt else []
        return cls({"agent": agent, "path": path, "messages": messages, "turn": 0, "start": 0,
                    "phase": "model", "calls": {}})

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
    def start(self) -> int:
        return int(self.data.get("start", 0))

    @property
    def phase(self) -> Phase:
        phase = self.data.get("phase", "model")
        return phase if phase in ("model", "tools", "final") else "model"

    def next_turn(self) -> None:
        """The model is called again: the next turn begins, its calls forgotten."""
        self.data["turn"] = self.turn + 1
        self.data["phase"] = "model"
        self.data["calls"] = {}
        self.data.pop("active", None)

    def set_phase(self, phase: Phase) -> None:
        self.data["phase"] = phase

    def hand_over(self, agent: str, path: str) -> None:
        """Another agent holds the conversation from now on, with its own turns."""
        self.data.update(agent=agent, path=path, turn=0, start=0, phase="model", calls={})
        self.data.pop("active", None)

    def renew_budget(self) -> None:
        """A failed agent run again: ``max_turns`` more calls from the turn it stopped at."""
        exhausted = self.data.pop("exhausted", None)
        if exhausted is not None:
            self.data["start"] = int(exhausted)

    def exhaust(self) -> None:
        self.data["exhausted"] = self.turn

    # -- the conversation --------------------------------------------------------------------
    @property
    def conversation(self) -> Conversation:
        return Conversation.from_data(self.data.get("messages", []))

    def set_conversation(self, conversation: Conversation) -> None:
        self.data["messages"] = conversation.to_data()

    # -- tool calls of the turn ----------------------------------------------------------------
    def call(self, call_id: str) -> dict[str, Any]:
        """The record of a tool call of this turn (created empty)."""
        calls: dict[str, Any] = self.data.setdefault("calls", {})
        entry: dict[str, Any] = calls.setdefault(call_id, {})
        return entry

    @property
    def active(self) -> str | None:
        value = self.data.get("active")
        return str(value) if value is not None else None

    def activate(self, call_id: str | None) -> None:
        if call_id is None:
            self.data.pop("active", None)
        else:
            self.data["active"] = call_id

    @property
    def pause(self) -> PauseKind | None:
        value = self.data.get("pause")
        return value if value in ("approval", "tool") else None

    def set_pause(self, kind: PauseKind | None) -> None:
        if kind is None:
            self.data.pop("pause", None)
        else:
            self.data["pause"] = kind

    def worker(self, call_id: str) -> AgentState | None:
        """The state of the worker agent the call ``call_id`` asks, if it started."""
        data = self.call(call_id).get("worker")
        return AgentState(data) if isinstance(data, dict) else None

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
        self.data["consumed"] = len(answers)
        return fresh

