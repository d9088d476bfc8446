"""A pre-imported process that forks one fresh child per job: ``python -m harness.zygote``.

Importing tether, SQLAlchemy and psycopg costs most of a second; the fault-injection tests
start hundreds of processes, so they fork them from this zygote instead. Each job line on stdin
becomes a new process (``os.fork``): a new pid, which opens its own store connection from the
URL, runs :func:`harness.child.one_job`, and may SIGKILL itself. The zygote holds no
connection and runs no thread, so forking it is safe; it answers one JSON line per job with the
child's pid as it starts (``{"forked": pid}``), then its exit status (negative: killed by
that signal), like ``subprocess`` would.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback

import tether.runtime.runner
import tether.stores.postgres
import tether.stores.sqlite
from harness import child, tasks


def _status(raw: int) -> int:
    if os.WIFSIGNALED(raw):
        return -os.WTERMSIG(raw)
    return os.WEXITSTATUS(raw)


def _fork(job: dict[str, object]) -> tuple[int, int]:
    pid = os.fork()
    if pid == 0:  # the child: a new process
        code = 1
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            code = child.one_job(job)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    print(json.dumps({"forked": pid}), flush=True)
    _, raw = os.waitpid(pid, 0)
    return pid, _status(raw)


def main() -> int:
    assert tether.runtime.runner and tether.stores.postgres and tether.stores.sqlite
    tasks.example_tasks()  # import the examples' task modules once, before any fork
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        if line.strip():
            pid, status = _fork(json.loads(line))
            print(json.dumps({"pid": pid, "status": status}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
