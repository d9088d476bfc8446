"""The plan comparison behind ``tether compat`` at given positions (no store): the output
shape class (C115) and the compatible-change notes."""

from __future__ import annotations

from pathlib import Path

import tether
from tether.compiler.compat import Position, findings, notes
from tether.compiler.plan import Plan

BASE = """\
tether: 1
name: shapes
inputs:
  request: {type: string}
nodes:
  alpha:
    agent:
      model: {provider: openai, name: m, base_url: "http://127.0.0.1:9/v1"}
      prompt: "{{ inputs.request }}"
      max_turns: 2
      output: {type: object, properties: {total: {type: number}}}
  use:
    needs: [alpha]
    task: t.use
    with: {total: "{{ nodes.alpha.output.total }}"}
"""
NEW_SCHEMA = BASE.replace("total: {type: number}", "total: {type: string}")


def _plan(tmp_path: Path, name: str, text: str) -> Plan:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return tether.compile(path)


def test_a_changed_output_schema_read_later_pins_the_run(tmp_path: Path) -> None:
    old, new = _plan(tmp_path, "v1.yaml", BASE), _plan(tmp_path, "v2.yaml", NEW_SCHEMA)
    after_alpha = Position(started={"alpha": "completed"})
    (finding,) = findings(old, new, after_alpha)
    assert (finding.code, finding.node_id) == ("C115", "alpha")
    assert "`use`" in finding.message
    # the reader already ran: nothing still to run reads the old shape
    assert findings(old, new, Position(started={"alpha": "completed", "use": "completed"})) \
        == []
    # nobody reads it: the changed schema concerns no node still to run
    unread = BASE.replace('with: {total: "{{ nodes.alpha.output.total }}"}', "with: {}")
    assert findings(_plan(tmp_path, "u1.yaml", unread),
                    _plan(tmp_path, "u2.yaml", unread.replace("total: {type: number}",
                                                              "total: {type: string}")),
                    after_alpha) == []
    # mid-loop, the same change is C113 (the conversation used the old schema)
    assert [f.code for f in findings(old, new, Position(started={"alpha": "interrupted"}))] \
        == ["C113"]


def test_the_notes_name_the_compatible_changes(tmp_path: Path) -> None:
    old = _plan(tmp_path, "v1.yaml", BASE)
    new = _plan(tmp_path, "v2.yaml", BASE.replace("  use:\n", "  use:\n    title: Use it\n")
                .replace("inputs:\n", "inputs:\n  region: {type: string, default: eu}\n")
                + "  later:\n    needs: [use]\n    noop: true\n")
    assert notes(old, new) == ["node `use`: title changed", "node `later` added",
                               "input `region` added (optional)"]
    assert findings(old, new, Position(started={"alpha": "completed", "use": "completed"})) \
        == []
