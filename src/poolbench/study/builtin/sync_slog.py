"""sync-slog: what synchronous writes cost, when a separate log device (SLOG) pays, and what
`sync=disabled` "gains" and risks: sync=standard/always/disabled × log none/single/mirror ×
jobs; synchronous random writes (fsync after each) beside plain random writes.

zfs-fuse (pool version 23) has no `sync` property (pool version 28 added it): there the study
measures sync=standard only, and refuses --levels. Log devices use the layout grammar's log
class (`raidz1:3 + log mirror:2`); where this build's grammar lacks it, asking for a log
level is refused before anything is created.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from poolbench import capabilities
from poolbench.errors import Unsupported, UsageError
from poolbench.study.builtin.base import Builtin, StudyFile, need, study_file, working_set
from poolbench.study.builtin.context import Context
from poolbench.study.builtin.headline import Figure, compared, figure, p99_compared
from poolbench.workloads.workload import format_size, parse_record_size

if TYPE_CHECKING:
    from poolbench.store.facts import ConfigFacts, StudyFacts

SYNC_LEVELS = ["standard", "always", "disabled"]
LOG_DISKS = {"none": 0, "single": 1, "mirror": 2}
PAYS = 1.10  # a SLOG "pays" when sync writes are at least this much faster with it

DISABLED_RISK = (
    "sync=disabled acknowledges every fsync/O_DSYNC write before it is on disk: after a crash "
    "or power cut the last few seconds of writes the application was told are durable (up "
    "to a transaction group or two, zfs_txg_timeout = 5 s) are gone. The pool stays "
    "consistent; a database, an NFS client or a VM guest that trusted those writes may not."
)
SAME_DEVICES = (
    "The log devices here are the same kind of device as the pool's members (sparse files on "
    "one filesystem): a SLOG helps on real hardware when it completes sync writes faster "
    "than the pool does (a low-latency SSD with power-loss protection); measure yours."
)


def log_layout(base: str, log: str) -> str:
    """The layout of the pool `base` with a log of kind `log` (none, single, mirror)."""
    if log == "none":
        return base
    return f"{base} + log " + ("mirror:2" if log == "mirror" else "stripe:1")


def _check_log_grammar(layout: str) -> None:
    """Refuse a log level this build's layout grammar cannot express (before any pool)."""
    from poolbench.planner.layout import check_widths

    try:
        check_widths(layout)
    except UsageError:
        raise Unsupported(
            f"The sync-slog study needs a log device ('{layout}'), but this build's layout "
            "grammar has no log class yet, so it cannot build that pool; nothing was created.",
            "Run with --logs none (the ZIL in the pool only), or use a poolbench whose layout "
            "grammar has vdev classes (`+ log mirror:2`).",
        ) from None


def _sync_levels(ctx: Context) -> list[str]:
    if ctx.dialect != "zfs-fuse":
        return ctx.opt_list("levels", SYNC_LEVELS)
    if "levels" in ctx.options:
        raise capabilities.unsupported(
            "sync",
            "The sync-slog study was given --levels (sync=...), but this machine's ZFS is "
            "zfs-fuse (pool version 23), which has no sync property: it always behaves as "
            "sync=standard. Nothing was created.",
            "Drop --levels to measure sync=standard here, or run the study on OpenZFS for "
            "always and disabled (the guest tier: vm/run-openzfs-tier.sh).",
        )
    ctx.announce(
        "no sync levels: zfs-fuse has no sync property (it behaves as sync=standard); "
        "OpenZFS adds always and disabled."
    )
    return []


def build(ctx: Context) -> StudyFile:
    logs = ctx.opt_list("logs", list(LOG_DISKS))
    bad = [x for x in logs if x not in LOG_DISKS]
    if bad:
        raise UsageError(
            f"--logs {bad[0]} is not none, single or mirror.", "e.g. --logs none,mirror"
        )
    need(ctx, 2 + max(LOG_DISKS[x] for x in logs), "sync-slog study (a mirror and its logs)")
    base = ctx.options.get("base", "mirror:2")
    layouts = [log_layout(base, x) for x in logs]
    for layout in layouts:
        if layout != base:
            _check_log_grammar(layout)
    records = [format_size(parse_record_size(r)) for r in ctx.opt_list("records", ["4k"])]
    jobs = ctx.opt_ints("jobs", [1, 4, 16])
    names = [
        f"{kind}-{r}-j{j}" for r in records for j in jobs for kind in ("rand-write", "sync-write")
    ]
    factors: dict[str, list[str | int]] = {"backend": ["zfs"], "layout": list(layouts)}
    sync = _sync_levels(ctx)
    if sync:
        factors["sync"] = list(sync)
    return study_file(
        ctx,
        "sync-slog",
        "synchronous random writes (fsync after each) beside plain random writes, per sync "
        "setting, log device and job count: what sync costs, when a SLOG pays, what "
        "sync=disabled risks",
        factors | {"ashift": [12]},
        {"names": names, "size": working_set(ctx, 0.15, cap="256M"), "runtime": 10},
    )


def log_kind(layout: str) -> str:
    if "+ log" not in layout:
        return "none"
    return "mirror" if "log mirror" in layout else "single"


def _find(facts: StudyFacts, log: str, sync: str) -> ConfigFacts | None:
    return next(
        (
            c
            for c in facts.configs
            if log_kind(c.level("layout")) == log and c.level("sync", "standard") == sync
        ),
        None,
    )


def _sync_cost(facts: StudyFacts) -> list[str]:
    """Under sync=standard without a log: synchronous writes against plain ones."""
    c = _find(facts, "none", "standard")
    lines: list[str] = []
    for w in c.figures if c is not None else ():
        plain = "rand-write-" + w.removeprefix("sync-write-")
        s = figure(c, w) if w.startswith("sync-write-") and c is not None else None
        a = figure(c, plain) if c is not None else None
        if s and a and c is not None:
            text, significant = compared(c.figures[plain], c.figures[w])
            said = f"sync is {text}" if significant else text
            lines.append(f"  {w}: {s.text()} vs plain writes {a.text()}: {said}")
    head = "what sync writes cost (sync=standard, no log; ratio of mean IOPS, 95% Fieller CI):"
    return [head, *lines] if lines else []


# workload, a's and b's figure, a vs b (IOPS), significant, a's p99 against b's (or None)
Pair = tuple[str, Figure, Figure, str, bool, tuple[str, bool] | None]


def _sync_pairs(a: ConfigFacts | None, b: ConfigFacts | None) -> list[Pair]:
    """The sync-write workloads measured on both a and b: (workload, a's figure, b's, a
    against b with its interval, whether the replicates show a difference, a's p99 against
    b's with whether it is lower beyond the noise)."""
    if a is None or b is None:
        return []
    out = []
    for w in a.figures:
        fa, fb = figure(a, w), figure(b, w)
        if w.startswith("sync-write-") and fa and fb:
            out.append((w, fa, fb, *compared(b.figures[w], a.figures[w]), p99_compared(a, b, w)))
    return out


def _verdict(
    with_log: Figure, without: Figure, significant: bool, p99: tuple[str, bool] | None
) -> str:
    """A SLOG pays when sync writes get ≥ 10% more IOPS with it, the replicates show the
    difference is not noise, and, when latencies were recorded, its p99 is lower beyond the
    noise too (`p99_compared`: a test of the two, not a comparison of two point figures)."""
    r = with_log.iops / without.iops if without.iops > 0 else 0.0
    if not (r >= PAYS and significant):
        return "the SLOG does not pay here"
    if p99 is None:
        return "the SLOG pays"  # no latencies recorded: IOPS is all there is
    text, lower = p99
    if lower:
        return f"the SLOG pays ({text})"
    return f"the SLOG pays in IOPS, but its p99 is not shown lower ({text})"


def _slog_pays(facts: StudyFacts) -> list[str]:
    lines = [
        f"  sync={sync}, {w}: log {log} {a.text()} vs no log {b.text()}: "
        f"{text}; {_verdict(a, b, significant, p99)}"
        for sync in ("standard", "always")
        for log in ("single", "mirror")
        for w, a, b, text, significant, p99 in _sync_pairs(
            _find(facts, log, sync), _find(facts, "none", sync)
        )
    ]
    if not lines:
        return []
    head = "when a SLOG pays (synchronous writes, with a log vs without; 95% Fieller CI):"
    return [head, *lines, SAME_DEVICES]


def _disabled(facts: StudyFacts) -> list[str]:
    lines = [
        f"  log {log}, {w}: sync=disabled {a.text()} vs standard {b.text()}: {text}"
        for log in LOG_DISKS
        for w, a, b, text, *_ in _sync_pairs(
            _find(facts, log, "disabled"), _find(facts, log, "standard")
        )
    ]
    return ["what sync=disabled 'helps':", *lines, DISABLED_RISK] if lines else []


def notes(ctx: Context, facts: StudyFacts) -> list[str]:
    out = _sync_cost(facts) + _slog_pays(facts) + _disabled(facts)
    if not any(c.level("sync") for c in facts.configs):
        out.append(
            "only sync=standard was measured (this ZFS has no sync property, or --levels "
            "left it out): what sync=always and sync=disabled do is not known from this run."
        )
    return out


BUILTIN = Builtin(
    "sync-slog",
    "What do sync writes cost, when does a SLOG pay, and what does sync=disabled risk?",
    (4, "1G"),
    build,
    {
        "levels": "sync settings, e.g. standard,always,disabled (OpenZFS)",
        "logs": "log devices: none, single, mirror",
        "jobs": "concurrent jobs per point, e.g. 1,4,16",
        "records": "write sizes, e.g. 4k,16k,128k",
        "base": "the pool's layout without its log, e.g. mirror:2 or raidz1:3",
    },
    notes=notes,
)
