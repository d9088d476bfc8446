"""W6: `tether check` of generated 1,000-, 5,000- and 10,000-node workflows (YAML and .flow).

Run: .venv/bin/python bench/check_scale.py [--repeat 5]
Prints the median wall time of `tether.check` (parse, validate, graph checks, templates) per
size and syntax, and the 10,000/1,000 ratio (target: under 1 s at 10,000 nodes, ratio <= 12:
linear growth). Also times the `tether check` command end to end (process start included).
`--pure` parses `.flow` with Lark's own parser even when lark-cython is installed;
`--no-fast` reads every `.flow` statement with the grammar (no direct reader of task
statements, `tether.dsl.flow_direct`).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate import workflow_flow, workflow_yaml

import tether


def measure(path: Path, repeat: int) -> float:
    """Median seconds of `tether.check(path)`, with the template caches cleared each time
    (a `tether check` process starts cold)."""
    from tether.dsl.expressions import _quick_analysis, analyse
    from tether.templating import classify, compiled, segments

    times = []
    for _ in range(repeat):
        for cache in (analyse, classify, compiled, segments, _quick_analysis):
            cache.cache_clear()
        start = time.perf_counter()
        diagnostics = tether.check([path])
        times.append(time.perf_counter() - start)
        errors = [d for d in diagnostics if d.is_error]
        assert not errors, errors[:3]
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pure", action="store_true", help="no lark-cython")
    parser.add_argument("--no-command", action="store_true", help="skip the command timings")
    parser.add_argument("--no-fast", action="store_true", help="no hand-written fast path "
                        "(in process only: the command timings keep it)")
    args = parser.parse_args()
    if args.no_fast:
        from tether.dsl import flow_reader

        flow_reader.read_task = lambda *args, **kwargs: None  # type: ignore[assignment]
    if args.pure:
        from tether.dsl import flow_syntax

        flow_syntax._compiled_parser = lambda: None  # type: ignore[assignment]
    from tether.dsl.flow_syntax import _compiled_parser

    print("`.flow` parser:", "Lark" if _compiled_parser() is None else "lark-cython")
    results: dict[tuple[str, int], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in SIZES:
            for syntax, text in (("yaml", workflow_yaml(size)), ("flow", workflow_flow(size))):
                path = Path(tmp) / f"w{size}.{syntax}"
                path.write_text(text)
                results[(syntax, size)] = measure(path, args.repeat)
                print(f"check {syntax:4} {size:>6} nodes: {results[(syntax, size)]:.3f} s "
                      f"(median of {args.repeat})")
        for syntax in ("yaml", "flow"):
            ratio = results[(syntax, 10_000)] / results[(syntax, 1_000)]
            print(f"{syntax}: 10,000/1,000 ratio {ratio:.1f} (target <= 12); "
                  f"10,000 nodes {'meets' if results[(syntax, 10_000)] < 1 else 'MISSES'} "
                  "the 1 s target")
        if args.no_command:
            return
        for syntax in ("yaml", "flow"):
            command: dict[int, float] = {}
            for size in (1_000, 10_000):
                command[size] = command_seconds(Path(tmp) / f"w{size}.{syntax}", args.repeat)
            print(f"`tether check` command (a fresh process each time), {syntax}: "
                  f"1,000 nodes {command[1_000]:.3f} s, 10,000 nodes {command[10_000]:.3f} s, "
                  f"ratio {command[10_000] / command[1_000]:.1f}")


SIZES = (1_000, 5_000, 10_000)


def command_seconds(path: Path, repeat: int) -> float:
    """Median wall time of the `tether check` command, process start included."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "tether", "check", str(path)], check=True,
                       capture_output=True, cwd=path.parent)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


if __name__ == "__main__":
    main()
