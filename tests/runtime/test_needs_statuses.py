"""`needs`: the statuses of all of a node's needs as one object, for an "all green" join
(issue 25), in YAML and `.flow`; checked at compile time; plans of files that do not use it
are unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

import tether
from tether.compiler.needs_reads import FIELDS as COMPILER_FIELDS
from tether.runtime.needs import FIELDS as RUNTIME_FIELDS

WORKFLOW = """\
tether: 1
name: join
inputs:
  break_lint: {type: boolean, default: false}
nodes:
  lint:
    task: t.step
    with: {fail: "{{ inputs.break_lint }}"}
  test:
    task: t.step
    with: {fail: false}
  docs:
    task: t.step
    with: {fail: false}
    needs: [lint]
  summary:
    needs: [lint, test, docs]
    trigger: all_done
    task: t.report
    with:
      green: "{{ needs.all_success }}"
      statuses: "{{ needs.statuses }}"
      failed: "{{ needs.failed }}"
      lint: "{{ needs.statuses.lint }}"
  publish:
    needs: [summary]
    trigger: all_done
    when: "{{ nodes.summary.output.green }}"
    noop: true
output:
  summary: "{{ nodes.summary.output }}"
  published: "{{ nodes.publish.status }}"
"""

FLOW = """\
workflow join
input break_lint: boolean = false

task lint = t.step(fail: {{ inputs.break_lint }})
task test = t.step(fail: false)
task docs = t.step(fail: false)
    after lint
task summary = t.report(green: {{ needs.all_success }}, statuses: {{ needs.statuses }},
                        failed: {{ needs.failed }}, lint: {{ needs.statuses.lint }})
    after lint, test, docs trigger all_done
noop publish
    after summary trigger all_done when {{ nodes.summary.output.green }}

output summary = {{ nodes.summary.output }}
output published = {{ nodes.publish.status }}
"""


def step(fail: bool) -> str:
    if fail:
        raise RuntimeError("red")
    return "ok"


def report(**values: object) -> dict[str, object]:
    return values


TASKS = {"t.step": step, "t.report": report}


def _run(path: Path, break_lint: bool) -> dict[str, object]:
    result = tether.Runner(path, tether.InMemoryCheckpointer(), TASKS).run(
        {"break_lint": break_lint})
    return result.state["nodes"]["summary"]["output"] | {
        "published": result.state["nodes"]["publish"]["status"]}


@pytest.mark.parametrize("name,text", [("join.yaml", WORKFLOW), ("join.flow", FLOW)])
def test_needs_holds_every_status_and_the_all_green_join(tmp_path: Path, name: str,
                                                         text: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    assert tether.check(path, tasks=TASKS) == []
    assert _run(path, break_lint=False) == {
        "green": True, "statuses": {"lint": "completed", "test": "completed",
                                    "docs": "completed"},
        "failed": [], "lint": "completed", "published": "completed"}
    assert _run(path, break_lint=True) == {
        "green": False, "statuses": {"lint": "failed", "test": "completed",
                                     "docs": "upstream_failed"},
        "failed": ["lint", "docs"], "lint": "failed", "published": "skipped"}


def test_yaml_and_flow_share_a_plan(tmp_path: Path) -> None:
    (tmp_path / "join.yaml").write_text(WORKFLOW, encoding="utf-8")
    (tmp_path / "join.flow").write_text(FLOW, encoding="utf-8")
    assert tether.compile(tmp_path / "join.flow").fingerprint == \
        tether.compile(tmp_path / "join.yaml").fingerprint


def test_the_compiler_and_the_runtime_name_the_same_fields() -> None:
    assert COMPILER_FIELDS == RUNTIME_FIELDS


@pytest.mark.parametrize(("replace", "expected"), [
    ("{{ needs.statuses.lint }}", None),
    ("{{ needs.statuses.publish }}",
     ("`publish` is not one of the needs of `summary`", "its needs: `lint`, `test`, `docs`")),
    ("{{ needs.statuses.tset }}",
     ("`tset` is not one of the needs of `summary`", "did you mean `test`?")),
    ("{{ needs.all_sucess }}", ("`needs` has no field `all_sucess`",
                                "did you mean `all_success`?")),
    ("{{ needs.lint.status }}", ("`needs` has no field `lint`",
                                 "`needs` is one object over all the needs; read "
                                 "`nodes.lint.status`, or `needs.statuses.lint`")),
])
def test_needs_reads_are_checked(tmp_path: Path, replace: str,
                                 expected: tuple[str, str] | None) -> None:
    path = tmp_path / "join.yaml"
    path.write_text(WORKFLOW.replace('lint: "{{ needs.statuses.lint }}"', f'lint: "{replace}"'),
                    encoding="utf-8")
    found = [(d.message, d.help) for d in tether.check(path) if d.code == "E215"]
    assert found == ([expected] if expected else [])


def test_needs_without_needs_is_an_error(tmp_path: Path) -> None:
    """The attacker's case: a node without needs (or the workflow's output) reading `needs`
    would always see nothing; it is refused rather than read as an empty success."""
    path = tmp_path / "join.yaml"
    path.write_text(WORKFLOW.replace('with: {fail: false}\n  docs', 'with: {fail: "{{ '
                                     'needs.all_success }}"}\n  docs').replace(
        'published: "{{ nodes.publish.status }}"', 'green: "{{ needs.all_success }}"'),
        encoding="utf-8")
    assert [(d.code, d.node_id, d.message) for d in tether.check(path) if d.code == "E215"] \
        == [("E215", "test", "`needs` is read where node `test` has no `needs`"),
            ("E215", None, "`needs` is read where the workflow's output belongs to no node")]


def test_a_case_node_sees_its_switch_among_its_needs(tmp_path: Path) -> None:
    """The compiler and the runtime agree on what `needs` holds: a switch's case nodes need
    the switch, though no `needs:` says so."""
    path = tmp_path / "switch.yaml"
    path.write_text("""\
tether: 1
name: switch_needs
inputs:
  tier: {type: string}
nodes:
  route:
    switch:
      on: "{{ inputs.tier }}"
      cases: {gold: [gold]}
      default: null
  gold:
    task: t.report
    with: {route: "{{ needs.statuses.route }}", green: "{{ needs.all_success }}"}
""", encoding="utf-8")
    assert tether.check(path, tasks=TASKS) == []
    result = tether.Runner(path, tether.InMemoryCheckpointer(), TASKS).run({"tier": "gold"})
    assert result.state["nodes"]["gold"]["output"] == {"route": "completed", "green": True}
