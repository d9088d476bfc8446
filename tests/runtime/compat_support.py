"""What the ``compat`` / ``upgrade`` tests share: a counting task and workflow files."""

from __future__ import annotations

import collections
import textwrap
from pathlib import Path
from typing import Any

LOOP = textwrap.dedent("""\
    tether: 1
    name: drafts
    nodes:
      draft:
        task: t.tag
        with: {label: D}
      gate:
        needs: [draft]
        approval: {reason: again?}
      critique:
        needs: [gate]
        task: t.tag
        with: {label: C}
        loop: {to: draft, while: "{{ iteration < 3 }}", max_iterations: 3}
      publish:
        needs: [critique]
        task: t.tag
        with: {label: P}
""")
"""A loop of three passes with an approval in its body (``gate``)."""


FAN = textwrap.dedent("""\
    tether: 1
    name: fan
    nodes:
      each:
        task: t.tag
        for_each: ["x", "y", "z"]
        fail_fast: false
        with: {label: "{{ item }}"}
      after:
        needs: [each]
        task: t.tag
        with: {label: done}
""")
"""A for_each of three elements (fail_fast off), then one node."""


MAIN = textwrap.dedent("""\
    tether: 1
    name: parent
    nodes:
      child:
        workflow: sub.yaml
      last:
        needs: [child]
        task: t.tag
        with: {label: L}
""")
"""A workflow whose first node is a sub-workflow (``sub.yaml``: :data:`SUB`)."""

SUB = textwrap.dedent("""\
    tether: 1
    name: sub
    nodes:
      s1:
        task: t.tag
        with: {label: S1}
      ask:
        needs: [s1]
        approval: {reason: inner}
      s2:
        needs: [ask]
        task: t.tag
        with: {label: S2}
""")
"""The sub-workflow: a task, an approval, a task."""


class Tasks:
    """``t.tag`` lower-cases its label, counting calls; it fails once for each label in
    ``failing``."""

    def __init__(self, failing: set[str] | None = None) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.failing = failing or set()

    def tag(self, label: str) -> str:
        self.calls[label] += 1
        if label in self.failing:
            self.failing.discard(label)
            raise RuntimeError(f"{label} failed")
        return label.lower()

    @property
    def registry(self) -> dict[str, Any]:
        return {"t.tag": self.tag}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path
