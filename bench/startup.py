"""Start-up cost of the ``tether`` command, whole process, against ``python -c pass``.

Run: .venv/bin/python bench/startup.py [--repeat 15] [--only submit ...] [--against SRC]

Each command runs ``--repeat`` times as a child process, interleaved with the baseline
(``python -c pass``), so that the machine's drift hits both alike. CPU is user + system of the
finished children (``resource.getrusage(RUSAGE_CHILDREN)`` deltas around each run), wall is a
monotonic clock around it. Printed: the median CPU and wall of each command, its CPU minus the
baseline's, the ratio to the baseline, and the issue-25 target.

Bytecode is cached as for an installed package (``PYTHONDONTWRITEBYTECODE`` is cleared and the
cache goes to a temporary ``PYTHONPYCACHEPREFIX``; one warm-up run fills it): a user's second
``tether check`` does not compile the sources again, so neither does the benchmark.

The commands: ``tether --help``, ``tether check`` of examples/refund/refund.yaml (and of
refund.flow: the ``.flow`` parser's tables come from the user's cache after the warm-up run,
as they do for a user), ``tether submit`` of it to a SQLite file, and ``tether resume`` of a
run waiting at its approval, twice: continuing the run here to its end (``resume``: it also
runs the run), and recording the answer only, leaving the run to the workers (``resume
--enqueue``: the command's own start-up); and without task modules, no worker being live
(``resume, no tasks``: the answer recorded, the command says what to run and exits 5).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REFUND = ROOT / "examples" / "refund" / "refund.yaml"
TASKS = ROOT / "examples" / "refund" / "tasks.py"

TARGETS: dict[str, float] = {"check": 0.15, "check .flow": 0.15, "submit": 0.25,
                             "resume": 0.25, "resume --enqueue": 0.25,
                             "resume, no tasks": 0.25}
RESUMES = ("resume", "resume --enqueue", "resume, no tasks")
"""The commands that answer a run: each run gets a fresh waiting run (its argv holds RUN)."""


@dataclass(frozen=True)
class Sample:
    """One child process: CPU seconds (user + system) and wall seconds."""

    cpu: float
    wall: float


def run_once(argv: list[str], env: dict[str, str], expect: tuple[int, ...] = (0,)) -> Sample:
    """Run ``argv`` to its end and return what it cost."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in expect:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Sample(cpu=cpu, wall=wall)


def environment(cache: str, src: Path = ROOT / "src") -> dict[str, str]:
    """The children's environment: the sources ``src`` (this checkout's), cached bytecode."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = cache
    env["PYTHONPATH"] = str(src)
    env["TETHER_EXAMPLE_LEDGER"] = str(Path(cache).parent / "ledger.jsonl")
    return env


def tether(*args: str) -> list[str]:
    """The argv of one ``tether`` command, as ``python -m tether``."""
    return [sys.executable, "-m", "tether", *args]


def waiting_run(db: str, env: dict[str, str]) -> str:
    """Submit and run the refund example until it waits at its approval; return the run id."""
    out = subprocess.run(tether("run", str(REFUND), "--tasks", str(TASKS), "--db", db,
                                "-i", "account=ACC-42", "-i", "amount=500", "--json"),
                         env=env, capture_output=True, text=True, check=False)
    result = json.loads(out.stdout)
    if result["status"] != "paused":
        raise SystemExit(f"the refund run did not pause at its approval: {out.stdout}")
    return str(result["execution_id"])


def commands(db: str) -> dict[str, tuple[list[str], tuple[int, ...]]]:
    """Name -> (argv, accepted exit codes). ``resume`` (continues the run here, to its end),
    ``resume --enqueue`` (records the answer, leaves the run to the workers) and ``resume,
    no tasks`` (no task modules and no live worker: records the answer, says what to run,
    exits 5) get a fresh waiting run each time (see :func:`measure`), so their argv here is
    a template."""
    return {
        "--help": (tether("--help"), (0,)),
        "check": (tether("check", str(REFUND)), (0,)),
        "check .flow": (tether("check", str(REFUND.with_suffix(".flow"))), (0,)),
        "submit": (tether("submit", str(REFUND), "--db", db, "-i", "account=ACC-42",
                          "-i", "amount=20"), (0,)),
        "resume": (tether("resume", "RUN", "--tasks", str(TASKS), "--db", db,
                          "--value", '{"approved": true}'), (0,)),
        "resume --enqueue": (tether("resume", "RUN", "--enqueue", "--db", db,
                                    "--value", '{"approved": true}'), (0,)),
        "resume, no tasks": (tether("resume", "RUN", "--db", db,
                                    "--value", '{"approved": true}'), (5,)),
    }


BASELINE = "python -c pass"


def with_run(name: str, argv: list[str], db: str, env: dict[str, str]) -> list[str]:
    """``argv`` of command ``name``; a resume's with a fresh run waiting at its approval."""
    if name not in RESUMES:
        return argv
    run = waiting_run(db, env)
    return [run if a == "RUN" else a for a in argv]


def measure(repeat: int, workdir: Path, sources: dict[str, Path],
            only: tuple[str, ...] = ()) -> dict[str, dict[str, list[Sample]]]:
    """Run every command (or those ``only`` names) ``repeat`` times per tree of ``sources``
    (label -> its ``src``), each run beside one of the baseline; with two trees their runs
    alternate in ABBA order. Each tree has its own database (and bytecode cache)."""
    dirs = {label: workdir / f"tree{index}" for index, label in enumerate(sources)}
    for directory in dirs.values():
        directory.mkdir()
    envs = {label: environment(str(dirs[label] / "pycache"), src)
            for label, src in sources.items()}
    dbs = {label: f"sqlite:///{dirs[label] / 'bench.db'}" for label in sources}
    names = only or tuple(commands("x"))
    samples = {label: {BASELINE: [], **{name: [] for name in names}} for label in sources}
    baseline = [sys.executable, "-c", "pass"]
    for label, env in envs.items():  # warm-up: fills the bytecode cache (and creates the
        for name, (argv, expect) in commands(dbs[label]).items():  # database submit uses)
            run_once(with_run(name, argv, dbs[label], env), env, expect)
    order = list(sources)
    for index in range(repeat):
        for name in names:
            for label in (order if index % 2 == 0 else order[::-1]):
                argv, expect = commands(dbs[label])[name]
                argv = with_run(name, argv, dbs[label], envs[label])
                samples[label][BASELINE].append(run_once(baseline, envs[label]))
                samples[label][name].append(run_once(argv, envs[label], expect))
    return samples


def report(samples: dict[str, dict[str, list[Sample]]]) -> None:
    """Print the medians, the CPU above the baseline, the ratios and the targets; with two
    trees, also each command's CPU in the second over the first."""
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    medians: dict[str, dict[str, float]] = {}
    for label, table in samples.items():
        base = statistics.median(s.cpu for s in table[BASELINE])
        medians[label] = {}
        print(f"{label}:")
        print(f"  {'command':16} {'cpu s':>7} {'wall s':>7} {'cpu-base':>9} {'ratio':>7}  "
              "target")
        for name, runs in table.items():
            cpu = statistics.median(s.cpu for s in runs)
            medians[label][name] = cpu
            wall = statistics.median(s.wall for s in runs)
            target = TARGETS.get(name)
            verdict = "" if target is None else (
                f"<= {target:.2f} s cpu: {'met' if cpu <= target else 'MISSED'}")
            print(f"  {name:16} {cpu:7.3f} {wall:7.3f} {cpu - base:9.3f} {cpu / base:6.1f}x  "
                  f"{verdict}")
    if len(medians) == 2:
        first, second = medians
        print(f"cpu of {second} / {first}:")
        for name, cpu in medians[first].items():
            if name != BASELINE:
                print(f"  {name:16} {medians[second][name] / cpu:6.2f}")


Measure = Callable[[int, Path, dict[str, Path], tuple[str, ...]], Any]


def main(doc: str | None = None, measured: Measure | None = None,
         shown: Callable[[Any], None] | None = None, repeat: int = 15) -> None:
    """Parse the options, measure (by default, CPU: :func:`measure`) in a temporary
    directory and print (:func:`report`); ``bench/startup_instructions.py`` passes its own."""
    parser = argparse.ArgumentParser(description=doc or __doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=repeat)
    parser.add_argument("--only", action="append", default=[], metavar="COMMAND",
                        help="Measure only this command (repeatable): --help, check, "
                        "'check .flow', submit, resume, 'resume --enqueue', "
                        "'resume, no tasks'.")
    parser.add_argument("--against", type=Path, default=None, metavar="SRC",
                        help="Also measure the sources at SRC (e.g. an older checkout's src "
                        "directory), alternating with this checkout's (ABBA), and print "
                        "this checkout's figures over theirs.")
    args = parser.parse_args()
    sources = {"this checkout": ROOT / "src"}
    if args.against is not None:
        sources = {f"against {args.against}": args.against.resolve(), **sources}
    with tempfile.TemporaryDirectory(prefix="tether-startup-") as tmp:
        os.chdir(tmp)  # no pyproject.toml above: `resume, no tasks` has none configured
        (shown or report)((measured or measure)(args.repeat, Path(tmp), sources,
                                                tuple(args.only)))


if __name__ == "__main__":
    main()
