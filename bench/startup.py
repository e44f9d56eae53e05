"""How long poolbench commands take to start: `--help` and `--version` (issue 11: <= 150 ms),
and, reported beside them without a budget, `runs` on an empty store and a `plan` (commands
that load the study model, the store and the planner, but should not load scipy).

Each command is run as a fresh subprocess (the way a user runs it) RUNS times, interleaved with
`python -c pass` so a busy machine slows all three alike; the median is printed, with the
interpreter's own start-up for comparison. Exit status 1 when a median is over the budget.

    PYTHONPATH=src .venv/bin/python bench/startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUDGET_MS = 150.0
STORE = Path(tempfile.mkdtemp(prefix="pb-startup-")) / "empty.db"
PB = [sys.executable, "-m", "poolbench"]
CASES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "poolbench --help": [*PB, "--help"],
    "poolbench --version": [*PB, "--version"],
    "poolbench runs": [*PB, "runs", "--db", str(STORE)],
    "poolbench plan": [*PB, "plan", "--disks", "6x4T"],
}
BUDGETED = ("poolbench --help", "poolbench --version")


def _once(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


def main() -> int:
    from poolbench.store.db import Store

    Store(STORE).close()  # an empty store of ours, so `runs` reads rather than refuses
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs of each command (>= 10)")
    runs = max(10, parser.parse_args().runs)
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for argv in CASES.values():
        _once(argv)  # warm the page cache; not counted
    for _ in range(runs):
        for name, argv in CASES.items():
            times[name].append(_once(argv))
    over = False
    print(f"median of {runs} runs each (ms):")
    for name, samples in times.items():
        median = statistics.median(samples)
        budget = f"  (budget {BUDGET_MS:.0f})" if name in BUDGETED else ""
        over |= bool(budget) and median > BUDGET_MS
        spread = f"min {min(samples):6.1f}  max {max(samples):6.1f}"
        print(f"  {name:<22} {median:7.1f}   {spread}{budget}")
    STORE.unlink(missing_ok=True)
    STORE.parent.rmdir()
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
