"""The table of node kinds is the one source: the plan's variants, validation and the docs
agree with it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from tether.compiler import plan_shape
from tether.compiler.plan import AgentNode, ApprovalNode, TaskNode, WorkflowNode
from tether.dsl.loader import workflow_from_text
from tether.kinds import KIND_NAMES, KINDS, SETTINGS, NodeKind, NodeKindName

DOCS = Path(__file__).resolve().parents[2] / "docs" / "language.md"
VARIANTS = {NodeKind.TASK: TaskNode, NodeKind.APPROVAL: ApprovalNode,
            NodeKind.WORKFLOW: WorkflowNode, NodeKind.AGENT: AgentNode}


def test_the_literal_and_the_enum_name_the_same_kinds_in_the_same_order() -> None:
    assert get_args(NodeKindName) == KIND_NAMES == tuple(KINDS)


@pytest.mark.parametrize("kind", list(NodeKind))
def test_a_plan_variant_has_exactly_the_fields_its_kind_takes(kind: NodeKind) -> None:
    """Kind-specific fields exist only on their variant: a variant's fields are the node keys
    minus the other kinds and the settings the table says the kind does not have."""
    variant = VARIANTS[kind]
    fields = {info.alias or name for name, info in variant.model_fields.items()}
    others = {other.value for other in NodeKind if other is not kind}
    assert fields == set(plan_shape.ORDER) - others - set(KINDS[kind].refuses)
    assert set(plan_shape.absent(kind)) <= set(plan_shape.NEUTRAL)
    assert variant.model_fields["kind"].default == kind


def test_every_key_a_kind_may_lack_has_a_neutral_value_in_format_1() -> None:
    """Format 1's kinds and settings have neutral values; kinds added later (agent) are
    written with their own keys only, so earlier plans keep their JSON and fingerprints."""
    assert set(plan_shape.NEUTRAL) == set(KIND_NAMES) - {"agent"} | set(SETTINGS)
    assert plan_shape.absent(NodeKind.AGENT) == ()


@pytest.mark.parametrize("kind", list(NodeKind))
@pytest.mark.parametrize("setting", SETTINGS)
def test_validation_refuses_exactly_the_settings_the_table_refuses(kind: NodeKind,
                                                                   setting: str) -> None:
    values = {"with": "{}", "retry": "{max_attempts: 2}", "timeout": "5s",
              "idempotent": "true", "for_each": "[1]", "concurrency": "2"}
    head = {"task": "task: t", "approval": "approval: {reason: r}", "workflow": "workflow: w.yaml",
            "agent": "agent: {model: 'openai:m', prompt: p, max_turns: 1}"}
    extra = ", for_each: [1]" if setting == "concurrency" else ""
    text = (f"tether: 1\nname: w\nnodes:\n  a: {{{head[kind]}, {setting}: {values[setting]}"
            f"{extra}}}\n")
    _, diagnostics = workflow_from_text(text, "w.yaml", "yaml")
    refused = {d.message for d in diagnostics if d.code == "E208"}
    message = f"`{setting}` does not apply to {KINDS[kind].noun}"
    assert (message in refused) == (not KINDS[kind].takes(setting))


def test_the_language_docs_list_the_kinds_each_setting_applies_to() -> None:
    rows = re.findall(r"^\| `(\w+)` \| ([a-z, ]+) \|", DOCS.read_text(), re.MULTILINE)
    documented = {key: set(kinds.split(", ")) for key, kinds in rows if key in SETTINGS}
    assert set(documented) == set(SETTINGS)
    for key, kinds in documented.items():
        assert kinds == {k.value for k, spec in KINDS.items() if spec.takes(key)}, key
