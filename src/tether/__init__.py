"""tether: a workflow language with a static graph compiler and a durable runtime."""

from tether.compiler import Plan, check, compile
from tether.diagnostics import Diagnostic
from tether.dsl.ast import Workflow
from tether.dsl.loader import load
from tether.errors import (
    AlreadyResumed,
    ChainResumeError,
    CheckpointNotFound,
    ExecutionExists,
    InputError,
    InterruptSignal,
    NotJSONError,
    PlanError,
    PlanMismatch,
    ResumeError,
    ResumeValueError,
    RunNotFound,
    SchemaVersionError,
    StoreError,
    StoreUnavailable,
    TaskError,
    TetherError,
    WorkflowError,
)
from tether.runtime.context import Resume, interrupt
from tether.runtime.idempotent import idempotent
from tether.runtime.registry import task
from tether.runtime.runner import Runner, RunResult
from tether.stores.base import Checkpointer
from tether.stores.memory import InMemoryCheckpointer
from tether.stores.records import Checkpoint

__all__ = [
    "AlreadyResumed",
    "ChainResumeError",
    "Checkpoint",
    "CheckpointNotFound",
    "Checkpointer",
    "Diagnostic",
    "ExecutionExists",
    "InMemoryCheckpointer",
    "InputError",
    "InterruptSignal",
    "NotJSONError",
    "Plan",
    "PlanError",
    "PlanMismatch",
    "Resume",
    "ResumeError",
    "ResumeValueError",
    "RunNotFound",
    "RunResult",
    "Runner",
    "SchemaVersionError",
    "StoreError",
    "StoreUnavailable",
    "TaskError",
    "TetherError",
    "Workflow",
    "WorkflowError",
    "check",
    "compile",
    "idempotent",
    "interrupt",
    "load",
    "task",
]
