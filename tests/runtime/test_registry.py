"""Task registration: the allow-list a workflow's `task:` names are looked up in."""

from __future__ import annotations

import pytest

import tether
from tether.errors import TaskError
from tether.runtime.registry import REGISTRY, TaskRegistry


def test_a_task_without_a_name_answers_to_its_full_and_its_bare_name() -> None:
    """`@tether.task` registers `module.qualname`, and the bare name while it is unique."""
    @tether.task
    def registry_probe_unique(x: int) -> int:
        return x

    full = f"{__name__}.test_a_task_without_a_name_answers_to_its_full_and_its_bare_name." \
        "<locals>.registry_probe_unique"
    assert REGISTRY[full] is registry_probe_unique
    assert REGISTRY["test_a_task_without_a_name_answers_to_its_full_and_its_bare_name."
                    "<locals>.registry_probe_unique"] is registry_probe_unique


def test_a_bare_name_claimed_by_two_functions_belongs_to_neither() -> None:
    """Two different functions with one bare name: only the full names find them."""
    registry = TaskRegistry()

    def first() -> int:
        return 1

    def second() -> int:
        return 2

    registry.register("a.step", first)
    registry.alias("step", first)
    registry.register("b.step", second)
    registry.alias("step", second)
    assert "step" not in registry
    assert registry["a.step"] is first and registry["b.step"] is second
    registry.alias("step", first)  # once ambiguous, always ambiguous
    assert "step" not in registry
    assert sorted(registry) == ["a.step", "b.step"]


def test_an_explicit_name_wins_and_a_conflicting_one_is_refused() -> None:
    """`@task("x")` registers exactly "x"; another function under "x" is a TaskError that
    names both; the same definition registered again is fine."""
    registry = TaskRegistry()

    def one() -> int:
        return 1

    def two() -> int:
        return 2

    registry.register("billing.refund", one)
    registry.register("billing.refund", one)
    with pytest.raises(TaskError, match="registered twice"):
        registry.register("billing.refund", two)
    registry.alias("billing.refund", two)  # an alias never shadows a real name
    assert registry["billing.refund"] is one


def test_a_workflow_can_name_a_task_by_its_bare_name(tmp_path: pytest.TempPathFactory) -> None:
    """`task: <function name>` runs a function registered with a plain `@tether.task`."""
    @tether.task
    def registry_probe_bare_run(n: int) -> int:
        return n + 1

    name = ("test_a_workflow_can_name_a_task_by_its_bare_name.<locals>."
            "registry_probe_bare_run")
    path = tmp_path / "w.yaml"  # type: ignore[operator]
    path.write_text(f"tether: 1\nname: w\nnodes:\n  a:\n    task: \"{name}\"\n"
                    "    with: {n: 1}\noutput: \"{{ nodes.a.output }}\"\n")
    assert tether.Runner(path).run().output == 2
