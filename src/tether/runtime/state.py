"""Run state: the typed owner of the JSON a run holds, reads, changes and checkpoints.

The stored form is plain JSON, unchanged since the first release (old databases resume)::

    {"inputs": {...},
     "nodes": {"<id>": {"status": ..., "output": ..., "error": {...}, "answers": [...],
                        "waiting": "<checkpoint id>", "items": {"<i>": <unit>},
                        "sub": <state of a sub-workflow run>}},
     "counters": {"<loop closing node>": <current pass, from 1>}}

:class:`RunState` and :class:`UnitState` wrap those mappings and are the only code that
indexes into them; :class:`NodeError` is the typed error of a unit (and of a run). A node that
has not started has no entry. A *unit* (a node, or one ``for_each`` element) is ``pending`` or
``running`` (runs when resumed), ``interrupted`` (waits for the answer to the pause recorded at
checkpoint ``waiting``), or finished (``completed``, ``skipped``, ``failed``,
``upstream_failed``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tether.kinds import NodeKind
from tether.paths import StatePath, ensure_path, find_path
from tether.status import FINISHED, NOT_OK, SkipReason, UnitStatus

if TYPE_CHECKING:
    from tether.compiler.plan import Plan

__all__ = ["NodeError", "RunState", "SkipReason", "StatePath", "UnitState", "unit_path"]

_ERROR_KEYS = ("type", "message", "node_id")


@dataclass(frozen=True)
class NodeError(Mapping[str, Any]):
    """Why a unit (or a run) failed: the exception's type name, its message, the node.

    Stored as ``{"type", "message", "node_id"[, "attempts"]}``; also readable as that mapping
    (``error["message"]``), as results of earlier releases were.
    """

    type: str
    message: str
    node_id: str | None = None
    attempts: int | None = None

    @classmethod
    def of(cls, exc: BaseException, node_id: str | None, *,
           attempts: int | None = None) -> NodeError:
        """The error describing ``exc`` raised at ``node_id``."""
        if isinstance(exc, TimeoutError):
            return cls("TimeoutError", str(exc) or "the task timed out", node_id, attempts)
        if isinstance(exc, SystemExit):
            return cls("SystemExit", f"the task called sys.exit({exc.code!r})", node_id,
                       attempts)
        if not isinstance(exc, Exception):
            message = f"the task raised {type(exc).__name__}" + (f": {exc}" if str(exc) else "")
            return cls(type(exc).__name__, message, node_id, attempts)
        message = str(exc) or type(exc).__name__
        return cls(type(exc).__name__, message, node_id, attempts)

    @classmethod
    def from_json(cls, data: Any, node_id: str | None = None) -> NodeError:
        """Read a stored error (tolerating the shapes old releases wrote)."""
        if not isinstance(data, dict):
            return cls("Error", str(data), node_id)
        attempts = data.get("attempts")
        return cls(str(data.get("type", "Error")), str(data.get("message", "")),
                   data.get("node_id", node_id),
                   attempts if isinstance(attempts, int) else None)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type, "message": self.message,
                                "node_id": self.node_id}
        if self.attempts is not None:
            data["attempts"] = self.attempts
        return data

    def at(self, node_id: str | None, message: str | None = None) -> NodeError:
        """The same error, reported at another node (and optionally with another message)."""
        return NodeError(self.type, self.message if message is None else message, node_id,
                         self.attempts)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NodeError):
            return self.to_json() == other.to_json()
        if isinstance(other, Mapping):
            return self.to_json() == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.type, self.message, self.node_id, self.attempts))

    def __getitem__(self, key: str) -> Any:
        return self.to_json()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_json())

    def __len__(self) -> int:
        return len(self.to_json())


class UnitState:
    """One unit's entry (a view over its stored mapping)."""

    __slots__ = ("data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    @property
    def status(self) -> str:
        return str(self.data.get("status", UnitStatus.PENDING))

    @status.setter
    def status(self, value: str) -> None:
        self.data["status"] = value

    @property
    def output(self) -> Any:
        return self.data.get("output")

    @property
    def error(self) -> NodeError | None:
        error = self.data.get("error")
        return None if error is None else NodeError.from_json(error)

    @property
    def answers(self) -> list[Any]:
        """The answers this unit's ``interrupt()`` calls receive, in order."""
        return list(self.data.get("answers") or ())

    @property
    def waiting(self) -> str | None:
        """The interrupted checkpoint this unit waits at, when it is interrupted."""
        value = self.data.get("waiting")
        return str(value) if value is not None else None

    @property
    def items(self) -> dict[str, Any]:
        """The ``for_each`` elements' entries, by index (created when missing)."""
        items: dict[str, Any] = self.data.setdefault("items", {})
        return items

    def stored_keys(self) -> list[str]:
        """The keys its stored entry holds (what a full rewrite of it marks)."""
        return list(self.data)

    @property
    def attempts_made(self) -> int:
        """The attempts a polling node has made so far (0 before the first)."""
        return int(self.data.get("attempts", 0))

    @property
    def agent(self) -> dict[str, Any] | None:
        """The agent loop's state of an agent node's unit (its stored mapping), if begun."""
        data = self.data.get("agent")
        return data if isinstance(data, dict) else None

    def begin_agent(self, data: dict[str, Any]) -> None:
        """Hold a new agent loop's state (an :class:`AgentState`'s mapping)."""
        self.data["agent"] = data

    def item(self, key: str) -> UnitState | None:
        """The ``for_each`` element ``key``'s entry, or None before it started."""
        entry = self.items.get(key)
        return UnitState(entry) if isinstance(entry, dict) else None

    def item_status(self, key: str) -> str | None:
        """The status of the ``for_each`` element ``key``, or None before it started."""
        entry = self.items.get(key)
        return str(entry.get("status", UnitStatus.PENDING)) if entry else None

    def item_outputs(self, count: int) -> list[Any]:
        """The outputs of the ``for_each`` elements ``0 .. count-1`` (all completed)."""
        items = self.items
        return [items[str(i)]["output"] for i in range(count)]

    def complete_item(self, key: str, output: Any,
                      tries: tuple[dict[str, Any], ...] = ()) -> None:
        """The ``for_each`` element ``key`` completed with ``output``; ``tries``: its failed
        attempts before (an element of a node with a retry policy), kept as ``attempts``."""
        entry = completed_entry(output)
        if tries:  # it failed before: the entry keeps the attempts (the history's)
            entry["attempts"] = list(tries)
        self.items[key] = entry

    def polled(self, output: Any, attempt: int) -> None:
        """A polling node's ``attempt`` returned ``output`` and its ``until`` still fails:
        it stays running, with the latest output shown."""
        self.data.update({"status": UnitStatus.RUNNING, "output": output, "attempts": attempt})

    def wake(self) -> None:
        """Its timer is due: runnable again (no longer waiting at a checkpoint)."""
        self.data["status"] = UnitStatus.PENDING
        self.data.pop("waiting", None)

    def fail(self, error: NodeError, tries: tuple[dict[str, Any], ...] = ()) -> None:
        """Failed with ``error``; the answers stay (a resume re-uses a claimed decision).
        ``tries``: its failed attempts (a node with a retry policy), kept as ``attempts``."""
        self.data["status"] = UnitStatus.FAILED
        self.data["error"] = error.to_json()
        self.data.pop("waiting", None)
        if tries:
            self.data["attempts"] = list(tries)

    def suspend(self, checkpoint_id: str) -> None:
        """Interrupted, waiting for the answer to the pause at ``checkpoint_id``."""
        self.data["status"] = UnitStatus.INTERRUPTED
        self.data["waiting"] = checkpoint_id

    def answer(self, value: dict[str, Any]) -> None:
        """Give the waiting unit its next answer; it runs again."""
        self.data.setdefault("answers", []).append(value)
        self.data["status"] = UnitStatus.PENDING
        self.data.pop("waiting", None)

    def replace_answer(self, value: dict[str, Any]) -> None:
        """Replace the last answer (a new decision for a unit that failed after its first)."""
        answers = self.data.setdefault("answers", [])
        if answers:
            answers[-1] = value
        else:
            answers.append(value)


def completed_entry(output: Any) -> dict[str, Any]:
    return {"status": UnitStatus.COMPLETED, "output": output}


def unit_path(node_id: str, item: str | None = None) -> StatePath:
    """The path of a node's entry, or of one of its ``for_each`` elements."""
    return ("nodes", node_id, "items", item) if item is not None else ("nodes", node_id)


def split_address(address: str) -> tuple[str, str | None]:
    """``enrich/item:3`` -> ``("enrich", "3")``; ``review`` -> ``("review", None)``."""
    node_id, _, item = address.partition("/item:")
    return node_id, (item or None)


def parse_agent_path(agent_path: str) -> list[tuple[str, str | None]]:
    """``workflow:w/node:p/item:3/workflow:x/node:q`` -> ``[("p", "3"), ("q", None)]``."""
    steps: list[tuple[str, str | None]] = []
    for part in agent_path.split("/") if agent_path else []:
        kind, _, value = part.partition(":")
        if kind == "node":
            steps.append((value, None))
        elif kind == "item" and steps:
            steps[-1] = (steps[-1][0], value)
    return steps


def _agent_node(agent_path: str) -> str | None:
    """The agent node of ``.../agent:<node>/tool:<t>`` (or ``.../worker:<w>/...``), if any."""
    for part in agent_path.split("/") if agent_path else []:
        kind, _, value = part.partition(":")
        if kind == "agent":
            return value
    return None


class RunState:
    """The state of one run, or of a sub-workflow run nested in it."""

    __slots__ = ("data",)

    def __init__(self, data: dict[str, Any]) -> None:
        data.setdefault("nodes", {})
        data.setdefault("counters", {})
        self.data = data

    @classmethod
    def new(cls, inputs: dict[str, Any]) -> RunState:
        """The state of a run that has not started."""
        return cls({"inputs": inputs, "nodes": {}, "counters": {}})

    @classmethod
    def from_snapshot(cls, snapshot: dict[str, Any]) -> RunState:
        """A working copy of a checkpoint's ``state_snapshot``."""
        return cls(copy.deepcopy(snapshot))

    # -- reading -------------------------------------------------------------------------------
    @property
    def inputs(self) -> dict[str, Any]:
        inputs: dict[str, Any] = self.data.setdefault("inputs", {})
        return inputs

    @property
    def nodes(self) -> dict[str, Any]:
        nodes: dict[str, Any] = self.data["nodes"]
        return nodes

    @property
    def counters(self) -> dict[str, Any]:
        counters: dict[str, Any] = self.data["counters"]
        return counters

    def status(self, node_id: str) -> str:
        entry = self.data["nodes"].get(node_id)
        return str(entry.get("status", UnitStatus.PENDING)) if entry else UnitStatus.PENDING

    def finished(self, node_id: str) -> bool:
        return self.status(node_id) in FINISHED

    def unit(self, node_id: str) -> UnitState:
        """A node's entry (created empty when missing)."""
        return UnitState(self.data["nodes"].setdefault(node_id, {}))

    def at(self, path: StatePath) -> UnitState:
        """The unit at ``path`` (created with its parents when missing)."""
        return UnitState(ensure_path(self.data, path))

    def find(self, path: StatePath) -> UnitState | None:
        """The unit at ``path``, or None."""
        found = find_path(self.data, path)
        return UnitState(found) if isinstance(found, dict) else None

    def sub(self, path: StatePath, inputs: dict[str, Any]) -> RunState:
        """The state of the sub-run held by the unit at ``path`` (created when missing)."""
        entry = ensure_path(self.data, path)
        if "sub" not in entry:
            entry["sub"] = RunState.new(inputs).data
        return RunState(entry["sub"])

    # -- changing ------------------------------------------------------------------------------
    def add_usage(self, call: dict[str, Any]) -> None:
        """Count one model call's tokens (``call``: its node, agent, turn, ``input_tokens``
        and ``output_tokens``) in ``usage``: the run's totals and the list of calls."""
        usage = self.data.setdefault("usage", {"input_tokens": 0, "output_tokens": 0,
                                               "calls": []})
        usage["input_tokens"] = int(usage.get("input_tokens", 0)) + call["input_tokens"]
        usage["output_tokens"] = int(usage.get("output_tokens", 0)) + call["output_tokens"]
        usage.setdefault("calls", []).append(call)

    def show_turn(self, messages: list[Any], turn: int) -> None:
        """Show an agent's messages and turn at the top of the state (the snapshot of its
        turn row shows what the model is called with)."""
        self.data["messages"] = messages
        self.data["turn"] = turn

    def set_inputs(self, values: dict[str, Any]) -> None:
        """Replace the run's inputs (a fork's, after they were checked)."""
        self.data["inputs"] = values

    def complete(self, node_id: str, output: Any,
                 tries: tuple[dict[str, Any], ...] = ()) -> None:
        """``node_id`` completed with ``output``; ``tries``: its failed attempts before."""
        entry = completed_entry(output)
        if tries:  # it failed before: the entry keeps the attempts (the history's)
            entry["attempts"] = list(tries)
        self.data["nodes"][node_id] = entry

    def complete_text(self, node_id: str, output: Any, text: str) -> str:
        """``node_id`` completed with ``output`` (whose JSON is ``text``); returns the entry's
        JSON, for the journal.

        The one hot-path writer of JSON by concatenation: every completed node passes here,
        and its output was serialised once already (``text``); dumping the entry again would
        double the cost of a large output. The result equals ``dumps(completed_entry(output))``
        (tests/runtime/test_state_writes.py checks it).
        """
        self.data["nodes"][node_id] = completed_entry(output)
        return '{"status":"completed","output":' + text + "}"

    def skip(self, node_id: str, status: UnitStatus, reason: SkipReason) -> None:
        """``node_id`` did not run: ``status`` (skipped or upstream_failed), for ``reason``."""
        self.data["nodes"][node_id] = {"status": status, "output": None, "reason": reason}

    def restart(self, node_id: str) -> None:
        """``node_id`` runs again on a loop's next pass (its last output stays readable)."""
        previous = self.data["nodes"].get(node_id) or {}
        self.data["nodes"][node_id] = {"status": UnitStatus.PENDING,
                                       "output": previous.get("output")}

    def counter(self, node_id: str) -> int:
        """The current pass of the loop ``node_id`` closes (1 on the first)."""
        return int(self.data["counters"].get(node_id, 1))

    def has_counter(self, node_id: str) -> bool:
        """Whether the loop ``node_id`` closes has begun counting its passes."""
        return node_id in self.data["counters"]

    def set_counter(self, node_id: str, value: int) -> None:
        """Set the pass of the loop ``node_id`` closes."""
        self.data["counters"][node_id] = value

    def with_output(self, node_id: str, output: Any) -> dict[str, Any]:
        """The node entries, with ``node_id`` shown running with ``output`` (a copy of the
        top mapping only: what a polling node's ``until`` reads)."""
        nodes = dict(self.data["nodes"])
        nodes[node_id] = {"status": UnitStatus.RUNNING, "output": output}
        return nodes

    # -- walking ---------------------------------------------------------------------------------
    def units(self, plan: Plan, prefix: StatePath = ()) -> Iterator[tuple[Plan, StatePath,
                                                                         UnitState]]:
        """Every unit entry, in this state and nested sub-run states, with plan and path."""
        for node_id, entry in self.data.get("nodes", {}).items():
            node = plan.by_id.get(node_id)
            if node is None or not isinstance(entry, dict):
                continue
            path = (*prefix, "nodes", node_id)
            yield plan, path, UnitState(entry)
            sub_plan = node.workflow.plan if node.kind is NodeKind.WORKFLOW else None
            for key, item in (entry.get("items") or {}).items():
                yield plan, (*path, "items", key), UnitState(item)
                if sub_plan is not None and "sub" in item:
                    yield from RunState(item["sub"]).units(sub_plan, (*path, "items", key,
                                                                      "sub"))
            if sub_plan is not None and "sub" in entry:
                yield from RunState(entry["sub"]).units(sub_plan, (*path, "sub"))

    def problems(self, plan: Plan) -> list[str]:
        """What makes this state unusable with ``plan`` (a fork's patched state): the shape of
        ``inputs``, ``nodes`` and ``counters``, each node entry, its status and its items."""
        found: list[str] = []
        for key in ("inputs", "nodes", "counters"):
            if not isinstance(self.data.get(key), dict):
                found.append(f"'{key}' must be an object, not {_json_type(self.data.get(key))}")
        if found:
            return found
        for node_id, entry in self.data["nodes"].items():
            if node_id not in plan.by_id:
                found.append(f"'nodes' has no node '{node_id}' in this plan")
            else:
                found.extend(_entry_problems(f"nodes.{node_id}", entry))
        for node_id, count in self.data["counters"].items():
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                found.append(f"'counters.{node_id}' must be a whole number, not "
                             f"{_json_type(count)}")
        return found

    def locate(self, plan: Plan, agent_path: str, address: str) -> tuple[Plan, StatePath]:
        """The plan of the (sub-)run holding a unit, and the unit's path in this state.

        Raises ``KeyError`` when the plan has no such node.
        """
        path: StatePath = ()
        for node_id, item in parse_agent_path(agent_path):
            node = plan.node(node_id)
            if node.kind is not NodeKind.WORKFLOW:
                raise KeyError(agent_path)
            plan = node.workflow.plan
            path = (*path, *unit_path(node_id, item), "sub")
        node_id, item = split_address(address)
        agent = _agent_node(agent_path)
        if agent is not None:  # a pause inside an agent node: the node's unit waits
            node_id, item = agent, None
        plan.node(node_id)
        return plan, (*path, *unit_path(node_id, item))

    def reopen(self, plan: Plan, *, forget_answers: bool) -> list[StatePath]:
        """Make failed units runnable again (resume and fork); return the changed paths.

        Failed and upstream-failed units go back to ``pending`` (finished ``for_each``
        elements and sub-run progress are kept) and keep the answers they were given, so a
        resume re-uses a claimed decision instead of asking again. With ``forget_answers``
        (fork), interrupted and failed units forget their answers, so the branch asks again.
        """
        changed: list[StatePath] = []
        for _, path, unit in list(self.units(plan)):
            status = unit.status
            if status in NOT_OK or (forget_answers and status == UnitStatus.INTERRUPTED):
                unit.data["status"] = UnitStatus.PENDING
                unit.data.pop("error", None)
                unit.data.pop("waiting", None)
                if forget_answers:
                    unit.data.pop("answers", None)
                changed.append(path)
        return changed

    def waiting(self, plan: Plan) -> dict[str, tuple[StatePath, UnitState]]:
        """The units waiting for an answer, by the interrupted checkpoint each waits at."""
        return {unit.waiting: (path, unit) for _, path, unit in self.units(plan)
                if unit.status == UnitStatus.INTERRUPTED and unit.waiting is not None}

    def wake(self, path: StatePath) -> list[StatePath]:
        """After the unit at ``path`` was answered, every interrupted node holding it (a
        ``for_each`` node, its element, a workflow node, up to the top) is pending again, so
        the scheduler re-enters it. Returns the changed paths."""
        changed = []
        for end in range(2, len(path)):
            prefix = path[:end]
            if prefix[-2] not in ("nodes", "items"):
                continue
            entry = find_path(self.data, prefix)
            if isinstance(entry, dict) and entry.get("status") == UnitStatus.INTERRUPTED:
                entry["status"] = UnitStatus.PENDING
                changed.append(prefix)
        return changed

    def first_failure(self, plan: Plan) -> NodeError | None:
        """The error of the first failed node in plan order, if any."""
        for node in plan.nodes:
            entry = self.data["nodes"].get(node.id)
            if entry and entry.get("status") == UnitStatus.FAILED:
                return NodeError.from_json(entry.get("error"), node.id)
        return None

    def snapshot(self) -> dict[str, Any]:
        """A deep copy of the JSON (what a RunResult carries)."""
        return copy.deepcopy(self.data)


def locate_unit(plan: Plan, state: dict[str, Any], agent_path: str,
                address: str) -> tuple[Plan, StatePath]:
    """The plan holding the unit at ``address`` under ``agent_path``, and its path (see
    :meth:`RunState.locate`)."""
    return RunState(state).locate(plan, agent_path, address)


_STATUSES = frozenset(status.value for status in UnitStatus)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    names = {bool: "a boolean", str: "a string", list: "an array", dict: "an object"}
    return names.get(type(value), "a number")


def _entry_problems(where: str, entry: Any) -> list[str]:
    """What is wrong with one unit entry of a state (see :meth:`RunState.problems`)."""
    if not isinstance(entry, dict):
        return [f"'{where}' must be an object, not {_json_type(entry)}"]
    found: list[str] = []
    status = entry.get("status", UnitStatus.PENDING)
    if status not in _STATUSES:
        found.append(f"'{where}.status' must be one of {', '.join(sorted(_STATUSES))}")
    for key in ("items", "sub"):
        if key in entry and not isinstance(entry[key], dict):
            found.append(f"'{where}.{key}' must be an object, not {_json_type(entry[key])}")
    if "answers" in entry and not isinstance(entry["answers"], list):
        found.append(f"'{where}.answers' must be an array, not {_json_type(entry['answers'])}")
    if isinstance(entry.get("items"), dict):
        for key, item in entry["items"].items():
            found.extend(_entry_problems(f"{where}.items.{key}", item))
    return found
