"""Module boundaries of the pipeline: the runtime reads plans and renders templates without
the front ends; the shared modules depend on no stage."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "tether"
SHARED = ("jsontypes.py", "suggest.py", "kinds.py", "durations.py", "files.py",
          *(f"templating/{p.name}" for p in sorted((SRC / "templating").glob("*.py"))))


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("path", sorted((SRC / "runtime").glob("*.py")), ids=lambda p: p.name)
def test_the_runtime_imports_nothing_from_the_front_ends(path: Path) -> None:
    assert not {m for m in imported_modules(path) if m.startswith("tether.dsl")}


@pytest.mark.parametrize("name", SHARED)
def test_a_shared_module_imports_no_stage(name: str) -> None:
    stages = ("tether.dsl", "tether.compiler", "tether.runtime", "tether.stores", "tether.cli")
    assert not {m for m in imported_modules(SRC / name) if m.startswith(stages)}


def test_the_flow_reader_uses_only_the_public_names_of_the_syntax_module() -> None:
    tree = ast.parse((SRC / "dsl" / "flow_reader.py").read_text(encoding="utf-8"))
    names = [alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             and node.module == "tether.dsl.flow_syntax" for alias in node.names]
    assert names and not [name for name in names if name.startswith("_")]
