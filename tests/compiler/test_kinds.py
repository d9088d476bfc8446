"""The table of node kinds is the one source: the plan's variants, validation and the docs
agree with it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from tether.compiler import plan_shape
from tether.compiler.plan import (
    AgentNode,
    ApprovalNode,
    FailNode,
    NoopNode,
    SleepNode,
    SleepUntilNode,
    SwitchNode,
    TaskNode,
    WorkflowNode,
)
from tether.dsl.loader import workflow_from_text
from tether.kinds import KIND_NAMES, KINDS, SETTINGS, NodeKind, NodeKindName

DOCS = Path(__file__).resolve().parents[2] / "docs" / "language.md"
VARIANTS = {NodeKind.TASK: TaskNode, NodeKind.APPROVAL: ApprovalNode,
            NodeKind.WORKFLOW: WorkflowNode, NodeKind.AGENT: AgentNode,
            NodeKind.SWITCH: SwitchNode, NodeKind.NOOP: NoopNode, NodeKind.FAIL: FailNode,
            NodeKind.SLEEP: SleepNode, NodeKind.SLEEP_UNTIL: SleepUntilNode}
FORMAT_1_KINDS = ("task", "approval", "workflow")
"""Kinds added after format 1 carry their own key; format 1's keys stay as they were."""


def test_the_literal_and_the_enum_name_the_same_kinds_in_the_same_order() -> None:
    assert get_args(NodeKindName) == KIND_NAMES == tuple(KINDS)


@pytest.mark.parametrize("kind", list(NodeKind))
def test_a_plan_variant_has_exactly_the_fields_its_kind_takes(kind: NodeKind) -> None:
    """Kind-specific fields exist only on their variant: a variant's fields are the node keys
    minus the other kinds and the settings the table says the kind does not have."""
    variant = VARIANTS[kind]
    fields = {info.alias or name for name, info in variant.model_fields.items()}
    others = {other.value for other in NodeKind if other is not kind}
    own = {kind.value} - set(plan_shape.ORDER)
    later = {key for key in plan_shape.OMITTED if KINDS[kind].takes(key)} | {"title"}
    assert fields - own - later == set(plan_shape.ORDER) - others - set(KINDS[kind].refuses)
    assert set(plan_shape.absent(kind)) <= set(plan_shape.NEUTRAL)
    assert variant.model_fields["kind"].default == kind


def test_every_key_a_kind_may_lack_has_a_neutral_value_in_format_1() -> None:
    """Format 1's keys have neutral values; every key added since is left out at its default,
    and kinds added later are written with their own keys only, so earlier plans keep their
    JSON and fingerprints."""
    new_kinds = set(KIND_NAMES) - set(FORMAT_1_KINDS)
    assert set(plan_shape.NEUTRAL) | set(plan_shape.OMITTED) | new_kinds == \
        set(KIND_NAMES) | set(SETTINGS) | {"title", "renamed_from"}
    for kind in new_kinds:
        assert plan_shape.absent(NodeKind(kind)) == ()


@pytest.mark.parametrize("kind", list(NodeKind))
@pytest.mark.parametrize("setting", SETTINGS)
def test_validation_refuses_exactly_the_settings_the_table_refuses(kind: NodeKind,
                                                                   setting: str) -> None:
    values = {"with": "{}", "retry": "{max_attempts: 2}", "timeout": "5s",
              "idempotent": "true", "for_each": "[1]", "concurrency": "2",
              "until": "'{{ true }}'", "fail_fast": "false", "matrix": "{x: [1]}"}
    head = {"task": "task: t", "approval": "approval: {reason: r}", "workflow": "workflow: w.yaml",
            "agent": "agent: {model: 'openai:m', prompt: p, max_turns: 1}",
            "switch": "switch: {on: x, cases: {a: [b]}}", "noop": "noop: true",
            "fail": "fail: stop", "sleep": "sleep: 2s",
            "sleep_until": "sleep_until: '2026-01-01T00:00:00Z'"}
    extra = ", for_each: [1]" if setting in ("concurrency", "fail_fast") else ""
    extra += ", retry: {max_attempts: 2}" if setting == "until" and kind == "task" else ""
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
