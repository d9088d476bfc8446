"""``tether resume --enqueue --value`` on SQLite without SQLAlchemy or the runtime: the
answer's claim and the run left on its queue, written with the standard library's
``sqlite3`` (issue 25, fast start).

It takes only the common case, and only when it writes what the full path would
(``Runner.aresume`` -> ``lifecycle.route`` -> ``Resumption.record``, then
``store.enqueue_run``): a plain ``sqlite:///PATH`` naming an existing file whose schema is
this release's (``sqlite_submit.open_current``); a run named in full or by a unique prefix
of 8 or more characters, ``paused`` and held by nobody; one pending row at the top level of
the plan (not in a ``for_each``, a sub-workflow or an agent), picked as the full path picks
it (the only one, or the one ``--node`` names in a plan that renames nothing), with no
deadline; the node an approval of the current plan format, and the answer valid for its
form (the full path's own check, ``input_values.check_values``). Without ``--enqueue`` and
without task modules it also takes the case the full path leaves to the workers: a plan
whose only tasks are its top-level task nodes (and at least one), the run then left to the
live workers of its queue or, with none live, the full path's ``NotContinued`` (exit 5).
Who continues the run is decided by the functions ``lifecycle.route`` calls
(``runtime/route_rules.py``), from the rows read here. Anything else returns
None *before anything is written*, and the caller runs the full path, which then answers,
refuses or reports exactly as it always did (the same messages and exit codes).

The claim is the store's (``sql_rows.claim``: ``BEGIN IMMEDIATE``, the run row read,
``DELETE ... RETURNING`` of the pending row, the decision and the ``answered`` event), so
of any number of racing answerers, through either path, exactly one gets the row; a loser
here returns None and the full path then reports what it reports to any later answerer
(``AlreadyResumed``, or "not waiting for input"). The run row is read again and the run
enqueued (``enqueue_run``) in the same transaction; the full path does both just after
its claim commits, so this is one of the orders it can take. A failed COMMIT is reported as
the store's error, never retried through the full path: the answer may have been written.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

from tether.errors import NotContinued, StoreError
from tether.runtime.input_values import check_values
from tether.runtime.route_rules import alive_since, continues_here, held, left
from tether.runtime.route_text import held_message
from tether.stores.events import AnswerChannel, RunEventKind, new_event_id
from tether.stores.idprefix import MIN_PREFIX, upper_bound
from tether.stores.lease_env import env_lease_seconds
from tether.stores.owners import describe_owner
from tether.stores.records import names_place
from tether.stores.sql_text import (
    DECISION_COLUMNS,
    EVENT_COLUMNS,
    PENDING_COLUMNS,
    RUN_COLUMNS,
    SQLITE_ANSWER,
    WORKER_COLUMNS,
    to_json,
)
from tether.stores.sqlite_file import is_locked, locked_error_of
from tether.stores.sqlite_submit import open_current

__all__ = ["Recorded", "record_answer"]

PLAN_FORMAT = 1  # tether.compiler.plan.PLAN_FORMAT (a test keeps them equal)


@dataclass(frozen=True)
class Recorded:
    """The answer recorded: the run's whole id, ``queued`` (left on its queue) or
    ``running`` (a live attempt holds it and applies the answer), and what to print; or,
    when the run was not left to the workers (``leave=False``) and none of its queue is live,
    the error the full path raises then (``not_continued``, exit 5)."""

    execution_id: str
    status: str
    message: str
    not_continued: NotContinued | None = None


class _Field(NamedTuple):
    """A form field as ``check_values`` reads it (``PlanInput``'s attributes)."""

    name: str
    type: str
    required: bool
    default: Any
    enum: tuple[Any, ...] | None


def _run(connection: sqlite3.Connection, execution_id: str) -> dict[str, Any] | None:
    row = connection.execute(SQLITE_ANSWER["get_run"][0], (execution_id,)).fetchone()
    return dict(zip(RUN_COLUMNS, row, strict=True)) if row is not None else None


def _resolve(connection: sqlite3.Connection, text: str) -> dict[str, Any] | None:
    """The run ``text`` names in full or by a unique prefix; None otherwise (the full path
    then says which id is unknown, too short or ambiguous)."""
    if not text or "\x00" in text:
        return None
    run = _run(connection, text)
    if run is not None or len(text) < MIN_PREFIX:
        return run
    high = upper_bound(text)
    if high is None:
        return None
    ids = [r[0] for r in connection.execute(SQLITE_ANSWER["runs_prefix_True"][0],
                                            (text, high, 2, 0)) if r[0].startswith(text)]
    return _run(connection, ids[0]) if len(ids) == 1 else None


def _target(connection: sqlite3.Connection, execution_id: str, node: str | None,
            plan_text: str) -> dict[str, Any] | None:
    """The pending row the answer is for, as ``Resumption._target`` picks it."""
    rows = [dict(zip(PENDING_COLUMNS, r, strict=True)) for r in connection.execute(
        SQLITE_ANSWER["list_pending_of"][0], (execution_id,))]
    if node is None:
        return rows[0] if len(rows) == 1 else None
    if "renamed_from" in plan_text:  # an old address is read through the renames
        return None
    return next((r for r in rows if names_place(r["agent_path"], r["node_id"], node)), None)


def _plan(plan_text: str) -> dict[str, Any] | None:
    plan = json.loads(plan_text)
    return plan if isinstance(plan, dict) and plan.get("tether_plan") == PLAN_FORMAT else None


_FLAT = frozenset({"task", "approval", "switch", "noop", "fail", "sleep", "sleep_until"})
"""Node kinds that call no task other than their own ``task``."""


def _tasks(plan: dict[str, Any]) -> list[str] | None:
    """The tasks the plan calls, sorted (``plans.task_names``); None when it may call more
    than its top-level task nodes (agents' tools, sub-workflows)."""
    nodes = plan.get("nodes") or ()
    if plan.get("agents") or any(n.get("kind") not in _FLAT for n in nodes):
        return None
    return sorted({str(n["task"]) for n in nodes if n.get("kind") == "task"})


def _form_accepts(plan: dict[str, Any], node_id: str, answer: dict[str, Any]) -> bool:
    """Whether ``node_id`` is a top-level approval of the plan whose form (if any) takes
    ``answer`` as the full path's check does."""
    node = next((n for n in plan.get("nodes") or () if n.get("id") == node_id), None)
    if node is None or node.get("kind") != "approval":
        return False
    form = (node.get("approval") or {}).get("form")
    if form is None:
        return True
    fields = tuple(_Field(f["name"], f["type"], f["required"], f.get("default"),
                          tuple(f["enum"]) if f.get("enum") is not None else None)
                   for f in form)
    _, problems = check_values(fields, answer, "field")  # type: ignore[arg-type]
    return not problems


def _value_text(answer: dict[str, Any]) -> str | None:
    """The stored text of the answer; None when the full path would refuse or alter it
    (``runtime.values.to_json``: no NaN, NUL or lone surrogate)."""
    try:
        text = json.dumps(answer, allow_nan=False)
        text.encode("utf-8")
    except (ValueError, UnicodeEncodeError):
        return None
    return None if "\\u0000" in text else to_json(answer)


def record_answer(url: str, text_id: str, answer: dict[str, Any], node: str | None,
                  queue: str | None, *, leave: bool = True) -> Recorded | None:
    """Claim the pending row ``answer`` is for and leave the run on its queue (see the
    module docstring); None when nothing was written and the full path must act.

    ``leave=False``: this process has no task modules (``tether resume`` without
    ``--tasks`` or a pyproject's), so the full path leaves the run to the workers when its
    plan calls a task (to the live ones of its queue; with none live the result carries the
    ``NotContinued`` it raises); a plan without tasks runs here, so this returns None
    first."""
    lease = env_lease_seconds()
    value = _value_text(answer)
    if lease is None or value is None:
        return None
    connection = open_current(url)
    if connection is None:
        return None
    try:
        return _record(connection, text_id, answer, value, node, queue, lease, leave)
    finally:
        connection.close()


def _live(connection: sqlite3.Connection, queue: str, lease: float) -> list[str]:
    """``lifecycle.live_workers`` of ``queue``, as ``host/pid``."""
    since = alive_since(time.time(), lease)
    rows = (dict(zip(WORKER_COLUMNS, r, strict=True)) for r in connection.execute(
        SQLITE_ANSWER["list_workers"][0], (since,)))
    return [f"{w['host']}/{int(w['pid'])}" for w in rows if queue in json.loads(w["queues"])]


class _Decided(NamedTuple):
    """What the reads decided: the run row, its pending row to claim, the queue to leave
    it on, and the tasks this process lacks (``leave=False``)."""

    run: dict[str, Any]
    target: dict[str, Any]
    where: str
    missing: list[str]


def _decide(connection: sqlite3.Connection, text_id: str, answer: dict[str, Any],
            node: str | None, queue: str | None, leave: bool) -> _Decided | None:
    """Read the run, its plan and its pending rows; None unless this is the common case
    (see the module docstring). Writes nothing."""
    run = _resolve(connection, text_id)
    if run is None or run["status"] != "paused" or run["owner"] is not None:
        return None
    where = queue or run["queue"] or "default"
    plan_row = connection.execute(SQLITE_ANSWER["get_plan"][0],
                                  (run["plan_fingerprint"],)).fetchone()
    plan = _plan(plan_row[0]) if plan_row is not None else None
    if plan is None:
        return None
    missing = [] if leave else _tasks(plan)
    if missing is None or continues_here(missing, leave):
        return None  # it may call tasks not read here, or the full path continues it here
    target = _target(connection, run["execution_id"], node, plan_row[0])
    if target is None or target["due_at"] is not None or target["agent_path"] \
            or "/" in target["node_id"] \
            or not _form_accepts(plan, target["node_id"], answer):
        return None
    return _Decided(run, target, where, missing)


def _record(connection: sqlite3.Connection, text_id: str, answer: dict[str, Any],
            value: str, node: str | None, queue: str | None, lease: float,
            leave: bool) -> Recorded | None:
    try:
        decided = _decide(connection, text_id, answer, node, queue, leave)
        holder = _claim(connection, decided, value) if decided is not None else None
    except (sqlite3.Error, ValueError, KeyError, TypeError, AttributeError) as exc:
        # (a SQLite error, or a stored row this path does not read as the full one would)
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        if is_locked(exc):  # the full path would wait as long again, then say the same
            raise locked_error_of(f"claiming the interrupt of run {text_id}",
                                  connection) from exc
        return None
    if decided is None or holder is None:
        return None  # nothing written
    eid, address = decided.run["execution_id"], decided.target["node_id"]
    _commit(connection, eid)
    if holder:
        return Recorded(eid, "running", held_message(eid, address, describe_owner(holder)))
    try:  # committed: from here on a failure is the store's error, never a second try
        live = _live(connection, decided.where, lease)
    except sqlite3.Error as exc:
        raise StoreError(f"listing workers: {exc}") from exc
    outcome = left(eid, address, decided.where, decided.missing, live, leave)
    return Recorded(eid, "queued", outcome.message, outcome.error)


def _claim(connection: sqlite3.Connection, decided: _Decided, value: str) -> str | None:
    """In one write transaction, left open for the caller to commit: claim the pending
    row, record the decision and the ``answered`` event, read the run again and, unless a
    live attempt holds it, enqueue it. The holder's owner token when one holds it, ``""``
    when the run was enqueued, None (rolled back) when another answerer was first."""
    eid, target = decided.run["execution_id"], decided.target
    connection.execute("BEGIN IMMEDIATE")
    connection.execute(SQLITE_ANSWER["lock_run"][0], (eid,))
    claimed = connection.execute(SQLITE_ANSWER["claim"][0],
                                 (eid, target["checkpoint_id"])).fetchone()
    if claimed is None:  # another answerer was first: the full path says so
        connection.execute("ROLLBACK")
        return None
    row = dict(zip(PENDING_COLUMNS, claimed, strict=True))
    decision = {**{c: row[c] for c in ("execution_id", "checkpoint_id", "node_id",
                                       "agent_path")},
                "value": value, "resolver": None, "comment": None, "created_at": time.time()}
    connection.execute(SQLITE_ANSWER["insert_decision"][0],
                       tuple(decision[c] for c in DECISION_COLUMNS))
    event_at = time.time()
    event = {"execution_id": eid, "event_id": new_event_id(event_at),
             "kind": str(RunEventKind.ANSWERED), "created_at": event_at, "owner": None,
             "actor": None, "channel": str(AnswerChannel.CLI),
             "data": to_json({"address": row["node_id"], "checkpoint_id": row["checkpoint_id"],
                              "reason": row["reason"]})}
    connection.execute(SQLITE_ANSWER["insert_event"][0],
                       tuple(event[c] for c in EVENT_COLUMNS))
    fresh = _run(connection, eid) or decided.run
    if held(fresh["owner"], fresh["lease_until"], time.time()):
        return str(fresh["owner"])
    connection.execute(SQLITE_ANSWER["enqueue_run"][0], (
        "failed", "queued", decided.where, decided.run["priority"], None, eid))
    return ""


def _commit(connection: sqlite3.Connection, execution_id: str) -> None:
    """COMMIT; a failure is the store's error, not a reason to try the full path (the
    answer may have been written)."""
    try:
        connection.execute("COMMIT")
    except sqlite3.Error as exc:
        raise StoreError(f"claiming the interrupt of run {execution_id}: {exc}") from exc
