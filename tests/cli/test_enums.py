"""``enum`` on inputs and approval form fields, through the real commands: the same plan from
YAML and ``.flow``, values outside the list refused at ``run`` and ``resume`` naming the
input or field (and nothing changed), the resume hint picking an allowed value."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKFLOW = """\
tether: 1
name: tiers
inputs:
  tier: {type: string, enum: [gold, silver], default: gold}
  size: {type: integer, enum: [1, 2, 3]}
nodes:
  review:
    approval:
      reason: pick a level
      context: {tier: "{{ inputs.tier }}", size: "{{ inputs.size }}"}
      form:
        level: {type: string, enum: [low, high], description: "how much"}
  done:
    needs: [review]
    fail: "{{ 'no' if nodes.review.output.level == 'low' else '' }}"
    when: "{{ nodes.review.output.level == 'low' }}"
output:
  level: "{{ nodes.review.output.level }}"
"""

FLOW = """\
workflow tiers
input tier: string = "gold" enum ["gold", "silver"]
input size: integer enum [1, 2, 3]

approval review
    reason "pick a level"
    context {tier: {{ inputs.tier }}, size: {{ inputs.size }}}
    form (level: string enum ["low", "high"] description "how much")

fail done = {{ 'no' if nodes.review.output.level == 'low' else '' }}
    after review
    when {{ nodes.review.output.level == 'low' }}

output level = {{ nodes.review.output.level }}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "tiers.yaml").write_text(WORKFLOW)
    (tmp_path / "tiers.flow").write_text(FLOW)
    return tmp_path


def tether(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "TETHER_DB"}
    environment["TETHER_DB"] = f"sqlite:///{project / 'tiers.db'}"
    return subprocess.run([sys.executable, "-m", "tether", *args], cwd=project,
                          env=environment, capture_output=True, text=True, timeout=120,
                          check=False)


def test_yaml_and_flow_compile_to_one_plan_that_keeps_the_enums(project: Path) -> None:
    for name in ("tiers.yaml", "tiers.flow"):
        result = tether(project, "compile", name, "-o", name + ".json")
        assert result.returncode == 0, result.stderr
    yaml_plan, flow_plan = (json.loads((project / f"tiers.{s}.json").read_text())
                            for s in ("yaml", "flow"))
    assert yaml_plan["fingerprint"] == flow_plan["fingerprint"]
    assert [i.get("enum") for i in yaml_plan["inputs"]] == [["gold", "silver"], [1, 2, 3]]
    fmt = tether(project, "fmt", "--to", "flow", "tiers.yaml")
    assert 'input tier: string = "gold" enum ["gold", "silver"]' in fmt.stdout
    assert 'form (level: string enum ["low", "high"] description "how much")' in fmt.stdout


def test_an_input_outside_its_enum_is_refused_before_anything_runs(project: Path) -> None:
    result = tether(project, "run", "tiers.yaml", "--input", "size=4", "--input", "tier=bronze")
    assert result.returncode == 1
    assert "input 'tier' must be one of \"gold\", \"silver\"" in result.stderr
    assert "input 'size' must be one of 1, 2, 3" in result.stderr
    assert "Traceback" not in result.stderr
    assert "tiers" not in tether(project, "runs").stdout  # no run was started


def test_an_answer_outside_the_form_enum_is_refused_and_an_allowed_one_resumes(
        project: Path) -> None:
    paused = tether(project, "run", "tiers.flow", "--input", "size=2",
                    "--execution-id", "t-1")
    assert paused.returncode == 4, paused.stderr
    assert """resume with: tether resume t-1 --value '{"level": "low"}'""" in paused.stdout
    refused = tether(project, "resume", "t-1", "--value", '{"level": "mid"}')
    assert refused.returncode == 1
    assert "field 'level' must be one of \"low\", \"high\"" in refused.stderr
    assert "review" in tether(project, "pending").stdout  # still waiting
    done = tether(project, "resume", "t-1", "--value", '{"level": "high"}', "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout or "null") is not None, (done.stdout, done.stderr)
    assert json.loads(done.stdout)["output"] == {"level": "high"}
