"""Traces, end to end: child processes (``tether run``, ``tether resume``) export their spans
over OTLP/HTTP to a real receiver in the test, which decodes them with opentelemetry-proto;
the tests assert the tree, shape by shape."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from otlp_receiver import Received, Receiver, children, named

HERE = Path(__file__).resolve().parent
TASKS = str(HERE / "trace_tasks.py")
CHILD_TIMEOUT = 180

WORKFLOW = """\
tether: 1
name: traced
inputs:
  skip: {type: boolean, default: true}
nodes:
  flaky:
    task: t.flaky
    retry: {max_attempts: 3, backoff: 10ms}
  maybe:
    task: t.item
    with: {x: 1}
    when: "{{ not inputs.skip }}"
  fan:
    needs: [flaky]
    for_each: [1, 2, 3]
    task: t.item
    with: {x: "{{ item }}"}
  review:
    needs: [fan]
    approval: {reason: check the doubled items, form: {approved: {type: boolean}}}
output: "{{ nodes.fan.output }}"
"""


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as started:
        yield started


def tether(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``tether ARGS`` in a new process, with ``env`` added to this one's environment."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run([sys.executable, "-m", "tether", *args], capture_output=True,
                          text=True, timeout=CHILD_TIMEOUT, env={**clean, **env}, cwd=cwd)


def _json(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.stdout, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _one(spans: list[Received]) -> Received:
    assert len(spans) == 1, spans
    return spans[0]


def test_retry_skip_fan_out_and_an_approval_answered_by_another_process_make_one_trace(
        tmp_path: Path, receiver: Receiver) -> None:
    flow = tmp_path / "traced.yaml"
    flow.write_text(WORKFLOW, encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'tether.db'}"
    env = {**receiver.env(), "TRACE_COUNTER": str(tmp_path / "counter")}
    first = tether("run", str(flow), "--tasks", TASKS, "--db", db, "--json", "-q", env=env,
                   cwd=tmp_path)
    paused = _json(first)
    assert paused["status"] == "paused", first.stderr
    run_id = paused["execution_id"]
    spans = receiver.wait_for(lambda s: len(named(s, "tether.run")) == 1)

    # the next "day", another process answers: its spans continue the same trace
    second = tether("resume", run_id, "--value", '{"approved": true}', "--tasks", TASKS,
                    "--db", db, "--json", "-q", env=env, cwd=tmp_path)
    assert _json(second)["status"] == "completed", second.stderr
    spans = receiver.wait_for(lambda s: len(named(s, "tether.run")) == 2)

    assert {s.trace_id for s in spans} == {spans[0].trace_id}  # one trace for the run
    assert {s.service for s in spans} == {"tether-test"}
    runs = sorted(named(spans, "tether.run"), key=lambda s: s.attributes["tether.run.attempt"])
    opening, resumed = runs
    assert opening.parent_id == ""  # no caller span: the run's first span is the root
    assert opening.attributes["tether.execution_id"] == run_id
    assert opening.attributes["tether.workflow"] == "traced"
    assert opening.attributes["tether.run.status"] == "paused"
    assert resumed.attributes["tether.run.status"] == "completed"
    assert resumed.parent_id == opening.span_id
    assert resumed.links == [  # the wait for the answer, as a link
        (opening.trace_id, opening.span_id,
         {"tether.link": "previous_attempt", "tether.wait": "paused"})]

    # a span per attempt: two failed (retried after their backoff), the third completed
    flaky = sorted(named(spans, "tether.node", tether__node__id="flaky"),
                   key=lambda s: s.attributes["tether.node.attempt"])
    assert [s.attributes["tether.node.attempt"] for s in flaky] == [1, 2, 3]
    assert [s.attributes["tether.node.status"] for s in flaky] == [
        "retried", "retried", "completed"]
    assert [s.status_code for s in flaky] == [2, 2, 0]  # ERROR, ERROR, UNSET
    for span in flaky:
        assert span.parent_id == opening.span_id
        assert span.attributes["tether.node.kind"] == "task"
    assert [s.attributes.get("tether.node.retry.backoff_seconds") for s in flaky] == [
        0.01, 0.02, None]  # exponential: 10 ms, then 20 ms
    assert [s.attributes.get("error.type") for s in flaky] == [
        "ConnectionError", "ConnectionError", None]
    assert [[(n, a) for n, a in s.events] for s in flaky] == [
        [("tether.node.retry", {"tether.node.attempt": 1, "error.type": "ConnectionError",
                                "tether.node.retry.backoff_seconds": 0.01})],
        [("tether.node.retry", {"tether.node.attempt": 2, "error.type": "ConnectionError",
                                "tether.node.retry.backoff_seconds": 0.02})], []]
    assert flaky[0].links == []  # each later attempt links to the one before
    assert [s.links for s in flaky[1:]] == [
        [(before.trace_id, before.span_id, {"tether.link": "previous_attempt"})]
        for before in flaky[:2]]

    maybe = _one(named(spans, "tether.node", tether__node__id="maybe"))
    assert maybe.parent_id == opening.span_id
    assert (maybe.attributes["tether.node.status"],
            maybe.attributes["tether.node.skip_reason"]) == ("skipped", "when")

    items = named(spans, "tether.node", tether__node__id="fan")
    assert sorted(s.attributes["tether.node.address"] for s in items) == [
        "fan/item:0", "fan/item:1", "fan/item:2"]
    for element in items:
        assert element.parent_id == opening.span_id
        assert element.attributes["tether.node.status"] == "completed"
        own = _one(list(children(spans, element)))  # the task's own span nests under it
        assert own.name == "task.own"
    assert sorted(s.attributes["x"] for s in named(spans, "task.own")) == [1, 2, 3]

    asked, answered = sorted(named(spans, "tether.node", tether__node__id="review"),
                             key=lambda s: s.attributes["tether.node.status"] != "interrupted")
    assert asked.parent_id == opening.span_id
    assert asked.attributes["tether.node.status"] == "interrupted"
    assert [(n, a) for n, a in asked.events] == [
        ("tether.approval", {"tether.approval.state": "requested"})]
    assert answered.parent_id == resumed.span_id
    assert answered.attributes["tether.node.status"] == "completed"
    assert [(n, a) for n, a in answered.events] == [
        ("tether.approval", {"tether.approval.state": "answered"})]
    # nothing else: the resumed attempt runs only what was left
    assert len(spans) == 2 + 3 + 1 + 3 + 3 + 2


def test_console_exporter_prints_the_spans_of_tether_run_with_no_other_set_up(
        tmp_path: Path) -> None:
    flow = tmp_path / "one.yaml"
    flow.write_text("tether: 1\nname: one\nnodes:\n  a:\n    task: t.item\n"
                    "    with: {x: 4}\noutput: \"{{ nodes.a.output }}\"\n", encoding="utf-8")
    result = tether("run", str(flow), "--tasks", TASKS, "--db",
                    f"sqlite:///{tmp_path / 'tether.db'}", "-q",
                    env={"OTEL_TRACES_EXPORTER": "console"}, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert '"name": "tether.run"' in result.stdout
    assert '"name": "tether.node"' in result.stdout
    assert '"name": "task.own"' in result.stdout
    assert '"tether.node.id": "a"' in result.stdout


def test_without_an_exporter_no_span_is_made_and_opentelemetry_is_not_imported(
        tmp_path: Path) -> None:
    """No cost when not enabled: a run never imports the OpenTelemetry API for nothing."""
    flow = tmp_path / "one.yaml"
    flow.write_text("tether: 1\nname: one\nnodes:\n  a:\n    task: t.noop\n", encoding="utf-8")
    script = (
        "import sys, tether\n"
        "from tether.runtime.runner import Runner\n"
        "result = Runner(sys.argv[1], None, {'t.noop': lambda: 1}).run()\n"
        "assert result.status == 'completed', result\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, "-c", script, str(flow)], capture_output=True,
                         text=True, timeout=CHILD_TIMEOUT, env=clean, check=True)
    assert out.stdout.strip() == "[]"


HOST = """\
import sys
import time
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from tether.runtime.runner import Runner
from tether.stores.open import open_checkpointer
import trace_tasks

provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
    endpoint=sys.argv[3] + "/v1/traces")))
trace.set_tracer_provider(provider)
store = open_checkpointer(sys.argv[2])
with trace.get_tracer("host").start_as_current_span("POST /orders"):
    first = Runner(sys.argv[1], store).run({"key": "s3cr3t-v4lue-42"})
fork = Runner(sys.argv[1], store).fork(first.execution_id)
print(first.status, fork.status)
provider.shutdown()
"""

SECRET_FLOW = """\
tether: 1
name: host
inputs:
  key: {type: string}
secrets: [TRACE_KEY]
nodes:
  a:
    task: t.item
    with: {x: 2}
  b:
    needs: [a]
    task: t.leak
    with: {key: "{{ secrets.TRACE_KEY }}"}
  c:
    task: t.spill
    with: {key: "{{ secrets.TRACE_KEY }}"}
    retry: {max_attempts: 2, backoff: 10ms}
"""


def test_a_host_provider_and_span_parent_the_run_a_fork_links_to_it_and_no_secret_leaks(
        tmp_path: Path, receiver: Receiver) -> None:
    """The host application's own TracerProvider is used as it is; the span active when it
    starts a run is the run's parent; a fork of that run is linked to its origin; a secret's
    value appears in no attribute, event or status (the failing task put it in its message)."""
    flow = tmp_path / "host.yaml"
    flow.write_text(SECRET_FLOW, encoding="utf-8")
    script = tmp_path / "host.py"
    script.write_text(HOST, encoding="utf-8")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env = {**clean, "TRACE_KEY": "s3cr3t-v4lue-42",
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, str(script), str(flow),
                          f"sqlite:///{tmp_path / 'tether.db'}", receiver.endpoint],
                         capture_output=True, text=True, timeout=CHILD_TIMEOUT, env=env)
    assert out.stdout.split() == ["failed", "failed"], out.stderr
    spans = receiver.wait_for(lambda s: len(named(s, "tether.run")) == 2)
    request = _one(named(spans, "POST /orders"))
    first = _one([s for s in named(spans, "tether.run") if s.parent_id == request.span_id])
    assert first.trace_id == request.trace_id
    assert first.status_code == 2  # ERROR: the run failed
    fork = _one([s for s in named(spans, "tether.run") if s is not first])
    assert fork.trace_id != first.trace_id and fork.parent_id == ""
    assert [(t, s, a["tether.link"]) for t, s, a in fork.links] == [
        (first.trace_id, first.span_id, "fork_origin")]
    failed = [s for s in named(spans, "tether.node", tether__node__id="b")]
    assert failed and all(s.status_code == 2 for s in failed)
    assert all(s.attributes["error.type"] == "RuntimeError" for s in failed)
    assert all("***" in s.status_message for s in failed)
    # the attacker's exception, retried: its raw self at the retry, the runtime's at the end
    spilled = sorted(named(spans, "tether.node", tether__node__id="c"),
                     key=lambda s: (s.trace_id != first.trace_id,
                                    s.attributes["tether.node.attempt"]))
    assert [(s.attributes["tether.node.attempt"], s.attributes["tether.node.status"],
             s.attributes["error.type"]) for s in spilled[:2]] == [
        (1, "retried", "Spill"), (2, "failed", "Spill")]
    assert spilled[0].status_message == ""  # a raw exception's message is never taken
    assert "***" in spilled[1].status_message  # the runtime's, masked
    assert "s3cr3t-v4lue-42" not in repr(spans)


def test_an_agent_run_has_a_turn_span_per_model_call_and_a_tool_span_per_tool_call(
        tmp_path: Path, receiver: Receiver) -> None:
    from tether.testing import ScriptedModelServer, ScriptedReply, ScriptedToolCall

    with ScriptedModelServer() as server:
        server.add_replies([
            ScriptedReply(text="Doubling.", tool_calls=(
                ScriptedToolCall(name="t_item", arguments={"x": 21}),),
                usage={"input_tokens": 100, "output_tokens": 20}),
            ScriptedReply(text="42", usage={"input_tokens": 150, "output_tokens": 5}),
        ])
        flow = tmp_path / "agent.yaml"
        flow.write_text(json.dumps({
            "tether": 1, "name": "agentic", "nodes": {"helper": {"agent": {
                "model": {"provider": "openai", "name": "test-model",
                          "base_url": server.openai_base_url},
                "max_turns": 4, "instructions": "You double numbers.",
                "prompt": "Double 21", "tools": ["t.item"]}}},
            "output": "{{ nodes.helper.output }}"}), encoding="utf-8")
        result = tether("run", str(flow), "--tasks", TASKS, "--db",
                        f"sqlite:///{tmp_path / 'tether.db'}", "--json", "-q",
                        env={**receiver.env(), "OPENAI_API_KEY": "sk-test-key-0123456789"},
                        cwd=tmp_path)
    assert _json(result)["status"] == "completed", result.stdout
    spans = receiver.wait_for(lambda s: len(named(s, "tether.run")) == 1)
    run = _one(named(spans, "tether.run"))
    node = _one(named(spans, "tether.node", tether__node__id="helper"))
    assert node.parent_id == run.span_id and node.attributes["tether.node.kind"] == "agent"
    turns = sorted(named(spans, "tether.agent.turn"),
                   key=lambda s: s.attributes["tether.agent.turn"])
    assert [s.parent_id for s in turns] == [node.span_id, node.span_id]
    assert [(s.attributes["gen_ai.system"], s.attributes["gen_ai.provider.name"],
             s.attributes["gen_ai.request.model"], s.attributes["gen_ai.usage.input_tokens"],
             s.attributes["gen_ai.usage.output_tokens"]) for s in turns] == [
        ("openai", "openai", "test-model", 100, 20), ("openai", "openai", "test-model", 150, 5)]
    tool = _one(named(spans, "tether.agent.tool"))
    assert tool.parent_id == node.span_id
    assert tool.attributes["gen_ai.tool.name"] == "t_item"  # the name the model called
    assert tool.attributes["tether.agent.name"] == "helper"
    own = _one(named(spans, "task.own"))  # the tool's body nests under its tool span
    assert own.parent_id == tool.span_id and own.attributes["x"] == 21


def _wait_file(path: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + CHILD_TIMEOUT
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def _worker(db: str, env: dict[str, str], log: Path) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.Popen(
        [sys.executable, "-m", "tether", "worker", "--tasks", TASKS, "--db", db, "--lease", "2",
         "--poll", "0.2", "--log-format", "json"],
        stdout=subprocess.DEVNULL, stderr=open(log, "w"), text=True,
        env={**clean, **env})


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=CHILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_a_worker_stopped_past_its_lease_records_the_loss_and_the_taker_continues_the_trace(
        tmp_path: Path, receiver: Receiver) -> None:
    """Worker A claims the run and is SIGSTOPped inside its task past its 2 s lease; worker B
    claims it and completes it; A, woken, finds its lease lost. A's ``tether.run`` span has
    the claim and the ``tether.lease_lost`` events; B's is in the same trace, its parent the
    run's first span, linked to it. A's JSON log lines written inside the task carry the
    trace and span ids of the task's node span and the run's id."""
    from tether.runtime.runner import Runner
    from tether.stores.open import open_checkpointer

    flow = tmp_path / "stall.yaml"
    flow.write_text("tether: 1\nname: stall\nnodes:\n  s:\n    task: t.stall\n",
                    encoding="utf-8")
    gate = tmp_path / "gate"
    gate.mkdir()
    db = f"sqlite:///{tmp_path / 'tether.db'}"
    store = open_checkpointer(db)
    run_id = Runner(flow, store, {}).submit()
    env = {**receiver.env(), "TRACE_GATE": str(gate)}
    first = _worker(db, env, tmp_path / "a.log")
    second: subprocess.Popen[str] | None = None
    try:
        _wait_file(gate / "blocked", first)
        os.kill(first.pid, signal.SIGSTOP)
        try:
            deadline = time.monotonic() + CHILD_TIMEOUT
            while (store.get_run(run_id).lease_until or 0) > time.time() - 0.5:
                assert time.monotonic() < deadline, "the lease never expired"
                time.sleep(0.1)
            second = _worker(db, env, tmp_path / "b.log")
            while store.get_run(run_id).status != "completed":
                assert second.poll() is None and time.monotonic() < deadline, \
                    (tmp_path / "b.log").read_text()
                time.sleep(0.1)
            (gate / "release").write_text("")
        finally:
            os.kill(first.pid, signal.SIGCONT)
        _stop(first)
        spans = receiver.wait_for(lambda s: len(named(s, "tether.run")) == 2)
    finally:
        _stop(first)
        if second is not None:
            _stop(second)
        store.close()
    taker = _one(named(spans, "tether.run", tether__run__status="completed"))
    loser = _one([s for s in named(spans, "tether.run") if s is not taker])
    assert loser.trace_id == taker.trace_id
    assert [name for name, _ in loser.events] == ["tether.claim", "tether.lease_lost"]
    assert loser.status_code == 2
    assert "another attempt took the run over" in loser.events[1][1]["tether.reason"]
    assert [name for name, _ in taker.events] == ["tether.claim"]
    assert taker.parent_id == loser.span_id
    assert [(s, a) for _, s, a in taker.links] == [  # no wait: it was taken over
        (loser.span_id, {"tether.link": "previous_attempt"})]
    lines = [json.loads(line) for line in (tmp_path / "a.log").read_text().splitlines()
             if line.startswith("{")]
    stalled = [line for line in lines if line["message"] == "stall called"]
    node = _one([s for s in named(spans, "tether.node", tether__node__id="s")
                 if s.parent_id == loser.span_id])
    assert [(line["trace_id"], line["span_id"], line["execution_id"], line["level"],
             line["logger"]) for line in stalled] == [
        (node.trace_id, node.span_id, run_id, "info", "trace_tasks")]


def test_an_unknown_exporter_is_named_in_a_warning_and_the_run_goes_on(tmp_path: Path) -> None:
    flow = tmp_path / "one.yaml"
    flow.write_text("tether: 1\nname: one\nnodes:\n  a:\n    task: t.item\n"
                    "    with: {x: 4}\n", encoding="utf-8")
    result = tether("run", str(flow), "--tasks", TASKS, "--db",
                    f"sqlite:///{tmp_path / 'tether.db'}", "-q",
                    env={"OTEL_TRACES_EXPORTER": "zipkn"}, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "OTEL_TRACES_EXPORTER: unknown exporter 'zipkn' (tether knows console, otlp, " \
        "none)" in result.stderr
    assert "Traceback" not in result.stderr and '"name"' not in result.stdout


def test_otel_sdk_disabled_wins_over_an_exporter(tmp_path: Path) -> None:
    flow = tmp_path / "one.yaml"
    flow.write_text("tether: 1\nname: one\nnodes:\n  a:\n    task: t.item\n"
                    "    with: {x: 4}\n", encoding="utf-8")
    result = tether("run", str(flow), "--tasks", TASKS, "--db",
                    f"sqlite:///{tmp_path / 'tether.db'}", "-q",
                    env={"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"},
                    cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "tether.run" not in result.stdout


SUBMITTER = """\
import sys
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from tether.runtime.runner import Runner
from tether.stores.open import open_checkpointer

provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
    endpoint=sys.argv[3] + "/v1/traces")))
trace.set_tracer_provider(provider)
store = open_checkpointer(sys.argv[2])
with trace.get_tracer("web").start_as_current_span("POST /jobs"):
    print(Runner(sys.argv[1], store, {}).submit())
provider.shutdown()
"""


def test_the_span_that_submits_a_run_is_the_parent_of_the_run_a_worker_executes(
        tmp_path: Path, receiver: Receiver) -> None:
    flow = tmp_path / "one.yaml"
    flow.write_text("tether: 1\nname: queued\nnodes:\n  a:\n    task: t.item\n"
                    "    with: {x: 5}\n", encoding="utf-8")
    script = tmp_path / "submit.py"
    script.write_text(SUBMITTER, encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'tether.db'}"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, str(script), str(flow), db, receiver.endpoint],
                         capture_output=True, text=True, timeout=CHILD_TIMEOUT, env=clean)
    assert out.returncode == 0, out.stderr
    run_id = out.stdout.strip()
    worker = _worker(db, receiver.env(), tmp_path / "worker.log")
    try:
        spans = receiver.wait_for(lambda s: len(named(s, "tether.node")) == 1)
    finally:
        _stop(worker)
    spans = receiver.wait_for(lambda s: len(named(s, "tether.run")) == 1)
    request = _one(named(spans, "POST /jobs"))
    run = _one(named(spans, "tether.run"))
    assert run.attributes["tether.execution_id"] == run_id
    assert (run.trace_id, run.parent_id) == (request.trace_id, request.span_id)
    assert [name for name, _ in run.events] == ["tether.claim"]


PARALLEL = """\
import json, sys, threading
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tether.runtime.runner import Runner

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
calls: dict[int, int] = {}
lock = threading.Lock()

def shaky(x: int) -> int:
    with lock:
        calls[x] = calls.get(x, 0) + 1
        seen = calls[x]
    if seen <= x % 3:  # element 0 passes at once, 1 fails once, 2 twice
        raise TimeoutError(f"try {seen} of {x}")
    return x

result = Runner(sys.argv[1], None, {"t.shaky": shaky}).run()
print(json.dumps({"status": str(result.status), "spans": [
    {"name": s.name, "span": s.context.span_id, "parent": s.parent.span_id if s.parent else 0,
     "attributes": dict(s.attributes), "links": [l.context.span_id for l in s.links]}
    for s in exporter.get_finished_spans()]}))
"""


def test_concurrent_elements_retried_each_get_a_span_per_attempt_under_the_run(
        tmp_path: Path) -> None:
    """Three for_each elements run at once, retried 0, 1 and 2 times: each attempt is one
    span with the element's address, under the run, linked to its own previous attempt."""
    flow = tmp_path / "par.yaml"
    flow.write_text("tether: 1\nname: par\nnodes:\n  fan:\n    for_each: [0, 1, 2, 3, 4, 5]\n"
                    "    task: t.shaky\n    with: {x: \"{{ item }}\"}\n"
                    "    retry: {max_attempts: 3, backoff: 10ms}\n", encoding="utf-8")
    script = tmp_path / "par.py"
    script.write_text(PARALLEL, encoding="utf-8")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, str(script), str(flow)], capture_output=True,
                         text=True, timeout=CHILD_TIMEOUT, env=clean)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    assert found["status"] == "completed"
    spans = found["spans"]
    run = _one([s for s in spans if s["name"] == "tether.run"])
    nodes = [s for s in spans if s["name"] == "tether.node"]
    assert all(s["parent"] == run["span"] for s in nodes)
    by_id = {s["span"]: s for s in nodes}
    for index in range(6):
        mine = sorted((s for s in nodes
                       if s["attributes"]["tether.node.address"] == f"fan/item:{index}"),
                      key=lambda s: s["attributes"]["tether.node.attempt"])
        retries = index % 3
        assert [(s["attributes"]["tether.node.attempt"], s["attributes"]["tether.node.status"])
                for s in mine] == [(n + 1, "retried") for n in range(retries)] + [
            (retries + 1, "completed")], index
        assert all(s["attributes"]["tether.node.id"] == "fan" for s in mine)
        for before, after in itertools.pairwise(mine):
            assert after["links"] == [before["span"]]
            assert by_id[after["links"][0]]["attributes"]["tether.node.address"] == \
                f"fan/item:{index}"


UNSAMPLED = """\
import sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from tether.observability import spans
from tether.runtime.runner import Runner

exporter = InMemorySpanExporter()
provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(float(sys.argv[2]))))
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
built = []
original = spans.NodeSpan.__init__
def counting(self, *args, **kwargs):
    built.append(1)
    original(self, *args, **kwargs)
spans.NodeSpan.__init__ = counting
tracer = trace.get_tracer("task")
def work(x: int) -> int:
    with tracer.start_as_current_span("task.own"):
        return x
result = Runner(sys.argv[1], None, {"t.work": work}).run()
print(result.status, len(built), sorted(s.name for s in exporter.get_finished_spans()))
"""


@pytest.mark.parametrize(("ratio", "expected"), [
    ("0", "completed 0 []"),
    ("1", "completed 3 ['task.own', 'task.own', 'task.own', 'tether.node', 'tether.node', "
          "'tether.node', 'tether.run']")])
def test_a_run_whose_span_is_not_sampled_builds_no_node_span(
        tmp_path: Path, ratio: str, expected: str) -> None:
    flow = tmp_path / "s.yaml"
    flow.write_text("tether: 1\nname: s\nnodes:\n  fan:\n    for_each: [1, 2, 3]\n"
                    "    task: t.work\n    with: {x: \"{{ item }}\"}\n", encoding="utf-8")
    script = tmp_path / "s.py"
    script.write_text(UNSAMPLED, encoding="utf-8")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, str(script), str(flow), ratio], capture_output=True,
                         text=True, timeout=CHILD_TIMEOUT, env=clean)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == expected


APPROVAL_FLOW = """\
tether: 1
name: approved
nodes:
  first:
    task: t.item
    with: {x: 1}
  review:
    needs: [first]
    approval: {reason: ok?, form: {approved: {type: boolean}}}
  after:
    needs: [review]
    task: t.item
    with: {x: 2}
"""


def test_a_queued_run_answered_later_is_continued_by_another_worker_in_the_same_trace(
        tmp_path: Path, receiver: Receiver) -> None:
    """Worker A runs a queued run to its approval and exits; later a third process records
    the answer (no execution there) and a new worker B, another service, continues the run:
    B's ``tether.run`` span is in A's trace, a child of the run's first span, linked to it as
    the wait for the answer; the approval node's two spans say requested, then answered."""
    from tether.runtime.runner import Runner
    from tether.stores.open import open_checkpointer

    flow = tmp_path / "approved.yaml"
    flow.write_text(APPROVAL_FLOW, encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'tether.db'}"
    store = open_checkpointer(db)
    try:
        run_id = Runner(flow, store, {}).submit()
        first = _worker(db, receiver.env(), tmp_path / "a.log")
        try:
            deadline = time.monotonic() + CHILD_TIMEOUT
            while store.get_run(run_id).status != "paused":
                assert first.poll() is None and time.monotonic() < deadline, \
                    (tmp_path / "a.log").read_text()
                time.sleep(0.1)
        finally:
            _stop(first)  # its provider flushes on exit: nothing of it stays in memory
        receiver.wait_for(lambda s: len(named(s, "tether.run")) == 1)
        answer = ("import sys\nfrom tether.runtime.runner import Runner\n"
                  "from tether.stores.open import open_checkpointer\n"
                  "Runner(sys.argv[1], open_checkpointer(sys.argv[2])).answer("
                  "sys.argv[3], {'approved': True})\n")
        clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        subprocess.run([sys.executable, "-c", answer, str(flow), db, run_id], check=True,
                       capture_output=True, text=True, timeout=CHILD_TIMEOUT, env=clean)
        second = _worker(db, {**receiver.env(), "OTEL_SERVICE_NAME": "tether-b"},
                         tmp_path / "b.log")
        try:
            while store.get_run(run_id).status != "completed":
                assert second.poll() is None and time.monotonic() < deadline, \
                    (tmp_path / "b.log").read_text()
                time.sleep(0.1)
        finally:
            _stop(second)
    finally:
        store.close()
    spans = receiver.wait_for(lambda s: len(named(s, "tether.run")) == 2)
    runs = sorted(named(spans, "tether.run"), key=lambda s: s.attributes["tether.run.attempt"])
    opening, resumed = runs
    assert (opening.service, resumed.service) == ("tether-test", "tether-b")
    assert {s.trace_id for s in spans} == {opening.trace_id}
    assert opening.attributes["tether.run.status"] == "paused"
    assert resumed.attributes["tether.run.status"] == "completed"
    assert resumed.parent_id == opening.span_id
    assert resumed.links == [(opening.trace_id, opening.span_id,
                              {"tether.link": "previous_attempt", "tether.wait": "paused"})]
    asked, answered = sorted(named(spans, "tether.node", tether__node__id="review"),
                             key=lambda s: s.service == "tether-b")
    assert (asked.parent_id, answered.parent_id) == (opening.span_id, resumed.span_id)
    assert [a["tether.approval.state"] for _, a in asked.events + answered.events] == [
        "requested", "answered"]
    assert _one(named(spans, "tether.node", tether__node__id="after")).parent_id == \
        resumed.span_id


POLL_FLOW = """\
tether: 1
name: polled
nodes:
  poll:
    task: t.poll
    until: "{{ nodes.poll.output.n >= 3 }}"
    retry: {max_attempts: 5, backoff: 10ms, strategy: fixed}
"""


def test_each_call_of_an_until_poll_is_a_node_span_with_its_attempt_number(
        tmp_path: Path, receiver: Receiver) -> None:
    """``until:``: the first call raises, the second and third return outputs the condition
    refuses, the fourth one it accepts: four spans, as a retried task's attempts are."""
    flow = tmp_path / "polled.yaml"
    flow.write_text(POLL_FLOW, encoding="utf-8")
    env = {**receiver.env(), "TRACE_COUNTER": str(tmp_path / "counter")}
    done = tether("run", str(flow), "--tasks", TASKS, "--db",
                  f"sqlite:///{tmp_path / 'tether.db'}", "--json", "-q", env=env, cwd=tmp_path)
    assert _json(done)["status"] == "completed", done.stderr
    spans = receiver.wait_for(lambda s: len(named(s, "tether.run")) == 1)
    run = _one(named(spans, "tether.run"))
    polls = sorted(named(spans, "tether.node", tether__node__id="poll"),
                   key=lambda s: s.attributes["tether.node.attempt"])
    assert [s.attributes["tether.node.attempt"] for s in polls] == [1, 2, 3, 4]
    assert [s.attributes["tether.node.status"] for s in polls] == [
        "retried", "retried", "retried", "completed"]
    assert [s.status_code for s in polls] == [2, 0, 0, 0]  # only the raising call: ERROR
    assert [s.attributes.get("error.type") for s in polls] == [
        "TimeoutError", None, None, None]
    assert [s.attributes.get("tether.node.retry.backoff_seconds") for s in polls] == [
        0.01, 0.01, 0.01, None]
    assert [[(n, a) for n, a in s.events] for s in polls] == [
        [("tether.node.retry", {"tether.node.attempt": 1, "error.type": "TimeoutError",
                                "tether.node.retry.backoff_seconds": 0.01})],
        [("tether.node.retry", {"tether.node.attempt": 2,
                                "tether.node.retry.backoff_seconds": 0.01})],
        [("tether.node.retry", {"tether.node.attempt": 3,
                                "tether.node.retry.backoff_seconds": 0.01})], []]
    assert all(s.parent_id == run.span_id and s.trace_id == run.trace_id for s in polls)
    assert polls[0].links == []
    assert [s.links for s in polls[1:]] == [
        [(before.trace_id, before.span_id, {"tether.link": "previous_attempt"})]
        for before in polls[:3]]
