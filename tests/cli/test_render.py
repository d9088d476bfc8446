"""The diagnostic renderers: text (exact golden output), JSON, SARIF 2.1.0 and GitHub."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tether.diagnostics import Diagnostic, Related, Severity, Span, make
from tether.diagnostics.render import (
    LineReader,
    render_github,
    render_json,
    render_sarif,
    render_text,
    summary,
)

REFUND_LINES = {
    10: '    with: {x: "{{ inputs.amout }}"}',
    13: "    needs: [a]",
}


def refund_lines(file: str, line: int) -> str | None:
    return REFUND_LINES.get(line) if file == "refund.yaml" else None


def e402() -> Diagnostic:
    return make(
        "E402",
        "unknown input `amout`",
        Span("refund.yaml", 10, 19, 10, 30),
        related=[Related(Span("refund.yaml", 13, 13, 13, 13), "`b` needs `a`")],
        help="did you mean `amount`?",
        node_id="b",
    )


def w100(line: int = 20) -> Diagnostic:
    return make("W100", "node `refund` retries a task not marked idempotent",
                Span("refund.yaml", line, 5, line, 9), node_id="refund")


# --------------------------------------------------------------------------- text


def test_text_matches_the_documented_format_exactly() -> None:
    expected = (
        "refund.yaml:10:19: error[E402]: unknown input `amout`\n"
        "   |\n"
        '10 |     with: {x: "{{ inputs.amout }}"}\n'
        "   |                   ^^^^^^^^^^^^\n"
        "   = note: refund.yaml:13:13: `b` needs `a`\n"
        "   = help: did you mean `amount`?\n"
    )
    assert render_text([e402()], read_line=refund_lines) == expected


def test_text_separates_diagnostics_with_one_blank_line_in_sorted_order() -> None:
    lines = {3: "  a:", 20: "    retry: {max_attempts: 3}"}
    first = make("E302", "dependency cycle: a -> b -> a", Span("refund.yaml", 3, 3))
    text = render_text([w100(), first], read_line=lambda f, n: lines.get(n))
    assert text == (
        "refund.yaml:3:3: error[E302]: dependency cycle: a -> b -> a\n"
        "  |\n"
        "3 |   a:\n"
        "  |   ^\n"
        "\n"
        "refund.yaml:20:5: warning[W100]: node `refund` retries a task not marked idempotent\n"
        "   |\n"
        "20 |     retry: {max_attempts: 3}\n"
        "   |     ^^^^^\n"
    )


def test_gutter_width_is_the_number_of_digits_of_the_line() -> None:
    diag = make("E201", "unknown key `nedes`", Span("w.yaml", 1234, 2, 1234, 6))
    text = render_text([diag], read_line=lambda f, n: " nedes: [a]")
    assert text.splitlines()[1:4] == ["     |", "1234 |  nedes: [a]", "     |  ^^^^^"]


def test_a_span_over_several_lines_gets_one_caret() -> None:
    diag = make("E202", "wrong type", Span("w.yaml", 4, 7, 6, 1))
    text = render_text([diag], read_line=lambda f, n: "  with:")
    assert text.splitlines()[3] == "  |       ^"


def test_tabs_are_shown_as_one_space_so_carets_line_up() -> None:
    diag = make("E201", "unknown key `x`", Span("w.yaml", 2, 3, 2, 3))
    text = render_text([diag], read_line=lambda f, n: "\t\tx: 1")
    assert text.splitlines()[2:4] == ["2 |   x: 1", "  |   ^"]


def test_no_line_has_trailing_spaces() -> None:
    diag = make("E201", "unknown key", Span("w.yaml", 2, 1, 2, 1), help="first\nsecond")
    text = render_text([diag], read_line=lambda f, n: "   ")
    assert all(line == line.rstrip() for line in text.splitlines())
    assert "2 |" in text.splitlines()


def test_multi_line_help_is_indented_under_its_first_line() -> None:
    diag = make("E201", "unknown key", Span("w.yaml", 2, 1), help="first\nsecond")
    lines = render_text([diag], read_line=lambda f, n: None).splitlines()
    assert lines[1:] == ["  = help: first", "          second"]


def test_no_source_excerpt_when_the_file_cannot_be_read(tmp_path: Path) -> None:
    missing = make("E100", "cannot read the file", Span.whole_file(str(tmp_path / "gone.yaml")))
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00bad")
    undecodable = make("E100", "not UTF-8", Span(str(binary), 1, 1, 1, 1), help="save as UTF-8")
    text = render_text([missing, undecodable])
    assert "|" not in text
    assert f"{binary}:1:1: error[E100]: not UTF-8\n  = help: save as UTF-8\n" in text


def test_default_reader_reads_files_from_disk(tmp_path: Path) -> None:
    source = tmp_path / "w.yaml"
    source.write_text("tether: 1\r\nname: w\r\nnodse: {}\r\n", encoding="utf-8")
    diag = make("E201", "unknown key `nodse`", Span(str(source), 3, 1, 3, 5))
    assert render_text([diag]).splitlines()[2:4] == ["3 | nodse: {}", "  | ^^^^^"]


def test_line_reader_reads_each_file_once(tmp_path: Path) -> None:
    source = tmp_path / "w.yaml"
    source.write_text("one\ntwo\n", encoding="utf-8")
    reader = LineReader()
    assert reader(str(source), 2) == "two"
    source.write_text("changed\n", encoding="utf-8")
    assert reader(str(source), 1) == "one"
    assert reader(str(source), 9) is None


def test_color_marks_severity_message_and_gutter() -> None:
    text = render_text([e402(), w100(13)], color=True, read_line=refund_lines)
    assert "\x1b[1;31merror[E402]\x1b[0m" in text
    assert "\x1b[1;33mwarning[W100]\x1b[0m" in text
    assert "\x1b[1munknown input `amout`\x1b[0m" in text
    assert "\x1b[1;34m   |\x1b[0m" in text
    assert "\x1b[" not in render_text([e402()], read_line=refund_lines)


def test_no_diagnostics_render_as_nothing() -> None:
    assert render_text([]) == ""


@pytest.mark.parametrize(
    ("diags", "checked", "expected"),
    [
        ([], 3, "checked 3 files: no problems"),
        ([], 1, "checked 1 file: no problems"),
        ([e402()], 1, "found 1 error in 1 file"),
        ([w100()], 1, "found 1 warning in 1 file"),
        ([e402(), e402(), w100()], 3, "found 2 errors and 1 warning in 1 file (3 files checked)"),
    ],
)
def test_summary_line(diags: list[Diagnostic], checked: int, expected: str) -> None:
    assert summary(diags, checked) == expected


# --------------------------------------------------------------------------- JSON


def test_json_has_every_field_sorted_and_a_summary() -> None:
    data = json.loads(render_json([w100(), e402()], files_checked=2))
    assert data["version"] == 1
    assert data["summary"] == {"errors": 1, "warnings": 1, "files": 2}
    first, second = data["diagnostics"]
    assert first == {
        "code": "E402", "severity": "error", "message": "unknown input `amout`",
        "file": "refund.yaml", "line": 10, "col": 19, "end_line": 10, "end_col": 30,
        "help": "did you mean `amount`?", "node_id": "b",
        "related": [{"file": "refund.yaml", "line": 13, "col": 13, "message": "`b` needs `a`"}],
    }
    assert (second["code"], second["severity"], second["help"]) == ("W100", "warning", None)


def test_json_is_stable_text() -> None:
    text = render_json([e402(), w100()], files_checked=1)
    assert text == render_json([w100(), e402()], files_checked=1)
    assert text.endswith("}\n") and text.startswith('{\n  "diagnostics": [\n')


def test_json_span_without_an_end_ends_where_it_starts() -> None:
    diag = make("E300", "duplicate id", Span("w.yaml", 4, 3))
    entry = json.loads(render_json([diag], 1))["diagnostics"][0]
    assert (entry["end_line"], entry["end_col"]) == (4, 3)


# --------------------------------------------------------------------------- SARIF

# The parts of the SARIF 2.1.0 schema that a result log like ours must satisfy.
SARIF_SUBSET = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "runs": {"type": "array", "items": {
            "type": "object",
            "required": ["tool"],
            "properties": {
                "tool": {"type": "object", "required": ["driver"], "properties": {
                    "driver": {"type": "object", "required": ["name"], "properties": {
                        "rules": {"type": "array", "items": {
                            "type": "object", "required": ["id"],
                            "properties": {"defaultConfiguration": {"properties": {
                                "level": {"enum": ["none", "note", "warning", "error"]}}}},
                        }},
                    }},
                }},
                "results": {"type": "array", "items": {
                    "type": "object", "required": ["message"],
                    "properties": {
                        "level": {"enum": ["none", "note", "warning", "error"]},
                        "ruleIndex": {"type": "integer", "minimum": -1},
                        "message": {"type": "object", "required": ["text"]},
                        "locations": {"type": "array", "items": {"type": "object"}},
                    },
                }},
            },
        }},
    },
}


def sarif_log(diags: list[Diagnostic]) -> dict[str, Any]:
    log = json.loads(render_sarif(diags))
    assert isinstance(log, dict)
    return log


def test_sarif_log_shape() -> None:
    log = sarif_log([w100(), e402()])
    assert log["version"] == "2.1.0"
    assert str(log["$schema"]).endswith("sarif-2.1.0.json")
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "tether" and driver["informationUri"].startswith("https://")
    from importlib.metadata import version

    assert driver["version"] == version("tether")
    assert [r["id"] for r in driver["rules"]] == ["E402", "W100"]
    assert driver["rules"][0] == {
        "id": "E402",
        "name": "unknown-input",
        "shortDescription": {"text": "a template reads an input that is not declared"},
        "fullDescription": {"text": "Declare the input under `inputs:` (or `input` in "
                            "`.flow`), or fix the name."},
        "defaultConfiguration": {"level": "error"},
    }
    assert driver["rules"][1]["defaultConfiguration"] == {"level": "warning"}


def test_sarif_results_point_at_their_rules_and_regions() -> None:
    (run,) = sarif_log([e402(), w100()])["runs"]
    error, warning = run["results"]
    assert (error["ruleId"], error["ruleIndex"], error["level"]) == ("E402", 0, "error")
    assert (warning["ruleId"], warning["ruleIndex"], warning["level"]) == ("W100", 1, "warning")
    assert error["message"]["text"] == "unknown input `amout`\nhelp: did you mean `amount`?"
    location = error["locations"][0]["physicalLocation"]
    assert location == {
        "artifactLocation": {"uri": "refund.yaml"},
        "region": {"startLine": 10, "startColumn": 19, "endLine": 10, "endColumn": 31},
    }
    (related,) = error["relatedLocations"]
    assert related["message"] == {"text": "`b` needs `a`"}
    assert related["physicalLocation"]["region"]["startLine"] == 13
    assert "relatedLocations" not in warning


def test_sarif_uris_are_relative_posix_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    monkeypatch.chdir(tmp_path)
    inside = make("E201", "x", Span(str(tmp_path / "flows" / "my flow.yaml"), 1, 1))
    outside = make("E201", "x", Span("/elsewhere/w.yaml", 1, 1))
    (run,) = sarif_log([inside, outside])["runs"]
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in run["results"]]
    assert sorted(uris) == ["file:///elsewhere/w.yaml", "flows/my%20flow.yaml"]


def test_sarif_without_diagnostics_has_an_empty_result_list() -> None:
    (run,) = sarif_log([])["runs"]
    assert run["results"] == [] and run["tool"]["driver"]["rules"] == []


def test_sarif_matches_the_schema_subset() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(sarif_log([e402(), w100()]), SARIF_SUBSET)


# --------------------------------------------------------------------------- GitHub


def test_github_one_line_per_diagnostic() -> None:
    assert render_github([w100(), e402()]) == (
        "::error file=refund.yaml,line=10,col=19,endLine=10,endColumn=30,title=E402::"
        "unknown input `amout`%0Anote: refund.yaml:13:13: `b` needs `a`"
        "%0Ahelp: did you mean `amount`?\n"
        "::warning file=refund.yaml,line=20,col=5,endLine=20,endColumn=9,title=W100::"
        "node `refund` retries a task not marked idempotent\n"
    )


def test_github_escapes_data_and_properties() -> None:
    diag = Diagnostic(
        code="E101", severity=Severity.ERROR, message="100% bad\r\nvalue: a, b",
        span=Span("dir,x/a:b%.yaml", 2, 3, 2, 4),
    )
    line = render_github([diag])
    assert line == (
        "::error file=dir%2Cx/a%3Ab%25.yaml,line=2,col=3,endLine=2,endColumn=4,title=E101::"
        "100%25 bad%0D%0Avalue: a, b\n"
    )
    assert render_github([]) == ""
