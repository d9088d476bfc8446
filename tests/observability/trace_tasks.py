"""Tasks of the trace tests: each makes its own span with the OpenTelemetry API (as an
instrumented library would), and ``flaky`` fails its first two calls (counted in $TRACE_COUNTER)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

from opentelemetry import trace

import tether

tracer = trace.get_tracer("trace_tasks")


@tether.task("t.flaky")
def flaky() -> str:
    counter = Path(os.environ["TRACE_COUNTER"])
    calls = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(calls + 1))
    if calls < 2:
        raise ConnectionError(f"call {calls + 1} fails")
    return "ok"


@tether.task("t.item")
def item(x: int) -> int:
    """Double a number.

    Args:
        x: The number.
    """
    with tracer.start_as_current_span("task.own", attributes={"x": x}):
        return x * 2


@tether.task("t.leak")
def leak(key: str) -> str:
    raise RuntimeError(f"refused with key {key}")


class Spill(Exception):
    """An attacker's exception: the value it is given is in its message, its arguments and
    attributes a careless tracer might read (``error.type``, ``error.message``, ``reason``)."""

    def __init__(self, value: str) -> None:
        super().__init__(f"refused {value}", value)
        self.error = SimpleNamespace(type=value, message=value)
        self.reason = value


@tether.task("t.spill")
def spill(key: str) -> str:
    raise Spill(key)


@tether.task("t.slow")
def slow(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


@tether.task("t.stall")
def stall() -> str:
    """The first call says so (file ``blocked``) and waits for the file ``release``; later
    calls return at once (``$TRACE_GATE`` names the directory)."""
    import logging
    import time

    gate = Path(os.environ["TRACE_GATE"])
    logging.getLogger("trace_tasks").info("stall called")
    if (gate / "blocked").exists():
        return "again"
    (gate / "blocked").write_text(str(os.getpid()))
    while not (gate / "release").exists():
        time.sleep(0.05)
    return "first"


@tether.task("t.meet")
def meet(parties: int) -> int:
    """A barrier of processes: records this process in ``$TRACE_GATE`` and waits until
    ``parties`` distinct processes have (so each of that many workers holds a run at once);
    later calls pass at once. Fails after two minutes."""
    import time

    gate = Path(os.environ["TRACE_GATE"])
    (gate / str(os.getpid())).write_text("")
    deadline = time.monotonic() + 120
    while len(list(gate.iterdir())) < parties:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(list(gate.iterdir()))} of {parties} processes met")
        time.sleep(0.05)
    return parties


@tether.task("t.poll")
def poll() -> dict[str, int]:
    """A status poll: the first call raises, the next ones count up (in $TRACE_COUNTER)."""
    counter = Path(os.environ["TRACE_COUNTER"])
    calls = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(calls + 1))
    if calls == 0:
        raise TimeoutError("the status endpoint timed out")
    return {"n": calls}
