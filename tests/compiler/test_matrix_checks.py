"""The matrix checks agree with what the runtime runs (issue 25): an `exclude` entry is
reported (E213 or E216) exactly when it leaves out no combination, and an axis listing a
value twice (E214) is exactly an axis whose combinations would run twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tether
from tether.runtime.foreach import combinations

_VALUES = st.one_of(st.sampled_from(["linux", "mac", "win", "3.11", "3.12"]),
                    st.sampled_from([3.11, 3.12, 3, True]))
_AXES = st.dictionaries(st.sampled_from(["os", "python", "arch"]),
                        st.lists(_VALUES, min_size=1, max_size=3, unique_by=repr),
                        min_size=1, max_size=3)


def _check(tmp_path: Path, matrix: dict[str, Any]) -> list[tuple[str, str]]:
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump({"tether": 1, "name": "m", "nodes": {"build": {
        "matrix": matrix, "task": "ci.build", "with": {"c": "{{ item }}"}}}}), encoding="utf-8")
    return [(d.code, d.message) for d in tether.check(path)]


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(axes=_AXES, data=st.data())
def test_an_exclude_entry_is_reported_exactly_when_it_excludes_nothing(
        tmp_path: Path, axes: dict[str, list[Any]], data: st.DataObject) -> None:
    keys = st.sampled_from([*axes, "pyhton"])
    entry = data.draw(st.dictionaries(keys, _VALUES, min_size=1, max_size=3))
    excludes_nothing = combinations(axes, "build") == combinations(
        {**axes, "exclude": [entry]}, "build")
    found = {code for code, _ in _check(tmp_path, {**axes, "exclude": [entry]})}
    assert bool(found & {"E213", "E216"}) == excludes_nothing, (entry, found)
    assert found <= {"E213", "E216"}


def test_a_repeated_value_is_e214_and_would_run_twice(tmp_path: Path) -> None:
    matrix = {"os": ["linux", "mac", "linux"], "python": ["3.12"]}
    rows = combinations(matrix, "build")
    assert rows.count({"os": "linux", "python": "3.12"}) == 2
    assert _check(tmp_path, matrix) == [
        ("E214", 'matrix axis `os` of node `build` lists "linux" twice, so each of its '
                 "combinations would run twice")]


def test_a_number_for_a_quoted_version_is_named_as_such(tmp_path: Path) -> None:
    """`3.12` unquoted is a number, which matches no `"3.12"` of the axis."""
    path = tmp_path / "matrix.yaml"
    path.write_text('tether: 1\nname: m\nnodes:\n  build:\n    matrix:\n'
                    '      python: ["3.11", "3.12"]\n      exclude: [{python: 3.12}]\n'
                    '    task: ci.build\n', encoding="utf-8")
    [diagnostic] = tether.check(path)
    assert diagnostic.code == "E216"
    assert diagnostic.help == ('write it as the axis does, "3.12" (`3.12` here is a number); '
                               '`python` lists "3.11", "3.12"')
