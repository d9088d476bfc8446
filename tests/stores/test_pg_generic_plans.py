"""A worker's PostgreSQL connections plan each prepared statement once
(``plan_cache_mode = force_generic_plan``, ``postgres.GENERIC_PLANS``): the claim was planned
again at every execution under ``auto``. Other stores keep PostgreSQL's default."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from helpers import new_run

from tether.stores.postgres import PostgresCheckpointer
from tether.stores.sql_queue import claim_one_call


def _mode(store: PostgresCheckpointer) -> str:
    with store.sql_cursor("reading the plan cache mode") as cursor:
        cursor.execute("SHOW plan_cache_mode")
        return str(cursor.fetchone()[0])



def test_a_store_plans_as_postgresql_does_until_a_worker_uses_it(
        pg_store: PostgresCheckpointer) -> None:
    assert _mode(pg_store) == "auto"
    pg_store.use_for_worker()
    assert _mode(pg_store) == "force_generic_plan"  # the open connection
    pg_store.close()  # every connection made afterwards: the search path and the mode
    assert _mode(pg_store) == "force_generic_plan"
    with pg_store.sql_cursor("reading the search path") as cursor:
        cursor.execute("SHOW search_path")
        assert pg_store.schema is not None and pg_store.schema in str(cursor.fetchone()[0])


def test_a_workers_claims_on_generic_plans_take_runs_in_claim_order(
        pg_store: PostgresCheckpointer) -> None:
    priorities = [3, 0, 7, 1, 7, 5, 2, 0, 4, 6, 1, 3, 9, 8, 2]
    ids: dict[str, int] = {}
    for priority in priorities:
        eid = new_run(pg_store, status="queued")
        assert pg_store.enqueue_run(eid, "q", priority, None)
        ids[eid] = priority
    pg_store.use_for_worker()
    taken: list[str] = []
    for limit in (1, 2, 1, 3, 1, 1, 2, 1, 1, 2):  # beyond 5 executions: the generic plan
        now = time.time()
        claimed = pg_store.claim_runs("w", ["q"], limit, now, now + 60)
        assert len(claimed) == limit
        taken += [c.run.execution_id for c in claimed]
    assert len(set(taken)) == len(taken) == len(ids)
    assert [ids[e] for e in taken] == sorted(priorities, reverse=True)
    now = time.time()
    assert pg_store.claim_runs("w", ["q"], 3, now, now + 60) == []


def test_a_workers_claim_passes_over_a_run_locked_elsewhere_and_changes_only_its_own(
        pg_store: PostgresCheckpointer, pg_schema: tuple[str, str]) -> None:
    """The one-statement claim on generic plans, of one run (``LIMIT 1`` written in it,
    issue 26) and of two (bound): a run another transaction holds locked is passed over
    (``SKIP LOCKED``), not waited for, and taken once the lock is gone; each claim changes
    only the runs it takes, with one ``claimed`` event each."""
    import psycopg

    url, schema = pg_schema
    eids = [new_run(pg_store, status="queued", created_at=1000.0 + i) for i in range(12)]
    for eid in eids:
        assert pg_store.enqueue_run(eid, "q", 0, None)
    pg_store.use_for_worker()
    taken: list[str] = []
    for _ in range(6):  # beyond 5 executions: the generic plan
        now = time.time()
        taken += [c.run.execution_id for c in pg_store.claim_runs("w", ["q"], 1, now, now + 60)]
    assert taken == eids[:6]
    with psycopg.connect(url) as holder:  # a transaction holding the next run's row lock
        holder.execute(f'SELECT 1 FROM "{schema}".runs WHERE execution_id = %s FOR UPDATE',
                       (eids[6],))
        now = time.time()
        passed = pg_store.claim_runs("w", ["q"], 2, now, now + 60)
        assert [c.run.execution_id for c in passed] == eids[7:9]
        holder.rollback()
    now = time.time()
    later = pg_store.claim_runs("w", ["q"], 1, now, now + 60)
    assert [c.run.execution_id for c in later] == [eids[6]]
    claimed = set(eids[:9])
    for eid in eids:
        run = pg_store.get_run(eid)
        assert run is not None
        assert run.status == ("running" if eid in claimed else "queued")
        assert (run.owner is not None) == (eid in claimed)
        kinds = [event.kind for event in pg_store.events(eid)]
        assert kinds == (["claimed"] if eid in claimed else [])


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)


def test_a_slots_claim_of_one_run_reads_no_run_but_by_index(
        pg_store: PostgresCheckpointer, pg_schema: tuple[str, str]) -> None:
    """The claim a slot sends after each run's end (limit 1), planned as a worker plans it
    (generic) over an analysed backlog of 1,000 runs, reads ``runs`` by its indexes only:
    its UPDATE probes the claimed run's key (with a bound ``LIMIT $n``, estimated at a tenth
    of the candidates, the UPDATE hashed a sequential scan of every run, issue 26). Over a
    table of a few hundred runs either plan costs about the same, and either is chosen."""
    import psycopg
    from psycopg import sql

    url, schema = pg_schema
    now = time.time()
    name, build, values = claim_one_call("w", ["q"], 1, now, now + 60, ["f" * 64])
    statement = pg_store._sql.get(name, build)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'SET search_path TO "{schema}"')
        connection.execute(
            "INSERT INTO runs (execution_id, workflow, plan_fingerprint, status, inputs, "
            "created_at, updated_at, queue) SELECT 'r' || i, 'wf', repeat('f', 64), "
            "'queued', '{}', i, i, 'q' FROM generate_series(1, 1000) AS i")
        connection.execute("ANALYZE runs")
        connection.execute("SET plan_cache_mode = force_generic_plan")
        connection.execute("PREPARE claim AS " + pg_store._text(statement.sql))
        params = sql.SQL(", ").join(sql.Literal(v) for v in statement.params(values))
        (plan,), = connection.execute(sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE claim({})").format(
            params)).fetchall()
    reads = {(node["Node Type"], node.get("Index Name"), node["Alias"])
             for node in _nodes(plan[0]["Plan"])
             if node.get("Relation Name") == "runs" and node["Node Type"].endswith("Scan")}
    assert all(kind != "Seq Scan" for kind, _, _ in reads), sorted(reads)
    target, = (node["Alias"] for node in _nodes(plan[0]["Plan"])
               if node["Node Type"] == "ModifyTable" and node["Relation Name"] == "runs")
    assert {(kind, index) for kind, index, alias in reads if alias == target} == {
        ("Index Scan", "runs_pkey")}, sorted(reads)
