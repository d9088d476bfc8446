"""Every exception tether defines pickles and unpickles with its fields and message.

Errors cross process boundaries (workers, subprocess tests), so a class whose constructor
takes other arguments than its message must still come back whole. The classes are found by
importing every module of the package: a new exception without a sample here fails
:func:`test_every_exception_class_has_a_sample`.
"""

from __future__ import annotations

import importlib
import pickle
import pkgutil
from datetime import UTC, datetime
from typing import Any

import pytest

import tether
from tether.runtime.state import NodeError

ERROR = NodeError("ValueError", "bad", "n")


def _samples() -> dict[str, Any]:
    """One instance per exception class, by qualified name."""
    from tether import errors
    from tether.agents import errors as agent_errors
    from tether.dsl.flow_values import Decline
    from tether.durations import DurationError
    from tether.files import NotRegularFile
    from tether.runtime.attempt import StopAtBoundary
    from tether.runtime.execution import RunFailure
    from tether.runtime.invoke import NodeFailure
    from tether.runtime.render import RenderError
    from tether.runtime.secrets import SecretMissing
    from tether.runtime.units import Suspended, UnitSkipped
    from tether.testing.script import ScriptError
    from tether.timestamps import TimestampError

    samples: list[BaseException] = [
        errors.TetherError("plain"),
        errors.WorkflowError([]),
        errors.PlanError("unreadable plan"),
        errors.PlanMismatch("run-1", "a" * 64, "b" * 64, "n", "detail"),
        errors.InputError(["amount is missing"]),
        errors.TaskError("no task t", task="t", node_id="n"),
        errors.NotJSONError("the output", "a set", node_id="n"),
        errors.RunNotFound("run-1"),
        errors.CheckpointNotFound("run-1", "c1", "is not in this run"),
        errors.ForkError("run-1", ["nodes must be an object"]),
        errors.ExecutionExists("run-1"),
        errors.DedupKeyTaken("key-1", "deploy"),
        errors.ConcurrencyLimitReached("deploy", "main", 1, ("run-1",)),
        errors.ResumeError("run-1", "nothing is waiting", node_id="n"),
        errors.ResumeValueError("run-1", "review", ["approved is missing"]),
        errors.AlreadyResumed("run-1", "answered", answered_by="ada",
                              answered_at=datetime(2024, 1, 2, tzinfo=UTC)),
        errors.LeaseLost("run-1"),
        errors.TemplateLimit("size", "1 MB", node_id="n", field="with.x"),
        errors.StoreURLError("bad port", parameter="port"),
        errors.StoreError("disk full"),
        errors.SchemaVersionError(9, 2),
        errors.StoreUnavailable("connection refused"),
        errors.InvalidId("a/b", "an execution id", "may not hold '/'"),
        errors.ValueTooLarge("big", 20_000_000, 16_777_216),
        errors.InterruptSignal("manager_approval", {"amount": 5}, node_id="n",
                               agent_path="workflow:w"),
        agent_errors.AgentError("agent"),
        agent_errors.ModelSpecError("gpt", "no provider"),
        agent_errors.ProviderUnavailable("openai", "openai"),
        agent_errors.MissingAPIKey("openai", "OPENAI_API_KEY"),
        agent_errors.ModelError(provider="openai", model="m", message="slow down",
                                retryable=True, status_code=429, retry_after=2.0),
        agent_errors.ToolSchemaError("lookup", "no annotation", parameter="x"),
        agent_errors.ToolArgumentsError("lookup", ["x is missing"]),
        agent_errors.ConversationError("no user message"),
        DurationError("'5x' is not a duration"),
        NotRegularFile("/dev/zero"),
        RenderError("with.amount", "division by zero"),
        SecretMissing("API_KEY"),
        Suspended(),
        ScriptError("not a list"),
        RunFailure(ERROR),
        NodeFailure(ERROR),
        StopAtBoundary("run-1", cancel=True),
        UnitSkipped("approval 'review' timed out"),
        errors.TimerNotDue("run-1", "not due", due_at=5.0, node_id="nap"),
        errors.NotContinued("run-1", "default", ["pay"], "review"),
        TimestampError("'soon' is not a timestamp"),
        Decline(),
        errors.DefinitionError("unusable"),
        errors.UsageError("bad argument"),
        errors.NotFoundError("nothing"),
        errors.RunStateError("not now"),
        errors.ExecutionError("went wrong"),
        errors.IdTooShort("execution id", "0193", 8),
        errors.AmbiguousId("checkpoint id", "0193abcd", ["0193abcd-1", "0193abcd-2"], 12,
                           execution_id="run-1"),
        errors.IneffectivePatch("run-1", "it forks from the run's end", ["inputs"]),
    ]
    try:
        from tether.web.auth import Forbidden, Unauthenticated
        from tether.web.config import ConfigError
        from tether.web.console import BadRequest, Conflict, NotFound
        from tether.web.fleet import FleetUnavailable
        from tether.web.links import LinkError
    except ImportError:  # the web extra is not installed
        pass
    else:
        samples += [Forbidden("approver only"), Unauthenticated("no token"),
                    ConfigError("bad --auth"), BadRequest("comment", "too long"),
                    Conflict("finished"), NotFound("no run"), FleetUnavailable("no worker"),
                    LinkError("expired", expired=True)]
    try:
        from tether.lsp.graph import NoGraph
        from tether.lsp.navigation import RenameRefused
    except ImportError:  # the lsp extra is not installed
        pass
    else:
        samples += [NoGraph("no graph: x.yaml has errors"), RenameRefused("no node id here")]
    try:
        from tether.web.starts import UnknownWorkflow
    except ImportError:  # the web extra is not installed
        pass
    else:
        samples += [UnknownWorkflow("deploy", ["build", "release"])]
    return {f"{type(s).__module__}.{type(s).__qualname__}": s for s in samples}


def _defined_exceptions() -> set[str]:
    """Every exception class defined in a module of the package that imports here."""
    found: set[str] = set()
    for info in pkgutil.walk_packages(tether.__path__, "tether."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra (web, providers) is not installed
            continue
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseException) \
                    and value.__module__ == module.__name__ \
                    and not value.__name__.startswith("_"):
                found.add(f"{value.__module__}.{value.__qualname__}")
    return found


SAMPLES = _samples()


def test_every_exception_class_has_a_sample() -> None:
    """A new exception class gets a sample here, so its pickling is tested."""
    assert _defined_exceptions() - set(SAMPLES) - {"tether.errors.Picklable"} == set()


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_an_exception_survives_pickling(name: str) -> None:
    """Unpickled: the same class, message, arguments and structured fields."""
    error = SAMPLES[name]
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert (str(copy), copy.args) == (str(error), error.args)
    assert copy.__dict__ == error.__dict__


FAMILIES = ("DefinitionError", "UsageError", "NotFoundError", "RunStateError",
            "ExecutionError", "StoreError")


def _tether_errors() -> list[type[BaseException]]:
    from tether import errors

    found = []
    for name in _defined_exceptions():
        module, _, qualname = name.rpartition(".")
        cls = getattr(importlib.import_module(module), qualname)
        if issubclass(cls, errors.TetherError) and cls is not errors.TetherError \
                and cls.__name__ not in FAMILIES:
            found.append(cls)
    return found


def test_every_error_belongs_to_exactly_one_family() -> None:
    """Each TetherError below the root is under one family, so ``except Family:`` is a
    partition a caller can rely on."""
    from tether import errors

    families = [getattr(errors, name) for name in FAMILIES]
    for cls in _tether_errors():
        owners = [f.__name__ for f in families if issubclass(cls, f)]
        assert len(owners) == 1, f"{cls.__qualname__} is in {owners or 'no family'}"


def test_every_public_exception_is_a_tether_error_in_a_family_or_the_signal() -> None:
    """Everything ``tether`` exports that is an exception is catchable by family."""
    from tether import errors

    families = tuple(getattr(errors, name) for name in FAMILIES)
    for name in tether.__all__:
        value = getattr(tether, name)
        if not (isinstance(value, type) and issubclass(value, BaseException)):
            continue
        if value in (errors.TetherError, errors.InterruptSignal, *families):
            continue
        assert issubclass(value, families), name


def test_lookups_are_lookup_errors_and_usage_errors_are_value_errors() -> None:
    """``RunNotFound`` is a ``LookupError``; a bad argument is a ``ValueError``."""
    from tether import errors

    assert issubclass(errors.RunNotFound, LookupError)
    assert issubclass(errors.CheckpointNotFound, LookupError)
    assert issubclass(errors.AmbiguousId, ValueError)
    assert issubclass(errors.StoreURLError, ValueError)
