"""The resume hint printed for a paused run matches the approval's form (issue 25): the value
it suggests is one that `tether resume` accepts, `{}` for an empty form."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

WORKFLOW = """\
tether: 1
name: gate
nodes:
  review:
    approval:
      reason: go?
      form: {form}
  after:
    noop: true
    needs: [review]
    when: "{{{{ nodes.review.output is not none }}}}"
"""


def _tether(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TETHER_DB": f"sqlite:///{tmp_path / 'runs.db'}"}
    return subprocess.run([sys.executable, "-m", "tether", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(("form", "hint"), [
    ("{}", "{}"),
    ("{approved: {type: boolean}}", '{"approved": true}'),
    ("{tier: {type: string, enum: [gold, silver]}, note: {type: string, default: ''}}",
     '{"tier": "gold"}'),
])
def test_the_printed_resume_command_is_accepted_by_resume(tmp_path: Path, form: str,
                                                          hint: str) -> None:
    """Run, read the hint, run the hinted command as printed: the run completes."""
    (tmp_path / "gate.yaml").write_text(WORKFLOW.format(form=form), encoding="utf-8")
    paused = _tether(tmp_path, "run", "gate.yaml")
    assert paused.returncode == 4, paused.stderr
    match = re.search(r"resume with: tether resume (\S+) --value '(.*)'$", paused.stdout,
                      re.MULTILINE)
    assert match is not None, paused.stdout
    assert match.group(2) == hint
    done = _tether(tmp_path, "resume", match.group(1), "--value", match.group(2))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("completed run ")
