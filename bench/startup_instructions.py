"""Start-up in instructions: each ``bench/startup.py`` command counted whole-process under
callgrind, for one or two source trees (issue 25, fast start).

Run: .venv/bin/python bench/startup_instructions.py [--against SRC] [--repeat 1]
     [--only resume ...]

CPU seconds on this shared machine move with the other processes' load; instruction counts
do not. Each command of ``bench/startup.py`` (the same argv, a fresh waiting run for each
resume) runs under ``valgrind --tool=callgrind --callgrind-out-file=/dev/null`` with the
bytecode cached as for an installed package (a warm-up run of every command fills each
tree's ``PYTHONPYCACHEPREFIX`` first); the count is valgrind's ``Collected`` total: every
instruction of the process, from the interpreter's start to its exit. With ``--against`` the
trees alternate (A B, then B A). Printed: each command's median count per tree, its count
above ``python -c pass``, and the second tree's count over the first's. Needs ``valgrind``.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from startup import BASELINE, commands, environment, main, run_once, with_run

COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def count(argv: list[str], env: dict[str, str], expect: tuple[int, ...]) -> int:
    """The instructions ``argv`` executed, whole process, under callgrind."""
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                           *argv], env=env, capture_output=True, text=True, check=False)
    if done.returncode not in expect:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    found = COLLECTED.search(done.stderr)
    if found is None:
        raise SystemExit(f"no callgrind total for {' '.join(argv)}:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def measure(repeat: int, workdir: Path, sources: dict[str, Path],
            only: tuple[str, ...]) -> dict[str, dict[str, list[int]]]:
    """Counts per tree (label -> its ``src``) and command, ``repeat`` each, trees in ABBA."""
    dirs = {label: workdir / f"tree{index}" for index, label in enumerate(sources)}
    envs = {}
    for label, directory in dirs.items():
        directory.mkdir()
        envs[label] = environment(str(directory / "pycache"), sources[label])
    dbs = {label: f"sqlite:///{dirs[label] / 'bench.db'}" for label in sources}
    for label, env in envs.items():  # warm-up: the bytecode cache, the database
        for name, (argv, expect) in commands(dbs[label]).items():
            run_once(with_run(name, argv, dbs[label], env), env, expect)
    names = (BASELINE, *(only or tuple(commands("x"))))
    counts: dict[str, dict[str, list[int]]] = {label: {n: [] for n in names}
                                               for label in sources}
    order = list(sources)
    for index in range(repeat):
        for name in names:
            for label in (order if index % 2 == 0 else order[::-1]):
                if name == BASELINE:
                    argv, expect = [sys.executable, "-c", "pass"], (0,)
                else:
                    argv, expect = commands(dbs[label])[name]
                    argv = with_run(name, argv, dbs[label], envs[label])
                counts[label][name].append(count(argv, envs[label], expect))
    return counts


def report(counts: dict[str, dict[str, list[int]]]) -> None:
    medians = {label: {name: statistics.median(values) for name, values in table.items()}
               for label, table in counts.items()}
    for label, table in medians.items():
        print(f"{label}:")
        print(f"  {'command':18} {'instructions':>14} {'above base':>12}")
        for name, value in table.items():
            print(f"  {name:18} {value / 1e6:12.1f} M {(value - table[BASELINE]) / 1e6:10.1f} M")
    if len(medians) == 2:
        first, second = medians
        print(f"instructions of {second} / {first}:")
        for name, value in medians[first].items():
            print(f"  {name:18} {medians[second][name] / value:6.3f}")


if __name__ == "__main__":
    main(__doc__, measure, report, repeat=1)
