"""Issue 23: what traces and metrics cost per node (W0's 200-node chain of `def` tasks, or
of `async def` tasks with ``--kind async``; no store: the runtime's own per-node time, where
any added cost shows most).

Run: .venv/bin/python bench/tracing.py [--repeat 15] [--store none|sqlite|postgres]
[--kind def|async|both] [--main /path/to/main/src]

Variants, interleaved in every repetition, each the per-node time of one run (median over
the repetitions), by three clocks: ``wall`` of the run; ``thread``, the CPU time of the thread
that runs the nodes (what a node costs the run: the batch processor exports in its own
thread); ``+export``, that plus the CPU time the exporter spent encoding and sending the run's
spans (the total CPU tracing costs; the exporter's CPU is timed inside its ``export`` calls,
whichever thread makes them: the provider is flushed after each traced run, outside its
timing, so no export overlaps another variant).

- ``off``: no provider installed, no metrics (the path every node takes by default);
- ``traced``: the OpenTelemetry SDK's TracerProvider with a BatchSpanProcessor exporting
  over OTLP/HTTP to a receiver in another process (it answers 200 and decodes nothing);
  node spans deferred (``observability/deferred.py``): ``+export`` also counts the CPU the
  drain thread spent building them;
- ``sdk``: the same with ``TETHER_DEFERRED_SPANS=0``: a real SDK span per node attempt;
- ``metrics``: prometheus-client counting (``tether worker --metrics-port``'s sink), no
  tracing.

(To switch tracing off and on in one process the script swaps the API's global provider,
which the API allows only once: a benchmark's liberty, not something tether does.)

With ``--main SRC``, ``off`` is also compared with the main branch's code: the same chain
in two child processes, one importing this tree and one ``SRC``, alternated, each run timed
by the process's CPU time (wall time on a shared machine swings by tens of percent).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import workloads as w

NODES = 200

RECEIVER = """
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


CLOCKS = ("wall", "thread", "+export")


class Timed:
    """An exporter that times the CPU of each export call of the exporter it wraps."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.cpu = 0.0

    def export(self, spans: Any) -> Any:
        started = time.thread_time()
        try:
            return self.inner.export(spans)
        finally:
            self.cpu += time.thread_time() - started

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _drain_cpu() -> float:
    """CPU seconds the deferred spans' drain has spent so far (every pipe)."""
    deferred = sys.modules.get("tether.observability.deferred")
    if deferred is None:
        return 0.0
    return sum(pipe.cpu for pipe in list(deferred._PIPES.values()))


def per_node(runner: Any, exported: Timed | None = None,
             flush: Any = None) -> tuple[float, float, float]:
    """Seconds per node of one run: wall, this thread's CPU, and that plus the exporter's
    CPU for the run's spans and the deferred spans' drain (``flush``: the provider's, called
    after the timing)."""
    before = exported.cpu + _drain_cpu() if exported is not None else 0.0
    wall, thread = time.perf_counter(), time.thread_time()
    result = runner.run()
    wall, thread = time.perf_counter() - wall, time.thread_time() - thread
    assert result.status == "completed", result
    if flush is not None:
        flush()
    export = exported.cpu + _drain_cpu() - before if exported is not None else 0.0
    return wall / NODES, thread / NODES, (thread + export) / NODES


def measure(repeat: int, store: Any = None,
            sync: bool = True) -> dict[str, tuple[float, float, float]]:
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from tether.observability import observer
    from tether.observability.metrics import Metrics
    from tether.runtime.runner import Runner

    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE,
                                text=True)
    assert receiver.stdout is not None
    port = int(receiver.stdout.readline())
    provider = TracerProvider()
    exported = Timed(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces"))
    provider.add_span_processor(BatchSpanProcessor(exported))  # type: ignore[arg-type]
    from prometheus_client import CollectorRegistry
    sink = Metrics(CollectorRegistry())
    runner = Runner(w.chain(NODES, sync=sync), store, w.TASKS)
    times: dict[str, list[tuple[float, float, float]]] = {
        "off": [], "traced": [], "sdk": [], "metrics": []}
    try:
        def traced(deferred: bool) -> tuple[float, float, float]:
            os.environ["TETHER_DEFERRED_SPANS"] = "1" if deferred else "0"
            trace._TRACER_PROVIDER = provider  # type: ignore[attr-defined]
            try:
                return per_node(runner, exported, provider.force_flush)
            finally:
                trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]

        for _ in range(3):  # warm up every path
            per_node(runner)
            traced(True)
            traced(False)
        for _ in range(repeat):
            times["off"].append(per_node(runner))
            times["traced"].append(traced(True))
            times["sdk"].append(traced(False))
            observer.SINK = sink
            times["metrics"].append(per_node(runner))
            observer.SINK = None
        provider.shutdown()
    finally:
        receiver.kill()
        receiver.wait()
    return {name: (statistics.median(v[0] for v in values),
                   statistics.median(v[1] for v in values),
                   statistics.median(v[2] for v in values))
            for name, values in times.items()}


def parts(repeat: int, count: int = 20_000) -> dict[str, float]:
    """What one node span costs, piece by piece: this thread's CPU per call (median of
    ``repeat`` interleaved rounds of ``count`` calls), with the SDK's provider and a batch
    processor whose exporter drops the spans (the export is not in these figures)."""
    from opentelemetry import context, trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    from tether.observability.deferred import pipe_for
    from tether.observability.spans import NodeSpan

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop(), max_queue_size=count * 2))
    tracer = provider.get_tracer("tether")
    root = tracer.start_span("tether.run")
    context.attach(trace.set_span_in_context(root))
    three = {"tether.node.id": "n1", "tether.node.kind": "task", "tether.node.attempt": 1}
    six = {**three, "tether.node.address": "n1", "tether.workflow": "chain200-def",
           "tether.execution_id": "0193d3a4-5b6c-7d8e-9f00-112233445566"}

    def bare() -> None:
        tracer.start_span("tether.node").end()

    def given3() -> None:
        tracer.start_span("tether.node", attributes=three).end()

    def given6() -> None:
        tracer.start_span("tether.node", attributes=six).end()

    def set3() -> None:
        span = tracer.start_span("tether.node")
        for key, value in three.items():
            span.set_attribute(key, value)
        span.end()

    def given3_status() -> None:
        span = tracer.start_span("tether.node", attributes=three)
        span.set_attribute("tether.node.status", "completed")
        span.end()

    def given3_status_current() -> None:
        span = tracer.start_span("tether.node", attributes=three)
        token = context.attach(trace.set_span_in_context(span))
        span.set_attribute("tether.node.status", "completed")
        context.detach(token)
        span.end()

    def node_span() -> None:
        NodeSpan(tracer, three).finish(None)

    pipe = pipe_for(tracer)
    assert pipe is not None

    def deferred_node_span() -> None:
        NodeSpan(tracer, three, pipe).finish(None)

    def now() -> None:
        time.time_ns()

    cases = {"SDK span, no attributes": bare, "SDK span, 3 attributes given": given3,
             "SDK span, 6 attributes given": given6,
             "SDK span, 3 set_attribute calls": set3,
             "SDK span, 3 given + status set": given3_status,
             "... and made current (attach/detach)": given3_status_current,
             "tether's NodeSpan (all of the above)": node_span,
             "tether's deferred NodeSpan (run thread)": deferred_node_span,
             "time.time_ns()": now}
    found: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeat):
        for name, case in cases.items():
            for _ in range(count // 10):
                case()
            provider.force_flush()
            pipe.drain()
            started = time.thread_time()
            for _ in range(count):
                case()
            found[name].append((time.thread_time() - started) / count)
    provider.shutdown()
    return {name: statistics.median(values) for name, values in found.items()}


CHILD = """
import sys, time, statistics
sys.path.insert(0, sys.argv[1])
import workloads as w
from tether.runtime.runner import Runner
runner = Runner(w.chain(200, sync=True), None, w.TASKS)
for _ in range(3):
    runner.run()
times = []
for _ in range(int(sys.argv[2])):
    t = time.process_time(); runner.run(); times.append((time.process_time() - t) / 200)
print(statistics.median(times))
"""


def versus_main(main_src: str, repeat: int) -> tuple[float, float]:
    """``off`` per-node time of this tree and of ``main_src``, in alternated children."""
    here = str(Path(__file__).resolve().parent.parent / "src")
    bench = str(Path(__file__).resolve().parent)
    mine: list[float] = []
    theirs: list[float] = []
    for _ in range(repeat):
        for src, into in ((here, mine), (main_src, theirs)):
            env = {**os.environ, "PYTHONPATH": src}
            env = {k: v for k, v in env.items() if not k.startswith("OTEL_")}
            out = subprocess.run([sys.executable, "-c", CHILD, bench, "9"], env=env,
                                 capture_output=True, text=True, check=True)
            into.append(float(out.stdout))
    return statistics.median(mine), statistics.median(theirs)


UNHOOK = (  # (file under src/tether/runtime, text, replacement): the observer hook removed
    ("execution.py", """        observer = self.session.observer
        if observer is None or fans_out(node):
            try:""", """        if True:
            try:"""),
    ("execution.py", """                            observer = self.session.observer
                            if observer is None or fans_out(node):""",
     """                            observer = None
                            if True:"""),
    ("execution.py", """            if self.session.observer is not None:
                self.session.observer.skipped(node, decision, reason)
""", ""),
    ("foreach.py", """        observer = self.level.session.observer""",
     """        observer = None"""),
    ("foreach.py", """                    if observer is None:
                        task =""", """                    if True:
                        task ="""),
    ("driver.py", """        self.session.observer = observer_for(
            execution_id, plan.name, attempt.number, info.parent_id if info else None, store,
            claimed=attempt.claimed, first=attempt.first)""", ""),
    ("driver.py", """        observer = self.session.observer
        if observer is None:
            return await self._attempt()""", """        return await self._attempt()
        observer = self.session.observer"""),
    ("invoke.py", """        if attempt > 1:
            next_attempt(node.id, attempt)
""", ""))


def unhooked() -> str:
    """A copy of this tree's src with the observer hook removed: no observability at all."""
    import shutil
    import tempfile

    target = Path(tempfile.mkdtemp(prefix="tether-unhooked-")) / "src"
    shutil.copytree(Path(__file__).resolve().parent.parent / "src", target)
    for name, text, replacement in UNHOOK:
        path = target / "tether" / "runtime" / name
        source = path.read_text(encoding="utf-8")
        assert text in source, f"the hook moved in {name}: update UNHOOK"
        path.write_text(source.replace(text, replacement), encoding="utf-8")
    return str(target)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--store", choices=["none", "sqlite", "postgres"], default="none",
                        help="checkpoint each node in SQLite or PostgreSQL "
                             "($TETHER_BENCH_POSTGRES_URL, else $TETHER_TEST_POSTGRES_URL), "
                             "or not")
    parser.add_argument("--main", default=None, metavar="SRC",
                        help="a src directory to compare 'off' with (the main branch's); "
                             "'unhooked': this tree without the observer hook")
    parser.add_argument("--kind", choices=["def", "async", "both"], default="def",
                        help="the chain's tasks: `def`, `async def`, or both (one after the "
                             "other, each with its own variants alternated)")
    parser.add_argument("--parts", action="store_true",
                        help="also time the pieces of a node span (see parts())")
    args = parser.parse_args()
    if args.parts:
        print(f"a node span's pieces, this thread's CPU, median of {args.repeat} rounds:")
        for name, value in parts(args.repeat).items():
            print(f"  {name:<40} {value * 1e6:6.2f} us")
    store: Any = None
    schema = None
    if args.store == "sqlite":
        import tempfile
        store = w.sqlite_store(Path(tempfile.mkdtemp(prefix="tether-bench-")))
    elif args.store == "postgres":
        opened = w.postgres_store()
        if opened is None:
            parser.error("--store postgres needs TETHER_BENCH_POSTGRES_URL")
        store, schema = opened
    kinds = ["def", "async"] if args.kind == "both" else [args.kind]
    results: dict[str, dict[str, tuple[float, float, float]]] = {}
    try:
        for kind in kinds:
            results[kind] = measure(args.repeat, store, sync=kind == "def")
    finally:
        if schema is not None:
            store.close()
            w.drop_schema(schema)
    for kind, found in results.items():
        off = found["off"]
        print(f"W0 {kind} chain, {NODES} nodes, store {args.store}, median of {args.repeat} "
              f"(us/node, and the ratio to off):")
        print("  " + " " * 8 + "".join(f"{clock:>20}" for clock in CLOCKS))
        for name, value in found.items():
            print(f"  {name:<8}" + "".join(
                f"{value[i] * 1e6:11.2f} ({value[i] / off[i]:4.2f}x)" for i in range(3)))
    if args.main:
        source = unhooked() if args.main == "unhooked" else args.main
        mine, theirs = versus_main(source, max(3, args.repeat // 3))
        print(f"  off vs main: {mine * 1e6:.2f} vs {theirs * 1e6:.2f} us/node "
              f"({(mine / theirs - 1) * 100:+.1f}%)")


if __name__ == "__main__":
    main()
