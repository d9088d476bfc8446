"""Drawing plans: exact Mermaid and DOT output, shapes, loops, and label escaping."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tether.compiler import compile
from tether.compiler.graph_render import (
    dot_string,
    mermaid_id,
    mermaid_label,
    mermaid_text,
    to_dot,
    to_mermaid,
)
from tether.compiler.plan import ApprovalNode, Plan, PlanApproval, TaskNode

ESSAY = """\
tether: 1
name: essay
inputs:
  topic: {type: string}
  items: {type: array, default: []}
nodes:
  draft:
    task: text.draft
    with: {topic: "{{ inputs.topic }}"}
  critique:
    needs: [draft]
    task: text.critique
    with: {text: "{{ nodes.draft.output }}"}
    loop: {to: draft, while: "{{ nodes.critique.output.score < 8 }}", max_iterations: 5}
  review:
    needs: [critique]
    when: "{{ inputs.topic != 'a|b' }}"
    approval: {reason: editor_ok}
  each:
    needs: [review]
    for_each: "{{ inputs.items }}"
    concurrency: 2
    trigger: all_done
    task: text.each
    with: {x: "{{ item }}"}
  lit:
    needs: [review]
    for_each: [1, 2, 3]
    task: text.each
    with: {x: "{{ item }}"}
  publish:
    needs: [each, lit]
    trigger: any_success
    workflow: child.yaml
    with: {a: 1}
  end:
    needs: [publish]
    task: text.end
"""

CHILD = """\
tether: 1
name: child
inputs:
  a: {type: integer}
nodes:
  one:
    task: t.one
    with: {a: "{{ inputs.a }}"}
"""

ESSAY_MERMAID = """\
---
title: "essay"
---
flowchart TD
    n_draft["draft<br/>text.draft"]
    n_critique["critique<br/>text.critique"]
    n_review{{"review<br/>approval: editor_ok<br/>when inputs.topic != 'a#124;b'"}}
    n_each["each<br/>text.each<br/>for each inputs.items (2 at a time)<br/>trigger: all_done"]
    n_lit["lit<br/>text.each<br/>×3"]
    n_publish[["publish<br/>workflow: child.yaml<br/>trigger: any_success"]]
    n_end["end<br/>text.end"]
    n_draft --> n_critique
    n_critique --> n_review
    n_review --> n_each
    n_review --> n_lit
    n_each --> n_publish
    n_lit --> n_publish
    n_publish --> n_end
    n_critique -.->|"while nodes.critique.output.score #lt; 8 (max 5)"| n_draft
    classDef approval fill:#fff4d6,stroke:#c98a00
    class n_review approval
    classDef workflow fill:#eaf2ff,stroke:#3a6fd8
    class n_publish workflow
"""

ESSAY_DOT = """\
digraph "essay" {
  graph [rankdir=TB, fontname=Helvetica, label="essay", labelloc=t];
  node [shape=box, style="rounded,filled", fillcolor="#f5f7fa", fontname=Helvetica];
  edge [fontname=Helvetica, fontsize=10];
  "draft" [label="draft\\ntext.draft"];
  "critique" [label="critique\\ntext.critique"];
  "review" [label="review\\napproval: editor_ok\\nwhen inputs.topic != 'a|b'", shape=hexagon, \
style=filled, fillcolor="#fff4d6", color="#c98a00"];
  "each" [label="each\\ntext.each\\nfor each inputs.items (2 at a time)\\ntrigger: all_done"];
  "lit" [label="lit\\ntext.each\\n×3"];
  "publish" [label="publish\\nworkflow: child.yaml\\ntrigger: any_success", shape=box3d, \
style=filled, fillcolor="#eaf2ff", color="#3a6fd8"];
  "end" [label="end\\ntext.end"];
  "draft" -> "critique";
  "critique" -> "review";
  "review" -> "each";
  "review" -> "lit";
  "each" -> "publish";
  "lit" -> "publish";
  "publish" -> "end";
  "critique" -> "draft" [style=dashed, constraint=false, \
label="while nodes.critique.output.score < 8 (max 5)"];
}
"""

WEIRD = 'a "q" [b] {c} {{d}} |e| <f> & #quot; `g` ;h\nnext\\line'


@pytest.fixture
def essay(tmp_path: Path) -> Plan:
    (tmp_path / "child.yaml").write_text(CHILD, encoding="utf-8")
    path = tmp_path / "essay.yaml"
    path.write_text(ESSAY, encoding="utf-8")
    return compile(path)


def weird_plan() -> Plan:
    nodes = (
        TaskNode(id="start", index=0, task=WEIRD),
        ApprovalNode(id="ask", index=1, approval=PlanApproval(reason=WEIRD),
                 needs=("start",), when='{{ x | length > 1 and y < "}}" }}'),
        TaskNode.model_validate({
            "id": "again", "index": 2, "kind": "task", "task": "t", "needs": ["ask"],
            "loop": {"to": "start", "while": "{{ " + WEIRD + " }}", "max_iterations": 3,
                     "on_exhausted": "continue", "body": ["start", "ask", "again"]},
        }),
    )
    return Plan(name=WEIRD, nodes=nodes)


def test_mermaid_output_is_exact(essay: Plan) -> None:
    assert to_mermaid(essay) == ESSAY_MERMAID


def test_dot_output_is_exact(essay: Plan) -> None:
    assert to_dot(essay) == ESSAY_DOT


def test_drawings_are_deterministic(essay: Plan) -> None:
    again = Plan.from_json(essay.to_json())
    assert to_mermaid(again) == to_mermaid(essay)
    assert to_dot(again) == to_dot(essay)


def test_loop_that_continues_when_exhausted_says_so() -> None:
    dot = to_dot(weird_plan())
    assert "(max 3, then continue)" in dot
    assert '"again" -> "start" [style=dashed' in dot


def test_long_conditions_are_cut_with_an_ellipsis() -> None:
    node = TaskNode(id="a", index=0, task="t", when="{{ " + "x and " * 30 + "y }}")
    (line,) = [line for line in to_dot(Plan(name="p", nodes=(node,))).splitlines()
               if line.startswith('  "a"')]
    assert "…" in line and len(line) < 120


def test_mermaid_ids_cannot_clash_with_keywords() -> None:
    assert mermaid_id("end") == "n_end"
    assert mermaid_id("graph") == "n_graph"
    assert mermaid_id("a-b") == "n_a_2d_b"


def test_mermaid_text_escapes_everything_that_could_end_a_label() -> None:
    escaped = mermaid_text('"|{}<>&#`')
    assert escaped == "#quot;#124;#123;#125;#lt;#gt;#amp;#35;#96;"
    for char in '"|{}<>`':
        assert char not in escaped


def test_mermaid_label_turns_newlines_into_breaks() -> None:
    assert mermaid_label(["a", "b\nc"]) == '"a<br/>b<br/>c"'


def test_mermaid_escapes_colons_only_near_the_word_style() -> None:
    assert mermaid_label(["a: b"]) == '"a: b"'
    assert mermaid_label(['style: "x"']) == '"style#58; #quot;x#quot;"'
    assert mermaid_label(["a: b"], context="n_restyle") == '"a#58; b"'


def test_mermaid_weird_labels_leave_no_raw_delimiters() -> None:
    text = to_mermaid(weird_plan())
    body = text.split("flowchart TD\n", 1)[1]
    for line in body.splitlines():
        if '"' in line:
            inner = line[line.index('"') + 1: line.rindex('"')].replace("<br/>", "")
            assert not set(inner) & set('"|{}<>`'), line


def test_dot_string_escapes_quotes_backslashes_newlines_and_entities() -> None:
    assert dot_string('say "hi"') == '"say \\"hi\\""'
    assert dot_string("a\\lb") == '"a\\\\lb"'
    assert dot_string("a\nb\r\nc") == '"a\\nb\\nc"'
    assert dot_string("x &lt; y") == '"x &amp;lt; y"'
    assert dot_string("{a|b} <c>") == '"{a|b} <c>"'


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_graphviz_accepts_the_output(essay: Plan) -> None:
    for plan in (essay, weird_plan()):
        result = subprocess.run(["dot", "-Tsvg"], input=to_dot(plan), capture_output=True,
                                text=True, check=False)
        assert result.returncode == 0, result.stderr
        assert "Warning" not in result.stderr and "Error" not in result.stderr
