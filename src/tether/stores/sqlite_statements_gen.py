"""Write :mod:`tether.stores.sqlite_statements`: the SQLite store's statements, compiled.

Run ``python -m tether.stores.sqlite_statements_gen`` (or ``make sqlite-statements``) after
changing a statement of the SQL stores, the schema, or upgrading SQLAlchemy;
tests/stores/test_sqlite_statements.py fails while the file is stale.

The statements are found by using them: a SQLite store that compiles every statement itself
(none ready) is driven through the operations below, on a scratch file, and each statement it
compiled is written under its name. A name always stands for one statement (the store's
cache relies on it), so a statement built for a name here is the one every later use of that
name would build. The operations are those of the commands that must start fast (``tether
run``, ``submit``, ``resume``, ``status``, ``history``, ...) and most others of the store;
a statement left out is compiled when first used, SQLAlchemy imported then.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tether.stores.events import RunEvent, RunEventKind
from tether.stores.records import (
    CheckpointRow,
    Decision,
    PendingCursor,
    PendingInterrupt,
    RunCursor,
)
from tether.stores.run_record import RunRecord
from tether.stores.sqlite import SQLiteCheckpointer
from tether.stores.statements import Compiled

TARGET = Path(__file__).with_name("sqlite_statements.py")
WIDTH = 99
HEADER = '''"""The SQLite store's statements, compiled (generated: do not edit).

Made by ``python -m tether.stores.sqlite_statements_gen`` (``make sqlite-statements``) from
the SQL stores' statements; read by tether.stores.sqlite. Name -> (SQL text, parameter
names in order, values the statement fixes).
"""

from __future__ import annotations

from typing import Any

STATEMENTS: dict[str, tuple[str, tuple[str, ...] | None, dict[str, Any]]] = {
'''


class _Compiling(SQLiteCheckpointer):
    """A SQLite store that compiles every statement with SQLAlchemy (none ready)."""

    ready_statements: Mapping[str, Compiled] = {}


def _exercise(store: SQLiteCheckpointer) -> None:
    """Use the store as the commands do, so that it builds their statements."""
    now = time.time()
    at = datetime.fromtimestamp(now, tz=UTC)
    eid, owner = "01900000-0000-7000-8000-000000000001", "owner-1"
    run = RunRecord(eid, "wf", "fp", "running", {}, at, at, owner=owner, lease_until=now + 60)
    store.create_run(run, "{}")
    store.get_run(eid)
    store.get_plan("fp")
    store.set_plan_tasks("fp", "[]")
    store.get_plan_tasks("fp")
    row = CheckpointRow(eid, "c1", created_at=now)
    store.put(row)
    store.put(row._replace(checkpoint_id="c2"), owner)
    store.acquire(eid, owner, now + 60, now)
    store.renew(eid, owner, now + 60)
    store.get_idempotent(eid, "k")
    store.put_idempotent(eid, "k", "1", owner)
    store.add_event(RunEvent(eid, RunEventKind.CANCEL_REQUESTED, now, actor="gen"))
    store.events(eid)
    pending = PendingInterrupt(eid, "c3", "review", "", "approval", {}, at)
    store.record_interrupt(row._replace(checkpoint_id="c3"), pending, owner)
    store.pause_run(eid, owner, ["c3"])
    store.list_pending()
    store.list_pending(eid)
    store.due_pending(now)
    store.pending_page()
    store.pending_page(PendingCursor.of(pending))
    store.last_row(eid)
    store.last_row(eid, skip_run_end=True)
    store.rows(eid)
    store.page_rows(eid)
    store.has_checkpoint(eid, "c1")
    store.claim(pending, {"approved": True}, owner=owner, until=now + 60, now=now,
                channel="cli")
    store.decisions(eid)
    store.replace_decision(Decision(eid, "c3", "review", "", {"approved": True}, at), owner)
    store.cancel_requested_at(eid)
    store.execution_ids_with_prefix(eid[:8], 10)
    store.execution_ids_with_prefix(chr(0x10FFFF), 10)
    store.checkpoint_ids_matching(eid, "c", 10)
    for status in (None, "running"):  # each shape of filters is a statement
        for workflow in (None, "wf"):
            for before in (None, RunCursor(now, eid)):
                store.find_runs(status=status, workflow=workflow, before=before)
    store.runs_changed()
    store.runs_changed(RunCursor(now, eid))
    store.set_run_plan(eid, "fp2", "{}", owner)
    store.finish_run(row._replace(checkpoint_id="c4"), "completed", None, owner)
    store.release(eid, owner)
    store.finished(eid)


def compiled_statements() -> dict[str, Compiled]:
    """Every statement :func:`_exercise` makes a SQLite store compile, by name."""
    with tempfile.TemporaryDirectory() as scratch:
        store = _Compiling(os.path.join(scratch, "statements.db"))
        try:
            _exercise(store)
            cache = dict(store._sql._cache)
        finally:
            store.close()
    return {name: _numbered(s.sql, s.names, s.defaults) for name, s in sorted(cache.items())}


_ANONYMOUS = re.compile(r"%\((\d+) (\w+)\)s")


def _numbered(sql: str, names: tuple[str, ...] | None, defaults: Mapping[str, Any]) -> Compiled:
    """The statement with its anonymous parameters' names (``%(<object id> param)s``, a
    different number in each process) numbered in order instead: only the statement itself
    gives them values (``defaults``), so their names only have to agree with each other."""
    numbers: dict[str, str] = {}

    def number(name: str) -> str:
        found = _ANONYMOUS.fullmatch(name)
        if found is None:
            return name
        return numbers.setdefault(name, f"%(anon_{len(numbers) + 1} {found[2]})s")

    ordered = None if names is None else tuple(number(name) for name in names)
    return sql, ordered, {number(name): value for name, value in defaults.items()}


def _text(value: str, indent: int) -> str:
    """``value`` as string literals of at most :data:`WIDTH` columns, split at spaces."""
    room = WIDTH - indent - 4
    parts: list[str] = []
    rest = value
    while len(repr(rest)) > room:
        cut = max(rest.rfind(" ", 0, room - 10), room // 2) + 1
        parts.append(rest[:cut])
        rest = rest[cut:]
    parts.append(rest)
    return ("\n" + " " * indent).join(repr(part) for part in parts)


def render(statements: Mapping[str, Compiled]) -> str:
    """The source of :mod:`tether.stores.sqlite_statements` for ``statements``."""
    out = [HEADER]
    for name, (sql, names, defaults) in statements.items():
        out.append(f"    {name!r}: (\n        {_text(sql, 8)},\n")
        for value in (names, defaults):
            line = f"        {value!r},\n"
            if len(line) > WIDTH + 1 and isinstance(value, dict):
                items = [f"            {k!r}: {v!r}," for k, v in value.items()]
                line = "        {\n" + "\n".join(items) + "\n        },\n"
            elif len(line) > WIDTH + 1:
                items = [f"            {v!r}," for v in value or ()]
                line = "        (\n" + "\n".join(items) + "\n        ),\n"
            out.append(line)
        out.append("    ),\n")
    out.append("}\n")
    return "".join(out)


def main() -> int:
    from tether.dsl.document_schema_gen import write_generated

    return write_generated(TARGET, render(compiled_statements()))


if __name__ == "__main__":
    sys.exit(main())
