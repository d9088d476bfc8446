"""``tether check --format json`` of every golden case and example, by two source trees.

Run: .venv/bin/python bench/check_same_output.py --against /path/to/other/src

Each file is checked alone, by this checkout's sources and by ``--against``'s, each in its own
process; then all of them in one command by each tree. Printed: the files whose output (or
exit code) differs, and the count. A change that must not change any diagnostic (a faster
route to the same result) shows ``differ 0``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def files() -> list[Path]:
    """The golden cases (and their sub-workflows) and the examples' workflow files."""
    golden = ROOT / "tests" / "golden" / "cases"
    found = [p for p in golden.rglob("*") if p.suffix in (".yaml", ".flow")]
    found += [p for p in (ROOT / "examples").rglob("*") if p.suffix in (".yaml", ".flow")]
    return sorted(found)


def check(src: Path, paths: list[Path]) -> tuple[int, str]:
    """The exit code and output of ``tether check --format json PATHS`` with ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-m", "tether", "check", "--format", "json",
                           *map(str, paths)], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=False)
    return done.returncode, done.stdout + done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, required=True, help="the other tree's src")
    args = parser.parse_args()
    mine, other = ROOT / "src", args.against.resolve()
    differ = 0
    paths = files()
    for path in paths:
        if check(mine, [path]) != check(other, [path]):
            differ += 1
            print(f"differ: {path.relative_to(ROOT)}")
    together = check(mine, paths), check(other, paths)
    lines = together[0][1].count("\n")
    print(f"{len(paths)} files, each alone: differ {differ}; all in one command: "
          f"{'same' if together[0] == together[1] else 'DIFFER'} ({lines} lines)")
    return 1 if differ or together[0] != together[1] else 0


if __name__ == "__main__":
    sys.exit(main())
