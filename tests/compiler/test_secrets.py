"""Secrets in the plan: declared names only, omitted when there are none, part of the
fingerprint when there are some; values are never part of a plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tether
from tether.compiler.plan import Plan, with_fingerprint
from tether.errors import PlanError

WORKFLOW = """\
tether: 1
name: pay
secrets: [STRIPE_KEY]
nodes:
  charge:
    task: billing.charge
    with: {key: "{{ secrets.STRIPE_KEY }}"}
"""


def test_declared_secrets_are_carried_by_name_in_the_plan(tmp_path: Path) -> None:
    (tmp_path / "pay.yaml").write_text(WORKFLOW)
    plan = tether.compile(tmp_path / "pay.yaml")
    assert plan.secrets == ("STRIPE_KEY",)
    data = json.loads(plan.to_json())
    assert list(data)[:5] == ["tether_plan", "name", "description", "inputs", "secrets"]
    assert Plan.from_json(plan.to_json()) == plan


def test_a_plan_without_secrets_writes_no_secrets_key_and_keeps_its_fingerprint(
        tmp_path: Path) -> None:
    (tmp_path / "pay.yaml").write_text(WORKFLOW.replace("secrets: [STRIPE_KEY]\n", "")
                                       .replace("{{ secrets.STRIPE_KEY }}", "k"))
    plan = tether.compile(tmp_path / "pay.yaml")
    assert "secrets" not in json.loads(plan.to_json())
    with_secret = plan.model_copy(update={"secrets": ("STRIPE_KEY",)})
    assert with_fingerprint(with_secret).fingerprint != plan.fingerprint


@pytest.mark.parametrize(("names", "message"), [
    (["stripe-key"], "secret name 'stripe-key' is not valid"),
    (["KEY", "KEY"], "secret 'KEY' is declared twice"),
])
def test_a_plan_file_with_invalid_secret_names_is_refused(tmp_path: Path, names: list[str],
                                                          message: str) -> None:
    (tmp_path / "pay.yaml").write_text(WORKFLOW)
    data = json.loads(tether.compile(tmp_path / "pay.yaml").to_json())
    data["secrets"] = names
    text = with_fingerprint(Plan.model_validate(data)).to_json()
    with pytest.raises(PlanError, match=message):
        Plan.from_json(text)


@pytest.mark.parametrize(("node", "code", "place"), [
    ("agent: {model: 'openai:gpt-4.1-mini', instructions: 'key {{ secrets.STRIPE_KEY }}', "
     "prompt: Pay.}", "E802", "the instructions of agent `n`"),
    ("agent: {model: 'openai:gpt-4.1-mini', prompt: 'Pay with {{ secrets.STRIPE_KEY | trim }}'}",
     "E802", "the prompt of agent `n`"),
    ("switch: {on: '{{ secrets.STRIPE_KEY | upper }}', cases: {a: [charge]}, default: [charge]}",
     "E803", "the value of switch `n`"),
    ("fail: 'bad {{ secrets.STRIPE_KEY[:4] ~ secrets.STRIPE_KEY[4:] }}'", "E803",
     "the message of fail node `n`"),
    ("{task: billing.charge, for_each: '{{ [secrets.STRIPE_KEY] }}', with: {k: '{{ item }}'}}",
     "E803", "the `for_each` items of node `n`"),
    ("{task: billing.charge, matrix: {k: ['{{ secrets.STRIPE_KEY }}']}, "
     "with: {k: '{{ item.k }}'}}", "E803", "the `matrix` items of node `n`"),
])
def test_check_refuses_a_secret_read_into_a_place_stored_in_clear(
        tmp_path: Path, node: str, code: str, place: str) -> None:
    """Every transformed read counts (the whole template is secret): E802 for values the run
    stores and shows, E803 for values that become run data."""
    body = node if node.startswith("{") else "{" + node + "}"
    (tmp_path / "pay.yaml").write_text(WORKFLOW + f"  n: {body}\n")
    with pytest.raises(tether.WorkflowError) as caught:
        tether.compile(tmp_path / "pay.yaml")
    found = [(d.code, d.message) for d in caught.value.diagnostics]
    assert any(c == code and place in m for c, m in found), found


def test_check_lets_conditions_and_task_inputs_read_secrets(tmp_path: Path) -> None:
    (tmp_path / "pay.yaml").write_text(
        WORKFLOW + "  n: {task: billing.charge, when: \"{{ secrets.STRIPE_KEY != '' }}\", "
        "with: {k: '{{ secrets.STRIPE_KEY | trim | upper }}'}}\n")
    tether.compile(tmp_path / "pay.yaml")
