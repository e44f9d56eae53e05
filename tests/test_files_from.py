"""`study --files-from @NAME`: sizes drawn from a saved histogram (planner/filedraw.py), the
archive of them (store/filetrees.py) and the CLI around it (cli/files_from.py). Pure or on
tmp_path; the real run on a pool is tests/test_files_from_real.py."""

from __future__ import annotations

import hashlib
import json
import random
import tarfile
import zlib
from pathlib import Path

import pytest

from poolbench.cli.main import main
from poolbench.errors import EXIT_INPUT, EXIT_USAGE, UsageError
from poolbench.planner.filedraw import UNIT, apportion, draw, scaled_draw, size_class
from poolbench.planner.filesizes import FileSizes, ScanNotes, units_of
from poolbench.store import filetrees, histograms

N = 2000


def poolbench(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """The CLI in this process (a subprocess costs a second or two of imports each)."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out + out.err


def _histogram(files: int = 50_000, seed: int = 5) -> dict[int, int]:
    """A skewed tree like a real one: log-normal sizes around 6 KiB, up to tens of MiB."""
    rng = random.Random(seed)
    counts: dict[int, int] = {}
    for _ in range(files):
        u = units_of(int(rng.lognormvariate(8.7, 1.8)))
        counts[u] = counts.get(u, 0) + 1
    return counts


def _by_class(sizes: list[int]) -> dict[int, tuple[int, int]]:
    out: dict[int, tuple[int, int]] = {}
    for s in sizes:
        n, b = out.get(size_class(units_of(s)), (0, 0))
        out[size_class(units_of(s))] = (n + 1, b + s)
    return out


def test_drawn_sizes_reproduce_the_histograms_shape() -> None:
    counts = _histogram()
    sizes, _ = draw(counts, N, seed=1)
    assert len(sizes) == N
    src: dict[int, tuple[int, int]] = {}  # size class → (files, bytes at the 512-B rounding)
    for u, c in counts.items():
        n, b = src.get(size_class(u), (0, 0))
        src[size_class(u)] = (n + c, b + u * UNIT * c)
    total_files = sum(n for n, _ in src.values())
    got: dict[int, tuple[int, int]] = {}
    for s in sizes:
        n, b = got.get(size_class(units_of(s)), (0, 0))
        got[size_class(units_of(s))] = (n + 1, b + units_of(s) * UNIT)
    for k, (files, nbytes) in src.items():
        want = N * files / total_files
        n, b = got.get(k, (0, 0))
        # files per size class: within one file of the exact share (stratified, not random)
        assert abs(n - want) < 1, k
        # bytes per class, for classes of 50 drawn files or more: within 6 % of the share
        # times the class's mean size. Inside a class sizes span 2x, so the mean of n
        # draws has a standard error under 20 %/sqrt(n), 2.8 % at 50 files.
        if want >= 50:
            assert abs(b / (want * nbytes / files) - 1) < 0.06, k
    # and each size within its 512-byte step of a size the histogram has
    assert all(units_of(s) in counts for s in sizes)


def test_the_draw_is_deterministic_for_a_seed() -> None:
    counts = _histogram()
    a, _ = draw(counts, N, seed=7)
    b, _ = draw(counts, N, seed=7)
    c, _ = draw(counts, N, seed=8)
    assert a == b
    assert a != c
    # another seed moves sizes inside their classes, never between classes
    assert {k: n for k, (n, _) in _by_class(a).items()} == {
        k: n for k, (n, _) in _by_class(c).items()
    }


def test_apportion_sums_and_stays_within_one() -> None:
    weights = {1: 7, 2: 3, 3: 1, 4: 1}
    got = apportion(weights, 10)
    assert sum(got.values()) == 10
    assert all(abs(got[k] - 10 * w / 12) < 1 for k, w in weights.items())


def test_scaled_to_the_file_count_and_to_the_budget() -> None:
    counts = _histogram()
    by_count = scaled_draw(counts, 1000, 1 << 40, seed=0)
    assert len(by_count.sizes) == 1000 and by_count.capped_by == "files"
    assert by_count.scale == pytest.approx(1000 / 50_000)
    small = scaled_draw(counts, 1000, by_count.total // 4, seed=0)
    assert small.capped_by == "bytes" and small.total <= by_count.total // 4
    assert len(small.sizes) >= 150  # cut by about the ratio, not to nothing
    few = scaled_draw({4: 3}, 1000, 1 << 30, seed=0)
    assert len(few.sizes) == 3  # never more files than the histogram has


def test_rare_large_files_left_out_are_stated() -> None:
    counts = {8: 100_000, units_of(1 << 30): 1}  # one 1 GiB file among 4K files
    d = scaled_draw(counts, 100, 1 << 40, seed=0)
    assert all(s <= 4096 for s in d.sizes)
    assert d.left_out_share == pytest.approx((1 << 30) / ((1 << 30) + 100_000 * 4096))


def test_empty_histogram_is_refused() -> None:
    with pytest.raises(UsageError, match="no files"):
        scaled_draw({}, 10, 1 << 20, seed=0)


def test_archive_holds_the_drawn_sizes_as_random_bytes(tmp_path: Path) -> None:
    sizes = [0, 1, 511, 512, 4097, 70_000, 300_000]
    a = filetrees.write_archive(tmp_path / "a.tar", sizes, seed=3, per_dir=3)
    b = filetrees.write_archive(tmp_path / "b.tar", sizes, seed=3, per_dir=3)
    assert hashlib.sha256(a.read_bytes()).digest() == hashlib.sha256(b.read_bytes()).digest()
    with tarfile.open(a) as tf:
        members = tf.getmembers()
        assert [m.size for m in members] == sizes
        assert [m.name for m in members] == filetrees.member_names(len(sizes), 3)
        data = tf.extractfile(members[-1]).read()  # type: ignore[union-attr]
    assert len(zlib.compress(data)) > 0.99 * len(data)  # incompressible, never zeros
    assert list(tmp_path.glob(".*")) == []  # no temporary file left


def _save(db: Path, name: str, counts: dict[int, int], kind: str = "files") -> None:
    logical = sum(u * UNIT * c for u, c in counts.items())
    h = FileSizes(counts, logical, 0, "/srv/x", notes=ScanNotes(dirs=10))
    doc = h.as_dict() | {"kind": kind}
    histograms.save(name, doc, db)


@pytest.mark.parametrize(
    ("arg", "words"),
    [
        ("tree", "give a saved histogram as @NAME"),
        ("@missing", "No saved histogram named 'missing'"),
        ("@blocks", "holds a pool's blocks"),
        ("@bad name", "is not a histogram name"),
    ],
)
def test_bad_names_get_one_paragraph(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arg: str, words: str
) -> None:
    db = tmp_path / "r.db"
    _save(db, "blocks", {8: 10}, kind="blocks")
    code, text = poolbench(capsys, "study", "recordsize", "--disks", "3x256M", "--dry-run",
                           "--db", str(db), "--files-from", arg)  # fmt: skip
    assert code in (EXIT_USAGE, EXIT_INPUT), text  # the exit-code table
    assert words in " ".join(text.split()) and "Traceback" not in text


def test_dry_run_shows_the_distribution_and_the_study_file_names_the_tree(
    zfs_fuse: None,  # a ZFS study's dry run reads the running ZFS (its daemon, here)
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the plan's lines unwrapped
    db = tmp_path / "r.db"
    _save(db, "mail", {2: 600, 8: 300, 64: 90, 2048: 10})  # 1K, 4K, 32K, 1M
    args = ["study", "recordsize", "--disks", "3x256M", "--levels", "128K", "--workloads",
            "seq-write", "--seed", "11", "--db", str(db), "--files-from", "@mail"]  # fmt: skip
    code, text = poolbench(capsys, *args, "--dry-run")
    out = " ".join(text.split())
    assert code == 0, text
    # the study's working set is 64M: 1,000 files of this shape (about 14 MiB) fit whole
    assert "--files-from @mail: untar writes 1,000 files of" in out
    assert "(seed 11) from the histogram's 1,000 files" in out and "all of them" in out
    assert "1 KiB: 60.0% / 60.0% / 600" in out and "1 MiB: 1.0% / 1.0% / 10" in out
    assert "workloads (2, each trial): untar, seq-write" in out
    code, toml = poolbench(capsys, *args, "--print-toml")
    tar = next(Path(line.split('"')[1]) for line in toml.splitlines() if "tarball" in line)
    with tarfile.open(tar) as tf:
        sizes = [m.size for m in tf.getmembers()]
    assert len(sizes) == 1000 and all(units_of(s) in (2, 8, 64, 2048) for s in sizes)
    assert "# note: --files-from @mail" in toml


def test_stored_histogram_json_roundtrip_draws_the_same(tmp_path: Path) -> None:
    counts = _histogram(2000)
    _save(tmp_path / "r.db", "t", counts)
    doc, _ = histograms.load("t", tmp_path / "r.db")
    back = {int(k): v for k, v in json.loads(json.dumps(doc["counts_512b_units"])).items()}
    assert draw(back, 300, 4) == draw(counts, 300, 4)


def test_a_tree_larger_than_the_working_set_is_scaled_to_it() -> None:
    from poolbench.cli.files_from import UserFiles, draw_for
    from poolbench.study.builtin.base import StudyFile, WorkloadsTable

    def study(workloads: WorkloadsTable) -> StudyFile:
        return StudyFile("s", "a study", 3, 6, {}, {"layout": ["stripe:1"]}, workloads)

    counts = {64: 5000}  # 5,000 files of 32K: 156 MiB
    h = FileSizes(counts, 5000 * 32768, 0, "/srv/x", notes=ScanNotes(dirs=50))
    uf = UserFiles("x", h, 0, None)
    d, said = draw_for(study({"size": "1M", "metadata_files": 2000}), uf)
    assert d.capped_by == "bytes" and d.total <= 1 << 20 and len(d.sizes) >= 28
    assert "scaled 0.0" in said and "to fit the study's working set of 1M" in said
    d, said = draw_for(study({}), uf)  # the study file's defaults: 2,000 and 256M
    assert len(d.sizes) == 2000 and "to the study's small-file count (2,000)" in said
