"""Issue 23 in instructions: what a traced (or metered) W0 node costs the run thread, counted.

Run: .venv/bin/python bench/tracing_instructions.py [--base /path/to/base/src] [--new src]
     [--store none|sqlite] [--runs 5] [--nodes 200] [--seeds 0,1]

``bench/tracing.py`` times the variants by the run thread's CPU; on a shared 2-core machine
its ratios move by tens of percent between invocations. This counts instead: each
(tree, variant, task style) runs in its own child under valgrind's callgrind with
instrumentation off and ``--separate-threads=yes``, warms up (3 runs), switches it on
(``callgrind_control -i on``) for ``--runs`` runs of the ``--nodes`` chain, off again, and
reports the instructions of the **main thread** (the one that runs the nodes) per node. The
deferred spans' drain thread and the batch exporter's thread are other threads: not counted
(``bench/tracing.py``'s ``+export`` reports their CPU). Variants: ``off`` (no provider, no
metrics), ``traced`` (the SDK's TracerProvider with a BatchSpanProcessor whose exporter drops
the spans: deferred node spans), ``metrics`` (prometheus-client counting). Needs
``valgrind``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
VARIANTS = ("off", "traced", "metrics")
STYLES = ("def", "async")


def child(variant: str, style: str, store_name: str, nodes: int, runs: int) -> None:
    sys.path.insert(0, str(HERE))
    import workloads as w

    from tether.runtime.runner import Runner

    if variant == "traced":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )

        class Drop(SpanExporter):
            def export(self, spans: object) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Drop()))
        trace.set_tracer_provider(provider)
    elif variant == "metrics":
        from prometheus_client import CollectorRegistry

        from tether.observability import observer
        from tether.observability.metrics import Metrics
        observer.SINK = Metrics(CollectorRegistry())
    with tempfile.TemporaryDirectory() as directory:
        store = w.sqlite_store(Path(directory)) if store_name == "sqlite" else None
        runner = Runner(w.chain(nodes, sync=style == "def"), store, w.TASKS)
        for _ in range(3):
            runner.run()
        control = ["callgrind_control", "-i"]
        subprocess.run([*control, "on", str(os.getpid())], check=True,
                       stdout=subprocess.DEVNULL)
        for _ in range(runs):
            runner.run()
        subprocess.run([*control, "off", str(os.getpid())], check=True,
                       stdout=subprocess.DEVNULL)


def count(src: Path, variant: str, style: str, store: str, nodes: int, runs: int,
          seed: int) -> float:
    """Instructions per node of the main thread of one child under callgrind."""
    with tempfile.TemporaryDirectory() as directory:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env.update(PYTHONPATH=str(src), PYTHONHASHSEED=str(seed))
        out = Path(directory) / "out"
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
             f"--callgrind-out-file={out}", sys.executable, __file__, "--child", variant,
             "--style", style, "--store", store, "--nodes", str(nodes), "--runs", str(runs)],
            env=env, capture_output=True, text=True)
        main = sorted(Path(directory).glob("out-01"))
        if done.returncode != 0 or not main:
            raise SystemExit(f"the child of {src} failed:\n{done.stderr[-2000:]}")
        for line in main[0].read_text().splitlines():
            if line.startswith("totals:"):
                return int(line.split()[1]) / (nodes * runs)
        raise SystemExit(f"no totals in {main[0]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, default=None, help="another tree's src")
    parser.add_argument("--new", type=Path, default=HERE.parent / "src")
    parser.add_argument("--store", choices=("none", "sqlite"), default="none")
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--style", choices=STYLES, default="def", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.style, args.store, args.nodes, args.runs)
        return
    seeds = [int(seed) for seed in args.seeds.split(",")]
    trees = {"new": args.new.resolve()}
    if args.base is not None:
        trees = {"base": args.base.resolve(), **trees}
    print(f"W0 run-thread instructions per node, {args.nodes}-node chain x {args.runs} runs, "
          f"store {args.store}, hash seeds {seeds} (callgrind, main thread only):")
    for style in STYLES:
        for name, src in trees.items():
            found = {v: statistics.median(count(src, v, style, args.store, args.nodes,
                                                args.runs, s) for s in seeds)
                     for v in VARIANTS}
            off = found["off"]
            print(f"  {style:5} {name:4} " + "  ".join(
                f"{v} {n:9,.0f} ({n / off:.3f}x)" for v, n in found.items()))


if __name__ == "__main__":
    main()
