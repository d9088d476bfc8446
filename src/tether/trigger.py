"""What started a run: its :class:`Trigger`, stored with the run and read by its templates
as ``trigger.*``.

Every way of starting a run records one (``runs.triggered_by``, migration 9):

=============  =====================================================  ==========================
``kind``       started by                                             ``actor``
=============  =====================================================  ==========================
``cli``        ``tether run`` / ``tether submit``                     the OS user
``python``     ``Runner.run`` / ``Runner.submit`` without a trigger   the OS user
``api``        ``POST /api/workflows/{name}/runs``                    the authenticated caller
``manual``     the console's Start form                               the signed-in user
``webhook``    a signed request at ``/hooks/PATH``                    ``webhook:PATH``
``schedule``   a tick of a schedule (a worker)                        ``schedule:NAME``
``unknown``    a run stored before triggers were recorded             None
=============  =====================================================  ==========================

A fork keeps its origin's trigger (it is the same start, branched). ``payload``, ``headers``,
``delivery`` and ``verify`` are a webhook's (the JSON body, the headers its workflow allows,
the delivery id, the signature scheme); ``tick`` a schedule's (the tick's time, ISO 8601 in
UTC). ``received_at`` is when the start was asked for. A trigger is run data, stored as the
inputs are: a webhook keeps only the headers its workflow lists, never the signature.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any


class TriggerKind(StrEnum):
    """How a run was started (see the module docstring)."""

    CLI = "cli"
    PYTHON = "python"
    API = "api"
    MANUAL = "manual"
    WEBHOOK = "webhook"
    SCHEDULE = "schedule"
    UNKNOWN = "unknown"


TRIGGER_FIELDS = ("kind", "actor", "payload", "headers", "delivery", "verify", "tick",
                  "received_at")
"""What templates read as ``trigger.<field>`` (the compiler checks the same names)."""


@dataclass(frozen=True)
class Trigger:
    """What started a run: how (``kind``), by whom (``actor``), and what came with it."""

    kind: TriggerKind
    actor: str | None = None
    payload: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delivery: str | None = None
    verify: str | None = None
    tick: str | None = None
    received_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (also what templates read): every field, by name."""
        return {"kind": self.kind.value, "actor": self.actor, "payload": self.payload,
                "headers": dict(self.headers), "delivery": self.delivery,
                "verify": self.verify, "tick": self.tick, "received_at": self.received_at}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Trigger | None:
        """The trigger of a stored JSON form (None for None); an unknown kind reads as
        ``unknown`` rather than failing a run's read."""
        if data is None:
            return None
        try:
            kind = TriggerKind(str(data.get("kind")))
        except ValueError:
            kind = TriggerKind.UNKNOWN
        headers = data.get("headers")
        return cls(kind=kind, actor=_text(data.get("actor")), payload=data.get("payload"),
                   headers={str(k): str(v) for k, v in headers.items()}
                   if isinstance(headers, Mapping) else {},
                   delivery=_text(data.get("delivery")), verify=_text(data.get("verify")),
                   tick=_text(data.get("tick")),
                   received_at=_text(data.get("received_at")) or "")

    def describe(self) -> str:
        """One line for people: ``cli by alice``, ``webhook:deploy (delivery 72d3...)``."""
        said = self.kind.value
        if self.actor and self.kind in (TriggerKind.WEBHOOK, TriggerKind.SCHEDULE):
            said = self.actor
        elif self.actor:
            said += f" by {self.actor}"
        if self.delivery:
            said += f" (delivery {self.delivery})"
        if self.tick:
            said += f" (tick {self.tick})"
        return said


UNKNOWN_TRIGGER = Trigger(TriggerKind.UNKNOWN, received_at="")
"""What a run stored before triggers were recorded reads as."""


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def os_user() -> str | None:
    """The name of the user running this process (None when the system has none for it)."""
    import getpass  # (imported on use: `pwd`, `termios`; most commands never ask)

    try:
        return getpass.getuser()
    except (OSError, KeyError, ImportError):
        return None


def local_trigger(kind: TriggerKind = TriggerKind.PYTHON, actor: str | None = None) -> Trigger:
    """The trigger of a start from this process: ``kind`` by ``actor`` (default: the OS
    user)."""
    return Trigger(kind, actor if actor is not None else os_user())


__all__ = ["TRIGGER_FIELDS", "UNKNOWN_TRIGGER", "Trigger", "TriggerKind", "local_trigger",
           "os_user"]
