"""Definition, references, rename, the outline and the graph preview, on YAML and .flow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from lsp_support import apply_edits, identifier, open_document, position, server_env
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from tether.compiler import compile
from tether.compiler.graph_render import to_mermaid

pytestmark = pytest.mark.asyncio(loop_scope="module")

YAML = '''tether: 1
name: review
# keep: draft is named in this comment, which a rename leaves alone
inputs:
  topic: {type: string}
nodes:
  draft:
    task: writing.draft
    with: {topic: "{{ inputs.topic }}", previous: "{{ nodes['critique'].output }}"}
  critique:
    needs: [draft]
    task: writing.critique
    with: {text: "{{ nodes.draft.output.text }}"}
    loop: {to: draft, while: "nodes.critique.output.score < 8", max_iterations: 3}
  route:
    needs: draft
    switch:
      on: "{{ nodes.draft.output.kind }}"
      cases: {short: [draft_done]}
      default: [other]
  draft_done: {noop: true, needs: [critique]}
  other: {noop: true, needs: [critique]}
output: {text: "{{ nodes.draft.output.text }}"}
'''

FLOW = '''workflow review
# keep: draft is named in this comment, which a rename leaves alone

input topic: string

task draft = writing.draft(topic: {{ inputs.topic }}, previous: {{ nodes.critique.output }})
task critique = writing.critique(text: {{ nodes.draft.output.text }})
    after draft
    loop to draft while {{ nodes.critique.output.score < 8 }} max 3
switch route after draft on {{ nodes.draft.output.kind }}
    case short: done
    default other
noop done after critique
noop other after critique

output text = {{ nodes.draft.output.text }}
'''


def hand_renamed(text: str, old: str, new: str) -> str:
    """The file an author would write with node ``old`` called ``new`` (a hyphenated id is
    read as ``nodes['new']``)."""
    import re

    dotted = f"nodes.{new}." if new.isidentifier() else f"nodes['{new}']."
    text = text.replace(f"nodes.{old}.", dotted).replace(f"nodes['{old}']", f"nodes['{new}']")
    return re.sub(rf"(?<![\w'.-]){old}(?![\w'-])", new, text)


RENAMES = [("draft", "draft-v2", "nodes.draft", len("nodes.d")),
           ("critique", "critic", "nodes['critique']", len("nodes['c"))]


@pytest.mark.parametrize(("name", "text"), [("review.yaml", YAML), ("review.flow", FLOW)])
@pytest.mark.parametrize(("old", "new", "needle", "offset"), RENAMES)
async def test_a_rename_gives_the_plan_of_the_hand_renamed_file(
        client: LanguageClient, tmp_path: Path, name: str, text: str, old: str, new: str,
        needle: str, offset: int) -> None:
    """Renaming from a template read (`nodes.draft`, `nodes['critique']`) edits needs/after,
    switch cases, loop.to and every template; the result compiles to the fingerprint of the
    file renamed by hand."""
    if needle not in text:
        needle, offset = f"nodes.{old}", len("nodes.") + 1
    path = tmp_path / name
    assert await open_document(client, path, text) == []
    where = position(text, needle, offset=offset)
    prepared = await client.text_document_prepare_rename_async(types.PrepareRenameParams(
        text_document=identifier(path), position=where))
    assert isinstance(prepared, types.Range)
    edit = await client.text_document_rename_async(types.RenameParams(
        text_document=identifier(path), position=where, new_name=new))
    assert edit is not None and edit.changes is not None
    renamed = apply_edits(text, edit.changes[path.resolve().as_uri()])
    (tmp_path / "renamed").mkdir()
    (tmp_path / "renamed" / name).write_text(renamed, encoding="utf-8")
    (tmp_path / "by_hand").mkdir()
    (tmp_path / "by_hand" / name).write_text(hand_renamed(text, old, new), encoding="utf-8")
    (tmp_path / "original").mkdir()
    (tmp_path / "original" / name).write_text(text, encoding="utf-8")
    fingerprint = compile(tmp_path / "renamed" / name).fingerprint
    assert fingerprint == compile(tmp_path / "by_hand" / name).fingerprint
    assert fingerprint != compile(tmp_path / "original" / name).fingerprint
    assert renamed.count("draft_done") == text.count("draft_done")  # other ids stay
    assert "# keep: draft is named" in renamed  # comments are no reference


@pytest.mark.parametrize(("name", "text"), [("refuse.yaml", YAML), ("refuse.flow", FLOW)])
async def test_a_rename_to_a_taken_or_invalid_id_is_refused(
        client: LanguageClient, tmp_path: Path, name: str, text: str) -> None:
    """Renaming onto an existing id, or to a name that is no id, is an error, not an edit."""
    path = tmp_path / name
    await open_document(client, path, text)
    where = position(text, "critique")
    for bad in ("draft", "9lives", "a b"):
        with pytest.raises(JsonRpcException):
            await client.text_document_rename_async(types.RenameParams(
                text_document=identifier(path), position=where, new_name=bad))


@pytest.mark.parametrize(("name", "text"), [("refs.yaml", YAML), ("refs.flow", FLOW)])
async def test_definition_and_references_of_a_node_id(
        client: LanguageClient, tmp_path: Path, name: str, text: str) -> None:
    """From a needs/after entry, definition is the node's declaration; references list the
    declaration and every read (templates, loop.to, switch cases)."""
    path = tmp_path / name
    await open_document(client, path, text)
    use = (position(text, "needs: [draft]", offset=9) if name.endswith("yaml")
           else position(text, "after draft", offset=7))
    found = await client.text_document_definition_async(types.DefinitionParams(
        text_document=identifier(path), position=use))
    declaration = (position(text, "  draft:", offset=2) if name.endswith("yaml")
                   else position(text, "task draft", offset=5))
    assert isinstance(found, list) and [loc.range.start for loc in found] == [declaration]
    refs = await client.text_document_references_async(types.ReferenceParams(
        text_document=identifier(path), position=use,
        context=types.ReferenceContext(include_declaration=True)))
    assert refs is not None
    starts = {(r.range.start.line, r.range.start.character) for r in refs}
    lines = text.split("\n")
    for ref in refs:
        line = lines[ref.range.start.line]
        assert line[ref.range.start.character:ref.range.end.character] == "draft"
    expected = 7  # declaration, needs, template, loop, switch needs and `on`, output
    assert len(starts) == expected, sorted(starts)
    without = await client.text_document_references_async(types.ReferenceParams(
        text_document=identifier(path), position=use,
        context=types.ReferenceContext(include_declaration=False)))
    assert without is not None and len(without) == expected - 1


@pytest.mark.parametrize("syntax", ["yaml", "flow"])
async def test_definition_of_a_task_and_of_a_sub_workflow(
        client: LanguageClient, tmp_path: Path, syntax: str) -> None:
    """`task:` leads to the Python `def` of the project's task module (never imported: the
    module raises at import); `workflow:` leads to the file."""
    (tmp_path / "pyproject.toml").write_text('[tool.tether]\ntasks = ["jobs/tasks.py"]\n')
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "tasks.py").write_text(
        'from tether import task\nraise SystemExit("never import me")\n\n\n'
        '@task("billing.refund")\ndef refund(amount: float) -> dict[str, float]:\n'
        '    """Give money back."""\n    return {"amount": amount}\n')
    (tmp_path / "child.yaml").write_text("tether: 1\nname: child\nnodes:\n  a: {noop: true}\n"
                                         "output: {done: true}\n")
    text = ("tether: 1\nname: parent\nnodes:\n  pay: {task: billing.refund, with: {amount: 1}}"
            "\n  sub: {workflow: child.yaml, needs: [pay]}\n")
    if syntax == "flow":
        text = ('workflow parent\ntask pay = billing.refund(amount: 1)\n'
                'workflow sub = "child.yaml" after pay\n')
    path = tmp_path / f"parent.{syntax}"
    await open_document(client, path, text)
    found = await client.text_document_definition_async(types.DefinitionParams(
        text_document=identifier(path), position=position(text, "billing.refund", offset=3)))
    assert isinstance(found, list) and len(found) == 1
    assert found[0].uri == (tmp_path / "jobs" / "tasks.py").resolve().as_uri()
    assert found[0].range.start == types.Position(line=5, character=4)
    found = await client.text_document_definition_async(types.DefinitionParams(
        text_document=identifier(path), position=position(text, "child.yaml", offset=2)))
    assert isinstance(found, list)
    assert [loc.uri for loc in found] == [(tmp_path / "child.yaml").resolve().as_uri()]
    shown = await client.text_document_hover_async(types.HoverParams(
        text_document=identifier(path), position=position(text, "sub", offset=1)))
    assert shown is not None and isinstance(shown.contents, types.MarkupContent)
    assert "output: `done`: sub-workflow output" in shown.contents.value


@pytest.mark.parametrize(("name", "text"), [("outline.yaml", YAML), ("outline.flow", FLOW)])
async def test_document_symbols_outline_the_inputs_and_nodes(
        client: LanguageClient, tmp_path: Path, name: str, text: str) -> None:
    """The outline lists the inputs and every node, with its kind and needs."""
    path = tmp_path / name
    await open_document(client, path, text)
    symbols = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=identifier(path)))
    assert symbols is not None
    names = [s.name for s in symbols]
    last = "draft_done" if name.endswith("yaml") else "done"
    assert names == ["topic", "draft", "critique", "route", last, "other"]
    critique = symbols[2]
    assert isinstance(critique, types.DocumentSymbol)
    assert critique.detail == "task writing.critique (needs draft)"
    declared = (position(text, "  critique:", offset=2) if name.endswith("yaml")
                else position(text, "task critique", offset=5))
    assert critique.selection_range.start == declared


@pytest.mark.parametrize(("name", "text"), [("graph.yaml", YAML), ("graph.flow", FLOW)])
async def test_the_graph_command_returns_the_mermaid_text_of_tether_graph(
        client: LanguageClient, tmp_path: Path, name: str, text: str) -> None:
    """`tether.graph` gives exactly the Mermaid text `tether graph` draws for the file, and
    refuses a document with errors, naming them."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    await open_document(client, path, text)
    mermaid = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="tether.graph", arguments=[path.resolve().as_uri()]))
    drawn = subprocess.run([sys.executable, "-m", "tether", "graph", str(path)],
                           capture_output=True, text=True, env=server_env(), timeout=300)
    assert drawn.returncode == 0, drawn.stderr
    assert mermaid == drawn.stdout == to_mermaid(compile(path))
    broken = tmp_path / f"broken{path.suffix}"
    await open_document(client, broken, text.replace("critique", "critic", 1))
    with pytest.raises(JsonRpcException, match="has errors"):
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="tether.graph", arguments=[broken.resolve().as_uri()]))


async def test_requests_outside_the_text_or_on_nothing_answer_empty(
        client: LanguageClient, tmp_path: Path) -> None:
    """A position past the end, or on no name, gives no answer rather than an error; the
    server then still answers a real request."""
    path = tmp_path / "edge.yaml"
    await open_document(client, path, YAML)
    nowhere = [types.Position(line=500, character=3), types.Position(line=0, character=400),
               position(YAML, "tether: 1")]
    for where in nowhere:
        assert await client.text_document_hover_async(types.HoverParams(
            text_document=identifier(path), position=where)) is None
        assert await client.text_document_definition_async(types.DefinitionParams(
            text_document=identifier(path), position=where)) in ([], None)
        assert await client.text_document_prepare_rename_async(types.PrepareRenameParams(
            text_document=identifier(path), position=where)) is None
        with pytest.raises(JsonRpcException, match="no node id here"):
            await client.text_document_rename_async(types.RenameParams(
                text_document=identifier(path), position=where, new_name="x"))
    found = await client.text_document_definition_async(types.DefinitionParams(
        text_document=identifier(path), position=position(YAML, "needs: [draft]", offset=9)))
    assert isinstance(found, list) and len(found) == 1
