"""The ``tether`` command imports only what the command it runs needs (issue 25, fast start).

Each check runs in a fresh interpreter (a subprocess with this checkout on ``PYTHONPATH``) and
reads ``sys.modules`` there: what a command imports is behaviour, not timing. The figures
themselves are in docs/performance.md (``bench/startup.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tether.cli.group import LazyGroup, cli, register_commands
from tether.cli.main import COMMAND_MODULES, COMMANDS

ROOT = Path(__file__).resolve().parents[2]
REFUND = ROOT / "examples" / "refund" / "refund.yaml"

# Imported by no command before it needs them.
NEVER_AT_IMPORT = (
    "click", "tether.cli.group", "pydantic", "sqlalchemy", "jinja2", "yaml", "lark", "asyncio",
    "fastapi", "starlette",
    "uvicorn", "rich", "networkx", "openai", "anthropic", "httpx", "psycopg", "opentelemetry",
    "tether.compiler", "tether.dsl.document", "tether.stores", "tether.runtime", "tether.web",
    "tether.agents",
)
# What checking a YAML file has no use for: the store, the runtime, the console, the
# provider SDKs, the .flow grammar, the other commands' modules, and pydantic (the document
# is validated by pydantic-core alone: tether.dsl.document_light).
NOT_FOR_CHECK = (
    "pydantic", "tether.dsl.document", "tether.compiler.build",
    "click", "tether.cli.group", "tether.cli.authoring", "tether.compiler.plan", "jinja2",
    "cronsim", "tether.cron", "sqlalchemy", "lark", "asyncio",
    "fastapi", "starlette", "uvicorn", "rich", "networkx",
    "openai", "anthropic", "httpx", "psycopg", "opentelemetry", "tether.stores",
    "tether.runtime.runner", "tether.runtime.driver", "tether.web", "tether.workers",
    "tether.agents.providers", "tether.cli.operator", "tether.cli.fleet", "tether.cli.inspect",
    "tether.cli.serve", "tether.cli.schedules", "tether.cli.queues", "tomllib",
    "importlib.metadata",  # (pydantic's plugin loader's: tether.cli.fast.pydantic_plugins_off)
)
# A .flow file whose statements the fast reader reads (tether.dsl.flow_direct) loads no parser
# tables and imports neither Lark nor PyYAML.
NOT_FOR_FLOW_CHECK = (*NOT_FOR_CHECK, "lark", "lark_cython", "yaml")

_PROBE = """
import json, sys
{body}
names = sorted(sys.modules)
print(json.dumps({{"modules": names, "extra": extra}}))
"""


def _probe(body: str, cwd: Path) -> tuple[set[str], object]:
    """Run ``body`` in a fresh interpreter; the modules it left imported, and its ``extra``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", _PROBE.format(body=body)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return set(report["modules"]), report["extra"]


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The names of ``names`` that are imported, as packages or as any module under them."""
    return [name for name in names
            if name in modules or any(m.startswith(name + ".") for m in modules)]


def test_importing_the_command_imports_nothing_heavy(tmp_path: Path) -> None:
    modules, _ = _probe("import tether.cli.main\nextra = None", tmp_path)
    assert "tether.cli.main" in modules  # the probe sees imports at all
    assert _loaded(modules, NEVER_AT_IMPORT) == []


def test_checking_a_yaml_file_imports_only_the_checker(tmp_path: Path) -> None:
    body = (
        "from tether.cli.main import main\n"
        f"code = main(['check', {str(REFUND)!r}])\n"
        "checked = sorted(sys.modules)\n"
        "from tether.compiler.plan import Plan\n"
        "extra = [code, Plan.__pydantic_complete__, checked]\n"
    )
    _, extra = _probe(body, tmp_path)
    assert isinstance(extra, list)
    modules = set(extra.pop())
    assert "tether.compiler.compile" in modules and "tether.cli.fast" in modules
    assert "pydantic_core" in modules and "tether.dsl.document_light" in modules
    assert _loaded(modules, NOT_FOR_CHECK) == []
    # exit 0, and the plan's validators were never built (check builds no plan)
    assert extra == [0, False]


def test_checking_a_small_flow_file_imports_no_parser(tmp_path: Path) -> None:
    body = (
        "import os\n"
        "from tether.cli.main import main\n"
        f"code = main(['check', {str(REFUND.with_suffix('.flow'))!r}])\n"
        "extra = [code, 'PYDANTIC_DISABLE_PLUGINS' in os.environ]\n"
    )
    modules, extra = _probe(body, tmp_path)
    assert "tether.dsl.flow_direct" in modules and "tether.compiler.compile" in modules
    assert "pydantic_core" in modules and "tether.dsl.document_light" in modules
    assert _loaded(modules, NOT_FOR_FLOW_CHECK) == []
    assert extra == [0, False]  # checked; pydantic's plugin switch is as it was


def test_checking_with_another_pydantic_core_uses_the_models(tmp_path: Path) -> None:
    """The generated schema is for one pydantic-core: with another, the check validates with
    the pydantic models, and reports the same."""
    path = tmp_path / "wrong.yaml"
    path.write_text(REFUND.read_text().replace("type: number", "type: numbr"))
    body = (
        "import contextlib, io\n"
        "from tether.dsl import document_schema\n"
        "from tether.cli.main import main\n"
        "runs = []\n"
        "for version in (document_schema.PYDANTIC_CORE_VERSION, '0.0.0'):\n"
        "    document_schema.PYDANTIC_CORE_VERSION = version\n"
        "    import tether.dsl.document_light as light\n"
        "    light.light_validator.cache_clear()\n"
        "    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out):\n"
        f"        code = main(['check', '--format', 'json', {str(path)!r}])\n"
        "    runs.append([code, out.getvalue(), 'pydantic.main' in sys.modules])\n"
        "extra = runs\n"
    )
    _, extra = _probe(body, tmp_path)
    assert isinstance(extra, list)
    (light_code, light_out, light_models), (code, out, models) = extra
    assert (light_code, light_models, code, models) == (1, False, 1, True)
    assert light_out == out and '"E203"' in out


def test_pydantic_loads_its_plugins_again_after_the_fast_check(tmp_path: Path) -> None:
    """The stand-in loader is gone after the check: a plan compiled next in the same process
    gets pydantic's own loader (and the plugins it finds)."""
    body = (
        "from tether.cli.main import main\n"
        f"code = main(['check', {str(REFUND)!r}])\n"
        "during = 'pydantic.plugin._loader' in sys.modules\n"
        "from tether.compiler import compile\n"
        f"compile({str(REFUND)!r})\n"
        "loader = sys.modules['pydantic.plugin._loader']\n"
        "extra = [code, during, loader.__file__ is not None, 'importlib.metadata' in sys.modules]\n"
    )
    _, extra = _probe(body, tmp_path)
    assert extra == [0, False, True, True]


def test_the_fast_check_turns_pydantic_plugins_off_only_while_it_runs() -> None:
    from tether.cli.fast import PLUGINS_SWITCH, pydantic_plugins_off

    saved = os.environ.pop(PLUGINS_SWITCH, None)
    try:
        with pydantic_plugins_off():
            inside = os.environ.get(PLUGINS_SWITCH)
        after = os.environ.get(PLUGINS_SWITCH)
        os.environ[PLUGINS_SWITCH] = "logfire"  # the user's own choice is kept
        with pydantic_plugins_off():
            kept = os.environ.get(PLUGINS_SWITCH)
        assert (inside, after, kept, os.environ.get(PLUGINS_SWITCH)) == (
            "__all__", None, "logfire", "logfire")
    finally:
        os.environ.pop(PLUGINS_SWITCH, None)
        if saved is not None:
            os.environ[PLUGINS_SWITCH] = saved


def test_a_plan_still_validates_when_first_used(tmp_path: Path) -> None:
    """Deferred validators are built on first use: a compiled plan reads back, a bad one is
    refused."""
    body = (
        "from tether.compiler import compile\n"
        "from tether.compiler.plan import Plan\n"
        f"plan = compile({str(REFUND)!r})\n"
        "again = Plan.model_validate_json(plan.model_dump_json(by_alias=True))\n"
        "try:\n"
        "    Plan.model_validate({'nodes': 'x'})\n"
        "    refused = False\n"
        "except Exception:\n"
        "    refused = True\n"
        "extra = [again == plan, refused, Plan.__pydantic_complete__]\n"
    )
    _, extra = _probe(body, tmp_path)
    assert extra == [True, True, True]


def test_every_command_is_mapped_to_the_module_that_registers_it() -> None:
    """The lazy table and the modules agree: each listed command is registered by its module
    and by no other (a stale entry would send a command to the wrong import)."""
    for name, module in COMMANDS.items():
        group = click.Group("tether")
        register_commands(group, [module])
        assert name in group.commands, (name, module)
    eager = click.Group("tether")
    register_commands(eager, COMMAND_MODULES)
    assert set(COMMANDS) == set(eager.commands)


def test_help_lists_every_command_of_every_module() -> None:
    eager = click.Group("tether")
    register_commands(eager, COMMAND_MODULES)
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    listed = {line.split()[0] for line in result.output.split("Commands:")[1].splitlines()
              if line.strip()}
    assert listed == set(eager.commands)


def test_a_command_of_an_unlisted_module_is_still_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module added to the modules but not to the table (a new command) still works: an
    unknown name loads every module before it is refused."""
    module = types.ModuleType("tether_test_unlisted_commands")

    def register(group: click.Group) -> None:
        group.add_command(click.Command("hello", callback=lambda: click.echo("hi")))

    module.register = register  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    group = LazyGroup("tether", modules=("tether.cli.authoring", module.__name__),
                      where={"check": "tether.cli.authoring"})
    assert CliRunner().invoke(group, ["hello"]).output == "hi\n"
    assert CliRunner().invoke(group, ["helo"]).exit_code == 2  # refused, after loading all


def test_a_mistyped_command_gets_a_suggestion(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-m", "tether", "chek", "x.yaml"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert "No such command 'chek'" in done.stderr and "'check'" in done.stderr


# What submitting and resuming leave out: the driver and the agents' modules for a submit (it
# drives nothing); the compiler's checks, the document model and the agents' modules for the
# resume of a run without agent nodes (it reads the stored plan).
NOT_FOR_SUBMIT = (
    "click.testing", "tether.runtime.driver", "tether.runtime.execution",
    "tether.runtime.resume", "tether.runtime.bridge", "tether.agents",
    "tether.runtime.agent.loop", "tether.runtime.executors.agent", "lark", "networkx",
    "fastapi", "starlette", "uvicorn", "rich", "openai", "anthropic", "httpx", "psycopg",
    "opentelemetry", "tether.web", "tether.workers.worker",
)
NOT_FOR_RESUME = (
    "tether.compiler.compile", "tether.dsl.document", "yaml", "tether.agents",
    "tether.runtime.agent.loop", "tether.runtime.executors.agent", "lark",
    "fastapi", "starlette", "uvicorn", "openai", "anthropic", "httpx", "psycopg",
    "opentelemetry", "tether.web", "tether.workers.loop", "tether.workers.schedules",
    "tether.runtime.signatures",  # (recorded by a run's submitter, not by its resume)
    # the stored plan is read by pydantic-core alone (compiler/plan_light.py)
    "pydantic", "tether.compiler.plan", "tether.compiler.compat",
)


def _waiting_run(db: str, cwd: Path) -> str:
    """A run of the refund example paused at its approval, made by the real command."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"),
           "TETHER_EXAMPLE_LEDGER": str(cwd / "ledger.jsonl")}
    done = subprocess.run([sys.executable, "-m", "tether", "run", str(REFUND), "--tasks",
                           str(REFUND.parent / "tasks.py"), "--db", db, "-i",
                           "account=ACC-42", "-i", "amount=500", "--json"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    result = json.loads(done.stdout)
    assert result["status"] == "paused", done.stderr
    return str(result["execution_id"])


def _submit_probe(db: str, cwd: Path) -> tuple[set[str], object]:
    body = (
        "import gc\n"
        "from tether.cli.main import main\n"
        f"code = main(['submit', {str(REFUND)!r}, '--db', {db!r}, '-i', 'account=ACC-42',"
        " '-i', 'amount=20'])\n"
        "extra = [code, gc.isenabled()]\n"
    )
    return _probe(body, cwd)


# What a submit to a current SQLite file has no use for: it inserts with sqlite3
# (stores/sqlite_submit.py), so neither SQLAlchemy nor the store classes nor the runtime.
NOT_FOR_SQLITE_SUBMIT = (
    *NOT_FOR_SUBMIT, "sqlalchemy", "tether.stores.sql", "tether.stores.sqlite",
    "tether.stores.base", "tether.stores.queueing", "tether.stores.records",
    "tether.runtime.runner", "tether.runtime.invoke", "tether.runtime.concurrency",
    "tether.runtime.dedup", "asyncio",
)


def test_submitting_to_a_new_database_uses_the_full_store(tmp_path: Path) -> None:
    """The file does not exist yet: the store creates and migrates it."""
    modules, extra = _submit_probe(f"sqlite:///{tmp_path / 'runs.db'}", tmp_path)
    assert "tether.runtime.runner" in modules and "sqlalchemy" in modules
    assert _loaded(modules, NOT_FOR_SUBMIT) == []
    assert extra == [0, True]  # submitted, and the collector is on again afterwards


def test_submitting_to_a_current_sqlite_file_imports_no_store_and_no_runtime(
        tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    _submit_probe(db, tmp_path)  # creates the database
    modules, extra = _submit_probe(db, tmp_path)
    assert "tether.stores.sqlite_submit" in modules and "tether.compiler.compile" in modules
    assert _loaded(modules, NOT_FOR_SQLITE_SUBMIT) == []
    assert extra == [0, True]


def test_resuming_a_run_without_agents_imports_no_agents(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    run_id = _waiting_run(db, tmp_path)
    body = (
        "import gc, os\n"
        f"os.environ['TETHER_EXAMPLE_LEDGER'] = {str(tmp_path / 'ledger.jsonl')!r}\n"
        "from tether.cli.main import main\n"
        f"code = main(['resume', {run_id!r}, '--tasks', {str(REFUND.parent / 'tasks.py')!r},"
        f" '--db', {db!r}, '--value', '{{\"approved\": true}}'])\n"
        "extra = [code, gc.isenabled()]\n"
    )
    modules, extra = _probe(body, tmp_path)
    assert "tether.runtime.driver" in modules and "tether.runtime.resume" in modules
    assert "tether.compiler.plan_light" in modules and "pydantic_core" in modules
    assert _loaded(modules, NOT_FOR_RESUME) == []
    assert "getpass" not in modules
    assert extra == [0, True]  # the run completed; the collector is on again


def test_resuming_with_another_pydantic_core_reads_the_plan_with_the_models(
        tmp_path: Path) -> None:
    """The plan schema is pinned to the pydantic-core it was made with: with another, the
    in-place resume reads the stored plan with the models, and completes the same."""
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    outputs = []
    for version in (None, "0.0.0"):
        run_id = _waiting_run(db, tmp_path)
        pin = "" if version is None else (
            "from tether.compiler import plan_schema\n"
            f"plan_schema.PYDANTIC_CORE_VERSION = {version!r}\n")
        body = (
            "import contextlib, io, os\n"
            f"os.environ['TETHER_EXAMPLE_LEDGER'] = {str(tmp_path / 'ledger.jsonl')!r}\n"
            + pin +
            "from tether.cli.main import main\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            f"    code = main(['resume', {run_id!r}, '--tasks', "
            f"{str(REFUND.parent / 'tasks.py')!r}, '--db', {db!r}, '--quiet', '--json',"
            " '--value', '{\"approved\": true}'])\n"
            "from tether.runtime import plans\n"
            "kept = [type(p).__module__ for p in plans._PLANS.values()]\n"
            "extra = [code, json.loads(out.getvalue())['output'], kept,\n"
            "         'pydantic.main' in sys.modules]\n"
        )
        _, extra = _probe(body, tmp_path)
        outputs.append(extra)
    light, models = outputs
    assert light[1] == models[1] == {"refund_id": "R-ACC-42-500", "approved_by_manager": True}
    assert light[::2] == [0, ["tether.compiler.plan_light"]] and light[3] is False
    assert models[::2] == [0, ["tether.compiler.plan"]] and models[3] is True


def test_pydantic_loads_its_plugins_again_after_the_resume(tmp_path: Path) -> None:
    """The resume reads its plan without pydantic (no plugin loader, no stand-in): a model
    the process makes afterwards (a task's, say) gets pydantic's own loader."""
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    run_id = _waiting_run(db, tmp_path)
    body = (
        "import os\n"
        f"os.environ['TETHER_EXAMPLE_LEDGER'] = {str(tmp_path / 'ledger.jsonl')!r}\n"
        "from tether.cli.main import main\n"
        f"code = main(['resume', {run_id!r}, '--tasks', {str(REFUND.parent / 'tasks.py')!r},"
        f" '--db', {db!r}, '--value', '{{\"approved\": true}}'])\n"
        "during = 'pydantic.plugin._loader' in sys.modules\n"
        "from pydantic import BaseModel\n"
        "class Receipt(BaseModel):\n"
        "    id: str\n"
        "made = Receipt(id='R-1').id\n"
        "loader = sys.modules['pydantic.plugin._loader']\n"
        "extra = [code, during, made, loader.__file__ is not None,\n"
        "         os.environ.get('PYDANTIC_DISABLE_PLUGINS')]\n"
    )
    _, extra = _probe(body, tmp_path)
    assert extra == [0, False, "R-1", True, None]


def test_checking_leaves_the_collector_as_it_found_it(tmp_path: Path) -> None:
    """The fast path pauses the collector while it imports, and only then."""
    body = (
        "import gc\n"
        "from tether.cli.main import main\n"
        f"first = main(['check', {str(REFUND)!r}])\n"
        "on = gc.isenabled()\n"
        "gc.disable()\n"
        f"second = main(['check', {str(REFUND)!r}])\n"
        "extra = [first, on, second, gc.isenabled()]\n"
    )
    _, extra = _probe(body, tmp_path)
    assert extra == [0, True, 0, False]


def test_the_compiler_package_imports_its_parts_on_use(tmp_path: Path) -> None:
    """Reading a plan does not import the compiler's checks; ``tether.compiler.compile`` is
    the function, before and after its submodule is imported."""
    body = (
        "import tether.compiler.plan\n"
        "before = 'tether.compiler.compile' in sys.modules\n"
        "import tether.compiler\n"
        "first = tether.compiler.compile\n"
        "import tether.compiler.compile\n"
        "from tether.compiler import Plan, compile\n"
        "extra = [before, callable(first), first is compile is tether.compiler.compile,\n"
        "         Plan is tether.compiler.plan.Plan, compile.__module__]\n"
    )
    _, extra = _probe(body, tmp_path)
    assert extra == [False, True, True, True, "tether.compiler.compile"]


# What recording an answer on a current SQLite file has no use for (--enqueue: the workers
# continue the run): it claims with sqlite3 (stores/sqlite_answer.py), so neither SQLAlchemy
# nor the store classes, the plan models or the runtime.
NOT_FOR_SQLITE_ANSWER = (
    "sqlalchemy", "pydantic", "asyncio", "yaml", "jinja2", "lark", "tether.compiler",
    "tether.dsl", "tether.templating", "tether.agents", "tether.stores.sql",
    "tether.stores.sqlite", "tether.stores.base", "tether.stores.open",
    "tether.stores.queueing", "tether.runtime.runner", "tether.runtime.resume",
    "tether.runtime.lifecycle", "tether.runtime.context", "tether.runtime.execution",
    "tether.runtime.driver", "tether.runtime.invoke", "tether.workers", "opentelemetry",
    "tether.web", "click.testing",
)


def _answer_probe(db: str, run_id: str, cwd: Path, *options: str) -> tuple[set[str], object]:
    body = (
        "import gc\n"
        "from tether.cli.main import main\n"
        f"code = main(['resume', {run_id!r}, *{list(options or ['--enqueue'])!r}, '--db', {db!r},"
        " '--value', '{\"approved\": true}'])\n"
        "extra = [code, gc.isenabled()]\n"
    )
    return _probe(body, cwd)


def test_answering_on_a_current_sqlite_file_imports_no_store_and_no_runtime(
        tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    modules, extra = _answer_probe(db, _waiting_run(db, tmp_path), tmp_path)
    assert "tether.stores.sqlite_answer" in modules
    assert _loaded(modules, NOT_FOR_SQLITE_ANSWER) == []
    assert extra == [0, True]  # recorded and left to the workers; the collector is on


def test_answering_on_another_store_uses_the_full_path(tmp_path: Path) -> None:
    """Not a plain URL (here: a query): the full store and the runtime record it."""
    db = f"sqlite:///{tmp_path / 'runs.db'}?durability=normal"
    modules, extra = _answer_probe(db, _waiting_run(db, tmp_path), tmp_path)
    assert "tether.runtime.lifecycle" in modules and "sqlalchemy" in modules
    assert extra == [0, True]


def test_answering_without_tasks_for_a_live_worker_imports_no_store_and_no_runtime(
        tmp_path: Path) -> None:
    """No --tasks (and no pyproject.toml): the run is left to the live worker of its queue,
    as with --enqueue."""
    import time

    from tether.stores.queueing import WorkerRecord
    from tether.stores.sqlite import SQLiteCheckpointer

    db = f"sqlite:///{tmp_path / 'runs.db'}"
    run_id = _waiting_run(db, tmp_path)
    store = SQLiteCheckpointer(tmp_path / "runs.db")
    store.register_worker(WorkerRecord("w", "host", 1, ("default",), 1, time.time(),
                                       time.time()))
    store.close()
    modules, extra = _answer_probe(db, run_id, tmp_path, "--quiet")
    assert "tether.stores.sqlite_answer" in modules
    assert _loaded(modules, NOT_FOR_SQLITE_ANSWER) == []
    assert extra == [0, True]


def test_answering_without_tasks_and_no_live_worker_imports_no_store_and_no_runtime(
        tmp_path: Path) -> None:
    """No --tasks, no pyproject.toml and no live worker of the run's queue: the answer is
    recorded, the run left on its queue, and the command exits 5 saying what to run,
    decided without SQLAlchemy, pydantic or the runtime."""
    assert not any((p / "pyproject.toml").is_file() for p in (tmp_path, *tmp_path.parents))
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    modules, extra = _answer_probe(db, _waiting_run(db, tmp_path), tmp_path, "--quiet")
    assert "tether.stores.sqlite_answer" in modules
    assert "tether.runtime.route_rules" in modules
    assert _loaded(modules, NOT_FOR_SQLITE_ANSWER) == []
    assert extra == [5, True]  # not continued; the collector is on again
