"""A process that fires schedules once: ``python schedule_child.py URL NOW EFFECTS [kill]``.

It opens the store, prints ``ready``, waits for a line on stdin (the parent's barrier), then
calls fire_schedules at ``NOW`` (Unix seconds) with a submit that runs the run in place; each
run's task appends its execution id to EFFECTS. It prints the ids it fired as JSON. With
``kill``, the submit prints ``submitted`` after the run and blocks: the parent SIGKILLs it
between submitting and advancing.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from typing import Any

from tether.compiler.plan import Plan
from tether.runtime.runner import Runner
from tether.stores.open import open_checkpointer
from tether.trigger import Trigger
from tether.workers.schedules import fire_schedules


def main() -> None:
    url, now, effects = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    kill = sys.argv[4:] == ["kill"]
    store = open_checkpointer(url)

    def build(region: str, run_id: str) -> str:
        fd = os.open(effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (run_id + "\n").encode())
        finally:
            os.close(fd)
        return region

    def submit(plan: Plan, inputs: dict[str, Any], execution_id: str, queue: str | None,
               trigger: Trigger) -> None:
        Runner(plan, store, {"reports.build": build}).run(inputs, execution_id=execution_id)
        if kill:
            print("submitted", flush=True)
            sys.stdin.readline()  # blocks until SIGKILL

    print("ready", flush=True)
    sys.stdin.readline()
    fired = fire_schedules(store, datetime.fromtimestamp(now, UTC), submit)
    print(json.dumps(fired), flush=True)


if __name__ == "__main__":
    main()
