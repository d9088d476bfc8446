"""A harness for crash and concurrency tests that use real processes.

``python -m harness.child JOB`` (with ``tests/runtime`` on ``PYTHONPATH``) is a child process:
it opens the store from a URL, registers the test tasks (or the examples' tasks), and runs,
resumes or forks a workflow. It can be armed to SIGKILL itself at a chosen boundary: right
before or right after a checkpoint write (``put``, ``record_interrupt``, ``finish_run`` of the
real store, wrapped in the child only), right after the claim of an interrupt or an idempotent
result is stored, or inside a task body. Task bodies append one line per execution to an
effects file (flushed and fsynced), so the parent test can count how often each body ran.

Modules:
    crash     arming a crash: wrapping the store's methods, and the hook task bodies call.
    tasks     the test tasks and the recorder (also wraps the examples' tasks).
    child     the child process: one job (run/resume/fork/drive/setup) or a worker loop.
    launch    the parent side: starting children (fresh interpreters or a pre-imported
              zygote that forks them), reading effects, reference runs.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNTIME_TESTS = HERE.parent
WORKFLOWS = HERE / "workflows"
ROOT = HERE.parents[2]
EXAMPLES = ROOT / "examples"
