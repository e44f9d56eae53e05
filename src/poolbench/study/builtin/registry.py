"""Every built-in study by name. A study is its module alone: every module of this package
but HELPERS exports its study as `BUILTIN` (build, notes, question: study/builtin/base.py),
found here (poolbench/discovery.py) and listed by name; the CLI's options, `--list`, the
examples test and `--print-toml` all come from here. Two studies of one name are refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeGuard

from poolbench import discovery
from poolbench.errors import UsageError
from poolbench.study.builtin.base import COMMON_OPTIONS, Builtin, StudyFile
from poolbench.study.builtin.context import Context
from poolbench.study.builtin.toml_file import to_toml

# The modules of this package that are no study: the registry, the skeleton and context
# every study builds with, the TOML writer, and notes several studies share.
HELPERS = (
    "base", "context", "headline", "l2arc_notes", "registry", "resilver_load", "slow_guard",
    "toml_file",
)  # fmt: skip


def _is_builtin(value: object) -> TypeGuard[Builtin]:
    return isinstance(value, Builtin)


FOUND = discovery.members("poolbench.study.builtin", "BUILTIN", _is_builtin, HELPERS)
# By name: the order `--list`, the CLI's options and the examples take.
STUDIES: dict[str, Builtin] = discovery.by_name(
    sorted(FOUND.members, key=lambda b: b.name), lambda b: (b.name,)
)

# Help for options several studies share; an option only one study has takes its own help.
OPTION_HELP = {
    "widths": "Disk counts / raidz widths (parity, width), e.g. 4,6.",
    "levels": "The study's main factor levels (ashift values, mirror widths, fill percents, "
    "recordsizes, compression algorithms, parities, vdev sources...).",
    "layouts": "Layouts to compare, e.g. raidz1,mirror:2+mirror:2.",
    "records": "Application record / I/O sizes (mirror, recordsize), e.g. 64k,1m.",
    "replicates": "Replicates per configuration (at least 2).",
    "max_replicates": "Most replicates while a CI is wider than the target.",
    "workloads": "Replace the study's workloads, e.g. seq-write,seq-read.",
    "size": "Working set per configuration, e.g. 256M.",
    "runtime": "Seconds per time-based workload.",
    "min_window": "Shortest timed window in seconds (default 3): time-based workloads run at "
    "least this long, shorter size-bound writes are repeated; 0 turns it off.",
}


def get(name: str) -> Builtin:
    if name not in STUDIES:
        raise UsageError(
            f"There is no built-in study '{name}'.",
            f"Run `poolbench study --list`; the studies are {', '.join(STUDIES)}.",
        )
    return STUDIES[name]


def build(name: str, ctx: Context) -> StudyFile:
    """The study dict for `ctx`, after refusing options this study does not take."""
    b = get(name)
    allowed = set(b.options) | set(COMMON_OPTIONS)
    extra = sorted(set(ctx.options) - allowed)
    if extra:
        raise UsageError(
            f"The {name} study takes no --{extra[0].replace('_', '-')} option.",
            "Its options: " + ", ".join(f"--{k.replace('_', '-')}" for k in sorted(allowed)) + ".",
        )
    return b.build(ctx)


def cli_options() -> dict[str, str]:
    """Every option any study takes → its help: the shared text, else '(study) its help'."""
    own: dict[str, list[str]] = {}
    for b in STUDIES.values():
        for key, text in b.options.items():
            if key not in OPTION_HELP:
                own.setdefault(key, []).append(f"({b.name}) {text}")
    shared = {k: v for k, v in OPTION_HELP.items() if k not in COMMON_OPTIONS}
    common = {k: OPTION_HELP[k] for k in COMMON_OPTIONS}
    return shared | {k: "; ".join(v) for k, v in own.items()} | common


def study_text(name: str, ctx: Context, adjust: Callable[[StudyFile], None] | None = None) -> str:
    """The study file `poolbench study NAME --print-toml` prints and `poolbench run` takes;
    `adjust` changes the built data first (--files-from: the untar workload's tree)."""
    data = build(name, ctx)
    if adjust is not None:
        adjust(data)
    return to_toml(get(name), data, ctx.said)


def example_context(name: str) -> Context:
    """The context examples/<name>.toml is written for: the default disks, OpenZFS, md."""
    count, size = get(name).default_disks
    return Context(count, size, dialect="openzfs", has_md=True)


def example_text(name: str) -> str:
    """What examples/<name>.toml holds."""
    return study_text(name, example_context(name))
