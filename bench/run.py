"""tether's benchmark suite (issue: checkpoint cost close to the storage floor).

Run: make bench   (or: .venv/bin/python bench/run.py [--repeat 7] [--only W0,W1])
PostgreSQL workloads use TETHER_BENCH_POSTGRES_URL (or TETHER_TEST_POSTGRES_URL); without
it they are skipped. Every variant is interleaved with its baseline in the same process;
figures are medians; ratios are computed from the same run. Results are printed and written
to bench/results/latest.json.

W0  200-node chain of trivial `def` and `async def` tasks: per-node total time with no store,
    SQLite and PostgreSQL as ratios to the INSERT+COMMIT floor, and where a node's time goes
    (bench/pernode.py). To compare two trees (a change against a base commit), use
    bench/w0_ab.py: the two trees' runs paired back to back, wall and CPU per node.
W1  200-node linear chain of trivial nodes: per-node overhead of checkpointing over the same
    plan with no checkpointer, on SQLite (normal and full durability) and PostgreSQL, against
    each one's raw INSERT+COMMIT floor measured in the same run; and at 2,000 nodes.
W2  the same chain with a 100 KB value in the state that no node changes (as an input, and as
    the first node's output): per-node overhead and bytes stored for the run.
W3  start-to-paused and resume-to-completed latency of a 3-node approval workflow (SQLite).
W4  10-node runs per second, one process (SQLite, PostgreSQL), and 4 processes on PostgreSQL.
W5  1,000-element for_each with concurrency 16: total time with and without checkpoints.
W6  `tether check` of 1,000- and 10,000-node workflows: see bench/check_scale.py.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pernode
import workloads as w

RESULTS = Path(__file__).resolve().parent / "results"


def median(values: list[float]) -> float:
    return statistics.median(values)


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs"


def overhead(plan: Any, stores: dict[str, Any], repeat: int, nodes: int,
             inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Per-node overhead of each store over no store, interleaved run by run."""
    times: dict[str, list[float]] = {"none": [], **{name: [] for name in stores}}
    last: dict[str, str] = {}
    w.run_once(plan, None, inputs)  # warm-up: template and plan caches
    for store in stores.values():
        w.run_once(plan, store, inputs)
    for _ in range(repeat):
        times["none"].append(w.run_once(plan, None, inputs)[0])
        for name, store in stores.items():
            seconds, last[name] = w.run_once(plan, store, inputs)
            times[name].append(seconds)
    base = median(times["none"])
    result: dict[str, Any] = {"baseline_per_node": base / nodes}
    for name in stores:
        result[name] = {"per_node": median(times[name]) / nodes,
                        "overhead_per_node": (median(times[name]) - base) / nodes,
                        "execution_id": last[name]}
    return result


def w1(tmp: Path, repeat: int, nodes: int, pg: Any) -> dict[str, Any]:
    stores = {"sqlite_normal": w.sqlite_store(tmp, "normal"),
              "sqlite_full": w.sqlite_store(tmp, "full")}
    if pg is not None:
        stores["postgres"] = pg
    result = overhead(w.chain(nodes), stores, repeat, nodes)
    result["floor_sqlite_normal"] = w.sqlite_floor(tmp, "NORMAL")
    result["floor_sqlite_full"] = w.sqlite_floor(tmp, "FULL", count=300)
    result["floor_postgres"] = w.postgres_floor() if pg is not None else None
    return result


def w2(tmp: Path, repeat: int, pg: Any) -> dict[str, Any]:
    stores = {"sqlite_normal": w.sqlite_store(tmp, "normal")}
    if pg is not None:
        stores["postgres"] = pg
    blob = "x" * 100_000
    result = {"input": overhead(w.chain(200, blob_input=True), stores, repeat, 200,
                                {"blob": blob}),
              "output": overhead(w.chain(200, blob_output=True), stores, repeat, 200)}
    for variant in ("input", "output"):
        for name, store in stores.items():
            result[variant][name]["bytes"] = w.stored_bytes(
                store, result[variant][name]["execution_id"])
    return result


def w3(tmp: Path, repeat: int) -> dict[str, float]:
    store = w.sqlite_store(tmp, "normal")
    plan = w.approval_plan()
    w.pause_resume(plan, store)
    pauses, resumes = [], []
    for _ in range(max(repeat * 5, 30)):
        pause, resume = w.pause_resume(plan, store)
        pauses.append(pause)
        resumes.append(resume)
    return {"pause": median(pauses), "resume": median(resumes)}


def _worker(url: str, seconds: float, queue: Any) -> None:
    from tether.stores.open import open_checkpointer

    store = open_checkpointer(url)
    queue.put(w.runs_per_second(w.chain(10), store, seconds) * seconds)


def w4(tmp: Path, pg: Any, schema: str | None) -> dict[str, Any]:
    result: dict[str, Any] = {
        "sqlite_one_process": w.runs_per_second(w.chain(10), w.sqlite_store(tmp, "normal")),
        "memory_one_process": w.runs_per_second(w.chain(10), tether_memory()),
    }
    if pg is not None and schema is not None:
        result["postgres_one_process"] = w.runs_per_second(w.chain(10), pg)
        url = f"{w.PG_URL}?schema={schema}"
        queue: Any = multiprocessing.get_context("spawn").Queue()
        seconds = 3.0
        workers = [multiprocessing.get_context("spawn").Process(
            target=_worker, args=(url, seconds, queue)) for _ in range(4)]
        for process in workers:
            process.start()
        total = sum(queue.get() for _ in workers)
        for process in workers:
            process.join()
        result["postgres_four_processes"] = total / seconds
    return result


def tether_memory() -> Any:
    from tether.stores.memory import InMemoryCheckpointer

    return InMemoryCheckpointer()


def w5(tmp: Path, repeat: int) -> dict[str, float]:
    plan = w.fan_out(1000, 16)
    store = w.sqlite_store(tmp, "normal")
    w.run_once(plan, None)
    none, sqlite = [], []
    for _ in range(max(2, repeat // 2)):
        none.append(w.run_once(plan, None)[0])
        sqlite.append(w.run_once(plan, store)[0])
    return {"none": median(none), "sqlite_normal": median(sqlite)}


def report(results: dict[str, Any]) -> None:
    if "W0" in results:
        pernode.report(results["W0"])
    if "W1" in results:
        report_w1(results)
    if "W2" in results:
        report_w2(results)
    if "W3" in results:
        report_rest(results)


def report_w1(results: dict[str, Any]) -> None:
    r1, r1k = results["W1"], results["W1_2000"]
    print("\nW1  200-node chain, per-node overhead of checkpointing (median)")
    print(f"    baseline (no checkpointer): {us(r1['baseline_per_node'])} per node")
    for name, floor_key, target in (("sqlite_normal", "floor_sqlite_normal", 5.0),
                                    ("sqlite_full", "floor_sqlite_full", None),
                                    ("postgres", "floor_postgres", 1.5)):
        if name not in r1:
            print(f"    {name:14} skipped (no PostgreSQL configured)")
            continue
        floor = r1[floor_key]
        ratio = r1[name]["overhead_per_node"] / floor
        goal = f" (target <= {target}x: {'met' if ratio <= target else 'MISSED'})" \
            if target else ""
        print(f"    {name:14} {us(r1[name]['overhead_per_node'])} per node; floor "
              f"{us(floor)}; ratio {ratio:.2f}x{goal}")
    scale = r1k["sqlite_normal"]["overhead_per_node"] * 2000 / (
        r1["sqlite_normal"]["overhead_per_node"] * 200)
    total = r1k["sqlite_normal"]["per_node"] * 2000 / (r1["sqlite_normal"]["per_node"] * 200)
    print(f"    2,000 nodes: {us(r1k['sqlite_normal']['overhead_per_node'])} per node; "
          f"2,000/200: checkpointed run {total:.1f}x, checkpoint overhead {scale:.1f}x "
          f"(target <= 11x: {'met' if max(scale, total) <= 11 else 'MISSED'})")


def report_w2(results: dict[str, Any]) -> None:
    r1, r2 = results["W1"], results["W2"]
    print("\nW2  200-node chain with an unchanged 100 KB value")
    for variant in ("input", "output"):
        for name in ("sqlite_normal", "postgres"):
            if name not in r2[variant]:
                continue
            o = r2[variant][name]["overhead_per_node"]
            ratio = o / r1[name]["overhead_per_node"]
            size = r2[variant][name]["bytes"]
            print(f"    as {variant:6} {name:14} {us(o)} per node ({ratio:.2f}x W1; target "
                  f"<= 1.5x: {'met' if ratio <= 1.5 else 'MISSED'}); stored {size / 1e6:.3f} MB "
                  f"(target < 1 MB: {'met' if size < 1e6 else 'MISSED'})")


def report_rest(results: dict[str, Any]) -> None:
    r3 = results["W3"]
    print("\nW3  3-node approval workflow on SQLite (median)")
    print(f"    start -> paused {r3['pause'] * 1e3:.2f} ms, resume -> completed "
          f"{r3['resume'] * 1e3:.2f} ms (target < 2 ms each: "
          f"{'met' if max(r3.values()) < 0.002 else 'MISSED'})")
    r4 = results["W4"]
    print("\nW4  10-node runs per second")
    for key, value in r4.items():
        print(f"    {key:24} {value:,.0f} runs/s")
    r5 = results["W5"]
    print("\nW5  1,000-element for_each, concurrency 16")
    print(f"    no checkpointer {r5['none']:.3f} s, SQLite {r5['sqlite_normal']:.3f} s "
          f"({(r5['sqlite_normal'] - r5['none']) / 1000 * 1e6:,.1f} µs per element)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--only", default="W0,W1,W2,W3,W4,W5",
                        help="comma-separated workloads to run (W2 needs W1; W3-W5 run together)")
    args = parser.parse_args()
    only = set(args.only.upper().split(","))
    if "W2" in only:
        only.add("W1")
    results: dict[str, Any] = {"machine": {"python": platform.python_version(),
                                           "platform": platform.platform(),
                                           "cpus": multiprocessing.cpu_count()},
                               "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    made = w.postgres_store()
    pg, schema = made if made is not None else (None, None)
    try:
        with tempfile.TemporaryDirectory() as directory:
            tmp = Path(directory)
            if "W0" in only:
                results["W0"] = pernode.measure(tmp, max(args.repeat, 15), pg)
            if "W1" in only:
                results["W1"] = w1(tmp, args.repeat, 200, pg)
                results["W1_2000"] = w1(tmp, args.repeat, 2000, None)
            if "W2" in only:
                results["W2"] = w2(tmp, args.repeat, pg)
            if {"W3", "W4", "W5"} <= only:
                results["W3"] = w3(tmp, args.repeat)
                results["W4"] = w4(tmp, pg, schema)
                results["W5"] = w5(tmp, args.repeat)
    finally:
        if schema is not None:
            w.drop_schema(schema)
    report(results)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "latest.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"\nresults written to {RESULTS / 'latest.json'}")


if __name__ == "__main__":
    main()
