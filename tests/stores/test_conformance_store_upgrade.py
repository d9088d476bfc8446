"""Store conformance: ``move_run_plan`` (``tether upgrade``, issue 24). The move is one
compare-and-set; the run's pending interrupts and decisions take their new places and its
``upgraded`` event is written in the same transaction: a move always has one event, a refused
move (held, raced, finished) none, and a move whose event cannot be written does not happen.

Every test runs against the in-memory, SQLite and PostgreSQL checkpointers (the last one
against the two SQL backends).

Checks the protocol RunStore (``tether.stores.contracts``), with the task signatures
recorded beside a plan (``set_plan_tasks``, ``get_plan_tasks``).
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
from helpers import new_run, pause, run_end
from sqlalchemy import text

from tether.errors import TetherError
from tether.stores.base import Checkpointer
from tether.stores.events import RunEventKind
from tether.stores.open import open_checkpointer
from tether.stores.records import Readdress

pytestmark = pytest.mark.protocol("RunStore")

OLD, NEW = "a" * 64, "b" * 64
NEW_PLAN = '{"tether_plan": 1, "name": "wf", "nodes": []}'


def _upgraded(store: Checkpointer, eid: str) -> list[dict[str, object]]:
    return [dict(e.data) for e in store.events(eid) if e.kind == RunEventKind.UPGRADED]


def test_a_move_writes_exactly_one_upgraded_event(store: Checkpointer) -> None:
    eid = new_run(store, status="queued", fingerprint=OLD)
    assert store.move_run_plan(eid, OLD, NEW, NEW_PLAN)
    assert _upgraded(store, eid) == [{"from": OLD, "to": NEW}]
    run = store.get_run(eid)
    assert run is not None and run.plan_fingerprint == NEW
    assert store.get_plan(NEW) == NEW_PLAN
    assert not store.move_run_plan(eid, OLD, NEW, NEW_PLAN)  # raced: already moved
    assert len(_upgraded(store, eid)) == 1


@pytest.mark.parametrize("why", ["held", "raced", "finished", "missing"])
def test_a_refused_move_leaves_no_event_and_no_change(store: Checkpointer, why: str) -> None:
    eid = new_run(store, status="queued", fingerprint=OLD)
    interrupted = pause(store, eid)
    if why == "held":
        assert store.acquire(eid, "worker-token", until=4e9, now=1.0)
    elif why == "finished":
        store.finish_run(run_end(eid), "completed", None, None)
    expected = "c" * 64 if why == "raced" else OLD
    target = "no-such-run" if why == "missing" else eid
    moved = store.move_run_plan(target, expected, NEW, NEW_PLAN, [Readdress(
        interrupted.checkpoint_id, "gate", "", "review")])
    assert not moved
    assert _upgraded(store, eid) == []
    run = store.get_run(eid)
    assert run is not None and run.plan_fingerprint == OLD
    assert all(p.node_id == "review" for p in store.list_pending(eid))


def test_a_move_readdresses_the_pauses_it_names(store: Checkpointer) -> None:
    eid = new_run(store, status="queued", fingerprint=OLD)
    first = pause(store, eid, node_id="review")
    second = pause(store, eid, node_id="other")
    assert store.claim(next(p for p in store.list_pending(eid)
                            if p.checkpoint_id == second.checkpoint_id), {"ok": True})
    assert store.move_run_plan(eid, OLD, NEW, NEW_PLAN, [
        Readdress(first.checkpoint_id, "gate", "", "review"),
        Readdress(second.checkpoint_id, "elsewhere", "", "other")])
    (pending,) = store.list_pending(eid)
    assert (pending.checkpoint_id, pending.node_id, pending.address) == \
        (first.checkpoint_id, "gate", "gate")
    (decision,) = store.decisions(eid)
    assert (decision.checkpoint_id, decision.node_id) == (second.checkpoint_id, "elsewhere")
    assert _upgraded(store, eid) == [{"from": OLD, "to": NEW, "renamed": {
        "review": "gate", "other": "elsewhere"}}]


_REFUSE = {
    "sqlite": ["CREATE TRIGGER refuse_events BEFORE INSERT ON run_events "
               "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"],
    "postgres": ["CREATE FUNCTION {schema}.refuse_events() RETURNS trigger AS $$ BEGIN "
                 "RAISE EXCEPTION 'refused by the test'; END $$ LANGUAGE plpgsql",
                 "CREATE TRIGGER refuse_events BEFORE INSERT ON {schema}.run_events "
                 "FOR EACH ROW EXECUTE FUNCTION {schema}.refuse_events()"],
}


def test_a_move_whose_event_cannot_be_written_does_not_happen(shared_url: str) -> None:
    """The event's INSERT fails (a trigger refuses it): the plan switch and the readdressed
    pause roll back with it, so no run is ever moved without its event."""
    with open_checkpointer(shared_url) as store:
        eid = new_run(store, status="queued", fingerprint=OLD)
        interrupted = pause(store, eid)
        backend = "sqlite" if shared_url.startswith("sqlite") else "postgres"
        schema = parse_qs(urlparse(shared_url).query).get("schema", [""])[0]
        with store.engine.begin() as connection:  # type: ignore[attr-defined]
            for statement in _REFUSE[backend]:
                connection.execute(text(statement.format(schema=f'"{schema}"')))
        with pytest.raises(TetherError):
            store.move_run_plan(eid, OLD, NEW, NEW_PLAN, [Readdress(
                interrupted.checkpoint_id, "gate", "", "review")])
        run = store.get_run(eid)
        assert run is not None and run.plan_fingerprint == OLD
        assert [p.node_id for p in store.list_pending(eid)] == ["review"]
        assert store.events(eid) == []


def test_task_signatures_are_recorded_once_beside_the_plan(store: Checkpointer) -> None:
    """``set_plan_tasks``: the first recording of a stored plan wins; a plan the store does
    not hold records nothing; the plan's JSON is untouched."""
    eid = new_run(store, fingerprint=OLD)
    plan_json = store.get_plan(OLD)
    assert store.get_plan_tasks(OLD) is None
    assert store.set_plan_tasks(OLD, '{"t": {"params": [], "returns": null}}')
    assert not store.set_plan_tasks(OLD, '{"other": {}}')
    assert store.get_plan_tasks(OLD) == '{"t": {"params": [], "returns": null}}'
    assert store.get_plan(OLD) == plan_json
    assert not store.set_plan_tasks("d" * 64, "{}")
    assert store.get_plan_tasks("d" * 64) is None
    assert store.get_run(eid) is not None
