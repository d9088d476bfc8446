"""Both writers are lossless: any valid document survives write -> read, in both syntaxes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tether
from tether.dsl.document import INPUT_TYPES, TRIGGER_RULES, WorkflowDoc, dump_document
from tether.dsl.flow_reader import read_flow
from tether.dsl.flow_writer import write_flow
from tether.dsl.source import RawDocument, SourceMap
from tether.dsl.validate import validate
from tether.dsl.yaml_reader import read_yaml
from tether.dsl.yaml_writer import write_yaml

ROUND_TRIP = settings(max_examples=250, deadline=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

# -- a strategy for valid documents -------------------------------------------------------------

ids = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
secret_names = st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True)
tricky = st.sampled_from([
    "", " ", "yes", "no", "on", "null", "~", "true", "1", "1.0", "-0", "1e3", ".inf", "0x10",
    "2024-01-01", "12:30", "<<", "=", "#", "a: b", "- x", "[1]", "{a}", "&a", "*a", "!tag",
    "%x", "@", "`", "'", '"', "\\", "\\n", "\n", "\r\n", "\t", "\x00", "\x85", "\u2028",
    "\ufeff", "é", "日本", "🙂", "{{ x }}", "{{ x }} y", " {{ x }}", "{{ '}}' }}", '{{ "}}" }}',
    "{{ {'a': 1}}}", "{{ x", "x }}", "{% if x %}y{% endif %}", "{# c #}", "a  b", "trailing ",
])
text = st.one_of(tricky, st.text(max_size=12), st.builds("".join, st.lists(tricky, max_size=3)))
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), text,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(text, inner, max_size=3)),
    max_leaves=8,
)
durations = st.from_regex(r"[1-9][0-9]{0,3}(\.[0-9]{1,2})?(ms|s|m|h|d)", fullmatch=True)
expressions = st.one_of(
    st.sampled_from(["{{ inputs.x > 1 }}", "{{ true }}", "{{ '}}' in x }}", "{% if %}", "  "]),
    st.builds(lambda t: "{{ " + t + " }}", st.from_regex(r"[a-z][a-z0-9_. ]{0,10}",
                                                           fullmatch=True)),
)


def optional(draw: st.DrawFn, data: dict[str, Any], key: str, values: st.SearchStrategy[Any],
             *, null: bool = True) -> None:
    """Set ``key`` to a drawn value, to None (an explicit YAML null), or leave it out."""
    choice = draw(st.sampled_from(["absent", "value", "null"] if null else ["absent", "value"]))
    if choice == "value":
        data[key] = draw(values)
    elif choice == "null":
        data[key] = None


@st.composite
def input_specs(draw: st.DrawFn) -> dict[str, Any]:
    type_name = draw(st.sampled_from(INPUT_TYPES))
    spec: dict[str, Any] = {"type": type_name}
    defaults = {
        "string": text, "number": st.one_of(st.integers(), st.floats(allow_nan=False,
                                                                     allow_infinity=False)),
        "integer": st.integers(), "boolean": st.booleans(),
        "object": st.dictionaries(text, json_values, max_size=3),
        "array": st.lists(json_values, max_size=3),
    }
    optional(draw, spec, "default", defaults[type_name])
    optional(draw, spec, "description", text)
    return spec


@st.composite
def nodes(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["task", "workflow", "approval"]))
    node: dict[str, Any] = {}
    if kind == "approval":
        approval: dict[str, Any] = {"reason": draw(text)}
        optional(draw, approval, "context", json_values)
        optional(draw, approval, "form", st.dictionaries(ids, input_specs(), max_size=3))
        node["approval"] = approval
    else:
        node[kind] = draw(st.one_of(text.filter(bool), st.from_regex(
            r"[a-z_]{1,5}(\.[a-z_]{1,5}){0,2}", fullmatch=True)))
        optional(draw, node, "with", st.dictionaries(text, json_values, max_size=3))
        optional(draw, node, "for_each", st.one_of(expressions, st.lists(json_values,
                                                                          max_size=3)))
        if node.get("for_each") is not None:
            optional(draw, node, "concurrency", st.integers(1, 64))
    for other in ("task", "workflow", "approval"):
        if other != kind and draw(st.booleans()) and draw(st.booleans()):
            node[other] = None
    if kind == "task":
        optional(draw, node, "retry", st.fixed_dictionaries(
            {"max_attempts": st.integers(1, 10)},
            optional={"backoff": st.one_of(st.none(), durations)}))
        optional(draw, node, "timeout", durations)
        optional(draw, node, "idempotent", st.booleans())
    optional(draw, node, "needs", st.lists(ids, max_size=3))
    optional(draw, node, "when", expressions)
    optional(draw, node, "trigger", st.sampled_from(TRIGGER_RULES))
    optional(draw, node, "loop", st.fixed_dictionaries(
        {"to": ids, "while": expressions, "max_iterations": st.integers(1, 100)},
        optional={"on_exhausted": st.sampled_from([None, "fail", "continue"])}))
    return node


@st.composite
def documents(draw: st.DrawFn) -> WorkflowDoc:
    data: dict[str, Any] = {"tether": draw(st.sampled_from([1, 1, 1, 2])), "name": draw(text)}
    optional(draw, data, "description", text)
    optional(draw, data, "inputs", st.dictionaries(ids, input_specs(), max_size=4))
    optional(draw, data, "secrets", st.lists(secret_names, max_size=3, unique=True))
    data["nodes"] = draw(st.dictionaries(ids, nodes(), min_size=1, max_size=5))
    optional(draw, data, "output", json_values)
    raw = RawDocument(data, SourceMap("generated.yaml"), "yaml")
    doc = validate(raw).doc
    assume(doc is not None and all(d.code == "E204" for d in raw.diagnostics))
    assert doc is not None
    return doc


# -- the properties -----------------------------------------------------------------------------


def reread(text: str, syntax: str) -> WorkflowDoc:
    """Read ``text`` back; only an unsupported version (E204) may be reported."""
    raw = read_flow(text, "t.flow") if syntax == "flow" else read_yaml(text, "t.yaml")
    assert raw.ok, (raw.diagnostics, text)
    doc = validate(raw).doc
    assert doc is not None and all(d.code == "E204" for d in raw.diagnostics), (
        raw.diagnostics, text)
    return doc


@ROUND_TRIP
@given(documents())
def test_flow_writer_is_lossless(doc: WorkflowDoc) -> None:
    text = write_flow(doc)
    again = reread(text, "flow")
    assert dump_document(again) == dump_document(doc), text
    assert write_flow(again) == text


@ROUND_TRIP
@given(documents())
def test_yaml_writer_is_lossless(doc: WorkflowDoc) -> None:
    text = write_yaml(doc)
    again = reread(text, "yaml")
    assert dump_document(again) == dump_document(doc), text
    assert write_yaml(again) == text


@ROUND_TRIP
@given(documents())
def test_flow_to_yaml_to_flow_is_lossless(doc: WorkflowDoc) -> None:
    flow = write_flow(doc)
    via_yaml = reread(write_yaml(reread(flow, "flow")), "yaml")
    assert dump_document(via_yaml) == dump_document(doc)
    assert write_flow(via_yaml) == flow


# -- a .flow file and its YAML twin compile to the same plan ------------------------------------

SHIPPING_YAML = """\
tether: 1
name: shipping
inputs:
  order: {type: object}
nodes:
  ship:
    task: shipping.ship
    with: {order: "{{ inputs.order }}"}
output: "{{ nodes.ship.output }}"
"""

TWINS = {
    "refund": ("""\
# comments run to end of line
tether 1                      # optional first statement; absent means 1
workflow refund               # required header: NAME or "quoted string"
description "Refund a customer"

input amount: number
input account: string = "ACC-1" description "the account to refund"
input ids: array = []

task lookup = billing.lookup_account(account: {{ inputs.account }})
approval review after lookup when {{ inputs.amount > 100 }}
    reason manager_approval
    context {amount: {{ inputs.amount }}, holder: {{ nodes.lookup.output.holder }}}
    form (approved: boolean, note: string = "" description "why")
task refund = billing.refund(amount: {{ inputs.amount }}, account: {{ inputs.account }})
    after review trigger all_done idempotent retry 3 backoff 2s timeout 30s
workflow ship = "./shipping.yaml"(order: {{ nodes.refund.output }}) after refund
task enrich = crm.enrich(id: {{ item }}) for_each {{ inputs.ids }} concurrency 4
task draft = text.draft(topic: "refunds")
task critique = text.critique(draft: {{ nodes.draft.output }}) after draft
    loop to draft while {{ nodes.critique.output.score < 8 }} max 5 on_exhausted continue
output refund_id = {{ nodes.refund.output.id }}
output status = "done"
""", """\
tether: 1
name: refund
description: Refund a customer
inputs:
  amount: {type: number}
  account: {type: string, default: ACC-1, description: the account to refund}
  ids: {type: array, default: []}
nodes:
  lookup:
    task: billing.lookup_account
    with: {account: "{{ inputs.account }}"}
  review:
    needs: [lookup]
    when: "{{ inputs.amount > 100 }}"
    approval:
      reason: manager_approval
      context: {amount: "{{ inputs.amount }}", holder: "{{ nodes.lookup.output.holder }}"}
      form:
        approved: {type: boolean}
        note: {type: string, default: "", description: why}
  refund:
    needs: [review]
    trigger: all_done
    task: billing.refund
    idempotent: true
    retry: {max_attempts: 3, backoff: 2s}
    timeout: 30s
    with: {amount: "{{ inputs.amount }}", account: "{{ inputs.account }}"}
  ship:
    workflow: ./shipping.yaml
    with: {order: "{{ nodes.refund.output }}"}
    needs: refund
  enrich:
    task: crm.enrich
    with: {id: "{{ item }}"}
    for_each: "{{ inputs.ids }}"
    concurrency: 4
  draft:
    task: text.draft
    with: {topic: refunds}
  critique:
    task: text.critique
    with: {draft: "{{ nodes.draft.output }}"}
    needs: [draft]
    loop: {to: draft, while: "nodes.critique.output.score < 8", max_iterations: 5,
           on_exhausted: continue}
output:
  refund_id: "{{ nodes.refund.output.id }}"
  status: done
"""),
    "minimal": ("workflow minimal\ntask only = demo.run\n",
                "tether: 1\nname: minimal\nnodes:\n  only: {task: demo.run}\n"),
    "guards": ("""\
workflow guards
input flag: boolean = false
task check = demo.check()
task maybe = demo.act(x: [1, 2.5, "three", null, {deep: [true]}])
    after check when {{ inputs.flag and nodes.check.output }} trigger any_success
task always = demo.finish after maybe, check trigger all_done timeout 1.5m
output {{ nodes.always.output }}
""", """\
tether: 1
name: guards
inputs: {flag: {type: boolean, default: false}}
nodes:
  check: {task: demo.check, with: {}}
  maybe:
    task: demo.act
    with: {x: [1, 2.5, three, null, {deep: [true]}]}
    needs: [check]
    when: "{{ inputs.flag and nodes.check.output }}"
    trigger: any_success
  always: {task: demo.finish, needs: [maybe, check], trigger: all_done, timeout: 1.5m}
output: "{{ nodes.always.output }}"
"""),
    "secrets": ("""workflow pay
input amount: number
secrets STRIPE_KEY, AUDIT_TOKEN
task charge = billing.charge(amount: {{ inputs.amount }}, key: {{ secrets.STRIPE_KEY }})
task audit = audit.log(token: {{ secrets.AUDIT_TOKEN }}) after charge
""", """tether: 1
name: pay
inputs: {amount: {type: number}}
secrets: [STRIPE_KEY, AUDIT_TOKEN]
nodes:
  charge:
    task: billing.charge
    with: {amount: "{{ inputs.amount }}", key: "{{ secrets.STRIPE_KEY }}"}
  audit: {task: audit.log, with: {token: "{{ secrets.AUDIT_TOKEN }}"}, needs: charge}
"""),
}


@pytest.mark.parametrize("name", sorted(TWINS))
def test_a_flow_file_and_its_yaml_twin_have_the_same_plan_fingerprint(
    name: str, tmp_path: Path
) -> None:
    flow, yaml = TWINS[name]
    (tmp_path / "shipping.yaml").write_text(SHIPPING_YAML)
    (tmp_path / f"{name}.flow").write_text(flow)
    (tmp_path / f"{name}.yaml").write_text(yaml)
    from_flow = tether.compile(tmp_path / f"{name}.flow")
    from_yaml = tether.compile(tmp_path / f"{name}.yaml")
    assert from_flow.fingerprint == from_yaml.fingerprint


@pytest.mark.parametrize("name", sorted(TWINS))
def test_converted_files_compile_to_the_same_plan(name: str, tmp_path: Path) -> None:
    from tether.dsl.convert import format_file

    flow, _ = TWINS[name]
    (tmp_path / "shipping.yaml").write_text(SHIPPING_YAML)
    (tmp_path / "original.flow").write_text(flow)
    (tmp_path / "converted.yaml").write_text(format_file(tmp_path / "original.flow", "yaml"))
    (tmp_path / "back.flow").write_text(format_file(tmp_path / "converted.yaml", "flow"))
    fingerprints = {tether.compile(tmp_path / f).fingerprint
                    for f in ("original.flow", "converted.yaml", "back.flow")}
    assert len(fingerprints) == 1


def test_names_shaped_like_dashed_ids_are_quoted_where_only_a_name_reads_back() -> None:
    """Found by hypothesis: a reason `A-0` was written bare, and `reason` takes NAME | STRING
    (not ID). Dashed node ids stay bare where ids are read (after, cases' members, loop to)."""
    text = """\
tether: 1
name: build-all
nodes:
  build-linux:
    approval: {reason: A-0}
  route:
    needs: [build-linux]
    switch:
      on: "{{ nodes['build-linux'].output.approved }}"
      cases: {a-b: [ship-it]}
      default: [ship-it]
  ship-it:
    needs: [route]
    noop: true
"""
    doc = reread(text, "yaml")
    flow = write_flow(doc)
    assert 'reason "A-0"' in flow and 'case "a-b": ship-it' in flow
    assert "workflow build-all" in flow and "after build-linux" in flow
    again = reread(flow, "flow")
    assert dump_document(again) == dump_document(doc)
    assert write_flow(again) == flow
