"""What the template sandbox refuses at run time, `tether check` refuses first (issue 22):
`{% include %}`, `{% import %}`, `{% from %}`, `{% extends %}` and the `attr` filter (E420-
E424), each at the word that does it; the runtime refuses every one of them too, so a
template that passes `check` never reaches another file or an attribute by a computed
name."""

from __future__ import annotations

from pathlib import Path

import pytest

import tether
from tether.templating import ENV

CASES = [
    ("{% include 'other.txt' %}", "E420", "include"),
    ("x {% import 'm.j2' as m %}{{ m.f() }}", "E421", "import"),
    ("{% from 'm.j2' import f %}{{ f() }}", "E421", "from"),
    ("{% extends 'base.j2' %}", "E422", "extends"),
    ("{{ inputs.name | attr('upper') }}", "E423", "attr"),
    ("{{ inputs.name | attr('__class__') }}", "E424", "__class__"),
    ("{{ inputs.name | attr('_private') }}", "E424", "_private"),
    ("{{ inputs.name | attr(inputs.name) }}", "E423", "attr"),
]


@pytest.mark.parametrize(("template", "code", "word"), CASES)
def test_check_reports_what_the_sandbox_refuses_at_its_word(
        tmp_path: Path, template: str, code: str, word: str) -> None:
    path = tmp_path / "w.yaml"
    quoted = template.replace("'", "''")
    path.write_text("tether: 1\nname: w\ninputs:\n  name: {type: string}\nnodes:\n  a:\n"
                    f"    task: t.x\n    with:\n      v: '{quoted}'\n")
    found = [d for d in tether.check(path) if d.code.startswith("E42")]
    assert [d.code for d in found] == [code], tether.check(path)
    span = found[0].span
    assert span.line == 9
    line = path.read_text().splitlines()[8]
    assert line[span.col - 1:].startswith(word), (line, span)
    with pytest.raises(Exception) as raised:
        ENV.from_string(template).render(inputs={"name": "n"})
    assert type(raised.value).__name__ in ("SecurityError", "TypeError", "UndefinedError")


def test_plain_attribute_reads_and_the_same_words_in_text_are_not_refused(
        tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("tether: 1\nname: w\ninputs:\n  name: {type: string}\nnodes:\n  a:\n"
                    "    task: t.x\n    with:\n      v: \"include, import, extends: "
                    "{{ inputs.name.upper() }} {{ inputs['name'] }}\"\n")
    assert [d.code for d in tether.check(path) if d.code.startswith("E42")] == []
