"""Deferred node spans (``observability/deferred.py``): built off the run thread, handed to the
SDK provider's processors, never lost (run end, ``force_flush``, ``shutdown``, process exit),
and real SDK spans where deferring is not possible or is turned off. Each case runs in a new
process: the OpenTelemetry API takes one global provider per process."""

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
name: deferred
inputs:
  skip: {type: boolean, default: true}
nodes:
  a:
    task: t.tag
    with: {x: 1}
  gate:
    needs: [a]
    task: t.tag
    with: {x: 2}
    when: "{{ not inputs.skip }}"
  fan:
    needs: [a]
    for_each: [1, 2]
    task: t.tag
    with: {x: "{{ item }}"}
"""

SCRIPT = """\
import json, os, sys, threading
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ConcurrentMultiSpanProcessor, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tether.runtime.runner import Runner

mode = sys.argv[2]

class Seen(SpanProcessor):
    def __init__(self):
        self.started, self.ended = [], []
    def on_start(self, span, parent_context=None):
        self.started.append(span.name)
    def on_end(self, span):
        self.ended.append((span.name, threading.current_thread().name))

class Broken(SpanProcessor):
    def on_end(self, span):
        if span.name == "tether.node":
            raise RuntimeError("a broken processor")

provider = TracerProvider(
    resource=Resource.create({"service.name": "deferred-test"}),
    active_span_processor=ConcurrentMultiSpanProcessor() if mode == "concurrent" else None)
seen = Seen()
exporter = InMemorySpanExporter()
provider.add_span_processor(seen)
# a batch that would not export for an hour unless flushed
provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=3_600_000))
if mode == "broken":
    provider.add_span_processor(Broken())
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("task")

def tag(x):
    current = trace.get_current_span()
    current.set_attribute("order.id", x)
    current.add_event("order.seen", {"order.id": x})
    with tracer.start_as_current_span("task.own"):
        return x

result = Runner(sys.argv[1], None, {"t.tag": tag}).run()
assert str(result.status) == "completed", result
ended_at_run_end = sorted(name for name, _ in seen.ended)
provider.force_flush()
spans = exporter.get_finished_spans()
print(json.dumps({
    "ended_at_run_end": ended_at_run_end,
    "started": sorted(seen.started),
    "threads": sorted({thread for name, thread in seen.ended if name == "tether.node"}),
    "spans": [{
        "name": s.name, "span": s.context.span_id, "trace": s.context.trace_id,
        "flags": int(s.context.trace_flags), "parent": s.parent.span_id if s.parent else 0,
        "attributes": dict(s.attributes), "events": [(e.name, dict(e.attributes))
                                                     for e in s.events],
        "service": s.resource.attributes.get("service.name"),
        "scope": s.instrumentation_scope.name, "start": s.start_time, "end": s.end_time,
        "status": s.status.status_code.name} for s in spans]}))
"""


def _run(tmp_path: Path, mode: str, **env: str) -> dict[str, Any]:
    flow = tmp_path / "deferred.yaml"
    flow.write_text(FLOW, encoding="utf-8")
    script = tmp_path / "deferred_script.py"
    script.write_text(SCRIPT, encoding="utf-8")
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("OTEL_") and k != "TETHER_DEFERRED_SPANS"}
    out = subprocess.run([sys.executable, str(script), str(flow), mode], capture_output=True,
                         text=True, timeout=CHILD_TIMEOUT, env={**clean, **env})
    assert out.returncode == 0, out.stderr
    found: dict[str, Any] = json.loads(out.stdout)
    found["stderr"] = out.stderr
    return found


NODES = ["tether.node"] * 4  # a, the skipped gate, two fan elements


def test_node_spans_are_built_off_the_run_thread_and_reach_the_processors_by_run_end(
        tmp_path: Path) -> None:
    found = _run(tmp_path, "sdk")
    # every node span reached the processors before the run's span ended
    assert found["ended_at_run_end"] == sorted(
        ["task.own"] * 3 + NODES + ["tether.run"])
    assert found["threads"] == ["tether-spans"]  # not the run thread
    assert sorted(found["started"]) == ["task.own"] * 3 + ["tether.run"]  # no on_start
    spans = found["spans"]
    run = next(s for s in spans if s["name"] == "tether.run")
    nodes = [s for s in spans if s["name"] == "tether.node"]
    assert len(nodes) == 4 and len(spans) == 8
    for node in nodes:
        assert (node["trace"], node["parent"], node["flags"]) == (
            run["trace"], run["span"], run["flags"])
        assert (node["service"], node["scope"]) == ("deferred-test", "tether")
        assert run["start"] <= node["start"] <= node["end"] <= run["end"]
    assert len({s["span"] for s in spans}) == len(spans)
    by_address = {s["attributes"].get("tether.node.address", s["attributes"]
                                      ["tether.node.id"]): s for s in nodes}
    assert by_address["gate"]["attributes"]["tether.node.skip_reason"] == "when"
    for address, x in (("a", 1), ("fan/item:0", 1), ("fan/item:1", 2)):
        node = by_address[address]
        # the task's own calls on the current span land on its node span
        assert node["attributes"]["order.id"] == x
        assert node["attributes"]["tether.node.status"] == "completed"
        assert node["events"] == [["order.seen", {"order.id": x}]]
        own = [s for s in spans if s["name"] == "task.own" and s["parent"] == node["span"]]
        assert len(own) == 1 and own[0]["trace"] == run["trace"]


@pytest.mark.parametrize("mode", ["off", "concurrent"])
def test_real_sdk_spans_when_turned_off_or_the_processors_run_concurrently(
        tmp_path: Path, mode: str) -> None:
    found = _run(tmp_path, mode, **({"TETHER_DEFERRED_SPANS": "0"} if mode == "off" else {}))
    assert sorted(found["started"]) == ["task.own"] * 3 + NODES + ["tether.run"]
    assert "tether-spans" not in found["threads"]
    names = sorted(s["name"] for s in found["spans"])
    assert names == sorted(["task.own"] * 3 + NODES + ["tether.run"])


def test_a_processor_failing_on_node_spans_stops_neither_the_run_nor_the_drain(
        tmp_path: Path) -> None:
    """(A real span's processor error would have reached the runtime; a deferred one's is
    logged, and the drain goes on with the next span.)"""
    found = _run(tmp_path, "broken")
    assert sorted(s["name"] for s in found["spans"]) == sorted(
        ["task.own"] * 3 + NODES + ["tether.run"])
    assert "a span processor failed on a tether.node span" in found["stderr"]


EXIT = """\
import sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from tether.observability import deferred

provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(),
                                               schedule_delay_millis=3_600_000))
tracer = provider.get_tracer("tether")
pipe = deferred.pipe_for(tracer)
assert pipe is not None
deferred.INTERVAL = 3600.0  # the drain thread sleeps: only the exit path can deliver
with tracer.start_as_current_span("outer") as outer:
    for index in range(3):
        pipe.span("queued", outer.get_span_context(), {"index": index}).end()
if sys.argv[1] == "shutdown":
    provider.shutdown()
"""


@pytest.mark.parametrize("how", ["shutdown", "exit"])
def test_spans_still_queued_are_exported_at_shutdown_and_at_process_exit(
        tmp_path: Path, how: str) -> None:
    script = tmp_path / "exit.py"
    script.write_text(EXIT, encoding="utf-8")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, str(script), how], capture_output=True, text=True,
                         timeout=CHILD_TIMEOUT, env=clean)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count('"name": "queued"') == 3, out.stdout
    assert out.stdout.count('"name": "outer"') == 1


def test_the_private_sdk_members_tether_relies_on_are_there() -> None:
    """``deferred.put_first`` reaches ``SynchronousMultiSpanProcessor._span_processors`` and
    ``._lock``: if an SDK release changes them, this fails (and tether falls back to real
    spans rather than break)."""
    from opentelemetry.sdk.trace import SpanProcessor, SynchronousMultiSpanProcessor

    from tether.observability.deferred import put_first

    multi = SynchronousMultiSpanProcessor()
    first, second = SpanProcessor(), SpanProcessor()
    multi.add_span_processor(second)
    assert isinstance(multi._span_processors, tuple)
    assert hasattr(multi._lock, "acquire")
    put_first(multi, first)
    assert multi._span_processors == (first, second)


def test_node_spans_set_the_api_context_variable_itself() -> None:
    """``spans.NodeSpan`` sets ``ContextVarsRuntimeContext._current_context`` directly (one
    call, not ``attach``'s three): if the API changes it, this fails (and tether falls back
    to ``attach`` and ``detach``)."""
    from opentelemetry import context, trace

    from tether.observability import spans

    assert spans._VAR is not None
    assert spans._VAR is context._RUNTIME_CONTEXT._current_context  # type: ignore[attr-defined]
    span = trace.NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)
    token = spans._SET(context.Context({spans.SPAN_KEY: span}))
    assert trace.get_current_span() is span
    spans._RESET(token)
    assert trace.get_current_span() is not span


FORK = """\
import os, sys
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tether.observability import deferred

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
tracer = provider.get_tracer("tether")
pipe = deferred.pipe_for(tracer)
with tracer.start_as_current_span("outer") as outer:
    parent = outer.get_span_context()
    pipe.span("in-parent", parent, {}).end()
    pipe.lock.acquire()  # as if the drain thread were mid-round when the process forks
    child = os.fork()
    if child == 0:
        pipe.span("in-child", parent, {}).end()
        pipe.flush()
        names = sorted(s.name for s in exporter.get_finished_spans())
        os._exit(0 if names == ["in-child"] and pipe.thread.is_alive() else 3)
    pipe.lock.release()
    _, code = os.waitpid(child, 0)
pipe.flush()
print(os.waitstatus_to_exitcode(code), sorted(s.name for s in exporter.get_finished_spans()))
"""


def test_a_forked_child_has_its_own_queue_and_drain_thread(tmp_path: Path) -> None:
    """The parent's queued spans stay the parent's; the child's lock is not the one the
    parent's drain thread held at the fork, and its spans are drained by its own thread."""
    script = tmp_path / "fork.py"
    script.write_text(FORK, encoding="utf-8")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=CHILD_TIMEOUT, env=clean)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "0 ['in-parent', 'outer']"
