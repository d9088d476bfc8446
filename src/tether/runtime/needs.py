"""``needs`` as templates see it: the statuses of the reading node's needs, as one object.

``needs.statuses`` maps each need (in ``needs:`` order) to its status, ``needs.all_success``
is true when every need completed (the "all green" join), ``needs.failed`` lists the needs
that failed or did not run because theirs failed. One need is read as before, with
``nodes.<id>.status`` and ``nodes.<id>.output``. The view is built per template read, from
the run state as it is, and costs nothing for a node whose templates do not read it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tether.runtime.render import Names
from tether.status import UnitStatus

FIELDS = ("statuses", "all_success", "failed")
"""What templates read as ``needs.<field>`` (the compiler checks the same names)."""

_FAILED = (UnitStatus.FAILED.value, UnitStatus.UPSTREAM_FAILED.value)


class NeedsView(Names):
    """The fields of :data:`FIELDS` over the needs ``ids`` in the run's ``nodes`` state."""

    __slots__ = ("_ids",)

    def __init__(self, nodes: dict[str, Any], ids: tuple[str, ...]) -> None:
        super().__init__(nodes)
        self._ids = ids

    def _statuses(self) -> dict[str, str]:
        found = {}
        for node_id in self._ids:
            entry = self._data.get(node_id)
            found[node_id] = str(entry.get("status", UnitStatus.PENDING)) if entry \
                else UnitStatus.PENDING.value
        return found

    def __getitem__(self, key: str) -> Any:
        statuses = self._statuses()
        if key == "statuses":
            return Names(statuses)
        if key == "all_success":
            return all(s == UnitStatus.COMPLETED.value for s in statuses.values())
        if key == "failed":
            return [n for n, s in statuses.items() if s in _FAILED]
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key in FIELDS

    def __iter__(self) -> Iterator[str]:
        return iter(FIELDS)

    def __len__(self) -> int:
        return len(FIELDS)

    def __repr__(self) -> str:
        return repr({key: self[key] for key in FIELDS})


__all__ = ["FIELDS", "NeedsView"]
