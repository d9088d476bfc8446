"""The agent kind in both syntaxes: one to one, the same document and fingerprint."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.compiler import compile
from tether.dsl.flow_writer import write_flow
from tether.dsl.loader import workflow_from_text
from tether.dsl.yaml_writer import write_yaml

YAML = """\
tether: 1
name: pay
inputs:
  request: {type: string}
  policy: {type: string, default: small amounts only}
nodes:
  lookup:
    task: billing.find
    with: {q: "{{ inputs.request }}"}
  payer:
    needs: [lookup]
    agent:
      model: openai:gpt-4.1-mini
      instructions: "You pay invoices. Policy: {{ inputs.policy }}"
      prompt: "{{ inputs.request }} ({{ nodes.lookup.output }})"
      tools: [billing.lookup, billing.approve_payment, billing.charge, helper]
      max_turns: 8
      output: {type: object, properties: {paid: {type: boolean}}, required: [paid]}
      handoffs: [disputes]
      approve_tools: [billing.charge]
    retry: {max_attempts: 2, backoff: 500ms}
    timeout: 30s
  helper:
    agent:
      model: {provider: anthropic, name: claude-x, base_url: "http://127.0.0.1:9/v1",
              api_key_env: TEAM_KEY}
      instructions: You look things up.
      tools: []
      max_turns: 3
  disputes:
    agent:
      model: "openai:llama3:8b"
      max_turns: 2
output: "{{ nodes.payer.output }}"
"""


def test_an_agent_workflow_and_its_flow_twin_are_one_document_and_one_plan(
        tmp_path: Path) -> None:
    workflow, diagnostics = workflow_from_text(YAML, "pay.yaml", "yaml")
    assert diagnostics == [] and workflow is not None
    flow = write_flow(workflow.doc)
    assert "agent payer\n    model openai:gpt-4.1-mini\n" in flow
    assert "    tools billing.lookup, billing.approve_payment, billing.charge, helper\n" in flow
    twin, more = workflow_from_text(flow, "pay.flow", "flow")
    assert more == [] and twin is not None and twin.doc == workflow.doc
    back, _ = workflow_from_text(write_yaml(twin.doc), "back.yaml", "yaml")
    assert back is not None and back.doc == workflow.doc
    (tmp_path / "pay.yaml").write_text(YAML)
    (tmp_path / "pay.flow").write_text(flow)
    plans = [compile(tmp_path / name) for name in ("pay.yaml", "pay.flow")]
    assert plans[0].fingerprint == plans[1].fingerprint
    plan = plans[0]
    assert [node.id for node in plan.nodes] == ["lookup", "payer"]
    assert [agent.id for agent in plan.agents] == ["helper", "disputes"]
    assert [(t.name, t.kind) for t in plan.nodes[1].agent.tools][-1] == ("helper", "worker")
    assert plan.from_json(plan.to_json()) == plan


@pytest.mark.parametrize(("text", "message"), [
    ("task a = t\n    tools x.y\n", "`tools` does not apply to a task node"),
    ("agent a\n    model openai:m\n    max_turns 2\n    prompt \"p\"\n    reason r\n",
     "`reason` does not apply to an agent node"),
    ("agent a(x: 1)\n    model openai:m\n    max_turns 2\n    prompt \"p\"\n",
     "arguments do not apply to an agent node"),
])
def test_flow_refuses_parts_of_other_kinds(text: str, message: str) -> None:
    _, diagnostics = workflow_from_text("workflow w\n" + text, "w.flow", "flow")
    assert message in [d.message for d in diagnostics]


def test_flow_reads_quoted_tool_names_and_null_lists() -> None:
    text = ('workflow w\nagent a\n    model "openai:gpt 4"\n    tools "odd-name", b.c\n'
            "    handoffs null\n    max_turns 1\n    prompt {{ 'hi' }}\n")
    workflow, diagnostics = workflow_from_text(text, "w.flow", "flow")
    assert diagnostics == [] and workflow is not None
    spec = workflow.doc.nodes["a"].agent
    assert spec is not None and spec.tools == ["odd-name", "b.c"] and spec.handoffs is None
    assert spec.model == "openai:gpt 4"
    assert write_flow(workflow.doc).count('"odd-name"') == 1
