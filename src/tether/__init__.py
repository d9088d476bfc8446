"""tether: a workflow language with a static graph compiler and a durable runtime.

The public API is the names in ``__all__``; they are imported on first use, so that
``import tether`` (and the ``tether`` command) stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.compiler import Plan, check, compile
    from tether.diagnostics import Diagnostic
    from tether.dsl.ast import Workflow
    from tether.dsl.loader import load
    from tether.errors import (
        AlreadyResumed,
        AmbiguousId,
        ChainResumeError,
        CheckpointNotFound,
        ConcurrencyLimitReached,
        DefinitionError,
        ExecutionError,
        ExecutionExists,
        ForkError,
        IdTooShort,
        IneffectivePatch,
        InputError,
        InterruptSignal,
        LeaseLost,
        NotFoundError,
        NotJSONError,
        PlanError,
        PlanMismatch,
        ResumeError,
        ResumeValueError,
        RunNotFound,
        RunStateError,
        SchemaVersionError,
        StoreError,
        StoreUnavailable,
        TaskError,
        TemplateLimit,
        TetherError,
        UsageError,
        WorkflowError,
    )
    from tether.runtime.context import Resume, interrupt
    from tether.runtime.idempotent import idempotent
    from tether.runtime.registry import task
    from tether.runtime.runner import Runner, RunResult
    from tether.stores.base import Checkpointer
    from tether.stores.memory import InMemoryCheckpointer
    from tether.stores.open import open_checkpointer
    from tether.stores.postgres import PostgresCheckpointer
    from tether.stores.records import Checkpoint
    from tether.stores.sqlite import SQLiteCheckpointer
    from tether.trigger import Trigger, TriggerKind

_ERRORS = (
    "AlreadyResumed", "ChainResumeError", "CheckpointNotFound", "ExecutionExists", "ForkError",
    "InputError",
    "InterruptSignal", "LeaseLost", "NotJSONError", "PlanError", "PlanMismatch", "ResumeError",
    "ResumeValueError", "RunNotFound", "SchemaVersionError", "StoreError", "StoreUnavailable",
    "TaskError", "TemplateLimit", "TetherError", "WorkflowError",
    "AmbiguousId", "DefinitionError", "ExecutionError", "IdTooShort", "IneffectivePatch",
    "NotFoundError", "RunStateError", "UsageError", "ConcurrencyLimitReached",
)

_WHERE: dict[str, str] = {
    **{name: "tether.errors" for name in _ERRORS},
    "Plan": "tether.compiler",
    "check": "tether.compiler",
    "compile": "tether.compiler",
    "Diagnostic": "tether.diagnostics",
    "Workflow": "tether.dsl.ast",
    "load": "tether.dsl.loader",
    "Resume": "tether.runtime.context",
    "interrupt": "tether.runtime.context",
    "idempotent": "tether.runtime.idempotent",
    "task": "tether.runtime.registry",
    "Runner": "tether.runtime.runner",
    "RunResult": "tether.runtime.runner",
    "Checkpointer": "tether.stores.base",
    "InMemoryCheckpointer": "tether.stores.memory",
    "open_checkpointer": "tether.stores.open",
    "PostgresCheckpointer": "tether.stores.postgres",
    "Checkpoint": "tether.stores.records",
    "SQLiteCheckpointer": "tether.stores.sqlite",
    "Trigger": "tether.trigger",
    "TriggerKind": "tether.trigger",
}

__all__ = [
    "AlreadyResumed",
    "AmbiguousId",
    "ChainResumeError",
    "Checkpoint",
    "CheckpointNotFound",
    "Checkpointer",
    "ConcurrencyLimitReached",
    "DefinitionError",
    "Diagnostic",
    "ExecutionError",
    "ExecutionExists",
    "ForkError",
    "IdTooShort",
    "InMemoryCheckpointer",
    "IneffectivePatch",
    "InputError",
    "InterruptSignal",
    "LeaseLost",
    "NotFoundError",
    "NotJSONError",
    "Plan",
    "PlanError",
    "PlanMismatch",
    "PostgresCheckpointer",
    "Resume",
    "ResumeError",
    "ResumeValueError",
    "RunNotFound",
    "RunResult",
    "RunStateError",
    "Runner",
    "SQLiteCheckpointer",
    "SchemaVersionError",
    "StoreError",
    "StoreUnavailable",
    "TaskError",
    "TemplateLimit",
    "TetherError",
    "Trigger",
    "TriggerKind",
    "UsageError",
    "Workflow",
    "WorkflowError",
    "check",
    "compile",
    "idempotent",
    "interrupt",
    "load",
    "open_checkpointer",
    "task",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'tether' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
