"""The Promela model of the run protocol (model/protocol.pml), checked by Spin: the claim /
lease / fence / answer / timer / continue / cancel protocol keeps its invariants and its
liveness property, and the checker does catch each planted bug (the fence removed; the
recovery of crashed runs removed; the lease check before a node removed). docs/internals.md
maps the model to the code.

Skipped (with the reason) where ``spin`` or a C compiler is missing, except in CI (``CI`` or
``TETHER_REQUIRE_BROWSER`` set, as .ci/run does), where that is a failure."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

MODEL = Path(__file__).resolve().parents[1] / "model" / "protocol.pml"
TIMEOUT = 600  # seconds per step; the checks take seconds (about 2 million states)


def _tools() -> tuple[str, str]:
    spin = shutil.which("spin")
    cc = shutil.which("cc") or shutil.which("gcc")
    if spin is None or cc is None:
        missing = " and ".join(n for n, p in (("spin", spin), ("a C compiler", cc)) if not p)
        if os.environ.get("CI") or os.environ.get("TETHER_REQUIRE_BROWSER"):
            pytest.fail(f"{missing} missing in CI: install spin (Debian: apt-get install spin)")
        pytest.skip(f"{missing} not installed (Debian: apt-get install spin gcc)")
    return spin, cc


def _run(command: list[str], cwd: Path) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, f"{command}: {done.stdout}\n{done.stderr}"
    return done.stdout


def _verify(tmp_path: Path, *, liveness: bool, defines: tuple[str, ...] = ()) -> str:
    """Spin's verifier of the model (with ``defines``), compiled and run; its report."""
    spin, cc = _tools()
    work = tmp_path / ("live" if liveness else "safe")
    work.mkdir()
    shutil.copy(MODEL, work / MODEL.name)
    _run([spin, *defines, "-a", MODEL.name], work)
    flags = ["-DNFAIR=3"] if liveness else ["-DSAFETY", "-DNOCLAIM"]
    _run([cc, "-O2", "-w", "-DCOLLAPSE", *flags, "-o", "pan", "pan.c"], work)
    search = ["-a", "-f"] if liveness else []
    report = subprocess.run(["./pan", "-m200000", *search], cwd=work, capture_output=True,
                            text=True, timeout=TIMEOUT).stdout
    assert "Full statespace search" in report, report
    assert "max search depth too small" not in report, report
    return report


def test_the_protocol_keeps_its_invariants(tmp_path: Path) -> None:
    """One owner's writes commit at a time, each node commits once, a cancelled run starts
    no node, and no reachable state is a deadlock."""
    report = _verify(tmp_path, liveness=False)
    assert "errors: 0" in report, report
    assert "assertion violations\t+" in report
    assert "invalid end states\t+" in report


def test_every_answered_due_or_crashed_run_is_continued_to_its_end(tmp_path: Path) -> None:
    report = _verify(tmp_path, liveness=True)
    assert "errors: 0" in report, report
    assert "acceptance   cycles \t+ (fairness enabled)" in report, report


def test_without_the_fence_a_stale_owner_commits_and_spin_says_so(tmp_path: Path) -> None:
    report = _verify(tmp_path, liveness=False, defines=("-DNOFENCE",))
    assert "assertion violated (owner==me)" in report, report
    assert "errors: 1" in report


def test_without_recovery_of_expired_leases_a_crashed_run_is_stuck(tmp_path: Path) -> None:
    report = _verify(tmp_path, liveness=True, defines=("-DNORECOVER",))
    assert "acceptance cycle" in report, report
    assert "errors: 1" in report


def test_without_the_lease_check_a_stalled_owner_starts_a_cancelled_runs_node(
        tmp_path: Path) -> None:
    report = _verify(tmp_path, liveness=False, defines=("-DNOCHECK",))
    assert "assertion violated ((status!=" in report and "!(finished)" in report, report
    assert "errors: 1" in report
