"""`poolbench bench`: an honest benchmark of one mounted filesystem."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from poolbench.cli.common import (
    MIN_WINDOW_ENV,
    REPLICATES,
    FiniteFloat,
    WholeNumber,
    a_path,
    check_replicates,
    cli_size,
    db_option,
    old_flag,
    open_store,
    pick,
    progress_bar,
    say_bench_interrupted,
)
from poolbench.engine.bench_run import BenchResult, BenchRun
from poolbench.engine.replicates import policy
from poolbench.engine.subject import Options
from poolbench.errors import CommandLineError, UsageError
from poolbench.report import bench_table
from poolbench.report.metrics import Metric, parse_metrics
from poolbench.store.db import Store
from poolbench.system.runner import LocalRunner
from poolbench.units import MiB
from poolbench.workloads.library import DEFAULT_BENCH, parse_list


def _check_args(
    path: Path | None,
    scratch_size: str | None,
    min_runs: int,
    max_runs: int,
    ci_target: float,
    dry_run: bool,
) -> None:
    """Everything refused before the store is opened (a typo must not leave a "failed" run)."""
    if (path is None) == (scratch_size is None):
        raise CommandLineError(
            "Give either a PATH to measure or --scratch SIZE, not both and not neither.",
            "Example: poolbench bench /mnt/pool or poolbench bench --scratch 2G.",
        )
    check_replicates(min_runs, max_runs)
    if not 0 < ci_target < 100:
        raise CommandLineError(f"--ci-target {ci_target} must be a percentage between 0 and 100.")
    if path is not None and not dry_run and not path.is_dir():
        raise UsageError(
            f"{path} is not a directory (or does not exist): there is nothing to measure.",
            "Give the mountpoint of the filesystem to benchmark, e.g. poolbench bench /tank.",
        )


@click.command()
@click.argument("path", required=False, callback=a_path)
@click.option(
    "--scratch",
    "scratch_size",
    default=None,
    metavar="SIZE",
    help="Measure a scratch ext4 that poolbench makes on a sparse file of SIZE (e.g. 2G), "
    "instead of PATH; removed afterwards. Needs root.",
)
@click.option(
    "--workloads",
    "workload_names",
    default=",".join(DEFAULT_BENCH),
    show_default=True,
    help="Comma-separated workload names (see 'poolbench workloads').",
)
@click.option("--size", default=None, help="Working set, e.g. 4G. Default: 2× RAM (cold rule).")
@click.option(
    "--compressibility",
    default=0,
    type=WholeNumber(0, 99),
    show_default=True,
    help="Declared data compressibility in percent. 0 = incompressible. Never zeros.",
)
@click.option(
    "--runtime",
    type=WholeNumber(1, 86400),
    default=30,
    show_default=True,
    help="Seconds per time-based (random) run.",
)
@click.option(
    "--min-window",
    "min_window",
    type=FiniteFloat(0, 3600),
    default=3.0,
    show_default=True,
    envvar=MIN_WINDOW_ENV,
    metavar="SECONDS",
    help="Shortest timed window: time-based workloads run at least this long, shorter "
    "size-bound writes are repeated (fio loops); 0 turns it off (environment: "
    "POOLBENCH_MIN_WINDOW).",
)
@click.option(
    "--iodepth",
    type=WholeNumber(1, 1024),
    default=1,
    show_default=True,
    help="Queue depth for random workloads (>1 uses libaio with O_DIRECT).",
)
@click.option(
    "--jobs",
    "numjobs",
    type=WholeNumber(1, 256),
    default=1,
    show_default=True,
    help="fio jobs for random workloads.",
)
@click.option(
    "--metadata-files",
    type=WholeNumber(10, 10_000_000),
    default=20000,
    show_default=True,
    help="Files per metadata test.",
)
@click.option(
    "--replicates",
    "min_runs",
    type=REPLICATES,
    default=None,
    help="Replicates at least (default 3), as a study's --replicates.",
)
@click.option(
    "--max-replicates",
    "max_runs",
    type=REPLICATES,
    default=None,
    help="Replicates at most (default 10), as a study's --max-replicates.",
)
@old_flag("--min-runs", "old_min_runs", REPLICATES)
@old_flag("--max-runs", "old_max_runs", REPLICATES)
@click.option(
    "--ci-target",
    type=FiniteFloat(0.1, 99.0),
    default=5.0,
    show_default=True,
    help="Repeat until the 95% CI is within ± this percent of the mean.",
)
@click.option(
    "--seed",
    type=WholeNumber(0, 2**31 - 1),
    default=None,
    help="Seed of the workload order per round and of fio's random offsets: the same seed "
    "replays them (default: random; recorded in the run either way).",
)
@click.option(
    "--metric",
    "metric_text",
    default=None,
    metavar="pNN[,pNN]",
    help="Completion-latency percentiles shown beside each figure: p50, p90, p99, p99.9 "
    "(default: p99 for random and synchronous workloads). --json always has all four.",
)
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON on stdout.")
@click.option("--dry-run", is_flag=True, help="Print the commands and jobs; change nothing.")
@click.option(
    "--hosts",
    "hosts_spec",
    default=None,
    metavar="HOSTFILE|H1,H2",
    help="Measure many hosts at once through fio's client/server mode: a host file "
    "(`host[:port] [path]` per line) or a comma list; needs --size. Each host runs "
    "`fio --server=ADDRESS`: fio's server has no authentication, so bind it to a management "
    "address, never a wildcard (docs/fleet.md).",
)
@click.option(
    "--record-as",
    "record_as",
    default=None,
    metavar="NAME",
    help="Record the run in the series NAME (letters, digits, . _ - : / @ +), a stable name "
    "for `poolbench history NAME` whatever the path; for scheduled checks (docs/history.md).",
)
@db_option
def bench(
    path: Path | None,
    scratch_size: str | None,
    workload_names: str,
    size: str | None,
    compressibility: int,
    runtime: int,
    min_window: float,
    iodepth: int,
    numjobs: int,
    metadata_files: int,
    min_runs: int | None,
    max_runs: int | None,
    old_min_runs: int | None,
    old_max_runs: int | None,
    ci_target: float,
    seed: int | None,
    metric_text: str | None,
    as_json: bool,
    dry_run: bool,
    hosts_spec: str | None,
    record_as: str | None,
    db: Path | None,
) -> None:
    """Benchmark the filesystem mounted at PATH, honestly.

    Working set ≥ 2× RAM by default, caches dropped and verified before cold reads,
    incompressible data, durable writes (fsync counted), device bytes checked against the
    application's, repeated until the 95% confidence interval is within ±5%; what it ran on
    (versions, the pool behind PATH, its disks, fill) recorded: docs/history.md.

    Example: poolbench bench /tank/scratch --workloads seq-write,seq-read --size 8G

    Many hosts: poolbench bench --hosts fleet.hosts /tank/bench --size 64G
    """
    least = int(pick(("--replicates", min_runs), ("--min-runs", old_min_runs), 3))
    most = int(pick(("--max-replicates", max_runs), ("--max-runs", old_max_runs), 10))
    _check_series_name(record_as, hosts_spec)
    if hosts_spec is not None:
        from poolbench.cli.fleet_bench import bench_fleet

        params = click.get_current_context().params
        bench_fleet({**params, "min_runs": least, "max_runs": most})
        return
    _check_args(path, scratch_size, least, most, ci_target, dry_run)
    metrics = _latency_metrics(metric_text)
    options = Options(
        workloads=parse_list(workload_names),
        size=cli_size(size, "--size") if size is not None else None,  # '' is refused
        compressibility=compressibility,
        runtime_s=runtime,
        min_window_s=min_window,
        iodepth=iodepth,
        numjobs=numjobs,
        metadata_files=metadata_files,
        stop=policy(least, most, ci_target / 100),
        seed=seed,
    )
    _measure(path, scratch_size, options, dry_run=dry_run, as_json=as_json, db=db, metrics=metrics,
             record_as=record_as)  # fmt: skip


SERIES_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,99}$")


def _check_series_name(name: str | None, hosts_spec: str | None) -> None:
    """--record-as: a name a series can keep, for one target (not a fleet run)."""
    if name is None:
        return
    if hosts_spec is not None:
        raise CommandLineError(
            "--record-as names the series of one target; a fleet run (--hosts) is not a series.",
            "Record each host's bench on that host, then bring the stores together with "
            "`poolbench import` (docs/history.md).",
        )
    if not SERIES_NAME.match(name):
        raise CommandLineError(
            f"--record-as {name!r} is not a series name.",
            "Use 1–100 letters, digits and . _ - : / @ +, starting with a letter or digit, "
            "e.g. --record-as tank-nightly.",
        )


def _job_text(name: str, text: str) -> str:
    """A fio job file as the dry run shows it: named, indented under its command."""
    body = "\n".join(f"    {line}" for line in text.rstrip("\n").splitlines())
    return f"  job {name}:\n{body}"


def _measure(
    path: Path | None,
    scratch_size: str | None,
    options: Options,
    *,
    dry_run: bool,
    as_json: bool,
    db: Path | None,
    metrics: list[Metric] | None = None,
    record_as: str | None = None,
) -> None:
    err = Console(stderr=True)
    runner = LocalRunner(
        dry_run=dry_run, echo=lambda s: err.print(f"[dim]would run:[/] {escape(s)}")
    )
    store = open_store(db, "dry" if dry_run else "write")
    scratch_bytes = cli_size(scratch_size, "--scratch") if scratch_size is not None else None
    bench_run = BenchRun(runner, store, path, options, scratch_bytes, scratch_size, record_as)
    if dry_run:
        # Each job file right under the command that would run it (the help promises both).
        bench_run.dry_run(
            lambda name, text: err.print(
                _job_text(name, text), markup=False, highlight=False, soft_wrap=True
            )
        )
        err.print("dry run: nothing was changed.")
        return

    done = bench_run.run(lambda: progress_bar(err), say_bench_interrupted(store.path),
                         lambda text: err.print(f"space: {text}", markup=False))  # fmt: skip
    if as_json:
        click.echo(
            json.dumps(
                {
                    "run_id": done.run_id,
                    "db": str(store.path),
                    "results": bench_table.as_json(done.results),
                    "fill": fp.fill if (fp := done.session.fingerprint) else None,
                    "space": done.session.working_set.as_dict()
                    if done.session.working_set
                    else None,
                },
                indent=2,
            )
        )
        return
    _render(done, bench_run.options, store, metrics)


def _latency_metrics(text: str | None) -> list[Metric] | None:
    """--metric for bench: latency percentiles only (the figure itself is always shown)."""
    if text is None:
        return None
    metrics = parse_metrics(text)
    if not all(m.is_latency for m in metrics):
        raise CommandLineError(
            f"--metric '{text}': bench always shows each workload's own figure; --metric "
            "chooses the latency percentiles beside it.",
            "Use p50, p90, p99 or p99.9, comma-separated (e.g. --metric p50,p99.9).",
        )
    return metrics


def _render(
    done: BenchResult, options: Options, store: Store, metrics: list[Metric] | None
) -> None:
    session = done.session
    ws = session.working_set
    tgt = session.device_target
    assert ws is not None and tgt is not None
    stop = options.stop
    head = (
        f"poolbench bench — run {done.run_id}: {session.target} ({tgt.mount.fstype} on "
        f"{', '.join(tgt.devices) or 'no block device'})\n"
        f"working set {ws.size_bytes / MiB:,.0f} MiB = {ws.ratio_to_ram:.2f}× RAM; "
        "cold reads after a cache drop, checked each time (a failed check is a warning); "
        f"data {options.compressibility}% compressible (fresh random buffers); "
        f"writes include fsync; {stop.min_runs}–{stop.max_runs} runs "
        f"to a 95% CI within ±{stop.ci_target:.0%}; fio {session.fio_version}"
        + (f"; filesystem {fill * 100:.1f}% full at the start"
           if session.fingerprint and (fill := session.fingerprint.fill) is not None else "")
    )  # fmt: skip
    console = Console(width=None if sys.stdout.isatty() else 110)
    bench_table.render(console, done.results, head, metrics)
    if ws.below_cold_rule:
        console.print(
            f"note: the working set is below 2× RAM ({ws.ratio_to_ram:.2f}×); cold reads rely "
            "on the cache drop (checked per figure) and the device byte check above."
        )
    console.print(f"stored as run {done.run_id} in {store.path}", markup=False)
