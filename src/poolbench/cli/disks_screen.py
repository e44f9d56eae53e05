"""`poolbench disks --screen DEVICES`: the devices resolved (read-only) or claimed (write
tests), the engine's screen run, stored, and shown as a table or JSON."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import click

from poolbench.capabilities import install_hint
from poolbench.cli.claiming import claim_from_cli
from poolbench.cli.common import open_store
from poolbench.engine.screen.compare import SLOW_RULE, advice, slow_disks
from poolbench.engine.screen.jobs import ScreenOptions
from poolbench.engine.screen.path import PATH_RULE
from poolbench.engine.screen.records import DiskScreen
from poolbench.engine.screen.run import Screen, ScreenDisk, screen
from poolbench.errors import CommandLineError, ToolMissingError, UsageError
from poolbench.safety.claims import resolve_dev
from poolbench.safety.guarded import GuardedRunner
from poolbench.safety.inventory import protected_paths, scan
from poolbench.store.screens import add_screen
from poolbench.system.runner import LocalRunner, Runner

MiB = 1024 * 1024


@dataclass(frozen=True)
class ScreenRequest:
    devices: Sequence[str]
    options: ScreenOptions
    destroy_data_on: Sequence[str]
    yes: bool
    db: Path | None
    scratch_dir: Path | None
    as_json: bool


def _read_only_targets(runner: Runner, req: ScreenRequest) -> list[ScreenDisk]:
    """The devices as named, each checked to be a block device; in use is said, not refused:
    reading harms nothing, but what else uses the disk shares its figures."""
    inv = scan(runner, protect=protected_paths(req.db, req.scratch_dir))
    out: list[ScreenDisk] = []
    for given in req.devices:
        try:
            d = inv.by_dev(resolve_dev(given))
        except OSError as exc:
            raise UsageError(f"Cannot screen {given}: {exc}.", "See 'poolbench disks'.") from exc
        if d is None:
            raise UsageError(f"{given} is not a block device poolbench can see.",
                             "Name devices as 'poolbench disks' lists them.")  # fmt: skip
        warn = tuple(
            f"in use ({r.detail}): read anyway, and whatever else uses it shares its figures"
            for r in d.reasons
        )
        if any(o.name == d.name for o in out):
            raise UsageError(f"{given} names {d.path} a second time.",
                             "Name each disk once: its runs would be measured twice.")  # fmt: skip
        out.append(ScreenDisk(d.path, d.name, warn))
    return out


def _targets(runner: Runner, req: ScreenRequest) -> tuple[Runner, list[ScreenDisk]]:
    if not req.options.writes:
        if req.destroy_data_on:
            raise CommandLineError(
                "--destroy-data-on with --screen applies only to the write tests.",
                "Add --write-tests to screen with writes, or leave --destroy-data-on out.",
            )
        return runner, _read_only_targets(runner, req)
    claims = claim_from_cli(runner, req.devices, req.destroy_data_on, req.yes, req.db,
                            req.scratch_dir)  # fmt: skip
    return GuardedRunner(runner, claims), [ScreenDisk(c.path, c.name) for c in claims.claims]


def run_screen(req: ScreenRequest) -> None:
    """Screen, store, show. The store is opened first: a screen it could not keep is refused
    before minutes of measuring."""
    req.options.check()
    runner: Runner = LocalRunner()
    if runner.which("fio") is None:
        raise ToolMissingError("fio is not installed: the screen measures with fio.",
                               install_hint("fio"))  # fmt: skip
    runner, disks = _targets(runner, req)
    store = open_store(req.db, "write")
    seconds = req.options.estimate_s(len(disks))
    click.echo(f"screening {len(disks)} disk(s) at once, about {seconds / 60:.1f} min "
               f"({seconds:.0f} s)", err=True)  # fmt: skip
    result = screen(runner, disks, req.options, progress=lambda s: click.echo(s, err=True))
    opts = {"runtime_s": req.options.runtime_s, "repeats": req.options.repeats,
            "sustain_s": req.options.sustain_s, "interval_s": req.options.interval_s,
            "path": None if result.path is None else result.path.to_json()}  # fmt: skip
    sid = add_screen(store, [d.to_json() for d in result.disks], req.options.writes, opts)
    if req.as_json:
        sys.stdout.write(json.dumps(_document(result, sid, store.path), indent=2) + "\n")
    else:
        show(result, sid, store.path)


def _skipped_text(result: Screen) -> str:
    names = ", ".join(t.name for t in result.skipped)
    return (f"skipped (they write): {names}; read-only by default. To run them, add "
            "--write-tests: the disks are then claimed like any destructive command "
            "(refused if mounted, in a pool or carrying a signature) and their data is "
            "overwritten.")  # fmt: skip


def _document(result: Screen, sid: str, db: Path) -> dict[str, object]:
    return {
        "screen": sid,
        "store": str(db),
        "disks": [d.to_json() | {"advice": advice(d)} for d in result.disks],  # fmt: skip
        "slow": [
            vars(s) | {"slower": s.slower, "text": s.text()} for s in slow_disks(result.disks)
        ],  # fmt: skip
        "slow_rule": SLOW_RULE,
        "path": None if result.path is None else result.path.to_json(),
        "skipped": [t.name for t in result.skipped],
        "skipped_note": _skipped_text(result) if result.skipped else None,
    }


def _rate_line(d: DiskScreen, interval: float, parts: int = 12) -> list[str]:
    """The sustained write's rate over time, in at most `parts` equal slices of the run
    (each slice's bytes over its seconds), to see the knee without --json."""
    series = d.series
    if not series:
        return []
    size = -(-len(series) // parts)  # ceil: whole intervals per slice
    rates = []
    for i in range(0, len(series), size):
        chunk = series[i : i + size]
        secs = sum(x.seconds for x in chunk)
        rates.append(sum(x.bytes for x in chunk) / secs / MiB if secs else 0.0)
    step = size * interval
    return [f"sustained write, MiB/s per {step:.2g} s: " + " ".join(f"{r:.0f}" for r in rates)]


def _cell(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def show(result: Screen, sid: str, db: Path) -> None:
    """The figures (80 columns), how each was measured, the slow disks, each disk's advice."""
    click.echo(f"{'device':<14} {'test':<19} {'mean':>10} {'95% interval':>21} {'runs':>4}")
    notes: list[str] = []
    for d in result.disks:
        for f in d.figures.values():
            s = f.summary
            ci = f"{s.ci_low:.1f}-{s.ci_high:.1f}" if s.n >= 2 else "one run"
            notes += [f.how] if f.how not in notes else []
            mark = f"†{notes.index(f.how) + 1}"
            click.echo(f"{_cell(d.device, 14):<14} {f.test:<19} {s.mean:>10.1f} "
                       f"{ci:>15} {f.unit:<5} {s.n:>4} {mark}")  # fmt: skip
    for i, n in enumerate(notes, 1):
        click.echo(f"†{i} {n}")
    slow = slow_disks(result.disks)
    for sd in slow:
        click.echo(f"warning: {sd.text()}")
    if slow:
        click.echo(f"  (named when {SLOW_RULE})")
    elif len(result.disks) > 1:
        click.echo(f"no disk is slower than its peers ({SLOW_RULE})")
    if result.path is not None:
        p = result.path
        click.echo(("warning: " if p.limited else "") + p.text() + f" (named when {PATH_RULE})")
    for d in result.disks:
        ident = ", ".join(x for x in (d.model, f"serial {d.serial}" if d.serial else
                                      "no serial number") if x)  # fmt: skip
        click.echo(f"{d.device}: {ident}; zoned: {d.zoned or 'not reported'}; write cache: "
                   f"{d.write_cache or 'not reported'}")  # fmt: skip
        for line in [*d.warnings, *advice(d), *_rate_line(d, result.options.interval_s)]:
            click.echo(f"  • {line}")
    if result.skipped:
        click.echo(_skipped_text(result))
    click.echo(f"stored as screen {sid} in {db}")
