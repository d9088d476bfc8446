"""Optional keys in the elements of a literal `for_each` list (issue 25): a key some element
has may be read with `default`, `get` or `in`; a key no element has is still E503.

The two workflows below reconstruct the shape of the flask tests and pydantic CI
translations, which ran before E503 began rejecting them: they check clean and run.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tether

FLASK_TESTS = """\
tether: 1
name: flask_tests
nodes:
  tests:
    for_each:
      - {name: Linux, python: "3.13", os: ubuntu-latest}
      - {name: Windows, python: "3.13", os: windows-latest}
      - {name: Mac, python: "3.13", os: macos-latest}
      - {python: "3.12"}
      - {python: "3.11"}
      - {python: "3.10"}
      - {name: PyPy, python: "pypy-3.10", tox: pypy310}
      - {name: Minimum Versions, python: "3.13", tox: py-min}
      - {name: Development Versions, python: "3.10", tox: py-dev}
      - {python: "3.9"}
      - {name: Typing, python: "3.13", tox: typing}
    title: "{{ item.name | default(item.python) }}"
    task: run_tox
    with:
      label: "{{ item.name | default(item.python) }}"
      os: "{{ item.get('os', 'ubuntu-latest') }}"
      env: "{{ item.tox if 'tox' in item else 'py' ~ item.python }}"
"""

PYDANTIC_CI = """\
tether: 1
name: pydantic_ci
nodes:
  test:
    for_each:
      - {python: "3.9"}
      - {python: "3.10"}
      - {python: "3.13", name: free-threaded, extra: "--disable-gil"}
      - {python: "pypy3.10", name: pypy, os: macos-latest}
    task: run_tox
    with:
      label: "{{ item.name | default('py' ~ item.python) }}"
      os: "{{ item.os | default('ubuntu-latest') }}"
      env: "{{ item.get('extra', '') }}"
  coverage:
    needs: [test]
    task: run_tox
    with:
      label: combine
      os: ubuntu-latest
      env: "{{ nodes.test.output | length }}"
"""


def run_tox(label: str, os: str, env: str) -> str:
    return f"{label}|{os}|{env}"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "workflow.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_flask_tests_translation_checks_clean_and_runs(tmp_path: Path) -> None:
    """`default`, `get` and `in` over optional keys: no diagnostic, and each element renders
    its own value (the name where there is one, else the Python version)."""
    path = _write(tmp_path, FLASK_TESTS)
    assert tether.check(path, tasks={"run_tox": run_tox}) == []
    result = tether.Runner(path, tether.InMemoryCheckpointer(), {"run_tox": run_tox}).run({})
    assert result.status == "completed", result
    outputs = result.state["nodes"]["tests"]["output"]
    assert outputs[0] == "Linux|ubuntu-latest|py3.13"
    assert outputs[3] == "3.12|ubuntu-latest|py3.12"
    assert outputs[6] == "PyPy|ubuntu-latest|pypy310"


def test_pydantic_ci_translation_checks_clean_and_runs(tmp_path: Path) -> None:
    path = _write(tmp_path, PYDANTIC_CI)
    assert tether.check(path, tasks={"run_tox": run_tox}) == []
    result = tether.Runner(path, tether.InMemoryCheckpointer(), {"run_tox": run_tox}).run({})
    assert result.status == "completed", result
    assert result.state["nodes"]["test"]["output"] == [
        "py3.9|ubuntu-latest|", "py3.10|ubuntu-latest|",
        "free-threaded|ubuntu-latest|--disable-gil", "pypy|macos-latest|"]


def _codes(tmp_path: Path, text: str) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in tether.check(_write(tmp_path, text))]


def _one_node(elements: list[dict[str, Any]], template: str) -> str:
    return yaml.safe_dump({"tether": 1, "name": "keys", "nodes": {"each": {
        "for_each": elements, "task": "t", "with": {"v": template}}}}, sort_keys=False)


def test_a_key_no_element_has_is_still_an_error_with_did_you_mean(tmp_path: Path) -> None:
    """The attacker's case: a misspelt key, bare or through `get`, is not excused by the
    relaxation."""
    elements = [{"name": "a", "python": "3.9"}, {"python": "3.10"}]
    assert _codes(tmp_path, _one_node(elements, "{{ item.pyhton }}")) == [
        ("E503", "`item.pyhton`: the elements of the `for_each` list have no key `pyhton`")]
    diagnostics = tether.check(_write(tmp_path, _one_node(
        elements, "{{ item.get('nmae', 'x') }}")))
    assert [(d.code, d.message, d.help) for d in diagnostics] == [
        ("E503", "`item.get('nmae')`: the elements of the `for_each` list have no key `nmae`",
         "did you mean `name`?")]
    assert _codes(tmp_path, _one_node(elements, "{{ item.nmae | default(1) }}"))[0][0] == "E503"


def test_a_bare_read_of_an_optional_key_is_a_warning_naming_how_many_lack_it(
        tmp_path: Path) -> None:
    """`item.name` alone fails at run time on the elements without `name`: W108, not E503."""
    elements = [{"name": "a", "python": "3.9"}, {"python": "3.10"}, {"python": "3.11"}]
    diagnostics = tether.check(_write(tmp_path, _one_node(elements, "{{ item.name }}")))
    assert [(d.code, d.message, d.help) for d in diagnostics] == [
        ("W108", "`item.name`: 2 of the 3 elements of the `for_each` list have no key `name`; "
                 "those fail at run time",
         "give a default: `item.name | default(...)`, or `item.get('name')`")]


_KEYS = st.sampled_from(["name", "python", "os", "tox", "extra"])
_ELEMENT = st.dictionaries(_KEYS, st.text(string.ascii_lowercase, min_size=1, max_size=4),
                           min_size=1)
_GUARDED = [
    "{{ item.%(k)s | default('x') }}",
    "{{ item.%(k)s | default(item.%(a)s) }}",
    "{{ item.%(k)s|d('') }}",
    "{{ item.get('%(k)s', 'x') }}",
    "{{ item.get('%(k)s') }}",
    "{{ item.%(k)s if '%(k)s' in item else 'none' }}",
    "{{ item.%(k)s if item.%(k)s is defined else 1 }}",
]


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(elements=st.lists(_ELEMENT, min_size=1, max_size=8), data=st.data())
def test_a_guarded_read_of_a_key_some_element_has_never_raises_e503(
        tmp_path: Path, elements: list[dict[str, str]], data: st.DataObject) -> None:
    """Random literal lists with optional keys: `default`, `get`, `in` and `is defined` on a
    key some element has give no diagnostic at all."""
    some = sorted(set().union(*elements))
    key = data.draw(st.sampled_from(some))
    always = sorted(set.intersection(*(set(e) for e in elements)))
    other = always[0] if always else key
    template = data.draw(st.sampled_from(_GUARDED)) % {"k": key, "a": other}
    assert _codes(tmp_path, _one_node(elements, template)) == []


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(elements=st.lists(_ELEMENT, min_size=1, max_size=8), data=st.data())
def test_a_read_of_a_key_no_element_has_is_always_e503(
        tmp_path: Path, elements: list[dict[str, str]], data: st.DataObject) -> None:
    """The converse: however the read is guarded, a key that no element has is reported,
    and only that (no W108 beside it)."""
    missing = data.draw(st.sampled_from(["nmae", "pyhton", "arch", "tox_env"]))
    template = data.draw(st.sampled_from([*_GUARDED, "{{ item.%(k)s }}"])) % {
        "k": missing, "a": missing}
    codes = [code for code, _ in _codes(tmp_path, _one_node(elements, template))]
    assert codes and set(codes) == {"E503"}
