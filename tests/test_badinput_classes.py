"""Crash classes of issue 29, each fixed as a class and checked as one: digits that only
`str.isdigit()` takes, numbers of thousands of digits, names the system refuses, sums that
overflow a float, versions that are not releases, searches without a bound. Every refusal is
one `error:` paragraph and a non-zero exit, never a traceback. No root, no pools."""

from __future__ import annotations

import ast
import contextlib
import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poolbench import is_digits
from poolbench.cli.main import main
from poolbench.errors import EXIT_INPUT, UsageError
from poolbench.planner.resilience import binomial_tail
from poolbench.planner.rules import RuleSet, parse_zfs_version, rules_note
from poolbench.planner.search import MAX_SEARCH_WORK, check_search_work
from poolbench.store.db import Store

SRC = Path(__file__).resolve().parent.parent / "src" / "poolbench"


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = 0
    try:
        main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out + out.err


def _refused(code: int, out: str, words: str) -> None:
    assert code != 0 and "Traceback" not in out and words in out, out


# -- digits ---------------------------------------------------------------------------------
def test_no_isdigit_left_in_the_source() -> None:
    """`str.isdigit()` takes '²' and '١٢': every check goes through `is_digits` (whose own
    body is the one call allowed)."""
    for path in SRC.rglob("*.py"):
        calls = [
            node.lineno
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute) and node.attr == "isdigit"
        ]
        assert len(calls) == (1 if path == SRC / "__init__.py" else 0), (path, calls)


@given(st.text(max_size=12))
def test_is_digits_is_exactly_ascii_digits(text: str) -> None:
    assert is_digits(text) == bool(re.fullmatch(r"[0-9]+", text, re.ASCII))
    if is_digits(text):
        assert int(text) >= 0


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "r.db"
    Store(path).close()
    return path


@pytest.mark.parametrize(
    "argv",
    [["report", "²"], ["export", "²", "--csv"], ["report", "١٢"], ["report", "9" * 5000]],
)
def test_run_references_take_ascii_digits(
    argv: list[str], store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run_cli([*argv, "--db", str(store)], capsys)
    _refused(code, out, "is not a run")
    assert len(out) < 400  # 5,000 digits are not echoed back


def test_compare_takes_ascii_digits(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_cli(["compare", "1", "²", "--db", str(store)], capsys)
    assert code != 0 and "Traceback" not in out, out


@pytest.mark.parametrize("widths", ["²", "4,²", "9" * 5000])
def test_study_widths_take_ascii_digits(widths: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_cli(["study", "parity", "--widths", widths, "--dry-run"], capsys)
    _refused(code, out, "is not a whole number")


# -- names the system refuses ---------------------------------------------------------------
def test_a_nul_byte_in_a_study_device_is_refused(
    tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = tmp_path / "s.toml"
    study.write_text(
        'name = "s"\n[disks]\nsource = "devices"\n'
        'devices = ["/dev/sdx\\u0000", "/dev/sdy", "/dev/sdz"]\n'
        '[factors]\nlayout = ["raidz1"]\n'
    )
    code, out = run_cli(["run", str(study), "--dry-run", "--db", str(store)], capsys)
    _refused(code, out, "NUL byte")


def test_a_file_name_too_long_is_one_paragraph(
    tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run_cli(["import", str(tmp_path / ("b" * 300)), "--db", str(store)], capsys)
    assert code != 0 and "Traceback" not in out, out
    assert "longer than this system allows" in out or "too long" in out, out


def test_os_name_errors_become_one_paragraph(capsys: pytest.CaptureFixture[str]) -> None:
    """The class: any ENAMETOOLONG or NUL byte reaching the system from a command."""
    from poolbench.cli import main as cli_main

    for exc in (OSError(36, "File name too long", "/tmp/" + "a" * 5000),
                ValueError("embedded null byte")):  # fmt: skip
        with pytest.raises(SystemExit) as stop:
            cli_main._refused_name(exc)
        assert stop.value.code == EXIT_INPUT  # a name the user gave: input refused
    err = capsys.readouterr().err
    assert "(5005 characters) is longer than this system allows" in err
    assert "contains a NUL byte" in err


# -- the risk sum -----------------------------------------------------------------------------
def _exact_tail(n: int, p: float, k: int) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1, n + 1))


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 60), p=st.floats(1e-9, 0.999), k=st.integers(0, 60))
def test_binomial_tail_agrees_with_the_exact_sum(n: int, p: float, k: int) -> None:
    got = binomial_tail(n, p, k)
    assert got == pytest.approx(_exact_tail(n, p, k) if k < n else 0.0, rel=1e-9, abs=1e-15)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 20_000), p=st.floats(0.0, 1.0), k=st.integers(0, 20_000))
def test_binomial_tail_is_a_probability_for_any_width(n: int, p: float, k: int) -> None:
    got = binomial_tail(n, p, k)
    assert 0.0 <= got <= 1.0 and math.isfinite(got)


def test_a_10000_way_mirror_plans(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_cli(["plan", "--layout", "mirror:10000x1T", "--json"], capsys)
    assert code == 0, out[-500:]
    vdev = json.loads(out)["resilience"]["vdevs"][0]
    assert vdev["failures_tolerated"] == 9999
    # 9,999 further failures within a 2.7 h resilver: far below any float.
    assert vdev["p_pool_loss_during_resilver"] == 0.0


def test_a_3_way_mirror_risk_is_the_closed_form() -> None:
    # P(both survivors fail) = p^2 for a 3-way mirror (it still tolerates one more).
    p = 1e-4
    assert binomial_tail(2, p, 1) == pytest.approx(p * p, rel=1e-12)


# -- versions -------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["1.0", "0.9", "1.2.3", "3.0", "9" * 5000, "2.²", "0.5.9"])
def test_versions_that_are_not_releases_are_refused(text: str) -> None:
    with pytest.raises(UsageError):
        parse_zfs_version(text)


@given(st.text(max_size=30))
def test_any_version_text_gives_rules_or_a_usage_error(text: str) -> None:
    with contextlib.suppress(UsageError):
        assert isinstance(parse_zfs_version(text), RuleSet)


def test_a_later_2x_says_it_takes_the_newest_rules() -> None:
    assert "assumed to keep them" in rules_note("2.9")
    assert "OpenZFS 2.1 and later" in rules_note("2.3")
    assert "0.6.0 - 0.6.4" in rules_note("0.6.3")


# -- the search's bound ---------------------------------------------------------------------
def test_the_search_refuses_work_beyond_its_bound() -> None:
    sizes = [(100 + i) << 30 for i in range(1000)]
    with pytest.raises(UsageError, match="different sizes is more than one search does"):
        check_search_work(sizes)
    check_search_work([1 << 40] * 10_000)  # 10,000 of one size: 10,000 disk-sizes
    check_search_work([1 << 40] * 5000 + [2 << 40] * 5000)
    assert 10_000 * 2 <= MAX_SEARCH_WORK < 1000 * 1000


def test_plan_refuses_1000_sizes_quickly(capsys: pytest.CaptureFixture[str]) -> None:
    disks = ",".join(f"{i}G" for i in range(100, 1100))
    code, out = run_cli(["plan", "--disks", disks, "--json"], capsys)
    _refused(code, out, "Group the disks into a few sizes")


# -- numbers of 120,000 digits, anywhere a number is read ------------------------------------
HUGE = "9" * 120_000


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--disks", f"{HUGE}x4TB"],
        ["plan", "--disks", f"6x{HUGE}T"],
        ["plan", "--layout", "raidz2:6x4TB", "--disk-speed", f"100M,{HUGE}iops"],
        ["plan", "--layout", "raidz2:6x4TB", "--disk-speed", f"{HUGE}M,100iops"],
        ["plan", "--layout", "raidz2:6x4TB", "--top", HUGE],
        ["plan", "--layout", "raidz2:6x4TB", "--ashift", HUGE],
        ["plan", "--layout", "raidz2:6x4TB", "--zfs-version", HUGE],
        ["study", "parity", "--widths", HUGE, "--dry-run"],
    ],
)
def test_huge_numbers_are_refused_briefly(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run_cli(argv, capsys)
    assert code != 0 and "Traceback" not in out, out[:500]
    assert len(out) < 1000, out[:500]  # the number is not echoed back whole


@pytest.mark.parametrize("speed", ["100M,0iops", "100M,0.0iops", "100M,250iops/0iops"])
def test_a_disk_of_no_iops_is_refused(speed: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The search scores speed in units of one disk: 0 IOPS divided by zero."""
    code, out = run_cli(["plan", "--disks", "6x4TB", "--disk-speed", speed], capsys)
    _refused(code, out, "no IOPS at all")
