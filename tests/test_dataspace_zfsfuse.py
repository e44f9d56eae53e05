"""`plan --data`'s space prediction against real zfs-fuse (pool v23) pools.

A synthetic tree of known sizes (many tiny files, small, medium and multi-record files, all
random bytes, so nothing compresses but the zeros of a tail record) is written into datasets
of recordsize 16K and 128K, compression off and on (lzjb), on raidz1 of 3, raidz2 of 6 and a
2-way mirror of sparse files, at ashift 9 and 12. The tree is scanned with the same scanner
`plan --data` uses; the prediction (data blocks as ZFS allocates them plus the metadata
model) must match each dataset's growth of `zfs get -Hp used` (what `zfs list` shows) within
2%. zfs-fuse's `zpool list` has no -p, so USED is the byte-exact figure read back.

Needs root and zfs-fuse. Pools are named ``pbdata*`` and built only on files under a fresh
``/var/tmp/pb-data-*`` directory; both are removed even on failure.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from poolbench.planner.capacity import plan_pool
from poolbench.planner.dataspace import WriteModel, data_space
from poolbench.planner.filesizes import FileSizes, ScanNotes
from poolbench.planner.layout import parse_layout
from poolbench.planner.rules import V23
from poolbench.system.datascan import scan_tree
from poolbench.system.runner import LocalRunner

pytestmark = pytest.mark.untimed

if shutil.which("zfs-fuse") is None or shutil.which("zpool") is None:
    pytest.skip("zfs-fuse is not installed (apt-get install zfs-fuse)", allow_module_level=True)

TOLERANCE = 0.02
LAYOUTS = ("raidz1:3x512M", "raidz2:6x512M", "mirror:2x512M")
# (dataset, recordsize, compression)
DATASETS = (("rs16k", 16384, "off"), ("rs128k", 131072, "off"), ("rs128k-lzjb", 131072, "on"))
LZJB_EXPANSION = 9 / 8  # lzjb spends one copy-map byte per 8 literal bytes


def _write_tree(root: Path, plan: list[tuple[int, int, int]], ndirs: int) -> None:
    """Random bytes in files of sizes drawn once with a fixed seed: (count, low, high)."""
    root.mkdir()
    rng = random.Random(31)
    n = 0
    for count, lo, hi in plan:
        for _ in range(count):
            d = root / f"d{n % ndirs:02d}"
            d.mkdir(exist_ok=True)
            (d / f"f{n:05d}").write_bytes(os.urandom(rng.randint(lo, hi)))
            n += 1


# The metadata model's ratios were read off the "mixed" tree, and its dnode ratio (a fifth,
# not a quarter) off "tiny" (many one-block files in many directories) at ashift 9; the real
# tree (Debian's /usr/share/perl: text, so compared with compression off only) was fitted to
# nothing.
MIXED = [(700, 1, 4096), (300, 4097, 16384), (80, 16385, 262144), (5, 1 << 20, 3 << 20)]
TINY = [(1500, 1, 2048)]
REAL = Path("/usr/share/perl")
TREES = ("mixed", "tiny", "real")


@pytest.fixture(scope="module")
def trees() -> Iterator[dict[str, tuple[Path, FileSizes]]]:
    base = Path(tempfile.mkdtemp(prefix="pb-data-tree-", dir="/var/tmp"))
    try:
        _write_tree(base / "mixed", MIXED, 12)
        _write_tree(base / "tiny", TINY, 60)
        out = {}
        for name in TREES:
            src = REAL if name == "real" else base / name
            r = scan_tree(src)
            notes = ScanNotes(**{k: v for k, v in r.notes.items()})  # type: ignore[arg-type]
            out[name] = (src, FileSizes(r.counts, r.logical_bytes, 0, r.root, notes=notes))
        yield out
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def runner(zfs_fuse: None) -> LocalRunner:
    """The runner; a pbdata pool an interrupted run of this module left is destroyed first."""
    r = LocalRunner()
    names = r.run(["zpool", "list", "-H", "-o", "name"], mutates=False).stdout.split()
    for name in names:
        if name.startswith("pbdata"):
            _destroy(r, name)
    return r


def _while_busy(runner: LocalRunner, argv: list[str]) -> None:
    """zfs-fuse answers 'pool is busy' for a moment after a copy into its datasets (an
    export or a destroy right after it): tried again each second for 30 s."""
    for _ in range(30):
        if runner.run(argv, check=False).returncode == 0:
            return
        time.sleep(1)
    runner.run(argv)


def _destroy(runner: LocalRunner, pool: str) -> None:
    _while_busy(runner, ["zpool", "destroy", "-f", pool])


def _used(runner: LocalRunner, ds: str) -> int:
    out = runner.run(["zfs", "get", "-Hp", "-o", "value", "used", ds], mutates=False).stdout
    return int(out.strip())


def _settle(runner: LocalRunner, pool: str, workdir: str) -> None:
    """Every pending transaction group on disk: export, then import again."""
    _while_busy(runner, ["zpool", "export", pool])
    runner.run(["zpool", "import", "-d", workdir, pool])


def _measure(
    runner: LocalRunner,
    layout: str,
    ashift: int,
    src: Path,
    idx: int,
    datasets: tuple[tuple[str, int, str], ...],
) -> dict[str, int]:
    """USED growth of each dataset after the tree was copied into it."""
    spec = parse_layout(layout)
    workdir = tempfile.mkdtemp(prefix="pb-data-", dir="/var/tmp")
    pool = f"pbdata{idx:02d}"
    files = []
    for n, size in enumerate(spec.vdevs[0].devices):
        path = os.path.join(workdir, f"d{n:02d}")
        with open(path, "wb") as fh:
            fh.truncate(size)
        files.append(path)
    kind = spec.vdevs[0]
    vdev = ["mirror"] if kind.kind == "mirror" else [f"raidz{kind.parity}"]
    runner.run(
        ["zpool", "create", "-f", "-m", "none", "-o", f"ashift={ashift}", pool, *vdev, *files]
    )
    try:
        for name, rs, comp in datasets:
            mnt = os.path.join(workdir, "mnt-" + name)
            argv = ["zfs", "create", "-o", f"recordsize={rs}", "-o", f"compression={comp}"]
            runner.run([*argv, "-o", f"mountpoint={mnt}", f"{pool}/{name}"])
        _settle(runner, pool, workdir)
        before = {n: _used(runner, f"{pool}/{n}") for n, _, _ in datasets}
        for name, _, _ in datasets:  # symlinks as symlinks: the scanner does not follow them
            shutil.copytree(src, os.path.join(workdir, "mnt-" + name, "t"), symlinks=True)
        _settle(runner, pool, workdir)
        return {n: _used(runner, f"{pool}/{n}") - before[n] for n, _, _ in datasets}
    finally:
        try:
            _destroy(runner, pool)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


CASES = [(t, lay, a) for t in TREES for lay in LAYOUTS for a in (9, 12)]


@pytest.mark.parametrize("tree,layout,ashift", CASES, ids=[f"{t}-{lay}@{a}" for t, lay, a in CASES])
def test_prediction_matches_used(
    tree: str, layout: str, ashift: int, runner: LocalRunner,
    trees: dict[str, tuple[Path, FileSizes]],
) -> None:  # fmt: skip
    src, hist = trees[tree]
    if tree == "real" and not src.is_dir():
        pytest.skip(f"{src} is not here (Debian's perl-modules)")
    datasets = DATASETS[:2] if tree == "real" else DATASETS
    measured = _measure(runner, layout, ashift, src, CASES.index((tree, layout, ashift)), datasets)
    plan = plan_pool(parse_layout(layout), ashift, V23)
    errors = {}
    for name, rs, comp in datasets:
        model = WriteModel(
            recordsize=rs,
            compression=comp == "on",
            expansion=LZJB_EXPANSION,
            embedded=False,  # pool v23 has no embedded_data
            indirect_bps=128,  # v23's indirect blocks are 16K
        )
        got = data_space(plan, hist, model)
        errors[name] = got.charged / measured[name] - 1
        print(f"{tree} {layout} ashift {ashift} {name}: predicted {got.charged} "
              f"(data {got.data_charged}, metadata {got.metadata_charged}), "
              f"measured {measured[name]}, error {errors[name]:+.2%}")  # fmt: skip
    assert all(abs(e) <= TOLERANCE for e in errors.values()), errors
