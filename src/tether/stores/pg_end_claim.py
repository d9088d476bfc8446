"""PostgreSQL: a worker slot's run end and its next claim in one transaction, one round trip.

A worker slot that ends a run claims the next one itself (``workers/chain.py``). Written
apart, that is two round trips and two commits (two WAL flushes) between the run's last node
and the next run's first: the end (the last node's row, the ``run_end`` row and the run row,
one fenced statement) and the claim (:func:`~tether.stores.sql_queue.claim_one_statement`).
Armed by the worker before each drive (:meth:`~tether.stores.base.Checkpointer.
arm_end_claim`), the slot's store sends both on its hot connection in libpq's pipeline mode,
followed by one Sync (``pg_hot.HotStatements.pipelined``): the extended protocol runs the
statements up to a Sync in one implicit transaction, committed at the Sync, so this is one
round trip and one commit with no ``BEGIN`` or ``COMMIT`` statements. The two statements'
texts, parameters and fencing are unchanged; only their transaction is shared. Both are
prepared once per connection with the types psycopg would send their parameters with, and
sent with text parameters without psycopg's cursor and pipeline objects (which cost a worker
about 520 us of CPU per end and claim, against 90 us for a node's checkpoint write: issue
26). Where the hot connection cannot be used directly (``pg_hot.py``: a transaction block,
psycopg's own pipeline, another encoding, a value it does not encode), the end is written
alone, as unarmed, and the chain claims alone.

- **Atomic.** Both commit or neither. A statement error (either statement) rolls both back
  (the server skips what follows the error up to the Sync): the end is then written alone as
  without the claim (:func:`end_with_claim`), and no claim is recorded, so the chain claims
  alone as before. A lost connection raises as the end
  alone would (``StoreUnavailable``; the claim, if it committed, is not seen: its run's lease
  expires and it is claimed again, as for a claim alone).
- **A lost lease.** The end's fence finding another owner writes nothing of the end, yet the
  claim in the same transaction may take a run: it is recorded all the same before
  ``finish_run`` raises ``LeaseLost``, and the chain drives it or gives it back.
- **Only one run's end.** The arming names the run; a sub-workflow's end, or any other
  run's, on the same store is written as without it. It is consumed by that end (a retry of
  the end is written alone), and :meth:`take_end_claim` disarms the store.
- **Not with a write group.** There a run's end rides in the group's shared batch with the
  other slots' writes; the store ignores the arming (``PostgresCheckpointer.arm_end_claim``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tether.stores.pg_fenced import finish_fenced
from tether.stores.queueing import EndClaim, NextClaim
from tether.stores.records import FencedWrite
from tether.stores.sql_queue import claim_one_call, claimed_from_rows
from tether.stores.write_group import WriteGroup

if TYPE_CHECKING:
    from tether.stores.postgres import PostgresCheckpointer

__all__ = ["EndClaims", "batch_found", "end_statement", "end_with_claim", "end_written",
           "outcome_of"]

log = logging.getLogger("tether.stores")


class EndClaims:
    """A PostgreSQL store's arming (mixed into
    :class:`~tether.stores.postgres.PostgresCheckpointer` before its base, so these override
    the no-op defaults of :class:`~tether.stores.base.Checkpointer`). Class defaults, not set
    in ``__init__`` (see ``PostgresCheckpointer._seen_sql``)."""

    write_group: WriteGroup[FencedWrite, tuple[bool, float | None]] | None
    reads_cancel_on_write: bool
    _armed: NextClaim | None = None  # arm_end_claim's
    _end_claim: EndClaim | None = None  # what the claim sent with that end took
    end_claim_fallbacks = 0
    """How many ends sent with a claim failed for a statement's error and were written
    alone (for tests and logs)."""

    def arm_end_claim(self, claim: NextClaim | None) -> None:
        """As every store's: a worker's store without a write group sends the armed run's
        end with the claim in one transaction (:func:`end_with_claim`)."""
        self._armed = claim if self.write_group is None and self.reads_cancel_on_write \
            else None

    def take_end_claim(self) -> EndClaim | None:
        taken, self._end_claim, self._armed = self._end_claim, None, None
        return taken

    def _armed_for(self, execution_id: str) -> NextClaim | None:
        """The claim armed for ``execution_id``'s end, taken (one end only), or None."""
        armed = self._armed
        if armed is None or armed.execution_id != execution_id:
            return None
        self._armed = None
        return armed


def end_statement(store: PostgresCheckpointer, write: FencedWrite) -> tuple[str, Any]:
    """The statement that writes a run's end alone (``write.end``): :func:`finish_fenced`,
    or, with the last node's row (``write.before``), the batch statement of the two rows;
    its text and parameters."""
    row, owner, end, before = write
    assert end is not None
    if before is not None:
        return store._batch_statement((write,))
    statement = store._sql.get("finish_fenced", finish_fenced)
    values = {**row._asdict(), "eid": row.execution_id, "owner": owner,
              "status": end.status, "now": end.at, "error": end.error}
    return statement.sql, statement.params(values)


def end_written(write: FencedWrite, rows: Sequence[Any]) -> bool:
    """Whether :func:`end_statement`'s rows say the end was written (all of it)."""
    if write.before is not None:
        return outcome_of(batch_found(rows), write)[0]
    written, updated = rows[0]
    return bool(written and updated)


def batch_found(rows: Iterable[Any]) -> dict[str, tuple[bool, float | None]]:
    """A fenced batch statement's rows: what each row's ``written`` and reading of
    ``cancel_requested_at`` were, by checkpoint id."""
    return {checkpoint_id: (bool(written), requested_at)
            for checkpoint_id, requested_at, written in rows}


def outcome_of(found: Mapping[str, tuple[bool, float | None]], item: FencedWrite,
               ) -> tuple[bool, float | None]:
    """An item's result from its batch's rows: written only if its row was (and its
    ``before`` row too: the statement writes a run's rows together or not at all)."""
    written, requested_at = found.get(item.row.checkpoint_id, (False, None))
    if written and item.before is not None:
        written = found.get(item.before.checkpoint_id, (False, None))[0]
    return written, requested_at


def end_with_claim(store: PostgresCheckpointer, write: FencedWrite, armed: NextClaim) -> bool:
    """Write a run's end and claim the slot's next run in one transaction and one round trip
    on the store's hot connection (the caller holds its lock, inside ``finish_run``'s error
    mapping): both statements in libpq's pipeline mode, one Sync
    (:meth:`~tether.stores.pg_hot.HotStatements.pipelined`); what the claim took is kept
    for :meth:`take_end_claim`. Whether the end was written, as :meth:`_end_alone` says
    it."""
    connection = store._hot()
    end_sql, end_params = end_statement(store, write)
    now = time.time()
    until = now + armed.lease_seconds
    name, build, values = claim_one_call(armed.worker, armed.queues, 1, now, until,
                                         sorted(armed.plans))
    claim = store._sql.get(name, build)
    claim_params = claim.params(values)
    assert not isinstance(claim_params, Mapping)  # PostgreSQL's statements are positional
    statements = store._hot_set()
    end_text, claim_text = store._text(end_sql), store._text(claim.sql)
    sent = time.monotonic()
    try:
        results = statements.pipelined((
            (statements.typed(end_text, end_params), end_params),
            (statements.typed(claim_text, claim_params), claim_params)))
    except Exception as exc:
        if store._is_disconnect(exc):
            raise
        log.warning("run %s: its end with the next claim failed (%s); ending it alone",
                    write.row.execution_id, type(exc).__name__)
        store.end_claim_fallbacks += 1
        return store._end_alone(connection, write)
    if results is None:  # not on libpq directly now (pg_hot.py): the end alone, as unarmed
        return store._end_alone(connection, write)
    claimed = claimed_from_rows(store, statements.rows(results[1]), until)
    store._end_claim = EndClaim(claimed[0] if claimed else None, sent)
    return end_written(write, statements.rows(results[0]))
