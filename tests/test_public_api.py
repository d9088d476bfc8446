"""The public API is exactly ``tether.__all__``: every name importable and documented."""

from __future__ import annotations

import importlib
import inspect

import tether

EXPECTED = {
    # language and compiler
    "load", "compile", "check", "Plan", "Workflow", "Diagnostic",
    # runtime
    "Runner", "RunResult", "task", "interrupt", "Resume", "idempotent",
    # what started a run (Runner.run/submit(trigger=...), RunRecord.trigger)
    "Trigger", "TriggerKind",
    # stores
    "Checkpointer", "Checkpoint", "InMemoryCheckpointer", "SQLiteCheckpointer",
    "PostgresCheckpointer", "open_checkpointer",
    # errors and control flow
    "TetherError", "WorkflowError", "PlanError", "PlanMismatch", "InputError", "TaskError",
    "NotJSONError", "RunNotFound", "CheckpointNotFound", "ForkError", "ExecutionExists",
    "ResumeError",
    "ChainResumeError", "ResumeValueError", "AlreadyResumed", "StoreError",
    "SchemaVersionError", "StoreUnavailable", "InterruptSignal", "LeaseLost", "TemplateLimit",
    # the error families (tether.errors), and the errors of ids and forks
    "DefinitionError", "UsageError", "NotFoundError", "RunStateError", "ExecutionError",
    "AmbiguousId", "IdTooShort", "IneffectivePatch", "ConcurrencyLimitReached",
}


def test_all_is_exactly_the_documented_api() -> None:
    """Adding or removing a public name is a deliberate change to this list."""
    assert set(tether.__all__) == EXPECTED
    assert len(tether.__all__) == len(set(tether.__all__))


def test_every_public_name_imports_and_has_a_docstring() -> None:
    """Each name resolves (lazily) to a documented object; `from tether import *` works."""
    namespace: dict[str, object] = {}
    exec("from tether import *", namespace)
    for name in tether.__all__:
        value = getattr(tether, name)
        assert namespace[name] is value
        assert inspect.getdoc(value), f"tether.{name} has no docstring"


def test_errors_form_one_tree_and_control_flow_is_not_an_error() -> None:
    """Every error derives from TetherError; the suspend signal is a BaseException only."""
    errors = [getattr(tether, n) for n in tether.__all__
              if isinstance(getattr(tether, n), type) and n.endswith(("Error", "Mismatch",
                                                                      "Found", "Exists",
                                                                      "Resumed", "Unavailable",
                                                                      "Lost", "Limit"))]
    assert all(issubclass(e, tether.TetherError) for e in errors)
    assert tether.ChainResumeError is tether.ResumeError
    assert not issubclass(tether.InterruptSignal, Exception)
    assert issubclass(tether.InterruptSignal, BaseException)


def test_importing_tether_is_lazy() -> None:
    """`import tether` does not import the compiler, the runtime or SQLAlchemy up front."""
    import subprocess
    import sys

    code = ("import sys, tether; print(sorted(m for m in ('networkx', 'sqlalchemy', 'jinja2') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
    assert importlib.import_module("tether").__name__ == "tether"


def test_the_console_package_has_a_small_documented_api() -> None:
    """``tether.web`` (the ``tether[web]`` extra): the app factory, the server, the config."""
    web = importlib.import_module("tether.web")
    assert set(web.__all__) == {"AuthMode", "ConfigError", "Role", "ServeConfig", "User",
                                "create_app", "serve"}
    for name in web.__all__:
        assert inspect.getdoc(getattr(web, name)), f"tether.web.{name} has no docstring"


def test_the_cli_does_not_import_the_console_until_serve_runs() -> None:
    import subprocess
    import sys

    code = ("import sys, tether.cli.main; print(sorted(m for m in ('fastapi', 'uvicorn', "
            "'tether.web') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
