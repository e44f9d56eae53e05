"""How long `poolbench --help` and `poolbench --version` take to start (issue 11: <= 150 ms).

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
import time

BUDGET_MS = 150.0
CASES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "poolbench --help": [sys.executable, "-m", "poolbench", "--help"],
    "poolbench --version": [sys.executable, "-m", "poolbench", "--version"],
}


def _once(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


def main() -> int:
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
        budget = "" if name.startswith("python") else f"  (budget {BUDGET_MS:.0f})"
        over |= bool(budget) and median > BUDGET_MS
        spread = f"min {min(samples):6.1f}  max {max(samples):6.1f}"
        print(f"  {name:<22} {median:7.1f}   {spread}{budget}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
