"""How long one fio run may take: its time limit, derived from the job itself (pure).

fio's own `runtime` is not enough: a job in a pool that stopped answering sits in the kernel
and never looks at its clock. So the Runner stops fio at a limit computed from what the job
asks (docs/watchdog.md):

    limit = START_S + MARGIN × (time-based run time and ramp
                                + bytes to move / FLOOR_RATE
                                + files to create, stat or delete / FLOOR_OPS)

(watchdog.work_limit: START_S = 60 s, MARGIN = 2, FLOOR_RATE = 1 MiB/s, FLOOR_OPS = 50/s;
all but the run time by design scaled by POOLBENCH_TIME_LIMIT_SCALE).
A time-based job lasts its runtime; a size-bound one moves `io_size` (else `size`, else
`filesize` × `nrfiles`) times `loops`, in each of its `numjobs` processes; a replay moves its
trace's bytes and, replayed in time, lasts its trace. Every job of the file is counted as if
it ran alone (they may run one after another). FLOOR_RATE and FLOOR_OPS are the slowest a
legitimate run goes here: a random 4 KiB write on one spinning disk, or a member capped by the
slow-disk study, is slower than the pool's streaming rate but not slower than these.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from poolbench import is_digits
from poolbench.system.watchdog import FLOOR_OPS, FLOOR_RATE, work_limit

_TIME = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "": 1.0}
_SIZE = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def _seconds(text: str) -> float:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(us|ms|s|m|h|d)?\s*", text.lower())
    return float(m.group(1)) * _TIME[m.group(2) or ""] if m else 0.0


def _bytes(text: str) -> int:
    """fio's sizes: 4096, 4k, 64m, 1g (KiB powers, as fio reads them by default)."""
    m = re.fullmatch(r"\s*(\d+)\s*([kmgtp]?)i?b?\s*", text.lower())
    return int(m.group(1)) * _SIZE[m.group(2)] if m else 0


def sections(job_text: str) -> list[dict[str, str]]:
    """Each job's options, the [global] section's beneath its own."""
    glob: dict[str, str] = {}
    jobs: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    for raw in job_text.splitlines():
        line = raw.strip()
        if not line or line.startswith((";", "#")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = glob if line[1:-1] == "global" else {}
            if current is not glob:
                jobs.append(current)
            continue
        if current is not None:
            key, _, value = line.partition("=")
            current[key.strip()] = value.strip()
    return [glob | j for j in jobs]


def _args_job(args: Sequence[str]) -> dict[str, str]:
    """A job given on the command line (`fio --name=x --size=1g ...`)."""
    return {a[2:].partition("=")[0]: a.partition("=")[2] for a in args if a.startswith("--")}


def _replay(opts: dict[str, str]) -> tuple[int, float]:
    """A replay's bytes and its trace's length in seconds (v3 iolog: µs timestamps)."""
    try:
        lines = Path(opts["read_iolog"]).read_text().splitlines()
    except OSError:
        return 0, 0.0
    moved, last = 0, 0
    for line in lines:
        f = line.split()
        if len(f) >= 5 and f[2] in ("read", "write") and is_digits(f[4]) and is_digits(f[0]):
            moved += int(f[4])
            last = max(last, int(f[0]))
    return moved, 0.0 if opts.get("replay_no_stall") == "1" else last / 1e6


def job_work(opts: dict[str, str]) -> tuple[float, int, int]:
    """What one job asks for: (seconds it runs by design, bytes it moves, files it makes)."""
    numjobs = max(1, int(opts.get("numjobs", "1") or 1))
    ramp = _seconds(opts.get("ramp_time", "0"))
    if opts.get("time_based") == "1":
        return _seconds(opts.get("runtime", "0")) + ramp, 0, 0
    if "read_iolog" in opts:
        moved, lasts = _replay(opts)
        return lasts, moved, 0
    nrfiles = max(1, int(opts.get("nrfiles", "1") or 1))
    per_file = _bytes(opts.get("filesize", "0"))
    size = _bytes(opts.get("io_size", "")) or _bytes(opts.get("size", "")) or per_file * nrfiles
    loops = max(1, int(opts.get("loops", "1") or 1))
    moved, files = size * loops * numjobs, nrfiles * numjobs * loops
    runtime = _seconds(opts.get("runtime", "0"))  # a size-bound job may also stop at this
    if runtime and moved / FLOOR_RATE + files / FLOOR_OPS > runtime:
        return ramp + runtime, 0, 0
    return ramp, moved, files


def limit_s(job_text: str, args: Sequence[str] = ()) -> float:
    """The time limit of one fio run of `job_text` (and/or a job given in `args`)."""
    jobs = sections(job_text) + ([_args_job(args)] if any(a.startswith("--name=") for a in args)
                                 else [])  # fmt: skip
    work = [job_work(j) for j in jobs]
    return work_limit(sum(w[0] for w in work), sum(w[1] for w in work), sum(w[2] for w in work))
