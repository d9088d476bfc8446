"""Peer comparison: the W1/W2/W4 workloads on tether, LangGraph and DBOS in one invocation,
and the workers' queue drain (bench/workers.py) on tether workers and DBOS queues.

Run: make bench-peers   (or: .venv/bin/python bench/peers.py [--repeat 5]
     [--queue-runs 1000] [--queue-workers 1,2] [--queue-repeat 3])
Creates bench/.peers-venv (once) with LangGraph 1.x, its SQLite and PostgreSQL savers and
DBOS 3.x from the package registry, runs tether's workloads in this process and the peers'
in that environment (bench/peer_workloads.py), and prints them side by side.
PostgreSQL: TETHER_BENCH_POSTGRES_URL (or TETHER_TEST_POSTGRES_URL); skipped without.

The queue drains (issue 26's DBOS ratio) are each a few seconds for tether and half a
minute for DBOS, and on a shared machine one drain of either moves by a fifth with the
disk's flush latency: each round drains with tether's workers, then DBOS's (every worker
count), ``--queue-repeat`` rounds in turn; the medians are compared, each drain printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import workloads as w  # noqa: E402

VENV = HERE / ".peers-venv"
PACKAGES = ["langgraph>=1.2,<2", "langgraph-checkpoint-sqlite>=3,<4",
            "langgraph-checkpoint-postgres>=3,<4", "dbos>=3.4,<4", "psycopg[binary]>=3.2,<4"]


def ensure_venv() -> Path:
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
                       check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PACKAGES], check=True)
    return python


def peer_results(python: Path, repeat: int, postgres: str, workdir: Path,
                 queue_runs: int = 0, queue_workers: str = "1,2",
                 one_cpu_each: bool = False, only: str = "") -> dict[str, Any]:
    schema_url = ""
    if postgres:
        import psycopg

        schema = f"peers_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(postgres, autocommit=True) as connection:
            connection.execute(f'CREATE SCHEMA "{schema}"')
        sep = "&" if "?" in postgres else "?"
        schema_url = f"{postgres}{sep}options=-csearch_path%3D{schema}"
    try:
        output = subprocess.run(
            [str(python), str(HERE / "peer_workloads.py"), "--repeat", str(repeat),
             "--postgres", schema_url, "--workdir", str(workdir),
             "--queue-runs", str(queue_runs), "--queue-workers", queue_workers,
             *(["--one-cpu-each"] if one_cpu_each else []), *(["--only", only] if only
                                                                else [])],
            check=True, capture_output=True, text=True, timeout=3600)
    finally:
        if postgres:
            import psycopg

            with psycopg.connect(postgres, autocommit=True) as connection:
                connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    if output.stderr.strip():
        print(output.stderr[-3000:], file=sys.stderr)
    return dict(json.loads(output.stdout.strip().splitlines()[-1]))


def tether_workers(runs: int, counts: str, workdir: Path,
                   one_cpu_each: bool = False) -> dict[str, Any]:
    """bench/workers.py's drain: N ``tether worker`` processes, ``runs`` 10-node runs."""
    from workers import drain

    if not w.PG_URL or not runs:
        return {}
    return {f"workers_{n}": drain(int(n), runs, 10, "bench_step", 4, workdir, one_cpu_each)
            for n in counts.split(",") if n.strip()}


def tether_results(repeat: int, workdir: Path) -> dict[str, Any]:
    from run import overhead

    stores: dict[str, Any] = {"sqlite": w.sqlite_store(workdir, "normal")}
    made = w.postgres_store()
    schema = None
    if made is not None:
        stores["postgres"], schema = made
    try:
        w1 = overhead(w.chain(200, sync=True), stores, repeat, 200)  # def tasks: like LangGraph's
        # sync nodes
        w2 = overhead(w.chain(200, blob_input=True), {"sqlite": stores["sqlite"]}, repeat, 200,
                      {"blob": "x" * 100_000})
        return {
            "sqlite": {**_w1(w1, "sqlite"),
                       "w2_bytes": w.stored_bytes(stores["sqlite"],
                                                  w2["sqlite"]["execution_id"]),
                       "w4_runs_per_second": w.runs_per_second(w.chain(10), stores["sqlite"])},
            **({"postgres": _w1(w1, "postgres")} if "postgres" in stores else {}),
        }
    finally:
        if schema is not None:
            w.drop_schema(schema)


def _w1(w1: dict[str, Any], store: str) -> dict[str, float]:
    return {"w1_overhead_per_node": w1[store]["overhead_per_node"],
            "w1_total_per_node": w1[store]["per_node"],
            "w1_baseline_per_node": w1["baseline_per_node"]}


DBOS_QUEUES_TARGET = 8.0  # issue 26: tether's workers at least 8x DBOS queues' steps/s


def queue_rounds(python: Path, runs: int, counts: str, rounds: int, workdir: Path,
                 one_cpu_each: bool) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """``rounds`` rounds of the queue drains, each tether's workers then DBOS's (every
    worker count): steps per second of each drain, by worker count, for both tools (DBOS's
    or why it was skipped)."""
    ours: dict[str, list[float]] = {}
    theirs: dict[str, Any] = {}
    for _ in range(max(1, rounds)):
        for key, row in tether_workers(runs, counts, workdir, one_cpu_each).items():
            ours.setdefault(key, []).append(row["steps_per_second"])
        found = peer_results(python, 1, w.PG_URL, workdir / "peers", runs, counts,
                             one_cpu_each, only="queue").get("dbos_queue", {})
        if "skipped" in found:
            return ours, found
        for key, row in found.items():
            if key.startswith("workers_"):
                theirs.setdefault(key, []).append(row["steps_per_second"])
    return ours, theirs


def show_queues(ours: dict[str, list[float]], theirs: dict[str, Any],
                one_cpu_each: bool) -> None:
    if not ours:
        return
    rounds = max(len(v) for v in ours.values())
    print("\nWorkers: 10-node runs drained from a queue by N processes (PostgreSQL, x4 each"
          + (", each process on one CPU" if one_cpu_each else "")
          + f"; {rounds} round(s), tether then DBOS in each; medians)")
    if "skipped" in theirs:
        print(f"    DBOS queues skipped: {theirs['skipped']}")
    for key, drains in ours.items():
        mine = statistics.median(drains)
        line = f"    {key.replace('_', ' '):10} tether {mine:,.0f} steps/s"
        if key in theirs and isinstance(theirs[key], list):
            dbos = statistics.median(theirs[key])
            ratio = mine / dbos
            line += (f", DBOS {dbos:,.0f} steps/s: {ratio:.1f}x (target >= "
                     f"{DBOS_QUEUES_TARGET:g}x: "
                     f"{'met' if ratio >= DBOS_QUEUES_TARGET else 'MISSED'})")
            pairs = [a / b for a, b in zip(drains, theirs[key], strict=False)]
            line += (f"\n{'':15}each round: tether {', '.join(f'{v:,.0f}' for v in drains)};"
                     f" DBOS {', '.join(f'{v:,.0f}' for v in theirs[key])}; ratios "
                     f"{', '.join(f'{v:.1f}x' for v in pairs)}")
        print(line)


def show(tether: dict[str, Any], peers: dict[str, Any]) -> None:
    rows = [("tether SQLite", tether.get("sqlite", {})),
            ("tether PostgreSQL", tether.get("postgres", {"skipped": "no server"})),
            ("LangGraph SqliteSaver", peers.get("langgraph_sqlite", {})),
            ("LangGraph PostgresSaver", peers.get("langgraph_postgres", {"skipped": "no server"})),
            ("DBOS SQLite", peers.get("dbos_sqlite", {})),
            ("DBOS PostgreSQL", peers.get("dbos_postgres", {"skipped": "no server"}))]
    print("\nW1  200-node chain of trivial sync nodes, per node (median): total with the "
          "store, total without it, overhead")
    for label, data in rows:
        if "skipped" in data or "w1_overhead_per_node" not in data:
            print(f"    {label:28} skipped: {data.get('skipped', 'no figure')}")
            continue
        total, base = data.get("w1_total_per_node"), data.get("w1_baseline_per_node")
        figures = (f"{total * 1e6:9,.1f} µs {base * 1e6:9,.1f} µs " if total is not None
                   and base is not None else f"{'n/a':>12} {'n/a':>12} ")
        print(f"    {label:28} {figures}{data['w1_overhead_per_node'] * 1e6:9,.1f} µs")
    print("\nW2  bytes stored for one 200-node run with an unchanged 100 KB value")
    for label, data in rows:
        if "w2_bytes" in data:
            print(f"    {label:28} {data['w2_bytes'] / 1e6:,.3f} MB")
    print("\nW4  10-node runs per second, one process, SQLite")
    ours = tether.get("sqlite", {}).get("w4_runs_per_second")
    theirs = peers.get("langgraph_sqlite", {}).get("w4_runs_per_second")
    for label, data in rows:
        if "w4_runs_per_second" in data:
            print(f"    {label:28} {data['w4_runs_per_second']:,.0f} runs/s")
    if ours and theirs:
        ratio = ours / theirs
        print(f"    tether / LangGraph SqliteSaver = {ratio:.1f}x (target >= 5x: "
              f"{'met' if ratio >= 5 else 'MISSED'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--queue-runs", type=int, default=1000,
                        help="runs drained by tether workers and DBOS queues (0: skip)")
    parser.add_argument("--queue-workers", default="1,2", help="worker process counts")
    parser.add_argument("--queue-repeat", type=int, default=3,
                        help="rounds of the queue drains (tether's, then DBOS's); medians")
    parser.add_argument("--one-cpu-each", action="store_true",
                        help="each worker process of both tools confined to one CPU (the "
                        "CPUs in turn): tether worker --cpu N, DBOS's by its own affinity")
    args = parser.parse_args()
    python = ensure_venv()
    with tempfile.TemporaryDirectory() as directory:
        workdir = Path(directory)
        ours = tether_results(args.repeat, workdir)
        theirs = peer_results(python, args.repeat, w.PG_URL, workdir / "peers")
        if w.PG_URL and args.queue_runs:
            ours["workers"], theirs["dbos_queue"] = queue_rounds(
                python, args.queue_runs, args.queue_workers, args.queue_repeat, workdir,
                args.one_cpu_each)
    show(ours, theirs)
    show_queues(ours.get("workers", {}), theirs.get("dbos_queue", {}), args.one_cpu_each)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "peers.json").write_text(
        json.dumps({"tether": ours, "peers": theirs}, indent=2) + "\n")


if __name__ == "__main__":
    main()
