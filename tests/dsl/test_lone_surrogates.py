"""A string escape that is half of a surrogate pair (issue 22): ``"\\ud800"`` in a ``.flow``
string is E102 at the escape's file:line:col (both readers agree), in YAML E101; ``tether
run`` of such a file stops at the check, never exits 3 (UnicodeEncodeError at the store)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tether
from tether.dsl.source import lone_surrogate

FLOW = 'workflow s\n\ninput name: string = "x"\n\ntask a = t.done(v: "{text}")\n'


@pytest.mark.parametrize(("text", "col"), [
    ("\\ud800", 21), ("ab\\udc00cd", 23), ("\\ude00\\ud83d", 21), ("\\ud83d x\\ude00", 21),
    ("\\ud83d\\ude00\\ud800", 33), ("\\\\\\ud800", 23),
])
def test_a_lone_surrogate_escape_in_flow_is_E102_at_the_escape(
        tmp_path: Path, text: str, col: int) -> None:
    path = tmp_path / "s.flow"
    path.write_text(FLOW.format(text=text))
    errors = [d for d in tether.check(path) if d.is_error]
    assert [(d.code, d.span.line, d.span.col) for d in errors] == [("E102", 5, col)]
    assert "is half of a surrogate pair" in errors[0].message


@pytest.mark.parametrize("text", ["\\ud83d\\ude00", "\\\\ud800", "plain \\u00e9"])
def test_pairs_and_escaped_backslashes_are_fine(tmp_path: Path, text: str) -> None:
    path = tmp_path / "s.flow"
    path.write_text(FLOW.format(text=text))
    assert [d for d in tether.check(path) if d.is_error] == []


def test_yaml_says_what_is_wrong_with_the_escape(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text('tether: 1\nname: s\nnodes:\n  a:\n    task: t.done\n'
                    '    with: {v: "\\ud800"}\n')
    (error,) = tether.check(path)
    assert (error.code, error.span.line, error.span.col) == ("E101", 6, 18)
    assert error.help is not None and "both halves of its surrogate pair" in error.help


def test_lone_surrogate_finds_the_first_unpaired_escape() -> None:
    assert lone_surrogate('"\\ud83d\\ude00"') is None
    assert lone_surrogate('"a\\ud800"') == 2
    assert lone_surrogate('"\\\\ud800"') is None


@pytest.mark.parametrize(("name", "text"), [
    ("s.flow", FLOW.format(text="\\ud800")),
    ("s.yaml", 'tether: 1\nname: s\nnodes:\n  a:\n    task: t.done\n    with: {v: "\\ud800"}\n'),
])
def test_run_stops_at_the_check_with_a_located_error(tmp_path: Path, name: str,
                                                      text: str) -> None:
    (tmp_path / name).write_text(text)
    (tmp_path / "t.py").write_text("from tether import task\n\n@task('t.done')\n"
                                   "def done(v: str) -> str:\n    return v\n")
    env = {k: v for k, v in os.environ.items() if k != "TETHER_DB"}
    done = subprocess.run([sys.executable, "-m", "tether", "run", name, "--tasks", "t.py",
                           "--db", f"sqlite:///{tmp_path / 'r.db'}"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode not in (0, 3), done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert f"{name}:" in done.stderr and ("E102" in done.stderr or "E101" in done.stderr)
