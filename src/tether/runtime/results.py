"""What ``run``, ``resume`` and ``fork`` return."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tether.runtime.state import NodeError
from tether.status import RunStatus
from tether.stores.records import PendingInterrupt


@dataclass(frozen=True)
class RunResult:
    """The outcome of ``run``, ``resume`` or ``fork``.

    ``status`` is ``completed``, ``failed`` or ``paused`` (every pending interrupt in
    ``pending``, oldest first; ``pending_interrupt`` is the first); ``running`` means an answer
    was recorded for a run another attempt is executing, which applies it (``message`` says
    which).
    """

    status: RunStatus
    execution_id: str
    output: Any = None
    state: dict[str, Any] = field(default_factory=dict)
    pending: tuple[PendingInterrupt, ...] = ()
    error: NodeError | None = None
    message: str | None = None

    @property
    def usage(self) -> dict[str, int]:
        """Tokens every model call of the run used so far (agent nodes):
        ``{"input_tokens": ..., "output_tokens": ...}``, zeros when no model was called."""
        usage = self.state.get("usage") if isinstance(self.state, dict) else None
        if not isinstance(usage, dict):
            return {"input_tokens": 0, "output_tokens": 0}
        return {"input_tokens": int(usage.get("input_tokens", 0)),
                "output_tokens": int(usage.get("output_tokens", 0))}

    @property
    def pending_interrupt(self) -> PendingInterrupt | None:
        """The first pending interrupt of a paused run."""
        return self.pending[0] if self.pending else None
