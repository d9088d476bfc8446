"""The ``.flow`` parser's tables are kept in the user's cache, and only where that is safe.

A cached parser must read exactly as a built one (tests/dsl/test_flow_parsers.py compares the
readings; here the processes that load the tables are compared with ones that build them),
and a damaged, foreign or unwritable cache must never change what ``tether check`` says.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tether.dsl.parser_cache import cache_directory, table_file

ROOT = Path(__file__).resolve().parents[2]
BROKEN = "workflow w\ntask a = shop.pay(amount 3)\napproval b after a\n  reason r\n"
GOOD = (ROOT / "examples" / "refund" / "refund.flow").read_text(encoding="utf-8")

# Runs `tether check` in-process with Lark's logger shown, so a load from the cache is seen.
_CHECK = """
import logging, os, sys
import lark  # its logger is set to CRITICAL on import: show its debug lines after that
if os.environ.get("PROBE_LARK_DEBUG"):
    logging.getLogger("lark").setLevel(logging.DEBUG)
from tether.cli.main import main
code = main(["check", *sys.argv[1:]])
sys.stdout.flush()
print(f"exit {code}")
"""


def _check(cache: Path | None, *files: Path,
           debug: bool = True) -> subprocess.CompletedProcess[str]:
    """``tether check files`` with the tables cached in ``cache`` (None: nowhere); with
    ``debug``, Lark's log (which says when the tables are loaded) on stderr."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PROBE_LARK_DEBUG": "1" if debug else ""}
    env.pop("TETHER_CACHE_DIR", None)
    if cache is not None:
        env["TETHER_CACHE_DIR"] = str(cache)
    else:
        env["XDG_CACHE_HOME"] = "/dev/null/none"  # nowhere a directory can be made
        env["HOME"] = "/dev/null/none"
    return subprocess.run([sys.executable, "-c", _CHECK, *map(str, files)], env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def _files(tmp_path: Path) -> tuple[Path, Path]:
    good, broken = tmp_path / "good.flow", tmp_path / "broken.flow"
    good.write_text(GOOD, encoding="utf-8")
    broken.write_text(BROKEN, encoding="utf-8")
    return good, broken


def _said(done: subprocess.CompletedProcess[str]) -> tuple[str, list[str]]:
    """What the user sees: stdout, and stderr without Lark's debug lines."""
    return done.stdout, [line for line in done.stderr.splitlines()
                         if "cache" not in line.lower() and line.strip()]


def test_the_tables_are_saved_then_loaded_and_read_the_same(tmp_path: Path) -> None:
    good, broken = _files(tmp_path)
    cache = tmp_path / "cache"
    reference = _check(None, good, broken)  # no cache at all: both parsers built
    assert "exit 1" in reference.stdout and "E102" in reference.stdout
    first = _check(cache, good, broken)
    assert sorted(p.name for p in cache.iterdir()) == ["flow-compiled.lark-tables",
                                                      "flow.lark-tables"]
    assert "Loading grammar from cache" not in first.stderr
    second = _check(cache, good, broken)
    assert second.stderr.count("Loading grammar from cache") == 2  # both parsers, and
    assert "Saving grammar" not in second.stderr  # neither built again
    assert _said(first) == _said(second) == _said(reference)


def test_a_damaged_cache_file_is_built_again(tmp_path: Path) -> None:
    good, broken = _files(tmp_path)
    cache = tmp_path / "cache"
    reference = _check(None, good, broken)
    cache.mkdir(mode=0o700)
    for name in ("flow-compiled", "flow"):
        (cache / f"{name}.lark-tables").write_bytes(b"not a hash\n\x80\x04garbage")
    done = _check(cache, good, broken, debug=False)  # as a user runs it: nothing more said
    assert (done.stdout, done.stderr) == (reference.stdout, "")
    again = _check(cache, good, broken)  # rewritten whole: now loaded
    assert again.stderr.count("Loading grammar from cache") == 2
    assert "Saving grammar" not in again.stderr
    assert _said(again) == _said(reference)


def test_tables_of_another_grammar_are_not_used(tmp_path: Path) -> None:
    """A file saved for another grammar (another version of tether) is rebuilt, not used."""
    from lark import Lark

    good, broken = _files(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    for name in ("flow-compiled", "flow"):
        Lark('statement: "x"\n', parser="lalr", start="statement",
             cache=str(cache / f"{name}.lark-tables"))
    done = _check(cache, good, broken)
    assert done.stderr.count("Saving grammar to cache") == 2  # both built and saved anew
    assert _said(done) == _said(_check(None, good, broken))


def test_no_cache_where_others_could_write(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("TETHER_CACHE_DIR", str(shared))
    assert cache_directory() is None and table_file("flow") is None
    shared.chmod(0o700)
    assert cache_directory() == shared and table_file("flow") == str(shared / "flow.lark-tables")
    (shared / "flow.lark-tables").mkdir()  # not a regular file
    assert table_file("flow") is None
    os.rmdir(shared / "flow.lark-tables")
    (shared / "flow.lark-tables").symlink_to(tmp_path / "elsewhere")
    assert table_file("flow") is None


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")
def test_no_cache_file_another_user_owns(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("TETHER_CACHE_DIR", str(cache))
    planted = cache / "flow.lark-tables"
    planted.write_bytes(b"")
    os.chown(planted, 4321, 4321)
    assert table_file("flow") is None
    os.chown(cache, 4321, 4321)
    assert cache_directory() is None


def test_no_usable_cache_directory_changes_nothing(tmp_path: Path) -> None:
    good, broken = _files(tmp_path)
    blocked = tmp_path / "a-file"
    blocked.write_text("", encoding="utf-8")
    done = _check(blocked / "cache", good, broken)  # cannot be made under a file
    assert _said(done) == _said(_check(None, good, broken))
    assert "grammar" not in done.stderr and "Traceback" not in done.stderr


def _shape(tree: object) -> object:
    """A tree as nested tuples of types, values and positions (what ``==`` does not see)."""
    from lark import Token, Tree

    if isinstance(tree, Tree):
        meta = tree.meta
        return (type(tree), type(tree.data), str(tree.data), meta.line, meta.column,
                meta.end_line, meta.end_column, tuple(_shape(c) for c in tree.children))
    assert isinstance(tree, Token)
    return (type(tree), tree.type, str(tree), tree.line, tree.column, tree.end_line,
            tree.end_column, tree.start_pos, tree.end_pos)


@pytest.mark.parametrize("compiled", [False, True])
def test_loaded_tables_build_the_very_trees_built_tables_do(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiled: bool) -> None:
    from tether.dsl import flow_syntax
    from tether.dsl.flow_syntax import split_statements

    if compiled and flow_syntax.compiled_lark() is None:
        pytest.skip("lark-cython is not installed")
    monkeypatch.setenv("TETHER_CACHE_DIR", str(tmp_path))
    built = flow_syntax._build(compiled=compiled)  # saves the tables
    assert any(tmp_path.iterdir())
    loaded = flow_syntax._build(compiled=compiled)  # loads them
    statements = [GOOD[c.start:c.end] for c in split_statements(GOOD, "f.flow")]
    assert len(statements) > 5
    for statement in statements:
        assert _shape(loaded.parse(statement)) == _shape(built.parse(statement)), statement
