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
