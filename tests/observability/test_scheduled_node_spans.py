"""Node spans opened and closed by the scheduler (no coroutine wraps a unit): units started as
asyncio tasks (parallel nodes, for_each elements) run inside their own span, a retry inside
such a task opens the next attempt's span there, and the scheduler's context is the run's
again once each unit started or ended. Deferred spans, real SDK spans, and either with the
metrics on. Each case runs in a new process (one global provider per process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

CHILD_TIMEOUT = 180

FLOW = """\
tether: 1
name: scheduled
nodes:
  left:
    task: t.flaky
    with: {name: left}
    retry: {max_attempts: 2, backoff: 1ms}
  right:
    task: t.flaky
    with: {name: right}
    retry: {max_attempts: 2, backoff: 1ms}
  fan:
    for_each: [1, 2]
    task: t.flaky
    with: {name: "fan{{ item }}"}
    retry: {max_attempts: 2, backoff: 1ms}
  after:
    needs: [left, right, fan]
    task: t.flaky
    with: {name: after}
"""

SCRIPT = """\
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tether.runtime.runner import Runner

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
if sys.argv[2] == "metrics":
    from prometheus_client import CollectorRegistry
    from tether.observability import observer
    from tether.observability.metrics import Metrics
    observer.SINK = Metrics(CollectorRegistry())
tracer = trace.get_tracer("task")
calls = {}
current = {}

def flaky(name: str) -> str:
    calls[name] = calls.get(name, 0) + 1
    with tracer.start_as_current_span("task.own", attributes={"name": name}):
        current[name] = trace.get_current_span().get_span_context().span_id
    if name != "after" and calls[name] == 1:
        raise ConnectionError("first call")
    return name

result = Runner(sys.argv[1], None, {"t.flaky": flaky}).run()
provider.force_flush()
print(json.dumps({"status": result.status, "after": trace.get_current_span().is_recording(),
                  "spans": [{"name": s.name, "span": s.context.span_id,
                             "parent": s.parent.span_id if s.parent else 0,
                             "attributes": dict(s.attributes),
                             "links": [link.context.span_id for link in s.links],
                             "status": s.status.status_code.name}
                            for s in exporter.get_finished_spans()]}))
"""


@pytest.mark.parametrize(("mode", "deferred"), [
    ("traces", "1"), ("traces", "0"), ("metrics", "1"), ("metrics", "0")])
def test_units_started_as_tasks_run_and_retry_inside_their_own_node_spans(
        tmp_path: Path, mode: str, deferred: str) -> None:
    flow, script = tmp_path / "scheduled.yaml", tmp_path / "scheduled_script.py"
    flow.write_text(FLOW, encoding="utf-8")
    script.write_text(SCRIPT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["TETHER_DEFERRED_SPANS"] = deferred
    child = subprocess.run([sys.executable, str(script), str(flow), mode], env=env,
                           capture_output=True, text=True, timeout=CHILD_TIMEOUT)
    assert child.returncode == 0, child.stderr
    found: dict[str, Any] = json.loads(child.stdout)
    assert found["status"] == "completed"
    assert found["after"] is False  # nothing of the run is current after it
    spans = found["spans"]
    run = next(s for s in spans if s["name"] == "tether.run")
    nodes = [s for s in spans if s["name"] == "tether.node"]
    own = [s for s in spans if s["name"] == "task.own"]
    by_id = {s["span"]: s for s in spans}
    assert all(s["parent"] == run["span"] for s in nodes)  # never under a sibling's span
    names = ["left", "right", "fan1", "fan2"]
    for name in names:
        mine = [s for s in own if s["attributes"]["name"] == name]
        assert len(mine) == 2, name
        first, second = (by_id[s["parent"]] for s in mine)  # each call under its attempt
        assert first["name"] == second["name"] == "tether.node"
        assert (first["attributes"]["tether.node.attempt"],
                first["attributes"]["tether.node.status"], first["status"]) == (
            1, "retried", "ERROR")
        assert (second["attributes"]["tether.node.attempt"],
                second["attributes"]["tether.node.status"], second["status"]) == (
            2, "completed", "UNSET")
        assert second["links"] == [first["span"]]
        if name.startswith("fan"):
            assert first["attributes"]["tether.node.address"] == \
                f"fan/item:{int(name[3:]) - 1}"
    after = [s for s in own if s["attributes"]["name"] == "after"]
    assert len(after) == 1
    node = by_id[after[0]["parent"]]
    assert (node["attributes"]["tether.node.id"], node["attributes"]["tether.node.status"],
            node["parent"]) == ("after", "completed", run["span"])
    assert len(nodes) == 2 * len(names) + 1
