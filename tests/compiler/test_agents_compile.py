"""Compile-time checks of agents that golden files cannot show, and hand-edited plans."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from tether.compiler import check
from tether.compiler.plan import Plan
from tether.errors import PlanError

WORKFLOW = """\
tether: 1
name: w
nodes:
  boss:
    agent:
      model: openai:gpt-4.1-mini
      prompt: hi
      tools: [helper]
      max_turns: 2
  helper:
    agent:
      model: anthropic:claude-x
      max_turns: 2
"""


def test_a_missing_provider_extra_is_an_error_at_check_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the anthropic SDK, a workflow whose agent uses it fails `check` (E907),
    saying which extra to install; the openai agent of the same file is fine."""
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "anthropic" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    path = tmp_path / "w.yaml"
    path.write_text(WORKFLOW)
    (diagnostic,) = check(path)
    assert diagnostic.code == "E907" and diagnostic.span.line == 12
    assert diagnostic.message == ("agent `helper` uses anthropic:claude-x, but the `anthropic` "
                                  "package is not installed")
    assert diagnostic.help == "pip install 'tether[anthropic]'"


def _plan(tmp_path: Path) -> dict[str, Any]:
    from tether.compiler import compile

    path = tmp_path / "w.yaml"
    path.write_text(WORKFLOW)
    data: dict[str, Any] = json.loads(compile(path).to_json())
    return data


def _refit(data: dict[str, Any]) -> str:
    """The plan with a fingerprint recomputed for its edited content."""
    from tether.compiler.plan import fingerprint_of

    plan = Plan.model_validate(data)
    return plan.model_copy(update={"fingerprint": fingerprint_of(plan)}).to_json()


def test_a_plan_keeps_called_agents_beside_its_nodes_and_reads_back(tmp_path: Path) -> None:
    data = _plan(tmp_path)
    assert [n["id"] for n in data["nodes"]] == ["boss"]
    assert [a["id"] for a in data["agents"]] == ["helper"]
    assert data["nodes"][0]["agent"]["tools"] == [{"name": "helper", "kind": "worker"}]
    assert Plan.from_json(json.dumps(data)).agents_by_id.keys() == {"boss", "helper"}


@pytest.mark.parametrize(("edit", "problem"), [
    (lambda d: d["agents"][0]["handoffs"].append("boss"), "cycle through 'boss'"),
    (lambda d: d["agents"][0].update(max_turns=0), "`max_turns` must be at least 1"),
    (lambda d: d["nodes"][0]["agent"]["tools"].append({"name": "ghost", "kind": "worker"}),
     "calls 'ghost', which is not an agent"),
])
def test_a_hand_edited_plan_with_broken_agents_is_refused(tmp_path: Path, edit: Any,
                                                          problem: str) -> None:
    """A plan read from a file cannot make agents recurse for ever, or call nothing."""
    data = _plan(tmp_path)
    edit(data)
    with pytest.raises(PlanError, match=problem):
        Plan.from_json(_refit(data))
