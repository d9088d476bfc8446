"""``trigger`` in a run's templates and ``on: manual`` in the compiler: an unknown field of
``trigger`` is E415 with did-you-mean at its place (``payload`` and ``headers`` are open
below), in YAML and ``.flow`` alike; ``on.manual`` is part of the plan, absent from plans of
files without ``on:`` (whose fingerprints do not change)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.compiler import compile as compile_workflow
from tether.compiler.compile import Compiler
from tether.compiler.plan import PlanManual
from tether.diagnostics import Diagnostic
from tether.dsl.convert import write
from tether.dsl.flow_reader import read_flow
from tether.dsl.loader import load

READS = """tether: 1
name: reads
on:
  webhook: {verify: github, secret: HOOK_SECRET, headers: [X-GitHub-Event]}
nodes:
  a:
    task: t
    with:
      ok: "{{ trigger.kind }} {{ trigger.actor }} {{ trigger.payload.any.depth[0] }}"
      hdr: "{{ trigger.headers['X-GitHub-Event'] }} {{ trigger.tick }} {{ trigger.delivery }}"
      typo: "{{ trigger.kidn }}"
      body: "{{ trigger.ref }}"
  b:
    needs: [a]
    when: "{{ trigger.kind == 'webhook' }}"
    task: t
output: "{{ trigger.received_at }} {{ trigger.verify }}"
"""


def errors(path: Path) -> list[Diagnostic]:
    return [d for d in Compiler().check_file(path) if d.code.startswith("E")]


@pytest.mark.parametrize("syntax", ["yaml", "flow"])
def test_unknown_trigger_fields_are_e415_with_did_you_mean(tmp_path: Path, syntax: str) -> None:
    path = tmp_path / "reads.yaml"
    path.write_text(READS, encoding="utf-8")
    if syntax == "flow":
        flow = tmp_path / "reads.flow"
        flow.write_text(write(load(path).doc, "flow"), encoding="utf-8")
        path = flow
    found = errors(path)
    assert [(d.code, d.message) for d in found] == [
        ("E415", "`trigger` has no field `kidn`"), ("E415", "`trigger` has no field `ref`")]
    assert found[0].help is not None and found[0].help.startswith("did you mean `kind`?")
    assert found[1].help is not None and found[1].help.startswith(
        "a webhook's body is read as `trigger.payload.ref`")
    if syntax == "yaml":
        assert [(d.span.line, d.node_id) for d in found] == [(11, "a"), (12, "a")]


def test_a_header_the_webhook_does_not_keep_is_e415(tmp_path: Path) -> None:
    """``trigger.headers`` holds only what ``on.webhook.headers`` lists (any case), and
    nothing without a webhook: reading another header is a mistake found before a run."""
    path = tmp_path / "h.yaml"
    path.write_text(READS.replace('"{{ trigger.kidn }}"', "\"{{ trigger.headers['X-Hub'] }}\"")
                    .replace('"{{ trigger.ref }}"', "1"), encoding="utf-8")
    assert [(d.code, d.message, d.help) for d in errors(path)] == [
        ("E415", "`trigger.headers` never holds `X-Hub`: a run keeps only the headers its "
         "webhook lists", "add `X-Hub` to `on.webhook.headers`")]
    path.write_text(READS.split("on:")[0] + "nodes:" + READS.split("nodes:")[1],
                    encoding="utf-8")
    assert ("E415", "`trigger.headers` never holds `X-GitHub-Event`: this workflow has no "
            "webhook") in [(d.code, d.message) for d in errors(path)]


def test_a_plan_reading_trigger_is_an_ordinary_plan(tmp_path: Path) -> None:
    """The root is known to the compiler only (nothing is added to the plan for it); an
    `on:` without `manual` is not started by hand."""
    path = tmp_path / "ok.yaml"
    path.write_text(READS.replace('typo: "{{ trigger.kidn }}"', "typo: 1")
                    .replace('body: "{{ trigger.ref }}"', "body: 2"), encoding="utf-8")
    plan = compile_workflow(path)
    assert plan.manual == PlanManual(allowed=False) and plan.webhook is not None


ON = """tether: 1
name: hand
on:
{on}
nodes:
  a: {{task: t}}
"""


@pytest.mark.parametrize(("on", "expected"), [
    ("  manual: true", PlanManual()),
    ("  manual:", PlanManual()),  # a null, as GitHub's `workflow_dispatch:`
    ("  manual: {users: [ada, bob, ada]}", PlanManual(users=("ada", "bob"))),
    ("  manual: false\n  schedule: {cron: '0 3 * * *'}", PlanManual(allowed=False)),
    ("  schedule: {cron: '0 3 * * *'}", PlanManual(allowed=False)),
])
def test_on_manual_is_part_of_the_plan(tmp_path: Path, on: str,
                                       expected: PlanManual) -> None:
    path = tmp_path / "hand.yaml"
    path.write_text(ON.format(on=on), encoding="utf-8")
    plan = compile_workflow(path)
    assert plan.manual == expected
    flow = tmp_path / "hand.flow"
    flow.write_text(write(load(path).doc, "flow"), encoding="utf-8")
    twin = compile_workflow(flow)
    assert (twin.manual, twin.fingerprint) == (plan.manual, plan.fingerprint)


def test_on_manual_in_flow_is_read_by_the_fast_reader_as_by_the_grammar() -> None:
    text = 'workflow w\non {manual: {users: ["ada"]}}\n\ntask a = t(x: 1)\n'
    fast, grammar = read_flow(text, "w.flow"), read_flow(text, "w.flow", fast=False, pure=True)
    assert fast == grammar and not fast.diagnostics


def test_a_wrong_manual_setting_is_a_schema_error_at_its_place(tmp_path: Path) -> None:
    path = tmp_path / "hand.yaml"
    path.write_text(ON.format(on="  manual: {user: [ada]}"), encoding="utf-8")
    found = errors(path)
    assert [(d.code, d.message, d.help, d.span.line, d.span.col) for d in found] == [
        ("E201", "unknown key `user` in `on.manual`", "did you mean `users`?", 4, 12)]
    path.write_text(ON.format(on="  manual: yes please"), encoding="utf-8")
    assert [(d.code, d.message) for d in errors(path)] == [
        ("E202", "`manual` must be true, false or a mapping with `users`, not a string")]


def test_who_may_start_by_hand_is_not_part_of_the_fingerprint(tmp_path: Path) -> None:
    """``manual`` is admission, not execution: adding or narrowing it keeps the fingerprint
    (stored runs stay matched to the file), though the plan's JSON carries it."""
    plain = tmp_path / "plain.yaml"
    plain.write_text("tether: 1\nname: hand\nnodes:\n  a: {task: t}\n", encoding="utf-8")
    fingerprints = {compile_workflow(plain).fingerprint}
    for on in ("  manual: true", "  manual: {users: [ada]}", "  manual: false"):
        path = tmp_path / "hand.yaml"
        path.write_text(ON.format(on=on), encoding="utf-8")
        plan = compile_workflow(path)
        assert '"manual"' in plan.to_json()
        fingerprints.add(plan.fingerprint)
    assert len(fingerprints) == 1


def test_a_webhook_input_reading_a_header_it_does_not_keep_is_e235(tmp_path: Path) -> None:
    path = tmp_path / "h.yaml"
    path.write_text("""tether: 1
name: h
inputs:
  e: {type: string}
on:
  webhook:
    verify: github
    secret: S
    headers: [X-GitHub-Event]
    inputs: {e: "{{ trigger.headers['X-Other'] }} {{ trigger.headers['x-github-EVENT'] }}"}
nodes:
  a: {task: t, with: {a: "{{ inputs.e }}"}}
""", encoding="utf-8")
    assert [(d.code, d.message, d.span.line) for d in errors(path)] == [
        ("E235", "webhook input `e`: `trigger.headers` never holds `X-Other` (add it to "
         "`headers`)", 10)]
