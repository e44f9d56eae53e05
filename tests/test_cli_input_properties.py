"""Every number, id, size, name and path a user types at the CLI, whatever it is: a result
or one clear error, never a traceback. The classes issue 29 names (non-ASCII digits such as
², numbers of 5,000 digits, NUL bytes, names of 5,000 characters) must be refused with a
non-zero exit and a message; any other text may be accepted, or refused the same way.
Entry points not already covered by tests/test_badinput.py: the built-in studies' options,
bench's options and path, run's study path, --disks, --seed, --scratch-dir and --db,
plan's --disks and --zfs-version, and the run ids of report, export and compare. No root,
no pools: each command stops at its refusal, --print-toml or --dry-run."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from poolbench.cli.main import main
from poolbench.errors import EXIT_INPUT, EXIT_OK, EXIT_UNSUPPORTED, EXIT_USAGE

# Text no option of poolbench takes as valid.
BAD_VALUES = ["²", "1²", "\u0661\u0662", "9" * 5000, "1\x00", "a" * 5000, "", " ", "-1", "nan",
              "1e400", "\x00", "/dev/sd\x00b", "é" * 5000]  # fmt: skip
# Paths: '²' or 'nan' is a file name like any other; these are not.
BAD_PATHS = ["", "\x00", "1\x00", "/dev/sd\x00b", "a" * 5000, "é" * 5000]
BAD = st.sampled_from(BAD_VALUES)
IDS = [repr(v[:6]) + (f"x{len(v)}" if len(v) > 6 else "") for v in BAD_VALUES]
ANY = st.one_of(BAD, st.text(max_size=20))
PROPERTY = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = 0
    try:
        main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out + out.err


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): "dir"
        if p.is_dir()
        else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The store and HOME inside tmp_path: whatever a command creates would show there."""
    monkeypatch.setenv("POOLBENCH_DB", str(tmp_path / "store" / "results.db"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def _clean(argv: list[str], capsys: pytest.CaptureFixture[str], root: Path, bad: bool) -> None:
    """No traceback, no internal error, nothing created; a BAD value is refused (exit 1 or
    2) with a message of its own."""
    before = _tree(root)
    code, out = _run(argv, capsys)
    assert "Traceback" not in out and "internal error" not in out, out[-2000:]
    # refused: a command line (2) or an input (5) by the one exit-code table (docs/cli.md)
    refused = (EXIT_USAGE, EXIT_INPUT)
    assert code in (refused if bad else (EXIT_OK, *refused, EXIT_UNSUPPORTED)), (
        argv[:5],
        code,
        out[-500:],
    )
    if code:
        assert "rror" in out, out[-500:]  # "error:" or click's "Error:"
    if not bad or "--print-toml" not in argv:
        assert _tree(root) == before, argv[:5]


STUDY_OPTIONS = [
    ("parity", "--widths"), ("mirror", "--levels"), ("mirror", "--records"),
    ("geometry", "--records"), ("width", "--widths"), ("fill", "--levels"),
    ("sync-slog", "--jobs"), ("ashift", "--levels"), ("parity", "--replicates"),
    ("parity", "--max-replicates"), ("parity", "--size"), ("parity", "--runtime"),
    ("parity", "--workloads"), ("parity", "--min-window"), ("parity", "--seed"),
    ("parity", "--disks"),
]  # fmt: skip


@pytest.mark.parametrize("value", BAD_VALUES, ids=IDS)
@pytest.mark.parametrize("which", STUDY_OPTIONS, ids=" ".join)
def test_study_options_refuse_bad_numbers_sizes_and_names(
    env: Path, capsys: pytest.CaptureFixture[str], which: tuple[str, str], value: str
) -> None:
    name, option = which
    _clean(["study", name, "--print-toml", option, value], capsys, env, bad=True)


@PROPERTY
@given(which=st.sampled_from(STUDY_OPTIONS), value=st.text(max_size=20))
def test_study_options_take_any_text_cleanly(
    env: Path, capsys: pytest.CaptureFixture[str], which: tuple[str, str], value: str
) -> None:
    name, option = which
    _clean(["study", name, "--print-toml", option, value], capsys, env, bad=False)


@pytest.mark.parametrize("name", BAD_VALUES, ids=IDS)
def test_a_study_name_that_is_none_is_refused(
    env: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    if name.strip():  # an empty name lists the studies
        _clean(["study", name, "--print-toml"], capsys, env, bad=True)


BENCH_OPTIONS = ["--size", "--workloads", "--seed", "--runtime", "--iodepth", "--jobs",
                 "--metadata-files", "--compressibility", "--scratch"]  # fmt: skip


@pytest.mark.parametrize("value", BAD_VALUES, ids=IDS)
@pytest.mark.parametrize("option", BENCH_OPTIONS)
def test_bench_options_refuse_bad_values(
    env: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    target = env / "target"
    target.mkdir(exist_ok=True)
    args = [option, value] if option == "--scratch" else [str(target), option, value]
    _clean(["bench", *args, "--dry-run"], capsys, env, bad=True)


@pytest.mark.parametrize("path", BAD_VALUES, ids=IDS)
def test_bench_refuses_a_path_that_is_none(
    env: Path, capsys: pytest.CaptureFixture[str], path: str
) -> None:
    _clean(["bench", path, "--dry-run", "--size", "64M"], capsys, env, bad=True)


# A study whose dry run needs no ZFS (so a value accepted by mistake shows as exit 0 on any
# machine, not as a refusal of the missing zfs-fuse daemon).
GOOD = """name = "s"
[disks]
count = 3
size = "1G"
[factors]
backend = ["directory"]
layout = ["{target}"]
[workloads]
size = "8M"
"""


@pytest.mark.parametrize("path", BAD_VALUES, ids=IDS)
def test_run_refuses_a_study_path_that_is_none(
    env: Path, capsys: pytest.CaptureFixture[str], path: str
) -> None:
    _clean(["run", path, "--dry-run"], capsys, env, bad=True)


RUN_CASES = [(o, v) for o in ("--disks", "--seed", "--resume") for v in BAD_VALUES] + [
    (o, v) for o in ("--db", "--scratch-dir") for v in BAD_PATHS
]


@pytest.mark.parametrize(("option", "value"), RUN_CASES, ids=lambda x: repr(x[:6]))
def test_run_options_refuse_bad_values(
    env: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    study, target = env / "s.toml", env / "target"
    if not study.exists():
        target.mkdir()
        study.write_text(GOOD.format(target=target))
        assert _run(["run", str(study), "--dry-run"], capsys)[0] == 0  # as it stands: valid
    _clean(["run", str(study), "--dry-run", option, value], capsys, env, bad=True)


@PROPERTY
@given(option=st.sampled_from(["--disks", "--zfs-version", "--afr", "--ure"]), value=ANY)
def test_plan_options_exit_cleanly(
    env: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    layout = [] if option == "--disks" else ["--layout", "raidz1:3x1T"]
    _clean(["plan", *layout, option, value, "--json"], capsys, env, bad=value in BAD_VALUES)


@pytest.mark.parametrize("value", BAD_VALUES, ids=IDS)
@pytest.mark.parametrize(
    "argv", [["report", "{}"], ["export", "{}"], ["compare", "{}", "1"], ["compare", "1", "{}"]]
)
def test_run_ids_refuse_bad_values(
    env: Path, capsys: pytest.CaptureFixture[str], argv: list[str], value: str
) -> None:
    _clean([a.replace("{}", value) for a in argv], capsys, env, bad=True)


PATH_ENTRIES = [["import", "{}"], ["hosts", "check", "{}"], ["fleet", "check", "{}"],
                ["disks", "{}"], ["runs", "--db", "{}"],
                ["report", "latest", "--db", "{}"], ["export", "latest", "--db", "{}"]]  # fmt: skip


@pytest.mark.parametrize("value", BAD_PATHS, ids=lambda v: repr(v[:6]))
@pytest.mark.parametrize("argv", PATH_ENTRIES, ids=" ".join)
def test_paths_and_device_ids_refuse_what_no_system_can_open(
    env: Path, capsys: pytest.CaptureFixture[str], argv: list[str], value: str
) -> None:
    _clean([a.replace("{}", value) for a in argv], capsys, env, bad=True)
