"""Hover and completion on YAML and .flow, with tasks read from the project's source."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsp_support import change_document, identifier, open_document, position
from lsprotocol import types
from pytest_lsp import LanguageClient

from tether.cli.authoring import workflow_schema
from tether.compiler.references import RUN_FIELDS
from tether.diagnostics.codes import lookup
from tether.trigger import TRIGGER_FIELDS

pytestmark = pytest.mark.asyncio(loop_scope="module")

TASKS = '''"""Tasks of the test project; importing this module fails on purpose."""
from typing import TypedDict

from tether import task

raise RuntimeError("the language server must never import task modules")


class Refund(TypedDict):
    id: str
    amount: float


@task("billing.refund")
def refund(amount: float, memo: str = "") -> Refund:
    """Give money back to the customer, once."""
    return {"id": "R-1", "amount": amount}


@task
async def notify(to: str) -> None:
    """Tell someone."""
'''

YAML = '''tether: 1
name: shop
inputs:
  amount: {type: number, description: How much to refund.}
secrets: [STRIPE_KEY]
nodes:
  refund:
    task: billing.refund
    with: {amount: "{{ inputs.amount }}", memo: "{{ secrets.STRIPE_KEY }}"}
  review:
    needs: [refund]
    approval:
      reason: check
      form: {approved: {type: boolean}, note: {type: string}}
  notify:
    needs: [review]
    task: notify
    for_each: [{to: a}, {to: b, cc: c}]
    with: {to: "{{ item.to }}", amount: "{{ nodes.refund.output.amount }}",
           ok: "{{ nodes.review.output.approved }}"}
'''

FLOW = '''workflow shop

input amount: number description "How much to refund."

task refund = billing.refund(amount: {{ inputs.amount }})
approval review after refund
    reason check
    form (approved: boolean, note: string)
task notify = notify(to: "x", amount: {{ nodes.refund.output.amount }},
                     ok: {{ nodes.review.output.approved }})
    after review, refund
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project whose pyproject.toml names a task module that cannot be imported."""
    (tmp_path / "pyproject.toml").write_text('[tool.tether]\ntasks = ["shop/tasks.py"]\n')
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "tasks.py").write_text(TASKS)
    return tmp_path


async def hover_text(client: LanguageClient, path: Path, where: types.Position) -> str:
    found = await client.text_document_hover_async(types.HoverParams(
        text_document=identifier(path), position=where))
    assert found is not None and isinstance(found.contents, types.MarkupContent)
    return found.contents.value


async def labels(client: LanguageClient, path: Path, where: types.Position) -> list[str]:
    found = await client.text_document_completion_async(types.CompletionParams(
        text_document=identifier(path), position=where))
    assert isinstance(found, types.CompletionList)
    return [item.label for item in found.items]


@pytest.mark.parametrize(("name", "text"), [("shop.yaml", YAML), ("shop.flow", FLOW)])
async def test_hover_shows_a_tasks_signature_and_docstring_from_its_source(
        client: LanguageClient, project: Path, name: str, text: str) -> None:
    """The task module raises at import: the signature comes from its source alone."""
    path = project / name
    assert await open_document(client, path, text) == []
    shown = await hover_text(client, path, position(text, "billing.refund", offset=4))
    assert "refund(amount: float, memo: str='') -> Refund" in shown
    assert "Give money back to the customer, once." in shown


@pytest.mark.parametrize(("name", "text"), [("node.yaml", YAML), ("node.flow", FLOW)])
async def test_hover_on_a_node_id_shows_its_kind_needs_and_output(
        client: LanguageClient, project: Path, name: str, text: str) -> None:
    path = project / name
    await open_document(client, path, text)
    flow = name.endswith(".flow")
    shown = await hover_text(client, path, position(text, "after review", offset=7) if flow
                             else position(text, "needs: [review]", offset=10))
    assert "**review**: approval node" in shown
    assert "needs: `refund`" in shown
    assert "output: `approved`: boolean, `note`: string" in shown
    shown = await hover_text(client, path, position(text, "review, refund", offset=9) if flow
                             else position(text, "needs: [refund]", offset=9))
    assert "**refund**: task node" in shown and "task `billing.refund`" in shown
    assert "output: `id`: str, `amount`: float" in shown


@pytest.mark.parametrize(("name", "text"), [("paths.yaml", YAML), ("paths.flow", FLOW)])
async def test_hover_on_a_template_path_shows_its_type(
        client: LanguageClient, project: Path, name: str, text: str) -> None:
    path = project / name
    await open_document(client, path, text)
    shown = await hover_text(client, path, position(text, "inputs.amount", offset=9))
    assert shown.startswith("`inputs.amount`: number") and "How much to refund." in shown
    shown = await hover_text(client, path, position(text, "output.amount", offset=9))
    assert shown == "`nodes.refund.output.amount`: float"
    shown = await hover_text(client, path, position(text, "inputs.amount", offset=2))
    assert shown == "`inputs`: the run's inputs (`amount`: number)"


async def test_hover_on_a_diagnostic_explains_its_code_as_tether_explain(
        client: LanguageClient, tmp_path: Path) -> None:
    text = "workflow typo\ntask fetch = http.get()\ntask parse = text.parse() after fecth\n"
    path = tmp_path / "typo.flow"
    (diag,) = await open_document(client, path, text)
    shown = await hover_text(client, path, position(text, "fecth", offset=2))
    known = lookup("E301")
    assert known is not None and diag.code == "E301"
    assert f"**E301 ({known.slug})**: {known.title}\n\n{known.explanation}" in shown


async def test_yaml_completion_of_ids_paths_tasks_and_keys(
        client: LanguageClient, project: Path) -> None:
    """Ids in needs (not the node itself), every template root's names, the project's task
    names, and the schema's keys where a key goes; also while the text does not parse."""
    path = project / "complete.yaml"
    await open_document(client, path, YAML)
    cases = {
        "    needs: [": ["refund", "review"],
        "    needs: [refund, ": ["refund", "review"],
        "    loop: {to: ": ["refund", "review"],
        "    with: {to: ": [],  # an argument called `to` takes no node id
        "    switch: {on: x, cases: {a: [refund], b: [": ["refund", "review"],
        '    with: {x: "{{ inputs.': ["amount"],
        '    with: {x: "{{ nodes.refund.output.': ["id", "amount"],
        '    with: {x: "{{ nodes.review.output.': ["approved", "note"],
        '    with: {x: "{{ nodes.review.': ["output", "status"],
        '    with: {x: "{{ item.': ["to", "cc"],
        '    with: {x: "{{ run.': list(RUN_FIELDS),
        '    with: {x: "{{ trigger.': list(TRIGGER_FIELDS),
        '    with: {x: "{{ secrets.': ["STRIPE_KEY"],
        "    task: ": ["billing.refund", "notify"],
    }
    version = 1
    for typed, wanted in cases.items():
        version += 1
        # typed into node `notify`, unfinished: the file does not parse
        text = YAML.replace("  notify:\n", f"  notify:\n{typed}\n")
        await change_document(client, path, version, [
            types.TextDocumentContentChangeWholeDocument(text=text)])
        where = types.Position(line=text[:text.index("  notify:")].count("\n") + 1,
                               character=len(typed))
        found = await labels(client, path, where)
        assert sorted(found) == sorted(wanted), typed
    version += 1
    text = YAML.replace("    needs: [review]\n", "    needs: [review]\n    ret\n")
    await change_document(client, path, version, [
        types.TextDocumentContentChangeWholeDocument(text=text)])
    schema = workflow_schema()
    found = await labels(client, path, position(text, "    ret", offset=7))
    assert set(found) == set(schema["$defs"]["NodeSpec"]["properties"])
    assert {"retry", "with", "needs", "when", "for_each"} <= set(found)
    found = await labels(client, path, position(text, "nodes:"))
    assert set(found) == set(schema["properties"])
    found = await labels(client, path, position(text, "      reason: check", offset=6))
    assert set(found) == set(schema["$defs"]["ApprovalSpec"]["properties"])


async def test_flow_completion_of_ids_paths_and_tasks(
        client: LanguageClient, project: Path) -> None:
    path = project / "complete.flow"
    await open_document(client, path, FLOW)
    cases = {
        "noop last after ": ["refund", "review", "notify"],
        "noop last after refund, ": ["refund", "review", "notify"],
        "output x = {{ nodes.refund.output.": ["id", "amount"],
        "output x = {{ inputs.": ["amount"],
        "task more = ": ["billing.refund", "notify"],
        "switch pick after refund on {{ inputs.amount }}\n    case big: ":
            ["refund", "review", "notify"],
        "switch pick after refund on {{ inputs.amount }}\n    default ":
            ["refund", "review", "notify"],
    }
    version = 1
    for typed, wanted in cases.items():
        version += 1
        text = FLOW + typed + "\n"
        await change_document(client, path, version, [
            types.TextDocumentContentChangeWholeDocument(text=text)])
        where = types.Position(line=text.count("\n") - 1,
                               character=len(typed.split("\n")[-1]))
        assert sorted(await labels(client, path, where)) == sorted(wanted), typed
