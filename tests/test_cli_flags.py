"""One flag vocabulary (issue 29, docs/cli.md): --replicates/--max-replicates in bench and
study with bench's old --min-runs/--max-runs as hidden aliases, -v before or after the
command, and output paths checked before anything is printed. Pure: no pools, no devices
(this machine's ZFS is not probed: offers.probe is replaced)."""

from __future__ import annotations

import logging
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from poolbench.cli.main import cli, main
from poolbench.engine import offers
from poolbench.errors import EXIT_INPUT, EXIT_USAGE
from report_store import build


@pytest.fixture
def db(tmp_path: Path) -> Path:
    build(tmp_path / "r.db").close()
    return tmp_path / "r.db"


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    out = capsys.readouterr()
    return int(stop.value.code or 0), out.out, out.err


@pytest.fixture
def no_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offers, "probe", lambda: offers.Offers("zfs-fuse", True, ""))


@pytest.mark.usefixtures("no_probe")
@pytest.mark.parametrize(
    "flags",
    [["--replicates", "4", "--max-replicates", "7"], ["--min-runs", "4", "--max-runs", "7"],
     ["--replicates", "4", "--max-runs", "7"], ["--min-runs", "4", "--replicates", "4",
                                                "--max-replicates", "7"]],
)  # fmt: skip
def test_study_takes_both_names(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(["study", "parity", "--print-toml", "--disks", "4x1G", *flags], capsys)
    assert code == 0, err
    study = tomllib.loads(out)
    assert (study["replicates"], study["max_replicates"]) == (4, 7)


@pytest.mark.usefixtures("no_probe")
def test_an_old_and_a_new_name_that_disagree_are_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["study", "parity", "--print-toml", "--replicates", "3", "--min-runs", "4"]
    code, out, err = _main(argv, capsys)
    assert code == EXIT_USAGE and out == ""
    assert "--replicates 3 and --min-runs 4 say different things" in err


def test_bench_takes_both_names_and_checks_them_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before the store is opened or anything measured: the range is checked the
    same whichever name gave it, and the message names the flags as documented."""
    for flags in (["--replicates", "5", "--max-replicates", "4"],
                  ["--min-runs", "5", "--max-runs", "4"]):  # fmt: skip
        code, _out, err = _main(["bench", str(tmp_path), *flags, "--db", str(tmp_path / "x.db")],
                                capsys)  # fmt: skip
        assert code == EXIT_USAGE, err
        assert "--replicates 5 / --max-replicates 4 are not a valid range" in err
    assert not (tmp_path / "x.db").exists()
    help_text = CliRunner().invoke(cli, ["bench", "--help"]).output
    assert "--replicates" in help_text and "--max-replicates" in help_text
    assert "--min-runs" not in help_text and "--max-runs" not in help_text  # hidden


@pytest.mark.parametrize(
    ("args", "level"),
    [
        ([], logging.WARNING),
        (["-v"], logging.INFO),
        (["-vv"], logging.DEBUG),
    ],
)
def test_verbose_works_before_or_after_the_command(args: list[str], level: int, db: Path) -> None:
    root = logging.getLogger()
    for argv in ([*args, "runs", "--db", str(db)], ["runs", "--db", str(db), *args]):
        root.setLevel(logging.WARNING)
        r = CliRunner().invoke(cli, argv)
        assert r.exit_code == 0, r.output
        assert root.level == level, argv
    root.setLevel(logging.WARNING)
    r = CliRunner().invoke(cli, ["-v", "runs", "--db", str(db), "-v"])  # they add up
    assert root.level == logging.DEBUG
    root.setLevel(logging.WARNING)


def test_a_bad_html_path_fails_before_the_report_prints(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "missing" / "r.html"
    code, out, err = _main(["report", "1", "--db", str(db), "--html", str(target)], capsys)
    assert code == EXIT_INPUT and out == ""  # not the whole report, then the error
    assert f"the directory {target.parent} does not exist" in err
    assert not target.parent.exists()
    code, out, err = _main(["export", "1", "--csv", "--db", str(db), "-o", str(target)], capsys)
    assert code == EXIT_INPUT and out == "" and not target.parent.exists()
    # A good path still gets the report on stdout and the page in the file.
    page = tmp_path / "r.html"
    code, out, err = _main(["report", "1", "--db", str(db), "--html", str(page)], capsys)
    assert code == 0 and "seq-write" in out and page.read_text().startswith("<!DOCTYPE html>")
