"""The journal turns state changes into checkpoint rows: deltas, with full snapshots.

The runtime marks the state paths it changes; a write serialises just those paths (the delta
since the previous row). A row is a full snapshot instead when the caller asks for one
(interrupts, fork origins, the first row after a resume), when the deltas written since the
last snapshot add up to more bytes than that snapshot had (at least ``MIN_SNAPSHOT_GAP``), or
after ``snapshot_every`` rows. The byte rule keeps the total stored linear in the run's length
(snapshots grow geometrically apart) and reading any checkpoint cheap (the deltas to fold
weigh no more than a snapshot); an unchanged large value is not copied again and again. The
hot path is one ``json.dumps`` of the delta and one ``INSERT``: no read, no snapshot copy.
Inputs never change during a run: they are stored once, on the run row, and left out of the
snapshots.
"""

from __future__ import annotations

import functools
import json
from time import time
from typing import TYPE_CHECKING, Any

from tether.paths import StatePath, get_path
from tether.runtime import ids
from tether.runtime.secrets import masked
from tether.runtime.values import dumps
from tether.status import CheckpointStatus, CheckpointStatusName, StepType, StepTypeName
from tether.stores.base import Checkpointer
from tether.stores.records import CheckpointRow

if TYPE_CHECKING:
    from tether.runtime.attempt import Attempt
    from tether.runtime.secrets import Masker

SNAPSHOT_EVERY = 1000
MIN_SNAPSHOT_GAP = 4096  # bytes of deltas before a snapshot is worth writing again
_PATHS: dict[StatePath, str] = {}  # JSON of state paths, which repeat from run to run


_ROW = functools.partial(tuple.__new__, CheckpointRow)
"""A :class:`CheckpointRow` from its values in column order (without the keyword handling of
the named tuple's constructor: one is built per checkpoint)."""


def _path_json(path: StatePath) -> str:
    """The JSON of a state path (remembered: the same paths recur run after run)."""
    key = _PATHS.get(path)
    if key is None:
        key = dumps(list(path))
        if len(_PATHS) < 100_000:
            _PATHS[path] = key
    return key


def _json(value: Any) -> str | None:
    if value is None:
        return None
    return "{}" if value == {} else dumps(value)


def _masked(masker: Masker, full: bool, state_json: str, *texts: str | None) -> tuple[Any, ...]:
    """The texts of a row with the run's secret strings masked as values (never as text).

    Values enter the state masked already (``Level``); this is the backstop for whatever
    reaches a row another way (an agent's messages, a sub-workflow's inputs). A text is parsed
    only when one of the strings occurs in it; keys, numbers, booleans, null and the paths of
    a delta are never changed, and a text whose values hold no secret is kept byte for byte.
    """
    strings = masker.strings()
    if not strings:
        return (state_json, *texts)
    forms = {text if text.isprintable() and '"' not in text and "\\" not in text
             else dumps(text)[1:-1] for text in strings}  # (as each appears in JSON text)

    def mask(text: str | None, delta: bool = False) -> str | None:
        if text is None or not any(form in text for form in forms):
            return text
        value = json.loads(text)
        if delta:  # [[path, value], ...]: only the values
            new: Any = [[path, masked(item, strings)] for path, item in value]
            changed = any(n[1] is not o[1] for n, o in zip(new, value, strict=True))
        else:
            new = masked(value, strings)
            changed = new is not value
        return dumps(new) if changed else text

    return (mask(state_json, delta=not full), *(mask(text) for text in texts))


class Journal:
    """Checkpoint writer of one execution (shared by its sub-runs).

    With an ``attempt``, every write first checks that the attempt still holds the run and is
    fenced on its owner token (a lost lease raises :class:`~tether.errors.LeaseLost` and
    writes nothing).
    """

    def __init__(self, store: Checkpointer, execution_id: str, state: dict[str, Any], *,
                 base_id: str | None = None, since_base: int | None = None,
                 last_id: str | None = None, snapshot_every: int = SNAPSHOT_EVERY,
                 attempt: Attempt | None = None) -> None:
        self.store = store
        self.attempt = attempt
        self.masker: Masker | None = None
        self.owner = attempt.owner if attempt is not None else None
        self.execution_id = execution_id
        self.state = state
        self.base_id = base_id
        self.since_base = since_base if since_base is not None and base_id else snapshot_every
        self.last_id = last_id
        self.every = snapshot_every
        self.dirty: dict[StatePath, str | None] = {}
        self.pending: dict[StatePath, str | None] = {}
        self.delta_bytes = 0  # written as deltas since the last snapshot
        self.snapshot_bytes = 0  # the size of the last snapshot
        self.hold = False
        """A row is held, or the next put holds its row (:meth:`hold_next`): the one flag
        :meth:`put` reads (the path of every node)."""
        self._hold_next = False
        self.held: CheckpointRow | None = None
        self._held_pending: dict[StatePath, str | None] = {}

    def mark(self, path: StatePath, text: str | None = None) -> None:
        """Record that the value at ``path`` changed; ``text`` is its JSON if known.

        A known text must be the value's JSON at the time of the next write: a caller that
        mutates the value afterwards marks the path again (without text).
        """
        self.dirty.pop(path, None)  # keep the order of the last change
        self.dirty[path] = text

    def next_id(self) -> str:
        """A checkpoint id for the next row (pass it to :meth:`row`)."""
        return ids.IDS.next(self.last_id)

    def check(self) -> None:
        """Raise LeaseLost if this journal's attempt no longer holds the run."""
        if self.attempt is not None:
            self.attempt.check()

    def row(self, *, node_id: str, node_index: int, step_type: StepType | StepTypeName,
            status: CheckpointStatus | CheckpointStatusName,
            agent_path: str = "", counters: dict[str, Any] | None = None,
            node_input: Any = None, node_output_json: str | None = None,
            full: bool = False, reason: str | None = None, context_json: str | None = None,
            parent_checkpoint_id: str | None = None,
            checkpoint_id: str | None = None) -> CheckpointRow:
        """The next checkpoint row (not yet written); consumes the marked changes. A held
        row is written first (:meth:`flush`), unless taken (:meth:`take_held`)."""
        if self.held is not None:
            self.flush()
        return self._row(checkpoint_id or ids.IDS.next(self.last_id), node_id, node_index,
                         step_type, status, agent_path, counters, node_input,
                         node_output_json, full, reason, context_json, parent_checkpoint_id)

    def _row(self, checkpoint_id: str, node_id: str, node_index: int, step_type: str,
             status: str, agent_path: str, counters: dict[str, Any] | None, node_input: Any,
             node_output_json: str | None, full: bool, reason: str | None,
             context_json: str | None, parent_checkpoint_id: str | None) -> CheckpointRow:
        """:meth:`row` with every value given in order (the path of every node)."""
        if full or self.base_id is None or self.since_base >= self.every or \
                self.delta_bytes > max(self.snapshot_bytes, MIN_SNAPSHOT_GAP):
            state_json = self._snapshot(checkpoint_id)
            full = True
        else:
            state_json = self._delta()
            self.since_base += 1
            self.delta_bytes += len(state_json)
        self.last_id = checkpoint_id
        self.pending, self.dirty = self.dirty, {}
        input_json = None if node_input is None else _json(node_input)
        if self.masker is not None:  # no secret's value is ever written (see _masked)
            state_json, input_json, node_output_json, context_json = _masked(
                self.masker, full, state_json, input_json, node_output_json, context_json)
        # the names as plain text: the drivers bind an exact str directly (an enum member goes
        # through their adaptation lookup first, which costs more than this conversion)
        return _ROW((self.execution_id, checkpoint_id, parent_checkpoint_id, node_id, node_index,
                     str(step_type), str(status), self.base_id, full, state_json, input_json,
                     node_output_json, dumps(counters) if counters else "{}", reason,
                     context_json, agent_path, time()))

    def _snapshot(self, checkpoint_id: str) -> str:
        """The state's JSON as a full snapshot at ``checkpoint_id`` (the new delta base)."""
        state_json = dumps({k: v for k, v in self.state.items() if k != "inputs"})
        self.base_id, self.since_base = checkpoint_id, 0
        self.snapshot_bytes, self.delta_bytes = len(state_json), 0
        return state_json

    def _delta(self) -> str:
        """``[[path, value], ...]`` for the marked paths, in the order they last changed."""
        dirty = self.dirty
        if len(dirty) == 1:  # the usual row: one node's entry, its JSON already made
            ((path, text),) = dirty.items()
            if text is not None:
                return f"[[{_path_json(path)},{text}]]"
        state = self.state
        parts = [f"[{_path_json(p)},{dumps(get_path(state, p)) if text is None else text}]"
                 for p, text in dirty.items()]
        return "[" + ",".join(parts) + "]"

    def undo(self) -> None:
        """Put back the changes of a row that could not be written (and of the held row
        written with it, :meth:`take_held`)."""
        self.dirty = {**self._held_pending, **self.pending, **self.dirty}
        self._held_pending = {}
        self.since_base = self.every  # the next row is a full snapshot again

    def hold_next(self, on: bool = True) -> None:
        """Hold the row of the next :meth:`put` instead of writing it (``on``), or no longer
        (a row already held stays held)."""
        self._hold_next = on
        self.hold = on or self.held is not None

    def flush(self) -> None:
        """Write the held row, if any (the run goes on after the node that wrote it)."""
        row, self.held = self.held, None
        self.hold = self._hold_next
        if row is None:
            return
        try:
            self.store.put(row, self.owner)
        except BaseException:
            self.undo()
            raise
        self._held_pending = {}

    def take_held(self) -> CheckpointRow | None:
        """The held row, for the caller to write with the run's end (``finish_run``'s
        ``last_node``), in one transaction; its changes stay pending until that write
        succeeds (:meth:`undo` puts them back if it fails)."""
        row, self.held = self.held, None
        self.hold = self._hold_next
        return row

    def put(self, node_id: str, node_index: int, step_type: StepType | StepTypeName,
            status: CheckpointStatus | CheckpointStatusName, agent_path: str = "",
            counters: dict[str, Any] | None = None, node_input: Any = None,
            node_output_json: str | None = None, full: bool = False,
            parent_checkpoint_id: str | None = None) -> CheckpointRow:
        """Write the next row now (fenced on the attempt's token). The values may be given
        in order: this is the path of every node. A row held before is written first; with
        :meth:`hold_next`, this row is built and held instead (its writer then either writes
        it, :meth:`flush`, or ends the run with it: ``Level.run``, ``Driver``)."""
        if self.hold:  # (one test on the path of every node)
            return self._put_held(node_id, node_index, step_type, status, agent_path,
                                  counters, node_input, node_output_json, full,
                                  parent_checkpoint_id)
        if self.attempt is not None:
            self.attempt.check()
        row = self._row(ids.IDS.next(self.last_id), node_id, node_index, step_type, status,
                        agent_path, counters, node_input, node_output_json, full, None, None,
                        parent_checkpoint_id)
        try:
            self.store.put(row, self.owner)
        except BaseException:
            self.undo()
            raise
        return row

    def _put_held(self, node_id: str, node_index: int, step_type: StepType | StepTypeName,
                  status: CheckpointStatus | CheckpointStatusName, agent_path: str,
                  counters: dict[str, Any] | None, node_input: Any,
                  node_output_json: str | None, full: bool,
                  parent_checkpoint_id: str | None) -> CheckpointRow:
        """:meth:`put` while a row is held (written first) or this one is to be held."""
        self.flush()
        if not self.hold:
            return self.put(node_id, node_index, step_type, status, agent_path, counters,
                            node_input, node_output_json, full, parent_checkpoint_id)
        if self.attempt is not None:
            self.attempt.check()
        row = self._row(ids.IDS.next(self.last_id), node_id, node_index, step_type, status,
                        agent_path, counters, node_input, node_output_json, full, None, None,
                        parent_checkpoint_id)
        self._hold_next, self.held, self._held_pending = False, row, self.pending
        return row
