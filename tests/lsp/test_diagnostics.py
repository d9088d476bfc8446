"""Diagnostics in the editor are exactly `tether check`'s, with quick fixes for typos."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lsp_support import (
    change_document,
    close_document,
    open_document,
    position,
    server_env,
    wait_diagnostics,
)
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = sorted(p for p in (ROOT / "tests" / "golden" / "cases").iterdir()
                if p.suffix in (".yaml", ".flow"))
EXAMPLES = sorted(p for p in (ROOT / "examples").rglob("*") if p.suffix in (".yaml", ".flow"))


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def expected_range(lines: list[str], entry: dict[str, int]) -> types.Range:
    """What a check JSON diagnostic's place is in LSP terms (computed independently)."""
    def at(line: int, col: int) -> types.Position:
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        return types.Position(line=line - 1, character=utf16(text[:col - 1]))

    return types.Range(start=at(entry["line"], entry["col"]),
                       end=at(entry["end_line"], entry["end_col"] + 1))


def check_json(paths: list[Path]) -> list[dict[str, object]]:
    """`tether check --format json` over ``paths`` (a real subprocess)."""
    result = subprocess.run(
        [sys.executable, "-m", "tether", "check", "--format", "json", *map(str, paths)],
        capture_output=True, text=True, env=server_env(), cwd=paths[0].parent, timeout=600)
    assert result.returncode in (0, 1), result.stderr
    diagnostics: list[dict[str, object]] = json.loads(result.stdout)["diagnostics"]
    return diagnostics


def is_workflow(path: Path) -> bool:
    from tether.compiler.compile import starts_with_tether_key

    return path.suffix == ".flow" or starts_with_tether_key(path)


async def test_every_golden_case_and_example_reports_what_tether_check_reports(
        client: LanguageClient) -> None:
    """For every golden case and example, the server publishes `tether check`'s diagnostics:
    same codes, severities, messages (help on its own line), ranges and related notes."""
    files = [p for p in [*GOLDEN, *EXAMPLES] if is_workflow(p)]
    by_file: dict[str, list[dict[str, object]]] = {str(f): [] for f in files}
    for entry in check_json(files):
        by_file[str(entry["file"])].append(entry)
    assert sum(map(len, by_file.values())) > 100  # the cases are mostly invalid files
    for path in files:
        published = await open_document(client, path)
        close_document(client, path)
        lines = path.read_text(encoding="utf-8").replace("\r\n", "\n").split("\n")
        expected = by_file[str(path)]
        assert len(published) == len(expected), path.name
        for got, want in zip(published, expected, strict=True):
            message = str(want["message"])
            if want["help"] is not None:
                message += f"\nhelp: {want['help']}"
            assert (got.code, got.message) == (want["code"], message), path.name
            assert got.severity == (types.DiagnosticSeverity.Error
                                    if want["severity"] == "error"
                                    else types.DiagnosticSeverity.Warning)
            assert got.range == expected_range(lines, want), (path.name, want)  # type: ignore[arg-type]
            notes = [(Path(os.path.normpath(types_path(r.location.uri))), r.message,
                      r.location.range.start.line + 1)
                     for r in got.related_information or []]
            wanted_notes = [(Path(os.path.normpath(path.parent / str(r["file"]))),
                             r["message"], r["line"])
                            for r in want["related"]]  # type: ignore[attr-defined]
            assert notes == wanted_notes, path.name


async def test_yaml_that_is_not_a_workflow_gets_no_diagnostics_as_with_skip_non_workflows(
        client: LanguageClient, tmp_path: Path) -> None:
    """A YAML file whose first key is not `tether:` (a CI file, the golden case
    not_a_mapping.yaml) is left alone, as `tether check --skip-non-workflows` leaves it."""
    others = [p for p in GOLDEN if not is_workflow(p)]
    compose = tmp_path / "compose.yaml"
    compose.write_text("services:\n  web: {image: nginx}\n")
    others.append(compose)
    assert len(others) >= 2
    for path in others:
        assert await open_document(client, path) == []
        result = subprocess.run(
            [sys.executable, "-m", "tether", "check", "--skip-non-workflows", str(path)],
            capture_output=True, text=True, env=server_env(), timeout=300)
        assert (result.returncode, result.stdout) == (0, ""), result.stderr
    typed = await open_document(client, tmp_path / "new.yaml", "tether: 1\nname: new\n")
    assert [d.code for d in typed] == ["E200"]  # once it is one, it is checked


def types_path(uri: str) -> str:
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(uri).path)


async def test_columns_count_utf16_units_on_a_line_with_non_ascii_text(
        client: LanguageClient, tmp_path: Path) -> None:
    """A typo after an emoji and accented text is underlined at its UTF-16 columns (in a
    folder whose name the URI escapes)."""
    text = ('tether: 1\nname: unicode\nnodes:\n  fetch: {task: http.get}\n'
            '  parse: {title: "résumé 🎉", task: text.parse, needs: [fecth]}\n')
    folder = tmp_path / "dossier d'été"  # a URI with escapes: %20, %27, %C3%A9
    folder.mkdir()
    path = folder / "unicode.yaml"
    published = await open_document(client, path, text)
    (diag,) = published
    assert diag.code == "E301"
    start = position(text, "fecth")
    assert diag.range == types.Range(start=start, end=types.Position(
        line=start.line, character=start.character + 5))
    assert start.character == len('  parse: {title: "résumé 🎉", task: text.parse, needs: [')+1


async def test_an_edit_gets_fresh_diagnostics_and_fixing_it_clears_them(
        client: LanguageClient, tmp_path: Path) -> None:
    """Incremental edits: a typo typed into a clean file is reported, its fix clears it."""
    text = "workflow edits\ntask fetch = http.get()\ntask parse = text.parse() after fetch\n"
    path = tmp_path / "edits.flow"
    assert await open_document(client, path, text) == []
    where = position(text, "fetch", occurrence=1)
    typo = types.Range(start=where, end=types.Position(line=where.line,
                                                       character=where.character + 5))
    published = await change_document(client, path, 2, [
        types.TextDocumentContentChangePartial(range=typo, text="fecth")])
    assert [d.code for d in published] == ["E301"]
    assert published[0].message.endswith("help: did you mean `fetch`?")
    published = await change_document(client, path, 3, [
        types.TextDocumentContentChangePartial(range=typo, text="fetch")])
    assert published == []


FIXABLE = {
    "yaml": ('tether: 1\nname: fixes\ninputs:\n  amount: {type: number}\nnodes:\n'
             '  fetch: {task: http.get, with: {x: "{{ inputs.amout }}"}}\n'
             '  parse: {task: text.parse, needs: [fecth]}\n'),
    "flow": ('workflow fixes\ninput amount: number\n'
             'task fetch = http.get(x: {{ inputs.amout }})\n'
             'task parse = text.parse() after fecth\n'),
}


@pytest.mark.parametrize("syntax", ["yaml", "flow"])
async def test_a_did_you_mean_becomes_a_quick_fix_that_fixes_the_file(
        client: LanguageClient, tmp_path: Path, syntax: str) -> None:
    """The quick fix of E301 and E402 replaces exactly the misspelt name; applied, the file
    checks clean."""
    text = FIXABLE[syntax]
    path = tmp_path / f"fixes.{syntax}"
    published = await open_document(client, path, text)
    assert sorted(str(d.code) for d in published) == ["E301", "E402"]
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=path.resolve().as_uri()),
        range=published[0].range, context=types.CodeActionContext(diagnostics=published)))
    assert actions is not None and len(actions) == 2
    fixed = text
    edits = []
    for action in actions:
        assert isinstance(action, types.CodeAction)
        assert action.kind == types.CodeActionKind.QuickFix
        assert action.edit is not None and action.edit.changes is not None
        edits += action.edit.changes[path.resolve().as_uri()]
    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character),
                       reverse=True):
        lines = fixed.split("\n")
        line = lines[edit.range.start.line]
        lines[edit.range.start.line] = (line[:edit.range.start.character] + edit.new_text
                                        + line[edit.range.end.character:])
        fixed = "\n".join(lines)
    assert "inputs.amount" in fixed and "fecth" not in fixed and "amout" not in fixed
    assert await change_document(client, path, 2, [
        types.TextDocumentContentChangeWholeDocument(text=fixed)]) == []


async def test_a_help_that_is_only_advice_gives_no_code_action(
        client: LanguageClient, tmp_path: Path) -> None:
    """E404's help (add a need) is not a replacement of a misspelt name: no quick fix."""
    text = "workflow advice\ntask fetch = http.get()\ntask parse = text.parse(body: " \
           "{{ nodes.fetch.output }})\n"
    path = tmp_path / "advice.flow"
    published = await open_document(client, path, text)
    assert [d.code for d in published] == ["E404"]
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=path.resolve().as_uri()),
        range=published[0].range, context=types.CodeActionContext(diagnostics=published)))
    assert not actions


async def test_an_unreadable_document_reports_e100_not_a_crash(
        client: LanguageClient, tmp_path: Path) -> None:
    """A NUL character is E100 as in `tether check`; the server keeps answering after."""
    path = tmp_path / "nul.yaml"
    published = await open_document(client, path, "tether: 1\nname: x\x00\n")
    assert [d.code for d in published] == ["E100"]
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(
        text_document=types.TextDocumentIdentifier(uri=path.resolve().as_uri())))
    assert symbols == []


async def test_saving_a_sub_workflow_rechecks_the_open_workflow_that_embeds_it(
        client: LanguageClient, tmp_path: Path) -> None:
    """A parent open in the editor learns of its child's new error when the child is saved
    (E701 names the child), and of its repair at the next save."""
    child = tmp_path / "child.yaml"
    good = "tether: 1\nname: child\nnodes:\n  a: {noop: true}\n"
    child.write_text(good)
    parent = tmp_path / "parent.yaml"
    assert await open_document(
        client, parent, "tether: 1\nname: parent\nnodes:\n  sub: {workflow: child.yaml}\n") == []
    for text, codes in (("tether: 1\nname: child\nnodes:\n  a: {noop: true, needs: [b]}\n",
                         ["E701"]), (good, [])):
        child.write_text(text)
        await open_document(client, child, text)
        client.diagnostics.pop(parent.resolve().as_uri(), None)
        client.text_document_did_save(types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=child.resolve().as_uri())))
        assert [d.code for d in await wait_diagnostics(client, parent.resolve().as_uri())] \
            == codes
        close_document(client, child)


async def test_a_burst_of_edits_ends_with_the_diagnostics_of_the_last_text(
        client: LanguageClient, tmp_path: Path) -> None:
    """Twenty edits sent without waiting (typo, fix, typo, ...; the last one a typo of its
    own): whatever was checked on the way, the diagnostics that remain are the last text's."""
    text = "workflow burst\ntask fetch = http.get()\ntask parse = text.parse() after fetch\n"
    path = tmp_path / "burst.flow"
    assert await open_document(client, path, text) == []
    uri = path.resolve().as_uri()
    where = position(text, "fetch", occurrence=1)
    typo = types.Range(start=where, end=types.Position(line=where.line,
                                                       character=where.character + 5))
    words = ["fecth", "fetch"] * 9 + ["fetch", "fetchh"]
    for version, word in enumerate(words, start=2):
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(range=typo, text=word)]))
        typo = types.Range(start=where, end=types.Position(
            line=where.line, character=where.character + len(word)))

    async def settled() -> list[types.Diagnostic]:
        while True:
            found = list(client.diagnostics.get(uri, ()))
            if any("`fetchh`" in d.message for d in found):
                return found
            await asyncio.sleep(0.05)

    final = await asyncio.wait_for(settled(), 120)
    assert [d.code for d in final] == ["E301"]
    assert final[0].message.startswith("node `parse` needs `fetchh`")
