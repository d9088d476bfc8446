"""Building a run's :class:`~tether.runtime.history.History` from the store.

What is read, per page: the run row, its plan, one page of checkpoint rows (unfolded: each
row's delta says which node entries it changed), the folded state at the page's start (to
know which nodes had finished before it), the run's ``run_events`` and ``decisions``, and the
newest folded state (for the graph's node states). Nothing is written.

What is inferred, exactly:

- **A node attempt's start.** Checkpoints are written when a node ends, not when it starts
  (a second row per node would cost the hot path). A node's start is the later of the end
  of its dependencies (``waits_for``; known when their rows are on the page) and the claim
  of the attempt that ran it; without either, the previous row's time. A failed attempt of
  a unit with a retry policy (a node, an element, a sub-workflow's node) records its own
  start and end; the attempt after it starts when the backoff ends. A ``for_each`` element
  that failed for good has no row: its entry is read from its node's failed row.
- **Abandoned.** An owner's attempt ends cleanly with a ``released`` event, a ``run_end``
  row, or a pause. When another owner claims the run and the previous attempt did not end
  cleanly (it died, or its lease expired or was taken over), the previous attempt is
  abandoned, and so is what it had in flight: each agent tool call whose pre-dispatch
  ``tool_call`` row it wrote with no later row of that agent, and each top-level node that
  was runnable at its last checkpoint (not finished, not waiting, every ``waits_for``
  finished) that a later owner then completed or failed on this page. Inside such a node,
  the ``for_each`` elements and sub-workflow nodes it had in flight (``history_inflight.py``
  says how they are found) that a later owner then completed are abandoned too, each at
  its own address. A run still ``running`` under an owner whose lease expired or who is
  provably dead shows its runnable nodes abandoned too, and what they had in flight inside
  them that provably exists (until someone resumes it).
- **Skip reasons** are read from the skipped node's entry (``reason``, written by the
  scheduler); runs written before it show none. Nodes of a cancelled run that never
  started are skipped with the reason ``cancelled``.
"""

from __future__ import annotations

import json
import time
from typing import Any, Protocol

from tether.errors import RunNotFound, StoreError
from tether.runtime.history import EventKind, History, HistoryEvent, NodeState
from tether.runtime.history_inflight import inside
from tether.runtime.history_nodes import PlanOutline, newest_state, node_views
from tether.runtime.state import RunState
from tether.status import FINISHED, RUN_END, RunStatus, SkipReason, StepType, UnitStatus
from tether.stores.contracts import EventStore, RunStore
from tether.stores.events import RunEvent, RunEventKind
from tether.stores.owners import parse_owner, provably_dead
from tether.stores.records import CheckpointRow, Decision, RunRecord, utc

__all__ = ["build_history", "checkpoint_time"]


class HistorySource(RunStore, EventStore, Protocol):
    """What building a history reads: the run, its checkpoints and decisions, its events."""


_SKIPPED = frozenset({UnitStatus.SKIPPED, UnitStatus.UPSTREAM_FAILED})
_NODE_ERROR_KEYS = ("type", "message")


def checkpoint_time(checkpoint_id: str) -> float:
    """The Unix time a (UUIDv7) checkpoint id was minted at, to the millisecond."""
    try:
        return int(checkpoint_id.replace("-", "")[:12], 16) / 1000
    except ValueError:
        return 0.0


def _plan(store: RunStore, run: RunRecord) -> PlanOutline | None:
    return PlanOutline.read(store.get_plan(run.plan_fingerprint))


def _entries(row: CheckpointRow) -> list[tuple[list[Any], Any]]:
    """The state paths ``row`` wrote and their values (a full row: every node entry)."""
    try:
        body = json.loads(row.state)
    except ValueError:
        raise StoreError(f"checkpoint {row.checkpoint_id} of run {row.execution_id} holds "
                         "invalid JSON in its state (the database was edited or damaged)") \
            from None
    if row.is_full and isinstance(body, dict):
        return [(["nodes", k], v) for k, v in (body.get("nodes") or {}).items()]
    if not isinstance(body, list):
        return []
    found: list[tuple[list[Any], Any]] = []
    for item in body:
        if isinstance(item, list) and len(item) == 2 and isinstance(item[0], list):
            if item[0] == [] and isinstance(item[1], dict):
                found += [(["nodes", k], v) for k, v in (item[1].get("nodes") or {}).items()]
            else:
                found.append((item[0], item[1]))
    return found


def _loads(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _error(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None if value is None else {"type": "Error", "message": str(value)}
    return {k: value.get(k) for k in _NODE_ERROR_KEYS}


def _top(address: str) -> str:
    return address.partition("/")[0]


class _Builder:
    """Walks one page of rows and the run's events in time order (see the module doc)."""

    def __init__(self, store: HistorySource, run: RunRecord, plan: PlanOutline | None,
                 statuses: dict[str, str]) -> None:
        self.store = store
        self.run = run
        self.plan = plan
        self.statuses = statuses  # top-level node -> status, as of the walk's position
        self.out: list[tuple[float, int, HistoryEvent]] = []
        self.done_at: dict[str, float] = {}
        self.attempts: dict[tuple[str, str], int] = {}  # (agent_path, address) -> attempts
        self.claim: RunEvent | None = None
        self.clean = True  # the current owner's attempt ended cleanly (or none began)
        self.open_tools: dict[str, tuple[CheckpointRow, str]] = {}
        self.finished_later: dict[str, float] = {}  # node -> time of its last ending row
        self.unit_ended: dict[tuple[str, str], float] = {}  # (agent_path, address) -> same
        self.last_row: str | None = None  # the newest checkpoint walked (or the page's start)
        self.last_time = run.created_at.timestamp()
        self.fork: RunEvent | None = None
        self.answers: dict[str, Decision] = {}

    # -- emitting ----------------------------------------------------------------------------
    def emit(self, kind: EventKind, at: float, **fields: Any) -> None:
        self.out.append((at, len(self.out), HistoryEvent(kind=kind, at=utc(at), **fields)))

    def owner_fields(self, event: RunEvent) -> dict[str, Any]:
        owner = parse_owner(event.owner)
        return {"owner": event.owner, "host": owner.host if owner else None,
                "pid": owner.pid if owner else None,
                "worker": event.data.get("worker"), "attempt": event.data.get("attempt")}

    def next_attempt(self, node: str, agent_path: str = "") -> int:
        key = (agent_path, node)
        self.attempts[key] = self.attempts.get(key, 0) + 1
        return self.attempts[key]

    def start_of(self, address: str, agent_path: str) -> float:
        """When the node at ``address`` began (inferred: see the module docstring)."""
        floor = self.claim.created_at if self.claim is not None else self.last_time
        if agent_path or self.plan is None or _top(address) not in self.plan.by_id:
            return max(floor, self.last_time)  # nested: after the previous row, at least
        needs = [self.done_at[n] for n in self.plan.by_id[_top(address)].waits_for
                 if n in self.done_at]
        return max([floor, *needs])

    # -- stored events -----------------------------------------------------------------------
    def on_event(self, event: RunEvent) -> None:
        at, kind = event.created_at, event.kind
        if kind == RunEventKind.CLAIMED:
            if self.claim is not None and not self.clean:
                self.abandon(at, "a new owner claimed the run")
            self.claim, self.clean = event, False
            self.emit(EventKind.CLAIMED, at, reason=event.data.get("reason"),
                      **self.owner_fields(event))
        elif kind == RunEventKind.RELEASED:
            if self.claim is not None and event.owner == self.claim.owner:
                self.clean = True
            self.emit(EventKind.RELEASED, at, reason=event.data.get("why"),
                      **self.owner_fields(event))
        elif kind == RunEventKind.LEASE_LOST:
            self.emit(EventKind.LEASE_LOST, at, reason=event.data.get("why"),
                      **self.owner_fields(event))
        elif kind == RunEventKind.ANSWERED:
            self.on_answer(event)
        elif kind == RunEventKind.CANCEL_REQUESTED:
            self.emit(EventKind.CANCEL_REQUESTED, at, actor=event.actor, channel=event.channel,
                      status=event.data.get("outcome"))
        elif kind == RunEventKind.CONCURRENCY:
            self.emit(EventKind.CONCURRENCY, at, reason=event.data.get("reason"),
                      status=event.data.get("outcome"), detail=event.data)
        elif kind == RunEventKind.UPGRADED:
            self.emit(EventKind.UPGRADED, at, actor=event.actor, channel=event.channel,
                      detail={key: value for key, value in event.data.items()
                              if key in ("from", "to", "renamed")})

    def on_answer(self, event: RunEvent) -> None:
        data = event.data
        decision = self.answers.pop(str(data.get("checkpoint_id")), None)
        reason = str(data.get("reason") or "")
        kind = EventKind.TIMED_OUT if event.channel == "timer" and \
            not reason.startswith("sleep") else EventKind.ANSWERED
        self.emit(kind, event.created_at, node=data.get("address"),
                  checkpoint_id=data.get("checkpoint_id"), actor=event.actor,
                  channel=event.channel, reason=reason or None,
                  comment=decision.comment if decision is not None else None,
                  detail=decision.value if decision is not None else None)

    def on_decision(self, decision: Decision) -> None:
        """An answer with no ``answered`` event (recorded before run events existed)."""
        channel = "timer" if decision.resolver == "timer" else None
        self.emit(EventKind.ANSWERED, decision.created_at.timestamp(), node=decision.address,
                  checkpoint_id=decision.checkpoint_id, actor=decision.resolver,
                  channel=channel, comment=decision.comment, detail=decision.value)

    # -- abandoned ---------------------------------------------------------------------------
    def abandon(self, at: float, why: str, *, resumed: bool = True) -> None:
        """The current owner's attempt ended without a trace: what it had in flight."""
        owner = self.claim.owner if self.claim is not None else None
        for key, (row, address) in list(self.open_tools.items()):
            self.emit(EventKind.TOOL_CALL_ABANDONED, at, node=address,
                      agent_path=row.agent_path, checkpoint_id=row.checkpoint_id,
                      owner=owner, reason=why, detail={"arguments": _loads(row.node_input)})
            del self.open_tools[key]
        state: RunState | None = None
        for node_id in self.runnable():
            if not resumed or self.finished_later.get(node_id, 0.0) > at:
                self.abandon_unit(node_id, "", at, owner, why)
            outline = self.plan.by_id[node_id] if self.plan is not None else None
            if outline is None or self.plan is None or outline.inside is None:
                continue
            state = state or self.state_at_last_row()
            for unit in inside(self.plan, outline, state):
                later = self.unit_ended.get((unit.agent_path, unit.address), 0.0) > at
                if later if resumed else unit.known:
                    self.abandon_unit(unit.address, unit.agent_path, at, owner, why)

    def abandon_unit(self, address: str, agent_path: str, at: float, owner: str | None,
                     why: str) -> None:
        attempt = self.next_attempt(address, agent_path)
        self.emit(EventKind.NODE_STARTED, self.start_of(address, agent_path), node=address,
                  agent_path=agent_path, attempt=attempt)
        self.emit(EventKind.NODE_ABANDONED, at, node=address, agent_path=agent_path,
                  attempt=attempt, owner=owner, reason=why)

    def state_at_last_row(self) -> RunState:
        """The run's folded state as of the newest row walked (one read, only when an
        owner abandoned a node with units inside it)."""
        found = self.store.get(self.run.execution_id, self.last_row) \
            if self.last_row is not None else None
        if found is None:
            return RunState.new({})
        return RunState.from_snapshot(found.state_snapshot)

    def runnable(self) -> list[str]:
        """Top-level nodes not finished nor waiting whose ``waits_for`` all finished."""
        if self.plan is None:
            return []
        status = self.statuses
        return [n.id for n in self.plan.nodes
                if status.get(n.id, UnitStatus.PENDING) in (UnitStatus.PENDING,
                                                             UnitStatus.RUNNING)
                and all(status.get(d) in FINISHED for d in n.waits_for)]

    # -- rows --------------------------------------------------------------------------------
    def on_row(self, row: CheckpointRow) -> None:
        entries = _entries(row)
        self.close_tools(row, entries)
        self.note_skips(row, entries)
        step, at = str(row.step_type), row.created_at
        if step == StepType.NODE:
            self.on_node(row, _entry_of(row, entries), entries)
        elif step == StepType.HITL_PAUSE:
            self.emit(EventKind.PAUSED, at, node=row.node_id, agent_path=row.agent_path,
                      checkpoint_id=row.checkpoint_id, reason=row.interrupt_reason,
                      detail=_loads(row.interrupt_context))
        elif step == StepType.LLM_CALL:
            self.emit(EventKind.AGENT_TURN, at, node=row.node_id, agent_path=row.agent_path,
                      checkpoint_id=row.checkpoint_id, attempt=row.node_index,
                      status=str(row.status))
        elif step == StepType.TOOL_CALL:
            self.open_tools[row.agent_path] = (row, row.node_id)
            self.emit(EventKind.TOOL_CALL_STARTED, at, node=row.node_id,
                      agent_path=row.agent_path, checkpoint_id=row.checkpoint_id,
                      detail={"arguments": _loads(row.node_input)})
        elif step == StepType.HANDOFF:
            self.emit(EventKind.HANDOFF, at, node=row.node_id, agent_path=row.agent_path,
                      checkpoint_id=row.checkpoint_id, detail=_loads(row.node_output))
        elif step == StepType.FORK_ORIGIN:
            self.on_fork(row)
        elif step == StepType.RUN_END or row.node_id == RUN_END:
            self.on_end(row)
        self.last_time = at
        self.last_row = row.checkpoint_id

    def close_tools(self, row: CheckpointRow, entries: list[tuple[list[Any], Any]]) -> None:
        """A later row of the agent that dispatched a tool call: the call returned (its
        result is in the conversation that row carries, when it carries one)."""
        for key, (tool, address) in list(self.open_tools.items()):
            agent = key.rpartition("/tool:")[0] or key
            if row.agent_path.startswith(agent) or row.step_type == StepType.RUN_END or \
                    (_top(row.node_id) == _top(tool.node_id) and not row.agent_path):
                detail = {"arguments": _loads(tool.node_input)}
                found = _tool_result(entries, key.rpartition("/tool:")[2])
                if found is not None:
                    detail["result"] = found
                self.emit(EventKind.TOOL_CALL_COMPLETED, row.created_at, node=address,
                          agent_path=tool.agent_path, checkpoint_id=tool.checkpoint_id,
                          detail=detail)
                del self.open_tools[key]

    def note_skips(self, row: CheckpointRow, entries: list[tuple[list[Any], Any]]) -> None:
        for path, value in entries:
            if len(path) != 2 or path[0] != "nodes" or not isinstance(value, dict):
                continue
            node_id, status = str(path[1]), str(value.get("status", UnitStatus.PENDING))
            before = self.statuses.get(node_id)
            self.statuses[node_id] = status
            if status in _SKIPPED and before != status and not row.agent_path:
                at = self.decided_at(node_id, row.created_at)
                self.emit(EventKind.NODE_SKIPPED, at, node=node_id,
                          checkpoint_id=row.checkpoint_id, status=status,
                          reason=value.get("reason"))
                self.done_at[node_id] = at

    def decided_at(self, node_id: str, written: float) -> float:
        """When the scheduler skipped ``node_id``: as its dependencies ended (the skip is
        written with the next row)."""
        if self.plan is None or node_id not in self.plan.by_id:
            return written
        needs = [self.done_at[n] for n in self.plan.by_id[node_id].waits_for
                 if n in self.done_at]
        return min(written, max(needs)) if needs else written

    def on_node(self, row: CheckpointRow, entry: dict[str, Any] | None,
                entries: list[tuple[list[Any], Any]]) -> None:
        if entry is not None and entry.get("status") in _SKIPPED:
            return  # (note_skips said so)
        tries = _tries(entry)
        address, where = row.node_id, row.agent_path
        fields: dict[str, Any] = {"node": address, "agent_path": where}
        if str(row.status) == "failed" and "/item:" not in address:
            self.failed_elements(row, entries)
        start = self.emit_tries(address, where, tries, self.start_of(address, where))
        if str(row.status) == "failed" and tries:
            self.ended(address, row, final=False)
            return
        attempt = self.next_attempt(address, where)
        self.emit(EventKind.NODE_STARTED, start, attempt=attempt, **fields)
        if str(row.status) == "failed":
            error = _loads(row.node_output)
            timed_out = isinstance(error, dict) and error.get("type") == "TimeoutError"
            self.emit(EventKind.NODE_TIMED_OUT if timed_out else EventKind.NODE_FAILED,
                      row.created_at, attempt=attempt, error=_error(error),
                      checkpoint_id=row.checkpoint_id, **fields)
            self.ended(address, row, final=False)
            return
        self.emit(EventKind.NODE_COMPLETED, row.created_at, attempt=attempt,
                  checkpoint_id=row.checkpoint_id, detail=_loads(row.node_output),
                  duration_ms=round(max(0.0, row.created_at - start) * 1000, 3), **fields)
        self.ended(address, row, final=True)

    def emit_tries(self, address: str, where: str, tries: list[dict[str, Any]],
                   start: float) -> float:
        """The failed attempts a unit's entry keeps (``attempts``: each with its own start,
        end, error and backoff); returns when the attempt after them started."""
        fields: dict[str, Any] = {"node": address, "agent_path": where}
        for one in tries:
            attempt = self.next_attempt(address, where)
            began, ended = float(one.get("started_at") or start), float(one.get("ended_at") or 0)
            self.emit(EventKind.NODE_STARTED, began, attempt=attempt, **fields)
            kind = EventKind.NODE_TIMED_OUT if one.get("timed_out") else EventKind.NODE_FAILED
            self.emit(kind, ended, attempt=attempt, error=_error(one.get("error")), **fields)
            backoff = one.get("backoff")
            if backoff is not None:
                self.emit(EventKind.NODE_RETRIED, ended, attempt=attempt,
                          backoff_seconds=float(backoff), **fields)
                start = ended + float(backoff)
        return start

    def failed_elements(self, row: CheckpointRow, entries: list[tuple[list[Any], Any]]) -> None:
        """The ``for_each`` elements that failed before their node's failed ``row`` (a
        failed element writes no row of its own; the node's row carries its entry): each
        element's attempts, the failed ones its entry keeps or else its one failure."""
        where = row.agent_path
        for key, item in _failed_items(row.node_id, entries):
            address = f"{row.node_id}/item:{key}"
            tries = _tries(item)
            if tries:
                self.emit_tries(address, where, tries, self.start_of(address, where))
                continue
            attempt = self.next_attempt(address, where)
            self.emit(EventKind.NODE_STARTED, self.start_of(address, where), node=address,
                      agent_path=where, attempt=attempt)
            error = item.get("error")
            timed_out = isinstance(error, dict) and error.get("type") == "TimeoutError"
            self.emit(EventKind.NODE_TIMED_OUT if timed_out else EventKind.NODE_FAILED,
                      row.created_at, node=address, agent_path=where, attempt=attempt,
                      error=_error(error))

    def ended(self, address: str, row: CheckpointRow, *, final: bool) -> None:
        if not row.agent_path:
            self.done_at[_top(address)] = row.created_at
        if final:  # a loop's next pass, or a later run of the node, counts from 1 again
            self.attempts.pop((row.agent_path, address), None)

    def on_fork(self, row: CheckpointRow) -> None:
        data = self.fork.data if self.fork is not None else {}
        self.emit(EventKind.FORKED, row.created_at, checkpoint_id=row.parent_checkpoint_id,
                  node=row.node_id, detail={"source": self.run.parent_execution_id,
                                            "patch": data.get("patch")})

    def on_end(self, row: CheckpointRow) -> None:
        self.clean = True
        output = _loads(row.node_output)
        status = self.run.status if self.run.status in (RunStatus.CANCELLED,) and \
            row.status == "failed" else str(row.status)
        self.emit(EventKind.RUN_ENDED, row.created_at, checkpoint_id=row.checkpoint_id,
                  status=status, error=_error(output) if row.status == "failed" else None,
                  detail=output if row.status == "completed" else None)
        if status == RunStatus.CANCELLED and self.plan is not None:
            for node in self.plan.nodes:
                if node.id not in self.statuses:
                    self.emit(EventKind.NODE_SKIPPED, row.created_at, node=node.id,
                              status=UnitStatus.SKIPPED, reason=SkipReason.CANCELLED)

    def finish(self, page_is_last: bool, now: float) -> None:
        """On the last page, a running run whose owner is gone has abandoned its nodes."""
        run = self.run
        if not page_is_last or run.status != RunStatus.RUNNING or self.claim is None or \
                self.clean or not _gone(run, now):
            return
        self.abandon(max(self.last_time, self.claim.created_at),
                     "its owner died or its lease expired; not resumed yet", resumed=False)

    def events(self) -> list[HistoryEvent]:
        return [event for _, _, event in sorted(self.out, key=lambda e: (e[0], e[1]))]


def _entry_of(row: CheckpointRow, entries: list[tuple[list[Any], Any]]) -> dict[str, Any] | None:
    """The entry of the unit ``row`` is about, if the row carries it."""
    node_id, _, item = row.node_id.partition("/item:")
    suffix = ["nodes", node_id] + (["items", item] if item else [])
    for path, value in entries:
        if path[-len(suffix):] == suffix and isinstance(value, dict):
            return value
    return None


def _tries(entry: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The failed attempts a unit's entry keeps (a unit with a retry policy), oldest first."""
    tries = entry.get("attempts") if entry is not None else None
    return [t for t in tries if isinstance(t, dict)] if isinstance(tries, list) else []


def _failed_items(node_id: str, entries: list[tuple[list[Any], Any]]
                  ) -> list[tuple[str, dict[str, Any]]]:
    """The failed ``for_each`` elements of ``node_id`` whose entries a row carries (as the
    node's entry, or each its own), in element order."""
    found: dict[str, dict[str, Any]] = {}
    for path, value in entries:
        if not isinstance(value, dict):
            continue
        items = value.get("items") if path[-2:] == ["nodes", node_id] else None
        if isinstance(items, dict):
            found.update({str(k): v for k, v in items.items() if isinstance(v, dict)})
        elif len(path) >= 4 and path[-4:-1] == ["nodes", node_id, "items"]:
            found[str(path[-1])] = value
    failed = [(k, v) for k, v in found.items() if v.get("status") == UnitStatus.FAILED]
    return sorted(failed, key=lambda pair: int(pair[0]) if pair[0].isdigit() else 0)


def _tool_result(entries: list[tuple[list[Any], Any]], name: str) -> Any:
    """The newest result of tool ``name`` in the conversation a row carries, if it does."""
    for path, value in entries:
        if path == ["messages"] and isinstance(value, list):
            for message in reversed(value):
                if isinstance(message, dict) and message.get("role") == "tool" and \
                        message.get("tool_name") in (name, name.replace(".", "_")):
                    return message.get("content")
    return None


def _gone(run: RunRecord, now: float) -> bool:
    """The run's owner is provably dead or its lease ran out (nobody executes it)."""
    return run.owner is None or (run.lease_until is not None and run.lease_until < now) or \
        provably_dead(run.owner)


def build_history(store: HistorySource, execution_id: str, after: str | None = None,
                  limit: int = 200, *, now: float | None = None) -> History:
    """One page of a run's history: the events up to its ``limit``-th checkpoint after
    ``after`` (see the module docstring). Raises :class:`RunNotFound`."""
    now = time.time() if now is None else now
    run = store.get_run(execution_id)
    if run is None:
        raise RunNotFound(execution_id)
    plan = _plan(store, run)
    rows = store.page_rows(execution_id, after, limit + 1)
    next_after = rows[limit - 1].checkpoint_id if len(rows) > limit else None
    rows = rows[:limit]
    seeded: dict[str, str] = {}
    if after is not None:
        start = store.get(execution_id, after)
        nodes = start.state_snapshot.get("nodes") if start is not None else None
        seeded = {k: str(v.get("status")) for k, v in (nodes or {}).items()
                  if isinstance(v, dict)}
    builder = _Builder(store, run, plan, seeded)
    builder.last_row = after
    low = checkpoint_time(after) if after is not None else float("-inf")
    high = rows[-1].created_at if next_after is not None else float("inf")
    stored = store.events(execution_id)
    builder.fork = next((e for e in stored if e.kind == RunEventKind.FORKED), None)
    decisions = store.decisions(execution_id)
    builder.answers = {d.checkpoint_id: d for d in decisions}
    answered = {str(e.data.get("checkpoint_id")) for e in stored
                if e.kind == RunEventKind.ANSWERED}
    for row in rows:
        if str(row.step_type) == StepType.NODE or row.node_id == RUN_END:
            builder.finished_later[_top(row.node_id)] = row.created_at
            builder.unit_ended[(row.agent_path, row.node_id)] = row.created_at
    if after is None:
        builder.emit(EventKind.RUN_CREATED, run.created_at.timestamp(),
                     detail={"queue": run.queue} if run.queue else None)
    timeline: list[tuple[float, int, Any]] = []
    for event in stored:
        if event.created_at <= high and (event.kind == RunEventKind.CLAIMED or
                                         low < event.created_at):
            timeline.append((event.created_at, 0, event))
    for decision in decisions:
        moment = decision.created_at.timestamp()
        if decision.checkpoint_id not in answered and low < moment <= high:
            timeline.append((moment, 0, decision))
    timeline += [(row.created_at, 1, row) for row in rows]
    timeline.sort(key=lambda t: (t[0], t[1]))
    for moment, _, item in timeline:
        if isinstance(item, CheckpointRow):
            builder.on_row(item)
        elif isinstance(item, Decision):
            builder.on_decision(item)
        elif moment > low:
            builder.on_event(item)
        else:  # a claim before the page: it says who wrote its rows, shown on an earlier page
            builder.claim, builder.clean = item, False
    builder.finish(next_after is None, now)
    events = builder.events()
    state = newest_state(store, run)
    return History(
        execution_id=run.execution_id, workflow=run.workflow, status=run.status,
        created_at=run.created_at, inputs=run.inputs, error=run.error,
        parent_execution_id=run.parent_execution_id,
        parent_checkpoint_id=run.parent_checkpoint_id,
        trigger=run.trigger.as_dict() if run.trigger else None,
        nodes=node_views(state, run, plan, events, abandoned=_gone(run, now)),
        usage=state.get("usage") if isinstance(state.get("usage"), dict) else None,
        events=events, next_after=next_after)


_ = NodeState  # (re-exported through history.py)
