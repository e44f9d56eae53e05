"""The sync-slog verdict's latency half (study/builtin/sync_slog.py, headline.p99_compared):
a SLOG pays when its p99 of all I/Os is lower beyond the run-to-run noise, by a test of the
two sets of runs (stats.pooled.difference), not by comparing two point figures. Planted
histograms whose pooled p99 is known by construction."""

from __future__ import annotations

from poolbench.store.facts import ConfigFacts, StudyFacts
from poolbench.study.builtin import sync_slog
from poolbench.study.builtin.context import Context
from poolbench.study.builtin.headline import p99_compared

MiB = 1024 * 1024
W = "sync-write-4k-j4"


def _runs(tail_ns: int) -> tuple[dict[int, int], ...]:
    """Three runs of 1,000 completions: 978–980 at 100 µs, the rest at tail_ns and 2.5%
    above it. In all 3,000 the 2,970th fastest (fio's p99: the first value whose running
    count reaches 99%) is the first tail value: 2,937 fast ones, then the tail."""
    return tuple({100_000: 980 - j, tail_ns: 15 + j, tail_ns * 41 // 40: 5} for j in range(3))


def _cfg(layout: str, iops: tuple[float, ...], tail_ns: int) -> ConfigFacts:
    return ConfigFacts(
        layout, {"layout": layout}, figures={W: iops}, latency_bins={W: _runs(tail_ns)}
    )


def _notes(*configs: ConfigFacts) -> list[str]:
    return sync_slog.notes(Context(4, "1G"), StudyFacts("t", "loop", 4, 256 * MiB, configs, ()))


def test_a_slog_with_a_lower_p99_beyond_the_noise_pays() -> None:
    none = _cfg("mirror:2", (98.0, 100.0, 102.0), 4_000_000)
    log = _cfg("mirror:2 + log mirror:2", (128.0, 130.0, 132.0), 1_000_000)
    text, lower = p99_compared(log, none, W) or ("", False)
    # Pooled p99s by construction: 1 ms against 4 ms.
    assert lower and text.startswith("p99 of all I/Os 0.25× (lower beyond the noise"), text
    line = next(x for x in _notes(none, log) if "log mirror" in x)
    assert "p99 of all I/Os 1.00 ms" in line and "p99 of all I/Os 4.00 ms" in line, line
    assert line.endswith("the SLOG pays (p99 of all I/Os 0.25× (lower beyond the noise, "
                         "97.5% intervals apart))"), line  # fmt: skip


def test_more_iops_with_the_same_p99_is_not_called_a_lower_latency() -> None:
    none = _cfg("mirror:2", (98.0, 100.0, 102.0), 4_000_000)
    log = _cfg("mirror:2 + log mirror:2", (128.0, 130.0, 132.0), 4_000_000)
    text, lower = p99_compared(log, none, W) or ("", True)
    assert not lower and "1.00× (not told apart" in text, text
    line = next(x for x in _notes(none, log) if "log mirror" in x)
    assert "the SLOG pays in IOPS, but its p99 is not shown lower" in line, line


def test_a_slower_slog_does_not_pay_whatever_its_p99() -> None:
    none = _cfg("mirror:2", (98.0, 100.0, 102.0), 4_000_000)
    log = _cfg("mirror:2 + log mirror:2", (99.0, 100.0, 101.0), 1_000_000)
    line = next(x for x in _notes(none, log) if "log mirror" in x)
    assert line.endswith("the SLOG does not pay here"), line


def test_runs_without_histograms_compare_the_runs_p99s_on_the_log_scale() -> None:
    def old(layout: str, p99s: tuple[float, ...]) -> ConfigFacts:
        return ConfigFacts(layout, {"layout": layout}, figures={W: (100.0, 101.0, 99.0)},
                           latency={W: {"99": p99s}})  # fmt: skip

    got = p99_compared(old("b", (1e6, 1.1e6, 0.9e6)), old("a", (4e6, 4.4e6, 3.6e6)), W)
    assert got is not None
    text, lower = got
    assert lower and text.startswith(
        "p99 (geometric mean of the runs' p99s; no histograms to pool) 0.25× (lower, 95% CI "
    ), text
    assert p99_compared(old("b", (1e6,) * 3), ConfigFacts("c", {}, figures={W: (1.0,)}), W) is None
