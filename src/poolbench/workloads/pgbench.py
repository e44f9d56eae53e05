"""The `pgbench` workload family (pure): its names, the scale factor a working set asks for,
and the parsers of what pgbench prints and logs.

* `pgbench-tpcb` — pgbench's built-in TPC-B-like read-write transaction;
* `pgbench-select` — its built-in select-only transaction (read-only);
* `pgbench-script:FILE` — the user's own script (`pgbench -f FILE`, on pgbench's tables).

A `-cN` suffix (`pgbench-tpcb-c8`) sets the client count; without it the study's [workloads]
jobs. engine/pgbench_run.py runs them on a fresh PostgreSQL cluster (system/pgserver.py).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from poolbench import is_digits
from poolbench.errors import UsageError
from poolbench.records.latency import Latency
from poolbench.workloads.workload import Workload

MiB = 1 << 20
# One scale unit is 100,000 pgbench_accounts rows: 16 MB on disk with its indexes
# (PostgreSQL 15: the database's base/ directory grew 16.2 MB loading scale 1).
BYTES_PER_SCALE = 16 * 10**6
MAX_SCALE = 100_000  # 1.6 TB: beyond any pool poolbench builds
PAGE = 8192  # PostgreSQL's block
# What one TPC-B-like transaction must at least put in the WAL: its commit record and the
# records of its three UPDATEs and one INSERT (heap tuples of 50-100 bytes each, with
# 24-byte record headers): measured 300-600 bytes per transaction with full_page_writes=off.
WAL_PER_TXN_FLOOR = 200
FSYNC_BLOCK = 4096  # the least an fsync puts on a disk (ZIL_MIN_BLKSZ; btrfs's sector)

MODES = {"tpcb": "tpcb-like", "select": "select-only"}
_NAME = re.compile(r"^pgbench-(tpcb|select)(?:-c(\d+))?$")
_SCRIPT = "pgbench-script:"
FORMS = "pgbench-{tpcb|select}[-cN], pgbench-script:FILE"


def is_pgbench(name: str) -> bool:
    return name.startswith("pgbench-")


def workload(name: str) -> Workload:
    """The workload named `name` (one of FORMS); UsageError for anything else."""
    if name.startswith(_SCRIPT):
        return _script(name, name.removeprefix(_SCRIPT))
    m = _NAME.match(name)
    if not m:
        raise UsageError(
            f"Unknown workload '{name}'.",
            f"The pgbench workloads are {FORMS}, e.g. pgbench-tpcb-c4 or "
            "pgbench-script:/root/my.sql.",
        )
    mode, clients = m.group(1), int(m.group(2) or 0)
    if m.group(2) is not None and not 1 <= clients <= 256:
        raise UsageError(f"{name}: the client count must be 1 to 256 (-cN).", "e.g. -c4.")
    what = (
        "TPC-B-like transactions (3 updates, 1 select, 1 insert, commit)"
        if mode == "tpcb"
        else "select-only transactions (one primary-key lookup)"
    )
    return Workload(
        name=name,
        family="database",
        summary=f"PostgreSQL: pgbench's {what} on a fresh cluster in the pool for the run time; "
        "transactions per second, latency from pgbench's per-transaction log.",
        direction="mixed" if mode == "tpcb" else "read",
        unit="TPS",
        kind="pgbench",
        jobs=clients,
        time_based=True,
    )


def _script(name: str, path: str) -> Workload:
    p = Path(path)
    if not path or not p.is_file() or not os.access(p, os.R_OK):
        raise UsageError(
            f"{name}: the pgbench script '{path}' is not a readable file.",
            "Give the path of a pgbench script (SQL with pgbench's \\set meta-commands), "
            "e.g. pgbench-script:/root/bench.sql.",
        )
    return Workload(
        name=name,
        family="database",
        summary=f"PostgreSQL: pgbench -f {path} on a fresh cluster (pgbench's tables loaded) "
        "for the run time; transactions per second, latency from the per-transaction log.",
        direction="mixed",
        unit="TPS",
        kind="pgbench",
        time_based=True,
    )


def mode_of(w: Workload) -> str:
    """`tpcb`, `select` or `script`."""
    if w.name.startswith(_SCRIPT):
        return "script"
    return w.name.split("-")[1]


def script_of(w: Workload) -> Path | None:
    return Path(w.name.removeprefix(_SCRIPT)) if w.name.startswith(_SCRIPT) else None


def scale_for(working_set: int) -> int:
    """pgbench's scale factor for a working set of `working_set` bytes: the data loaded is
    about that large (at least scale 1)."""
    return max(1, min(MAX_SCALE, working_set // BYTES_PER_SCALE))


def bytes_floor(recordsize: int, transactions: int, clients: int) -> float:
    """What the devices must at least write per read-write transaction over a window that
    ends with a CHECKPOINT (engine/pgbench_run.py): each commit's WAL record, and, as one
    client's every commit is an fsync of the WAL (synchronous_commit=on) which no filesystem
    makes durable in less than one block (ZFS's smallest ZIL block and btrfs's sector are
    4 KiB), one such block per transaction; and the checkpoint writes at least one data page,
    which ZFS writes as a whole record of `recordsize`. Several clients may share one fsync
    (group commit), so for them only the WAL record counts per transaction. Redundancy
    (a mirror's second copy, parity) only adds to this."""
    per_commit = max(WAL_PER_TXN_FLOOR, FSYNC_BLOCK) if clients == 1 else WAL_PER_TXN_FLOOR
    return per_commit + max(PAGE, recordsize) / max(1, transactions)


# -- pgbench's own output ---------------------------------------------------------------------
@dataclass(frozen=True)
class Summary:
    """What pgbench prints at the end of a run."""

    transactions: int
    failed: int
    tps: float
    latency_avg_ms: float | None


def parse_summary(stdout: str) -> Summary:
    """pgbench's closing lines (PostgreSQL 13-17): the transaction count and the TPS."""
    txns = re.search(r"number of transactions actually processed:\s*(\d+)", stdout)
    tps = re.search(r"^tps = ([0-9.]+)", stdout, re.MULTILINE)
    if not txns or not tps:
        raise ValueError("pgbench printed no transaction count or tps line")
    failed = re.search(r"number of failed transactions:\s*(\d+)", stdout)
    lat = re.search(r"latency average = ([0-9.]+) ms", stdout)
    return Summary(int(txns.group(1)), int(failed.group(1)) if failed else 0,
                   float(tps.group(1)), float(lat.group(1)) if lat else None)  # fmt: skip


@dataclass(frozen=True)
class TxLog:
    """The per-transaction log (`pgbench -l`): latencies in µs, and what did not complete."""

    latencies_us: tuple[int, ...]
    failed: int
    skipped: int
    first_epoch_s: float | None
    last_epoch_s: float | None

    def latency(self) -> Latency | None:
        """Average and percentiles in ns (the store's unit), nearest rank; None if empty."""
        xs = sorted(self.latencies_us)
        if not xs:
            return None
        n = len(xs)
        mean = sum(xs) / n
        sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
        pct = {str(q): 1000.0 * xs[max(0, math.ceil(q / 100 * n) - 1)] for q in (50, 95, 99)}
        return Latency("transaction", n, mean * 1000, xs[0] * 1000.0, xs[-1] * 1000.0,
                       sd * 1000, pct, _bins(xs))  # fmt: skip


def _bins(latencies_us: list[int]) -> dict[int, int]:
    """A histogram in ns as fio keeps one (64 bins per power of two, each named by its
    lower edge): the replicates' histograms merge into the p99 of all transactions."""
    out: dict[int, int] = {}
    for us in latencies_us:
        ns = us * 1000
        width = 1 << max(0, ns.bit_length() - 7)
        key = ns - ns % width
        out[key] = out.get(key, 0) + 1
    return out


def parse_log_lines(lines: list[str]) -> TxLog:
    """Lines of pgbench's per-transaction log: `client txn latency_us script epoch_s us
    [lag] [retries]`; latency is `failed` or `skipped` for transactions that did not
    complete. A line that is none of these is a ValueError (not a pgbench log)."""
    lat: list[int] = []
    failed = skipped = 0
    first = last = None
    for i, line in enumerate(lines, 1):
        f = line.split()
        if not f:
            continue
        if len(f) < 6 or not (is_digits(f[0]) and is_digits(f[4]) and is_digits(f[5])):
            raise ValueError(f"line {i} is not a pgbench transaction log line: {line[:60]!r}")
        if f[2] == "failed":
            failed += 1
        elif f[2] == "skipped":
            skipped += 1
        elif is_digits(f[2]):
            lat.append(int(f[2]))
        else:
            raise ValueError(f"line {i}: latency {f[2]!r} is not a number of µs")
        when = int(f[4]) + int(f[5]) / 1e6
        first = when if first is None else min(first, when)
        last = when if last is None else max(last, when)
    return TxLog(tuple(lat), failed, skipped, first, last)


def parse_logs(files: list[Path]) -> TxLog:
    """Every thread's log file of one run, together."""
    lines: list[str] = []
    for f in sorted(files):
        lines += f.read_text().splitlines()
    return parse_log_lines(lines)
