"""The .flow front end: data equal to the YAML front end's, exact spans, located errors."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.diagnostics import Diagnostic, Span
from tether.dsl.document import dump_document
from tether.dsl.flow_reader import read_flow
from tether.dsl.flow_syntax import MAX_SYNTAX_ERRORS, describe_terminal, parser
from tether.dsl.source import RawDocument
from tether.dsl.validate import validate
from tether.dsl.yaml_reader import read_yaml

REFUND_FLOW = """\
# comments run to end of line
tether 1                      # optional first statement; absent means 1
workflow refund               # required header: NAME or "quoted string"
description "Refund a customer"

input amount: number
input account: string = "ACC-1" description "the account to refund"

task lookup = billing.lookup_account(account: {{ inputs.account }})
approval review after lookup when {{ inputs.amount > 100 }}
    reason manager_approval
    context {amount: {{ inputs.amount }}, holder: {{ nodes.lookup.output.holder }}}
    form (approved: boolean, note: string = "" description "why")
task refund = billing.refund(amount: {{ inputs.amount }}, account: {{ inputs.account }})
    after review trigger all_done idempotent retry 3 backoff 2s timeout 30s
workflow ship = "./shipping.yaml"(order: {{ nodes.refund.output }})
task enrich = crm.enrich(id: {{ item }}) for_each {{ inputs.ids }} concurrency 4
task critique = text.critique(draft: {{ nodes.draft.output }}) after draft
    loop to draft while {{ nodes.critique.output.score < 8 }} max 5 on_exhausted continue
output refund_id = {{ nodes.refund.output.id }}
output status = "done"
"""

REFUND_YAML = """\
tether: 1
name: refund
description: Refund a customer
inputs:
  amount: {type: number}
  account: {type: string, default: ACC-1, description: the account to refund}
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
    task: billing.refund
    with: {amount: "{{ inputs.amount }}", account: "{{ inputs.account }}"}
    needs: [review]
    trigger: all_done
    idempotent: true
    retry: {max_attempts: 3, backoff: 2s}
    timeout: 30s
  ship:
    workflow: ./shipping.yaml
    with: {order: "{{ nodes.refund.output }}"}
  enrich:
    task: crm.enrich
    with: {id: "{{ item }}"}
    for_each: "{{ inputs.ids }}"
    concurrency: 4
  critique:
    task: text.critique
    with: {draft: "{{ nodes.draft.output }}"}
    needs: [draft]
    loop:
      to: draft
      while: "{{ nodes.critique.output.score < 8 }}"
      max_iterations: 5
      on_exhausted: continue
output:
  refund_id: "{{ nodes.refund.output.id }}"
  status: done
"""


def read(text: str) -> RawDocument:
    raw = read_flow(textwrap.dedent(text), "t.flow")
    assert raw.ok, raw.diagnostics
    return raw


def data_of(text: str) -> dict[str, Any]:
    data = read(text).data
    assert isinstance(data, dict)
    return data


def node(text: str, node_id: str = "a") -> dict[str, Any]:
    """The data of one node, read from ``workflow w`` followed by ``text``."""
    result: dict[str, Any] = data_of("workflow w\n" + textwrap.dedent(text))["nodes"][node_id]
    return result


def value(text: str) -> Any:
    """The data of one value, read as a whole-workflow output."""
    return data_of(f"workflow w\noutput {text}\n")["output"]


def errors(text: str) -> list[tuple[str, str, int, int]]:
    raw = read_flow(text, "t.flow")
    return [(d.code, d.message, d.span.line, d.span.col) for d in raw.diagnostics]


def one_error(text: str) -> Diagnostic:
    raw = read_flow(textwrap.dedent(text), "t.flow")
    assert len(raw.diagnostics) == 1, raw.diagnostics
    return raw.diagnostics[0]


# -- the same data as YAML --------------------------------------------------------------------


def test_refund_example_reads_to_exactly_the_data_of_its_yaml_twin() -> None:
    flow, yaml = read_flow(REFUND_FLOW, "r.flow"), read_yaml(REFUND_YAML, "r.yaml")
    assert flow.ok and yaml.ok, (flow.diagnostics, yaml.diagnostics)
    assert flow.data == yaml.data
    flow_doc, yaml_doc = validate(flow).doc, validate(yaml).doc
    assert flow_doc is not None and yaml_doc is not None
    assert dump_document(flow_doc) == dump_document(yaml_doc)


def test_a_flow_file_records_spans_for_every_path_the_yaml_reader_records() -> None:
    flow, yaml = read_flow(REFUND_FLOW, "r.flow"), read_yaml(REFUND_YAML, "r.yaml")
    assert set(flow.source.values) == set(yaml.source.values)
    assert set(flow.source.keys) == set(yaml.source.keys)


def test_tether_version_is_1_when_the_statement_is_absent() -> None:
    assert data_of("workflow w\ntask a = t\n") == {
        "tether": 1, "name": "w", "nodes": {"a": {"task": "t"}}}


def test_header_description_and_version() -> None:
    data = data_of('tether 2\nworkflow "my flow"\ndescription "what \\"it\\" does"\ntask a = t')
    assert data["tether"] == 2 and data["name"] == "my flow"
    assert data["description"] == 'what "it" does'


@pytest.mark.parametrize(
    ("line", "spec"),
    [
        ("input a: string", {"type": "string"}),
        ("input a: number = 1.5", {"type": "number", "default": 1.5}),
        ("input a: integer = null", {"type": "integer", "default": None}),
        ('input a: array = [1, "x"] description "the a"',
         {"type": "array", "default": [1, "x"], "description": "the a"}),
        ("input a: object = {} description null",
         {"type": "object", "default": {}, "description": None}),
    ],
)
def test_inputs(line: str, spec: dict[str, Any]) -> None:
    assert data_of(f"workflow w\n{line}\ntask n = t\n")["inputs"] == {"a": spec}


@pytest.mark.parametrize(("line", "inputs"), [("inputs {}", {}), ("inputs null", None)])
def test_explicit_empty_inputs(line: str, inputs: Any) -> None:
    assert data_of(f"workflow w\n{line}\ntask n = t\n")["inputs"] == inputs


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("task a = t", {"task": "t"}),
        ("task a = t()", {"task": "t", "with": {}}),
        ("task a = pkg.mod.fn(x: 1, y: [],)", {"task": "pkg.mod.fn", "with": {"x": 1, "y": []}}),
        ('task a = "odd-name"("key with space": 1)',
         {"task": "odd-name", "with": {"key with space": 1}}),
        ('workflow a = "./sub.yaml"', {"workflow": "./sub.yaml"}),
        ('workflow a = "./sub.yaml"(x: {{ inputs.x }})',
         {"workflow": "./sub.yaml", "with": {"x": "{{ inputs.x }}"}}),
        ("approval a reason ok", {"approval": {"reason": "ok"}}),
        ('approval a reason "needs sign-off" context null form ()',
         {"approval": {"reason": "needs sign-off", "context": None, "form": {}}}),
        ("approval a reason r form null", {"approval": {"reason": "r", "form": None}}),
        ("approval a reason r task null workflow null",
         {"approval": {"reason": "r"}, "task": None, "workflow": None}),
        ("task a = t with null approval null", {"task": "t", "with": None, "approval": None}),
    ],
)
def test_node_heads(text: str, expected: dict[str, Any]) -> None:
    assert node(text) == expected


@pytest.mark.parametrize(
    ("clauses", "expected"),
    [
        ("after b", {"needs": ["b"]}),
        ("after b, c", {"needs": ["b", "c"]}),
        ("after [b, c]", {"needs": ["b", "c"]}),
        ("after []", {"needs": []}),
        ("after null", {"needs": None}),
        ('after "B-1"', {"needs": ["B-1"]}),
        ("when {{ x > 1 }}", {"when": "{{ x > 1 }}"}),
        ('when "x > 1"', {"when": "x > 1"}),
        ("when true", {"when": True}),
        ("trigger all_done", {"trigger": "all_done"}),
        ("trigger bogus", {"trigger": "bogus"}),
        ("for_each {{ inputs.ids }} concurrency 4",
         {"for_each": "{{ inputs.ids }}", "concurrency": 4}),
        ("for_each [1, 2]", {"for_each": [1, 2]}),
        ("retry 3", {"retry": {"max_attempts": 3}}),
        ("retry 3 backoff 500ms", {"retry": {"max_attempts": 3, "backoff": "500ms"}}),
        ('retry 3 backoff "1.5m"', {"retry": {"max_attempts": 3, "backoff": "1.5m"}}),
        ("retry 3 backoff null", {"retry": {"max_attempts": 3, "backoff": None}}),
        ("retry null", {"retry": None}),
        ("timeout 2h", {"timeout": "2h"}),
        ("timeout null", {"timeout": None}),
        ("idempotent", {"idempotent": True}),
        ("idempotent true", {"idempotent": True}),
        ("idempotent false", {"idempotent": False}),
        ("idempotent null", {"idempotent": None}),
        ("loop to a while {{ x }} max 3",
         {"loop": {"to": "a", "while": "{{ x }}", "max_iterations": 3}}),
        ("loop to a while {{ x }} max 3 on_exhausted fail",
         {"loop": {"to": "a", "while": "{{ x }}", "max_iterations": 3, "on_exhausted": "fail"}}),
        ("loop null", {"loop": None}),
    ],
)
def test_clauses(clauses: str, expected: dict[str, Any]) -> None:
    assert node(f"task a = t {clauses}") == {"task": "t", **expected}


def test_clauses_come_in_any_order_on_any_continuation_line() -> None:
    text = """\
        task a = t(
            x: 1,  # a comment inside brackets
        )

        # a comment line between continuation lines
            idempotent timeout 5s
        \tafter b
        task b = u
    """
    assert node(text) == {"task": "t", "with": {"x": 1}, "idempotent": True,
                          "timeout": "5s", "needs": ["b"]}


def test_crlf_line_endings() -> None:
    assert data_of("workflow w\r\ntask a = t\r\n    after b\r\n")["nodes"]["a"] == {
        "task": "t", "needs": ["b"]}


def test_approval_form_fields() -> None:
    form = node('approval a reason r form (ok: boolean, note: string = "" description "why")')
    assert form["approval"]["form"] == {
        "ok": {"type": "boolean"},
        "note": {"type": "string", "default": "", "description": "why"},
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", 1),
        ("-0", 0),
        ("1.0", 1.0),
        ("1e3", 1000.0),
        ("-2.5E-3", -0.0025),
        ("123456789012345678901234567890", 123456789012345678901234567890),
        ("true", True),
        ("false", False),
        ("null", None),
        ('"yes"', "yes"),
        ('"caf\\u00e9 \\"q\\" \\\\ \\n"', 'café "q" \\ \n'),
        ('"tab\there"', "tab\there"),
        ("{{ a }}", "{{ a }}"),
        ("{{ {'k': 1} }}", "{{ {'k': 1} }}"),
        ('{{ "}}" ~ x }}', '{{ "}}" ~ x }}'),
        ('"{{ a }}"', "{{ a }}"),
        ("[]", []),
        ("{}", {}),
        ("[1, [2, [3]], {a: {b: null}}]", [1, [2, [3]], {"a": {"b": None}}]),
        ('{"with space": 1, true: 2, task: 3,}', {"with space": 1, "true": 2, "task": 3}),
        ("[\n  1,\n  2,\n]", [1, 2]),
    ],
)
def test_values(text: str, expected: Any) -> None:
    result = value(text)
    assert result == expected and type(result) is type(expected)


def test_output_forms() -> None:
    assert "output" not in data_of("workflow w\ntask a = t\n")
    assert value("null") is None
    assert value("{}") == {}
    items = data_of('workflow w\ntask a = t\noutput b = 1\noutput "c d" = [2]\n')["output"]
    assert items == {"b": 1, "c d": [2]}
    assert list(items) == ["b", "c d"]


def test_keywords_are_names_where_a_name_is_expected() -> None:
    data = data_of("""\
        workflow task
        input description: string description "d"
        task after = when.loop(reason: 1) after when
        task when = t
        approval loop reason when form (description: string description "x")
    """)
    assert data["name"] == "task"
    assert data["inputs"] == {"description": {"type": "string", "description": "d"}}
    assert data["nodes"]["after"] == {"task": "when.loop", "with": {"reason": 1},
                                      "needs": ["when"]}
    assert data["nodes"]["loop"]["approval"] == {
        "reason": "when", "form": {"description": {"type": "string", "description": "x"}}}


# -- spans --------------------------------------------------------------------------------------


def span(line: int, col: int, end_line: int, end_col: int) -> Span:
    return Span("r.flow", line, col, end_line, end_col)


def test_spans_of_the_refund_example() -> None:
    source = read_flow(REFUND_FLOW, "r.flow").source
    keys, values = source.keys, source.values
    assert keys[("name",)] == span(3, 1, 3, 8)
    assert values[("name",)] == span(3, 10, 3, 15)
    assert keys[("inputs", "amount")] == span(6, 7, 6, 12)
    assert values[("inputs", "account", "default")] == span(7, 25, 7, 31)
    assert keys[("nodes", "refund")] == span(14, 6, 14, 11)
    assert values[("nodes", "refund", "task")] == span(14, 15, 14, 28)
    assert keys[("nodes", "refund", "with", "amount")] == span(14, 30, 14, 35)
    assert values[("nodes", "refund", "with", "amount")] == span(14, 38, 14, 56)
    assert values[("nodes", "refund", "needs", 0)] == span(15, 11, 15, 16)
    assert keys[("nodes", "refund", "retry", "backoff")] == span(15, 54, 15, 60)
    assert values[("nodes", "refund", "timeout")] == span(15, 73, 15, 75)
    assert keys[("nodes", "review", "when")] == span(10, 30, 10, 33)
    assert values[("nodes", "review", "when")] == span(10, 35, 10, 59)
    assert values[("nodes", "review", "approval", "context", "holder")] == span(12, 51, 12, 82)
    assert keys[("nodes", "review", "approval", "form", "note")] == span(13, 30, 13, 33)
    assert values[("nodes", "critique", "loop", "to")] == span(19, 13, 19, 17)
    assert values[("nodes", "critique", "loop", "max_iterations")] == span(19, 67, 19, 67)
    assert keys[("output", "status")] == span(21, 8, 21, 13)
    assert values[("output", "status")] == span(21, 17, 21, 22)
    assert values[("nodes", "refund")] == span(14, 1, 15, 75)
    assert source.text == REFUND_FLOW


def test_validation_errors_point_into_the_flow_text() -> None:
    raw = read_flow("workflow w\ntask a = t\n    timeout 30 trigger sometimes\n", "t.flow")
    validate(raw)
    found = {(d.code, d.message, d.span.line, d.span.col) for d in raw.diagnostics}
    assert ("E207", "invalid duration `30`", 3, 13) in found
    assert ("E203", "`trigger` must be one of all_success, all_done, any_success, "
            "none_failed, none_failed_min_one_success; got `sometimes`", 3, 24) in found


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("workflow w\ntask a = t retries 3\n",
         ("E102", "unexpected `retries`; expected one of: a clause (after, when, trigger, "
          "for_each, concurrency, retry, timeout, idempotent, loop, reason, context, form, "
          "on_timeout, model, "
          "instructions, prompt, tools, max_turns, output, handoffs, approve_tools, "
          "max_tool_calls, title, until, "
          "fail_fast, matrix, on, case, default, renamed_from), `(`, end of line", 2, 12)),
        ("workflow w\ntask a = \n",
         ("E102", "unexpected end of line; expected one of: a string, a task name", 2, 9)),
        ("workflow w\ntask = t\n", ("E102", "unexpected `=`; expected an id", 2, 6)),
        ("workflow w 1\n", ("E102", "unexpected `1`; expected one of: `=`, end of line", 1, 12)),
        ("workflow w\ntask a = t(x 1)\n",
         ("E102", "unexpected `1`; expected `:`", 2, 14)),
        ("workflow w\ntask a = t(x: )\n", ("E102", "unexpected `)`; expected a value", 2, 15)),
        ("workflow w\ntask a = t\nretry 3\n",
         ("E102", "unexpected `retry`; expected one of: `agent`, `approval`, `concurrency`, "
          "`description`, `fail`, `input`, `inputs`, `noop`, `on`, `output`, `schedule`, "
          "`secrets`, `sleep_until`, `sleep`, `switch`, `task`, `tether`, `workflow`", 3, 1)),
        ("workflow w\ninput a string\n", ("E102", "unexpected `string`; expected `:`", 2, 9)),
        ("workflow w\ntask a = t(x: 1\ntask b = u\n", ("E102", "`(` is never closed", 2, 11)),
        ("workflow w\ntask a = t(x: [1, 2)\n",
         ("E102", "unexpected `)`; expected one of: `,`, `]`", 2, 20)),
        ("workflow w\ntask a = t(x: {{ y)\n",
         ("E102", "this `{{` has no matching `}}` on the same line", 2, 15)),
        ('workflow w\ntask a = t(x: "abc)\n',
         ("E102", 'this string has no closing `"` on the same line', 2, 15)),
        ('workflow w\ntask a = t(x: "a\\qb")\n',
         ("E102", "invalid string: invalid \\escape", 2, 17)),
        ("  workflow w\n",
         ("E102", "unexpected indentation: a statement starts at column 1", 1, 3)),
        ("task a = t\nworkflow w\n", ("E102", "a .flow file starts with `workflow NAME`", 1, 1)),
        ("workflow w\ntether 1\n", ("E102", "`tether` must be the first statement", 2, 1)),
        ("workflow w\ninputs {a: 1}\n", ("E102", "`inputs` takes only `{}` or `null`", 2, 8)),
        ("", ("E209", "the file is empty", 1, 1)),
        ("# nothing\n\n", ("E209", "the file is empty", 1, 1)),
        ("workflow w\noutput " + "[" * 65 + "]" * 65 + "\n",
         ("E103", "the document is nested more than 64 levels deep", 2, 72)),
        ("workflow w\ntask a = t(x: " + "[" * 62 + "]" * 62 + ")\n",
         ("E103", "the document is nested more than 64 levels deep", 2, 76)),
        ("workflow w\noutput 1e400\n",
         ("E105", "`1e400` is too large to be a JSON number", 2, 8)),
    ],
)
def test_syntax_errors(text: str, expected: tuple[str, str, int, int]) -> None:
    assert errors(text) == [expected]


def test_syntax_errors_have_no_data_and_help_lines() -> None:
    raw = read_flow("workflow w\ntask a = t retries 3\n", "t.flow")
    assert raw.data is None
    assert raw.diagnostics[0].help == "did you mean `retry`?"
    assert raw.diagnostics[0].span == Span("t.flow", 2, 12, 2, 18)
    stray = one_error("workflow w\ntask a = t\nretry 3\n")
    assert stray.help == "indent the line to continue the statement above it"
    bare = one_error("workflow w\ntask a = t when ready\n")
    assert bare.message == "unexpected `ready`; expected a value"
    assert bare.help == 'quote a string (`"ready"`) or write a template (`{{ ready }}`)'
    assert one_error("workflow w\noutput tru\n").help is None


def test_one_broken_statement_does_not_hide_the_others() -> None:
    text = "workflow w\ntask a = t(\ntask b = u $\ntask c = v after\ntask d = t\n"
    assert [(code, line) for code, _, line, _ in errors(text)] == [
        ("E102", 2), ("E102", 3), ("E102", 4)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("task a = t after b after c",
         ("E104", "duplicate clause `after`", 2, 20, "`after` is first given here", 2, 12)),
        ("task a = t() with null",
         ("E104", "duplicate clause `with`", 2, 14, "arguments are first given here", 2, 11)),
        ("task a = t\ntask a = u",
         ("E300", "duplicate node id `a`", 3, 6, "`a` is first defined here", 2, 6)),
        ("input a: string\ninput a: number",
         ("E104", "duplicate input `a`", 3, 7, "`a` is first defined here", 2, 7)),
        ("task a = t(x: 1, x: 2)",
         ("E104", "duplicate argument `x`", 2, 18, "`x` is first given here", 2, 12)),
        ("output {a: 1, a: 2}",
         ("E104", "duplicate key `a`", 2, 15, "`a` is first given here", 2, 9)),
        ("output a = 1\noutput a = 2",
         ("E104", "duplicate output key `a`", 3, 8, "`a` is first given here", 2, 8)),
        ("output 1\noutput a = 2",
         ("E104", "the output is given twice", 3, 1, "the output is first given here", 2, 1)),
        ("output a = 1\noutput 2",
         ("E104", "the output is given twice", 3, 1, "the output is first given here", 2, 1)),
        ("inputs {}\ninput a: string",
         ("E104", "the inputs are given twice", 3, 7, "the inputs are first given here", 2, 1)),
        ("description \"a\"\ndescription \"b\"",
         ("E104", "duplicate `description`", 3, 1, "the description is first given here", 2, 1)),
        ("workflow v",
         ("E104", "duplicate `workflow` header", 2, 1, "the workflow is first named here", 1, 1)),
        ("approval a reason r form (x: string, x: number)",
         ("E104", "duplicate form field `x`", 2, 38, "`x` is first defined here", 2, 27)),
    ],
)
def test_duplicates(text: str, expected: tuple[Any, ...]) -> None:
    diag = one_error("workflow w\n" + text + "\ntask z = t\n")
    related = diag.related[0]
    assert (diag.code, diag.message, diag.span.line, diag.span.col, related.message,
            related.span.line, related.span.col) == expected


@pytest.mark.parametrize(
    ("text", "message", "col"),
    [
        ("task a = t reason r", "`reason` does not apply to a task node", 12),
        ('workflow a = "s.yaml" form ()', "`form` does not apply to a workflow node", 23),
        ("approval a(x: 1) reason r", "arguments do not apply to an approval node", 11),
        ("approval a reason r retry 2", "`retry` does not apply to an approval node", 21),
        ("approval a reason r for_each []", "`for_each` does not apply to an approval node", 21),
        ("approval a reason r with null", "`with` does not apply to an approval node", 21),
    ],
)
def test_misplaced_clauses_are_reported_and_left_out(text: str, message: str, col: int) -> None:
    raw = read_flow(f"workflow w\n{text}\n", "t.flow")
    assert [(d.code, d.message, d.span.line, d.span.col) for d in raw.diagnostics] == [
        ("E208", message, 2, col)]
    assert isinstance(raw.data, dict)
    assert set(raw.data["nodes"]["a"]) <= {"task", "workflow", "approval"}


def test_misplaced_clauses_on_a_workflow_node_are_reported_like_yaml_reports_them() -> None:
    """The reader refuses what the kinds table refuses, with the words validation uses."""
    raw = read_flow('workflow w\nworkflow a = "s.yaml" retry 2\n', "t.flow")
    validate(raw)
    assert [(d.code, d.message, d.span.col) for d in raw.diagnostics] == [
        ("E208", "`retry` does not apply to a workflow node", 23)]
    yaml = read_yaml("tether: 1\nname: w\nnodes:\n  a: {workflow: s.yaml, retry: {max_attempts: 2}}"
                     "\n", "t.yaml")
    validate(yaml)
    assert [(d.code, d.message) for d in yaml.diagnostics] == [
        ("E208", "`retry` does not apply to a workflow node")]


# -- no input makes the reader raise ------------------------------------------------------------


def assert_well_located(text: str) -> None:
    raw = read_flow(text, "f.flow")
    lines = text.count("\n") + 1
    spans = [d.span for d in raw.diagnostics]
    spans += [r.span for d in raw.diagnostics for r in d.related]
    for where in spans:
        assert 1 <= where.line <= where.end_line <= lines, (where, text)
        assert where.col >= 1 and where.end_col >= 1, (where, text)
    for diag in raw.diagnostics:  # Lark's own names never show (the text's own words may)
        assert not any(raw_lark in diag.message and raw_lark not in text
                       for raw_lark in ("__ANON", "__IGNORE", "$END", "Token(", "RULE"))
    if raw.data is not None:
        validate(raw)


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.text())
def test_random_text_never_raises(text: str) -> None:
    assert_well_located(text)


@FUZZ
@given(st.binary())
def test_random_bytes_never_raise(data: bytes) -> None:
    assert_well_located(data.decode("utf-8", errors="replace"))


_PIECES = st.sampled_from([
    "(", ")", "[", "]", "{", "}", "{{", "}}", '"', "'", ",", ":", "=", "\n", "\n    ", " ",
    "#", "after", "task", "null", "loop", "0", "-", "1e9", "\\", "\t", "workflow", "é",
])


@FUZZ
@given(st.data())
def test_mutations_of_a_valid_file_never_raise(data: st.DataObject) -> None:
    text = REFUND_FLOW
    for _ in range(data.draw(st.integers(1, 4))):
        start = data.draw(st.integers(0, len(text)))
        end = data.draw(st.integers(start, min(len(text), start + 12)))
        insert = data.draw(st.lists(_PIECES, max_size=3)).__iter__()
        text = text[:start] + "".join(insert) + text[end:]
    assert_well_located(text)


def test_unclosed_brackets_at_scale_do_not_hang_or_recurse() -> None:
    assert_well_located("workflow w\noutput " + "[" * 200_000 + "\n")
    assert_well_located("workflow w\noutput " + "{a: " * 50_000 + "\n")
    assert_well_located("workflow w\ntask a = t(" + "\n" * 10_000 + "\n")


def test_every_terminal_has_a_readable_name() -> None:
    lark = parser()
    names = {t.name: describe_terminal(t.name) for t in lark.terminals
             if t.name not in lark.lexer_conf.ignore}  # (built or loaded tables)
    assert all((word != "a token" and word.islower()) or word.startswith("`")
               for word in names.values()), names
    assert describe_terminal("$END") == "end of line"


def test_reading_stops_after_too_many_syntax_errors() -> None:
    raw = read_flow("workflow w\n" + "x\n" * 1000, "t.flow")
    assert len(raw.diagnostics) == MAX_SYNTAX_ERRORS + 1
    last = raw.diagnostics[-1]
    assert (last.code, last.message, last.span.line) == (
        "E102", f"more than {MAX_SYNTAX_ERRORS} errors; the rest of the file is not read",
        MAX_SYNTAX_ERRORS + 2)


def test_a_10000_node_file_reads_completely_with_every_position() -> None:
    """Large files read whole (speed is measured by bench/check_scale.py, not asserted)."""
    lines = ["workflow big", "input n: number", "task n0 = svc.start(n: {{ inputs.n }})"]
    for i in range(1, 10_000):
        lines += [f"task n{i} = svc.step(x: {{{{ nodes.n{i - 1}.output }}}})",
                  f"    after n{i - 1}"]
    raw = read_flow("\n".join(lines) + "\n", "big.flow")
    assert raw.ok and len(raw.data["nodes"]) == 10_000
    assert raw.data["nodes"]["n9999"]["needs"] == ["n9998"]
    last = raw.source.key(("nodes", "n9999"))
    assert (last.line, last.col) == (len(lines) - 1, 6)
