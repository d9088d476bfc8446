"""Hostile and careless workflow files get diagnostics, never a crash, a hang or a blow-up:
trees of sub-workflows, huge integers, deep templates, paths that are not regular files."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

import tether
from tether.compiler.compile import Compiler
from tether.dsl.loader import read_workflow
from tether.errors import WorkflowError
from tether.templating import compiled

TASKS_ONLY = "tether: 1\nname: leaf\nnodes:\n" + "".join(
    f"  n{i}: {{task: t.step}}\n" for i in range(10))


def write_tree(root: Path, levels: int) -> Path:
    """``levels`` files of ten nodes, each node running the file below (about 300 bytes)."""
    for level in range(1, levels):
        nodes = "".join(f"  n{i}: {{workflow: l{level + 1}.yaml}}\n" for i in range(10))
        (root / f"l{level}.yaml").write_text(f"tether: 1\nname: l{level}\nnodes:\n{nodes}")
    (root / f"l{levels}.yaml").write_text(TASKS_ONLY)
    return root / "l1.yaml"


def write_chain(root: Path, length: int) -> Path:
    """``length`` files, each running the next."""
    for i in range(1, length):
        (root / f"c{i}.yaml").write_text(
            f"tether: 1\nname: c{i}\nnodes:\n  a: {{workflow: c{i + 1}.yaml}}\n")
    (root / f"c{length}.yaml").write_text("tether: 1\nname: last\nnodes:\n  a: {task: t}\n")
    return root / "c1.yaml"


def limit_memory() -> None:  # pragma: no cover - runs in the child
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def test_seven_small_files_that_expand_to_ten_million_nodes_are_refused_in_bounded_memory(
        tmp_path: Path) -> None:
    """Before, `check` took 60 s and 3.8 GB; now the child has 1 GB of address space and a
    generous timeout, and it reports E705 instead of building copies."""
    write_tree(tmp_path, 7)
    result = subprocess.run([sys.executable, "-m", "tether", "check", "--color", "never",
                             "l1.yaml"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, preexec_fn=limit_memory)
    assert result.returncode == 1, result.stderr
    assert "E705: with its sub-workflows, `l3.yaml` has more than 100,000 nodes " \
           "(run by l1.yaml -> l2.yaml)" in result.stdout


def test_a_chain_of_300_files_is_a_diagnostic_not_a_recursion_error(tmp_path: Path) -> None:
    main = write_chain(tmp_path, 300)
    with pytest.raises(WorkflowError) as caught:
        tether.compile(main)
    (error,) = caught.value.diagnostics
    assert error.code == "E701"
    (note,) = error.related
    assert note.span.file.endswith("c33.yaml")
    assert note.message == ("E705: sub-workflows nest more than 32 levels deep: "
                            "c1.yaml -> c2.yaml -> c3.yaml -> ... -> c32.yaml -> c33.yaml "
                            "-> c34.yaml")


def test_sub_workflows_32_levels_deep_compile_and_the_plan_reads_back(tmp_path: Path) -> None:
    plan = tether.compile(write_chain(tmp_path, 33))
    assert tether.Plan.from_json(plan.to_json()) == plan


def test_the_depth_diagnostic_lists_every_file_of_the_chain_with_its_reference(
        tmp_path: Path) -> None:
    main = write_chain(tmp_path, 5)
    workflow, _ = read_workflow(main)
    assert workflow is not None
    _, diagnostics = Compiler(max_depth=2).compile_workflow(workflow)
    deepest = diagnostics[0].related[0]
    assert deepest.message.startswith("E705: sub-workflows nest more than 2 levels deep")
    plan, inner = Compiler(max_depth=2).compile_file(tmp_path / "c3.yaml", "c3.yaml")
    assert plan is not None and not inner  # the same file is fine two levels higher up


def test_the_node_limit_counts_every_embedded_copy(tmp_path: Path) -> None:
    main = write_tree(tmp_path, 3)  # 10 + 100 + 1,000 nodes embedded
    workflow, _ = read_workflow(main)
    assert workflow is not None
    assert Compiler(max_nodes=1110).compile_workflow(workflow)[0] is not None
    plan, diagnostics = Compiler(max_nodes=1109).compile_workflow(workflow)
    assert plan is None
    assert [d.code for d in diagnostics] == ["E705"]
    assert diagnostics[0].span.line == 13  # the tenth reference is the one over the limit


@pytest.mark.parametrize(("syntax", "text"), [
    ("yaml", "tether: 1\nname: big\nnodes:\n  a: {task: t, with: {n: " + "9" * 4400 + "}}\n"),
    ("yaml", "tether: 1\nname: big\nnodes:\n  a: {task: t, with: {n: 0x" + "f" * 4000 + "}}\n"),
    ("flow", "workflow big\ntask a = t(n: " + "9" * 4400 + ")\n"),
])
def test_an_integer_longer_than_python_writes_is_a_diagnostic_at_its_value(
        tmp_path: Path, syntax: str, text: str) -> None:
    path = tmp_path / f"big.{syntax}"
    path.write_text(text)
    _, diagnostics = read_workflow(path)
    (diag,) = diagnostics
    assert diag.code == "E105" and "too large to be a JSON number" in diag.message
    assert (diag.span.line, diag.span.col) == ((4, 26) if syntax == "yaml" else (2, 15))


@pytest.mark.parametrize("expression", ["(" * 120 + "1" + ")" * 120, "not " * 2000 + "x",
                                        "[" * 200 + "]" * 200, "1" + " + 1" * 500,
                                        "x" + ".a" * 2000])
def test_a_deeply_nested_template_is_a_diagnostic_not_a_recursion_error(
        tmp_path: Path, expression: str) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("tether: 1\nname: deep\nnodes:\n  a:\n    task: t\n"
                    f"    with: {{x: \"{{{{ {expression} }}}}\"}}\n")
    diagnostics = tether.check(path)
    assert [(d.code, d.span.line) for d in diagnostics] == [("E411", 6)]


def test_a_deeply_nested_template_in_a_plan_is_refused_when_compiled_not_crashed() -> None:
    from jinja2 import TemplateSyntaxError

    with pytest.raises(TemplateSyntaxError, match="more than 32 levels deep"):
        compiled("{{ " + "(" * 120 + "1" + ")" * 120 + " }}")


@pytest.mark.parametrize("kind", ["symlink to /dev/zero", "FIFO", "directory"])
def test_a_path_that_is_not_a_regular_file_is_refused_without_reading_it(
        tmp_path: Path, kind: str) -> None:
    """A FIFO or /dev/zero read would never end: `check` runs in a child with a timeout."""
    path = tmp_path / ("w.flow" if kind == "FIFO" else "w.yaml")
    if kind == "FIFO":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to("/dev/zero")
    script = "import sys, tether; print([(d.code, d.message) for d in tether.check([sys.argv[1]])])"
    result = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                            text=True, timeout=60)
    if kind == "directory":  # a directory is searched for workflows: none here
        assert result.stdout.strip() == "[]", result.stderr
        _, diagnostics = read_workflow(path)
        assert "is not a regular file (a directory)" in diagnostics[0].message
    else:
        assert "is not a regular file" in result.stdout, result.stderr


def test_a_sub_workflow_that_is_a_device_is_refused_through_its_parent(tmp_path: Path) -> None:
    """A symlink to /dev/zero leaves the project (E706: never opened); a FIFO inside it is
    not a regular file (E701's note says so, and nothing waits for a writer)."""
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "fifo.yaml")
    main = tmp_path / "main.yaml"
    main.write_text("tether: 1\nname: m\nnodes:\n  a: {workflow: zero.yaml}\n"
                    "  b: {workflow: fifo.yaml}\n")
    zero, fifo = tether.check(main)
    assert zero.code == "E706" and "zero.yaml` is outside the project" in zero.message
    assert fifo.code == "E701"
    assert "not a regular file (a FIFO)" in fifo.related[0].message
