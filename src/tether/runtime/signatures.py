"""Task signatures recorded with a plan (issue 24).

When a submitter can import the tasks a plan calls (``Runner.run`` and ``Runner.submit`` with
a task registry, ``tether submit --tasks``/``--import-tasks``), it records each task's
signature (its parameters, their defaults, its return annotation) beside the plan in the
store (``plans.tasks``); a plan submitted with none gets those of the first worker that
claims its runs. Not part of the fingerprint: the same workflow file submitted from
two deploys is one plan, and the first recording wins.

A worker compares its own task code with the recorded signatures before it claims the
plan's runs (:func:`tether.runtime.drift.task_drift`): a parameter gone, newly required, or
defaulting to something else, or another return annotation, means the runs were planned for
other code, and the worker leaves them queued with the reason ``tether runs --stuck`` shows.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tether.runtime.plans import task_names

if TYPE_CHECKING:
    from tether.compiler.plan import Plan
    from tether.stores.contracts import RunStore

__all__ = ["Param", "TaskSignature", "dumps", "loads", "record_signatures", "signatures_of"]


@dataclass(frozen=True)
class Param:
    """One parameter: its name, kind (``POSITIONAL_OR_KEYWORD``...), and its default's
    ``repr`` (None: it has none, so a call must pass it)."""

    name: str
    kind: str
    default: str | None = None

    @property
    def required(self) -> bool:
        return self.default is None and self.kind not in ("VAR_POSITIONAL", "VAR_KEYWORD")


@dataclass(frozen=True)
class TaskSignature:
    """A task's parameters and return annotation (None: not annotated)."""

    params: tuple[Param, ...]
    returns: str | None = None

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> TaskSignature | None:
        """The signature of ``fn`` (None when it has none to read: a builtin)."""
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):
            return None
        params = tuple(Param(p.name, p.kind.name, None if p.default is p.empty
                             else repr(p.default)) for p in signature.parameters.values())
        annotation = signature.return_annotation
        returns = None if annotation is signature.empty else annotation \
            if isinstance(annotation, str) else inspect.formatannotation(annotation)
        return cls(params, returns)  # a postponed annotation (a string) is kept as written

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    @property
    def open_ended(self) -> bool:
        """Whether it takes ``**kwargs`` (any keyword is accepted)."""
        return any(p.kind == "VAR_KEYWORD" for p in self.params)

    def to_json(self) -> dict[str, Any]:
        return {"params": [[p.name, p.kind, p.default] for p in self.params],
                "returns": self.returns}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskSignature:
        return cls(tuple(Param(str(name), str(kind), None if default is None else str(default))
                         for name, kind, default in data.get("params") or ()),
                   data.get("returns"))


def signatures_of(plan: Plan, tasks: Mapping[str, Callable[..., Any]],
                  ) -> dict[str, TaskSignature]:
    """The signatures of the tasks ``plan`` calls that ``tasks`` has (sorted by name)."""
    found: dict[str, TaskSignature] = {}
    for name in sorted(task_names(plan)):
        fn = tasks.get(name)
        signature = TaskSignature.of(fn) if fn is not None else None
        if signature is not None:
            found[name] = signature
    return found


def dumps(signatures: Mapping[str, TaskSignature]) -> str:
    return json.dumps({name: s.to_json() for name, s in sorted(signatures.items())},
                      sort_keys=True, separators=(",", ":"))


def loads(text: str | None) -> dict[str, TaskSignature]:
    """The recorded signatures (an unreadable record counts as none: it only adds checks)."""
    if not text:
        return {}
    try:
        data = json.loads(text)
        return {str(name): TaskSignature.from_json(item) for name, item in data.items()}
    except (ValueError, TypeError, AttributeError):
        return {}


def record_signatures(store: RunStore, plan: Plan,
                      tasks: Mapping[str, Callable[..., Any]]) -> None:
    """Record the signatures of the plan's tasks that ``tasks`` has, unless recorded."""
    signatures = signatures_of(plan, tasks)
    if signatures and store.get_plan_tasks(plan.fingerprint) is None:
        store.set_plan_tasks(plan.fingerprint, dumps(signatures))
