"""``on: webhook`` in the compiler (issue 26): each mistake gets its code at its place
(E230-E235), in YAML and ``.flow`` alike, and a correct webhook is part of the plan with its
defaults filled in (and absent from plans without one, whose fingerprints do not change)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.compiler import compile as compile_workflow
from tether.compiler.compile import Compiler
from tether.dsl.convert import write
from tether.dsl.loader import load

GOOD = """tether: 1
name: on-push
inputs:
  ref: {type: string}
  note: {type: string, default: ""}
on:
  webhook:
    verify: github
    secret: GITHUB_SECRET
    headers: [X-GitHub-Event]
    inputs: {ref: "{{ trigger.payload.ref }}"}
nodes:
  a: {task: t, with: {r: "{{ inputs.ref }}", n: "{{ inputs.note }}"}}
"""

BAD = """tether: 1
name: bad-hook
inputs:
  ref: {type: string}
  sha: {type: string}
on:
  webhook:
    verify: github
    secret: my-secret
    path: "a/b"
    header: X-Sig
    tolerance: 5m
    headers: ["bad header"]
    inputs:
      ref: "{{ inputs.x }}"
      rev: "{{ trigger.paylod.after }}"
nodes:
  a: {task: t, with: {r: "{{ inputs.ref }}", s: "{{ inputs.sha }}"}}
"""


def codes(path: Path) -> list[tuple[str, int, int]]:
    return sorted((d.code, d.span.line, d.span.col) for d in Compiler().check_file(path)
                  if d.code.startswith("E"))


def test_a_webhook_is_part_of_the_plan(tmp_path: Path) -> None:
    path = tmp_path / "push.yaml"
    path.write_text(GOOD, encoding="utf-8")
    plan = compile_workflow(path)
    assert plan.webhook is not None
    assert (plan.webhook.path, plan.webhook.verify, plan.webhook.secret, plan.webhook.headers,
            plan.webhook.tolerance) == ("on-push", "github", "GITHUB_SECRET",
                                        ("x-github-event",), 300.0)
    assert "webhook" in plan.to_json()
    flow = tmp_path / "push.flow"
    flow.write_text(write(load(path).doc, "flow"), encoding="utf-8")
    assert compile_workflow(flow).webhook == plan.webhook
    plain = tmp_path / "plain.yaml"
    plain.write_text(GOOD.split("on:")[0] + "nodes:" + GOOD.split("nodes:")[1],
                     encoding="utf-8")
    assert '"webhook"' not in compile_workflow(plain).to_json()


@pytest.mark.parametrize("syntax", ["yaml", "flow"])
def test_each_mistake_is_reported_at_its_place(tmp_path: Path, syntax: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD, encoding="utf-8")
    if syntax == "flow":
        flow = tmp_path / "bad.flow"
        flow.write_text(write(load(path).doc, "flow"), encoding="utf-8")
        found = [c for c, _, _ in codes(flow)]
        assert found == sorted(["E230", "E231", "E232", "E233", "E233", "E234", "E234",
                                "E235", "E235"])
        return
    assert codes(path) == [("E230", 10, 11), ("E231", 9, 13), ("E232", 13, 15),
                           ("E233", 11, 5), ("E233", 12, 5), ("E234", 14, 5),
                           ("E234", 16, 7), ("E235", 15, 12), ("E235", 16, 12)]
    messages = {d.message for d in Compiler().check_file(path)}
    assert "webhook input `rev`: `trigger.paylod` does not exist (known: kind, actor, " \
        "payload, headers, delivery, verify, tick, received_at)" in messages
    assert "webhook input `ref`: reads `inputs`, which does not exist when a request " \
        "arrives (only `trigger`)" in messages


def test_unknown_keys_and_schemes_are_schema_errors(tmp_path: Path) -> None:
    path = tmp_path / "odd.yaml"
    path.write_text(GOOD.replace("verify: github", "verify: gitlab")
                    .replace("headers: [X-GitHub-Event]", "heders: []"), encoding="utf-8")
    found = Compiler().check_file(path)
    assert any("gitlab" in d.message or "verify" in d.message for d in found)
    assert any("heders" in d.message for d in found)
