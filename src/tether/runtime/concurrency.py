"""Concurrency keys at the start of a run: render the key, hand the run to the store's keyed
insert, and record what the key did in the histories.

``Runner.submit`` (and so ``tether submit``, the API, webhooks and schedules) and
``Runner.run`` (``tether run``, in place) both come here when the plan has
``concurrency``. The store decides atomically (``stores/keys.py``); this module only
renders, waits (in place, while the key is at its limit) and writes the history events.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from jinja2 import TemplateError

from tether.errors import InputError, TemplateLimit
from tether.runtime.attempt import StopAtBoundary
from tether.runtime.results import RunResult
from tether.runtime.run_events import add_event
from tether.runtime.state import NodeError
from tether.status import RunStatus
from tether.stores.base import Checkpointer
from tether.stores.events import RunEvent, RunEventKind
from tether.stores.keys import KeyedStart
from tether.stores.records import RunRecord
from tether.templating import evaluate, has_markup

if TYPE_CHECKING:
    from tether.compiler.plan import Plan

MAX_KEY_CHARS = 1000
WAIT_SECONDS = 0.25
"""How often a run started in place looks again at a key at its limit."""


def render_key(plan: Plan, inputs: Any) -> str | None:
    """The run's concurrency key (None: the plan has none, or it renders to null or "")."""
    spec = plan.concurrency
    if spec is None:
        return None
    try:
        value = evaluate(spec.key, {"inputs": inputs}) if has_markup(spec.key) else spec.key
    except (TemplateError, TemplateLimit) as exc:
        raise InputError([f"workflow '{plan.name}': the concurrency key {spec.key!r} cannot "
                          f"be rendered from the inputs: {exc}"]) from None
    if value is None or value == "":
        return None
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if len(text) > MAX_KEY_CHARS:
        raise InputError([f"workflow '{plan.name}': the concurrency key renders to "
                          f"{len(text):,} characters (at most {MAX_KEY_CHARS:,})"])
    return text


def keyed(plan: Plan, run: RunRecord) -> RunRecord:
    """``run`` with its rendered key and limit (unchanged when it has none)."""
    key = render_key(plan, run.inputs)
    if key is None or plan.concurrency is None:
        return run
    return replace(run, concurrency_key=key, concurrency_limit=plan.concurrency.limit)


def start_keyed(store: Checkpointer, plan: Plan, run: RunRecord, plan_json: str) -> KeyedStart:
    """Insert the keyed ``run`` (queued, submitted) as the plan's ``on_conflict`` decides,
    and record the outcome in the histories of the runs concerned."""
    assert plan.concurrency is not None
    started = store.create_keyed_run(run, plan_json, plan.concurrency.on_conflict, time.time())
    record(store, plan, run, started)
    return started


async def start_in_place(store: Checkpointer, plan: Plan, run: RunRecord,
                         plan_json: str, lease: Callable[[], float]) -> KeyedStart:
    """Insert the keyed ``run`` (running, owned by this process) once its key has room:
    until then nothing is stored and this waits; ``cancel_new`` and ``reject`` decide at
    once, as for a submission. ``lease``: the lease's end, asked again at each try."""
    assert plan.concurrency is not None
    waited = False
    superseded: tuple[str, ...] = ()
    while True:
        run = replace(run, lease_until=lease())
        started = store.create_keyed_run(run, plan_json, plan.concurrency.on_conflict,
                                         time.time())
        superseded += started.superseded
        if started.created:
            record(store, plan, run, replace(started, superseded=superseded), waited=waited)
            return started
        waited = True
        await asyncio.sleep(WAIT_SECONDS)


def record(store: Checkpointer, plan: Plan, run: RunRecord, started: KeyedStart,
           waited: bool = False) -> None:
    """The history events of a keyed start: the new run's (waiting, cancelled, or started
    after waiting), and each superseded run's."""
    assert plan.concurrency is not None
    key, limit = run.concurrency_key, plan.concurrency.limit
    holders = [h.execution_id for h in started.holders]
    data: dict[str, Any] = {"key": key, "limit": limit,
                            "on_conflict": plan.concurrency.on_conflict, "holders": holders}
    if started.status == RunStatus.CANCELLED:
        reason = (f"cancelled: concurrency key '{key}' had {len(holders)} run(s) in progress "
                  f"(limit {limit}); on_conflict: cancel_new")
        add_event(store, RunEvent(run.execution_id, RunEventKind.CONCURRENCY,
                                  data={**data, "outcome": "cancelled", "reason": reason}))
    elif started.superseded:
        reason = (f"superseded {len(started.superseded)} older run(s) of concurrency key "
                  f"'{key}': {', '.join(started.superseded)}")
        add_event(store, RunEvent(run.execution_id, RunEventKind.CONCURRENCY, data={
            **data, "outcome": "superseded", "reason": reason,
            "superseded": list(started.superseded)}))
    elif waited or started.occupied >= limit:
        reason = (f"waited for concurrency key '{key}' (limit {limit})" if waited else
                  f"waits for concurrency key '{key}': {started.occupied} run(s) running, "
                  f"paused or queued ahead (limit {limit})")
        add_event(store, RunEvent(run.execution_id, RunEventKind.CONCURRENCY,
                                  data={**data, "outcome": "waiting", "reason": reason}))
    for older in started.superseded:
        add_event(store, RunEvent(older, RunEventKind.CANCEL_REQUESTED, actor=run.execution_id,
                                  channel="concurrency", data={
                                      "outcome": "superseded", "key": key,
                                      "reason": f"superseded by the newer run "
                                      f"{run.execution_id} (on_conflict: cancel_running)"}))


def cancelled_result(store: Checkpointer, execution_id: str) -> RunResult:
    """The result of a run started in place that ``cancel_new`` stored cancelled."""
    run = store.get_run(execution_id)
    error = run.error if run is not None and isinstance(run.error, dict) else {}
    message = str(error.get("message") or "cancelled by its concurrency key")
    return RunResult(RunStatus.CANCELLED, execution_id,
                     error=NodeError("RunCancelled", message, None), message=message)


def cancel_boundary(store: Checkpointer, execution_id: str) -> Callable[[], None]:
    """The node-boundary check of a keyed run started in place: a newer run of its key
    (``cancel_running``) or ``tether cancel`` asked to cancel it (one primary-key read of
    one column per unit, for keyed runs only)."""
    def check() -> None:
        if store.cancel_requested_at(execution_id) is not None:
            raise StopAtBoundary(execution_id, cancel=True)
    return check
