"""`check` builds no plan for the files it checks: its diagnostics are a full compilation's,
on every example and golden file (sub-workflows are still compiled to plans)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.compiler.compile import Compiler
from tether.dsl.loader import read_workflow

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(
    path for folder in (ROOT / "examples", ROOT / "tests" / "golden" / "cases")
    for pattern in ("*.yaml", "*.flow") for path in folder.rglob(pattern)
)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_checking_reports_what_compiling_reports(path: Path) -> None:
    checked = Compiler().check_file(path)
    workflow, compiled = read_workflow(path)
    if workflow is not None:
        plan, more = Compiler().compile_workflow(workflow)
        compiled = compiled + more
        if not any(d.is_error for d in compiled):
            assert plan is not None
    assert checked == compiled
