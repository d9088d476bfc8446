"""A node's `title:` is a template (issue 25): rendered when the node starts, per element when
it reads `item`; checked at compile time like any template; never a reason to fail."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import tether
from tether.runtime.events import Event

WORKFLOW = """\
tether: 1
name: titled
inputs:
  sha: {type: string}
nodes:
  build:
    title: "Build {{ inputs.sha[:7] }}"
    task: t.run
    with: {label: build}
  tests:
    needs: [build]
    for_each: [{name: Linux, python: "3.13"}, {python: "3.12"}]
    title: "{{ item.name | default(item.python) }}"
    task: t.run
    with: {label: "{{ item.python }}"}
  plain:
    needs: [tests]
    title: Publish
    task: t.run
    with: {label: "{{ nodes.build.output }}"}
"""

FLOW = """\
workflow titled
input sha: string

task build = t.run(label: "build")
    title "Build {{ inputs.sha[:7] }}"
task tests = t.run(label: {{ item.python }})
    after build
    for_each [{name: "Linux", python: "3.13"}, {python: "3.12"}]
    title "{{ item.name | default(item.python) }}"
task plain = t.run(label: {{ nodes.build.output }})
    after tests
    title "Publish"
"""


def run_task(label: str) -> str:
    return label


def _events(path: Path) -> list[Event]:
    events: list[Event] = []
    runner = tether.Runner(path, tether.InMemoryCheckpointer(), {"t.run": run_task},
                           on_event=events.append)
    result = runner.run({"sha": "0123456789abcdef"})
    assert result.status == "completed", result
    return events


def test_titles_are_rendered_for_the_node_and_for_each_element(tmp_path: Path) -> None:
    """`{{ inputs.sha }}` is not shown literally; each element has its own title; a plain
    title stays as written; the fan-out node itself carries no element's title."""
    path = tmp_path / "titled.yaml"
    path.write_text(WORKFLOW, encoding="utf-8")
    started = {e.node_id: e.title for e in _events(path) if e.kind == "started"}
    assert started == {"build": "Build 0123456", "tests": None, "tests/item:0": "Linux",
                       "tests/item:1": "3.12", "plain": "Publish"}


def test_flow_titles_compile_to_the_same_plan_and_render_the_same(tmp_path: Path) -> None:
    yaml_path, flow_path = tmp_path / "titled.yaml", tmp_path / "titled.flow"
    yaml_path.write_text(WORKFLOW, encoding="utf-8")
    flow_path.write_text(FLOW, encoding="utf-8")
    assert tether.compile(flow_path).fingerprint == tether.compile(yaml_path).fingerprint
    assert [(e.kind, e.node_id, e.title) for e in _events(flow_path)] == \
        [(e.kind, e.node_id, e.title) for e in _events(yaml_path)]


def test_a_title_that_cannot_render_is_shown_as_written_and_the_node_runs(
        tmp_path: Path) -> None:
    """The attacker's case: a title reading a key a task's output lacks (unknowable at
    compile time) must not fail the run; it is shown as written."""
    path = tmp_path / "titled.yaml"
    path.write_text(WORKFLOW.replace('title: Publish', 'title: "{{ nodes.build.output.x }}"'),
                    encoding="utf-8")
    finished = [e for e in _events(path) if e.kind == "finished" and e.node_id == "plain"]
    assert [(e.status, e.title) for e in finished] == [
        ("completed", "{{ nodes.build.output.x }}")]


def test_a_title_is_checked_like_any_template(tmp_path: Path) -> None:
    """Unknown inputs, `item` outside a for_each and secrets are reported in a title."""
    path = tmp_path / "bad.yaml"
    path.write_text(WORKFLOW.replace('title: Publish',
                                     'title: "{{ inputs.shaa }} {{ item.x }}"'),
                    encoding="utf-8")
    assert [(d.code, d.node_id) for d in tether.check(path)] == [
        ("E402", "plain"), ("E406", "plain")]


def test_the_cli_progress_lines_show_rendered_titles(tmp_path: Path) -> None:
    (tmp_path / "titled.yaml").write_text(WORKFLOW, encoding="utf-8")
    (tmp_path / "ttasks.py").write_text(
        "from tether import task\n\n@task('t.run')\ndef run(label: str) -> str:\n"
        "    return label\n", encoding="utf-8")
    env = {**os.environ, "TETHER_DB": f"sqlite:///{tmp_path / 'runs.db'}"}
    result = subprocess.run(
        [sys.executable, "-m", "tether", "run", "titled.yaml", "--tasks", "ttasks.py",
         "--input", "sha=0123456789abcdef"], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "▶ Build 0123456 (build)" in result.stderr
    assert "✓ Linux (tests/item:0) completed" in result.stderr
    assert "✓ 3.12 (tests/item:1) completed" in result.stderr
    assert "{{" not in result.stderr
