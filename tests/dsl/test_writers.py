"""The writers: canonical .flow and YAML text, correct quoting, explicit empties kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tether.dsl.convert import format_file, format_source
from tether.dsl.document import WorkflowDoc, dump_document
from tether.dsl.flow_reader import read_flow
from tether.dsl.flow_writer import write_flow
from tether.dsl.source import RawDocument, SourceMap
from tether.dsl.validate import validate
from tether.dsl.yaml_writer import write_yaml
from tether.errors import WorkflowError

SOURCE = """\
workflow refund  # a comment the writers drop
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
output refund_id = {{ nodes.refund.output.id }}
"""

CANONICAL_FLOW = """\
workflow refund
description "Refund a customer"
input amount: number
input account: string = "ACC-1" description "the account to refund"

task lookup = billing.lookup_account(account: {{ inputs.account }})

approval review
    reason manager_approval
    context {amount: {{ inputs.amount }}, holder: {{ nodes.lookup.output.holder }}}
    form (approved: boolean, note: string = "" description "why")
    after lookup
    when {{ inputs.amount > 100 }}

task refund = billing.refund(amount: {{ inputs.amount }}, account: {{ inputs.account }})
    after review
    trigger all_done
    retry 3 backoff 2s
    timeout 30s
    idempotent

output refund_id = {{ nodes.refund.output.id }}
"""

CANONICAL_YAML = """\
tether: 1
name: refund
description: Refund a customer
inputs:
  amount:
    type: number
  account:
    type: string
    default: ACC-1
    description: the account to refund
nodes:
  lookup:
    task: billing.lookup_account
    with:
      account: "{{ inputs.account }}"
  review:
    approval:
      reason: manager_approval
      context:
        amount: "{{ inputs.amount }}"
        holder: "{{ nodes.lookup.output.holder }}"
      form:
        approved:
          type: boolean
        note:
          type: string
          default: ''
          description: why
    needs: [lookup]
    when: "{{ inputs.amount > 100 }}"
  refund:
    task: billing.refund
    with:
      amount: "{{ inputs.amount }}"
      account: "{{ inputs.account }}"
    needs: [review]
    trigger: all_done
    retry:
      max_attempts: 3
      backoff: 2s
    timeout: 30s
    idempotent: true
output:
  refund_id: "{{ nodes.refund.output.id }}"
"""


def doc_of(data: dict[str, Any]) -> WorkflowDoc:
    """A validated document from plain data (``tether`` and ``name`` filled in)."""
    raw = RawDocument({"tether": 1, "name": "w", **data}, SourceMap("d.yaml"), "yaml")
    doc = validate(raw).doc
    assert doc is not None and not raw.diagnostics, raw.diagnostics
    return doc


def flow_lines(data: dict[str, Any]) -> list[str]:
    return write_flow(doc_of(data)).splitlines()


def reads_back(doc: WorkflowDoc) -> None:
    raw = read_flow(write_flow(doc), "w.flow")
    again = validate(raw).doc
    assert again is not None and not raw.diagnostics, raw.diagnostics
    assert dump_document(again) == dump_document(doc)


def test_canonical_flow() -> None:
    assert format_source(SOURCE, "r.flow", "flow") == CANONICAL_FLOW


def test_canonical_yaml() -> None:
    assert format_source(SOURCE, "r.flow", "flow", to="yaml") == CANONICAL_YAML
    assert format_source(CANONICAL_YAML, "r.yaml", "yaml", to="flow") == CANONICAL_FLOW
    assert format_source(CANONICAL_YAML, "r.yaml", "yaml") == CANONICAL_YAML


def test_canonical_text_is_a_fixed_point() -> None:
    assert format_source(CANONICAL_FLOW, "r.flow", "flow") == CANONICAL_FLOW


@pytest.mark.parametrize(
    ("node", "clauses"),
    [
        ({"task": "t", "with": {}}, ["task a = t()"]),
        ({"task": "t", "needs": []}, ["task a = t", "    after []"]),
        ({"task": "t", "needs": None}, ["task a = t", "    after null"]),
        ({"task": "t", "idempotent": False}, ["task a = t", "    idempotent false"]),
        ({"task": "t", "idempotent": None}, ["task a = t", "    idempotent null"]),
        ({"task": "t", "with": None}, ["task a = t", "    with null"]),
        ({"task": "t", "retry": {"max_attempts": 2, "backoff": None}},
         ["task a = t", "    retry 2 backoff null"]),
        ({"task": "t", "retry": None, "timeout": None, "loop": None},
         ["task a = t", "    retry null", "    timeout null", "    loop null"]),
        ({"task": "t", "loop": {"to": "a", "while": "{{ x }}", "max_iterations": 2,
                                "on_exhausted": None}},
         ["task a = t", "    loop to a while {{ x }} max 2 on_exhausted null"]),
        ({"approval": {"reason": "r", "form": {}, "context": None}, "task": None},
         ["approval a", "    reason r", "    context null", "    form ()", "    task null"]),
        ({"task": "my-task.v2", "when": "{{ x }} and y"},
         ['task a = "my-task.v2"', '    when "{{ x }} and y"']),
        ({"task": "t", "timeout": "2h", "retry": {"max_attempts": 1, "backoff": "1.5m"}},
         ["task a = t", "    retry 1 backoff 1.5m", "    timeout 2h"]),
        ({"workflow": "./sub.flow", "with": {"x": 1}}, ['workflow a = "./sub.flow"(x: 1)']),
    ],
)
def test_explicit_empties_and_nulls_are_written(node: dict[str, Any], clauses: list[str]) -> None:
    doc = doc_of({"nodes": {"a": node}})
    assert write_flow(doc).splitlines()[2:] == clauses
    reads_back(doc)


@pytest.mark.parametrize(
    ("data", "lines"),
    [
        ({"tether": 2}, ["tether 2", "workflow w"]),
        ({"name": "my flow"}, ['workflow "my flow"']),
        ({"name": "null"}, ['workflow "null"']),
        ({"description": None}, ["workflow w", "description null"]),
        ({"inputs": {}}, ["workflow w", "inputs {}"]),
        ({"inputs": None}, ["workflow w", "inputs null"]),
        ({"inputs": {"a": {"type": "string", "default": None}}},
         ["workflow w", "input a: string = null"]),
        ({"concurrency": {"key": "{{ inputs.a }}", "limit": 2, "on_conflict": "reject"}},
         ["workflow w", 'concurrency {key: {{ inputs.a }}, limit: 2, on_conflict: "reject"}']),
        ({"concurrency": {"key": "deploy"}}, ["workflow w", 'concurrency {key: "deploy"}']),
    ],
)
def test_header_lines(data: dict[str, Any], lines: list[str]) -> None:
    raw = RawDocument({"tether": 1, "name": "w", "nodes": {"a": {"task": "t"}}, **data},
                      SourceMap("d.yaml"), "yaml")
    doc = validate(raw).doc
    assert doc is not None
    assert write_flow(doc).splitlines()[: len(lines)] == lines
    raw = read_flow(write_flow(doc), "w.flow")
    again = validate(raw).doc
    assert again is not None and dump_document(again) == dump_document(doc)


@pytest.mark.parametrize(
    ("output", "lines"),
    [
        ({}, ["output {}"]),
        (None, ["output null"]),
        ([], ["output []"]),
        ("done", ['output "done"']),
        ({"a": 1, "null": 2, "x y": 3}, ["output a = 1", 'output "null" = 2', 'output "x y" = 3']),
    ],
)
def test_output_lines(output: Any, lines: list[str]) -> None:
    doc = doc_of({"nodes": {"a": {"task": "t"}}, "output": output})
    assert write_flow(doc).splitlines()[-len(lines):] == lines
    reads_back(doc)


@pytest.mark.parametrize(
    ("string", "written"),
    [
        ("{{ x }}", "{{ x }}"),
        ("{{ '}}' }}", "{{ '}}' }}"),
        ("{{ x }} y", '"{{ x }} y"'),
        (" {{ x }}", '" {{ x }}"'),
        ("{{ {'a': 1}}}", "\"{{ {'a': 1}}}\""),
        ("{{ x\n}}", '"{{ x\\n}}"'),
        ("{{ x\t}}", '"{{ x\\t}}"'),
        ("a\u2028b\x85c", '"a\\u2028b\\u0085c"'),
        ('say "hi" \\', '"say \\"hi\\" \\\\"'),
        ("café", '"café"'),
        ("", '""'),
    ],
)
def test_strings_are_bare_templates_only_when_they_read_back(string: str, written: str) -> None:
    doc = doc_of({"nodes": {"a": {"task": "t", "with": {"v": string}}}})
    assert write_flow(doc).splitlines()[2] == f"task a = t(v: {written})"
    reads_back(doc)


def test_numbers_keep_int_or_float() -> None:
    values = [1, -0.0, 1.0, 1e16, 5e-324, 2**80, 1.7976931348623157e308]
    doc = doc_of({"nodes": {"a": {"task": "t"}}, "output": values})
    assert write_flow(doc).splitlines()[-1] == (
        "output [1, -0.0, 1.0, 1e+16, 5e-324, 1208925819614629174706176, "
        "1.7976931348623157e+308]")
    assert format_source(write_flow(doc), "n", "flow") == write_flow(doc)
    assert format_source(write_yaml(doc), "n", "yaml", to="flow") == write_flow(doc)


def test_wide_values_are_wrapped_and_read_back() -> None:
    long = {f"key_{i}": ["value"] * 4 for i in range(6)}
    doc = doc_of({"nodes": {"a": {"task": "t", "with": {"data": long}}}},)
    text = write_flow(doc)
    assert all(len(line) <= 100 for line in text.splitlines()), text
    assert "task a = t(\n    data: {\n        key_0: " in text
    reads_back(doc)


@pytest.mark.parametrize(
    "string",
    ["yes", "no", "on", "1.0", "1", "2024-01-01", "null", "~", "", "true", "<<", "=", "#x",
     "- a", "a: b", "{{ x }}", "line\nbreak", "\x00", "\ufeff", " padded ", "0o17", ".nan",
     "\x85", "a\u2028b", "\u2029", "🙂", "\r\n"],
)
def test_yaml_strings_stay_strings(string: str) -> None:
    doc = doc_of({"nodes": {"a": {"task": "t", "with": {string: string}}}, "output": [string]})
    text = write_yaml(doc)
    data = yaml.safe_load(text)
    assert data["nodes"]["a"]["with"] == {string: string}
    assert data["output"] == [string]


def test_yaml_templates_are_double_quoted_and_keys_use_yaml_spellings() -> None:
    doc = doc_of({"nodes": {"a": {"task": "t", "with": {"x": "{{ y }}"},
                                  "loop": {"to": "a", "while": "{{ z }}",
                                           "max_iterations": 2}}}})
    text = write_yaml(doc)
    assert '      x: "{{ y }}"\n' in text
    assert '      while: "{{ z }}"\n' in text
    assert "with_" not in text and "while_" not in text


def test_format_source_refuses_a_workflow_with_errors() -> None:
    with pytest.raises(WorkflowError) as caught:
        format_source("workflow w\ntask a = t retries 3\n", "bad.flow", "flow")
    assert [d.code for d in caught.value.diagnostics] == ["E102"]
    with pytest.raises(WorkflowError) as caught:
        format_source("tether: 1\nname: w\nnodes: {a: {task: t, timeout: soon}}\n",
                      "bad.yaml", "yaml", to="flow")
    assert [d.code for d in caught.value.diagnostics] == ["E207"]


def test_format_file_converts_between_syntaxes(tmp_path: Path) -> None:
    (tmp_path / "r.flow").write_text(SOURCE)
    (tmp_path / "r.yaml").write_text(format_file(tmp_path / "r.flow", to="yaml"))
    assert (tmp_path / "r.yaml").read_text() == CANONICAL_YAML
    assert format_file(tmp_path / "r.yaml", to="flow") == CANONICAL_FLOW
    assert format_file(tmp_path / "r.yaml") == CANONICAL_YAML
    with pytest.raises(WorkflowError) as caught:
        format_file(tmp_path / "missing.flow")
    assert [d.code for d in caught.value.diagnostics] == ["E100"]


def test_format_source_rejects_an_unknown_target() -> None:
    with pytest.raises(ValueError, match="unknown syntax 'json'"):
        format_source(CANONICAL_FLOW, "r.flow", "flow", to="json")  # type: ignore[arg-type]
