"""`poolbench plan --data` end to end through click: a scanned tree, a saved histogram,
zdb block statistics, the layout search ranked for the data, and bad input (no I/O beyond
reading the test's own files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from poolbench.cli.main import main
from poolbench.cli.plan_cmd import plan
from poolbench.errors import EXIT_INPUT, EXIT_USAGE
from poolbench.planner.zdbstats import parse_nicenum, parse_zdb

K = 1024

# `zdb -Lbbbs` output written by hand in the form OpenZFS 2.x's dump_block_stats() and
# dump_size_histograms() print it (zfs_nicenum figures): 1000 blocks of 4K and 100 of 128K
# of file data, and 50 metadata blocks.
ZDB_SAMPLE = """
Traversing all blocks ...

	bp count:               1150
	bp logical:         17301504      avg:  15044

Blocks  LSIZE   PSIZE   ASIZE     avg    comp   %Total  Type
     -      -       -       -       -       -        -  unallocated
    50   800K    200K    400K   8.00K    4.00     2.35  DMU dnode
     -      -       -       -       -       -        -  L1 ZFS plain file
 1.07K  16.4M   16.4M   16.4M   15.6K    1.00    97.65  L0 ZFS plain file
 1.07K  16.4M   16.4M   16.4M   15.6K    1.00    97.65  ZFS plain file
 1.12K  17.2M   16.6M   16.8M   15.0K    1.04   100.00  Total

Block Size Histogram

  block   psize                lsize                asize
   size   Count   Size   Cum.  Count   Size   Cum.  Count   Size   Cum.
    512:      0      0      0      0      0      0      0      0      0
     4K:  1.00K  3.91M  3.91M  1.00K  3.91M  3.91M  1.00K  3.91M  3.91M
     8K:     50   400K  4.30M      0      0  3.91M     50   400K  4.30M
   128K:    100  12.5M  16.6M    150  13.3M  17.2M    100  12.5M  16.8M
"""


def run(*args: str) -> Any:
    return CliRunner().invoke(plan, list(args))


def _tree(root: Path) -> Path:
    root.mkdir()
    for i in range(200):
        (root / f"f{i}").write_bytes(b"\xa5" * 4096)  # 200 files of 4K
    (root / "big").write_bytes(b"\x5a" * (300 * K))  # 3 records at 128K
    return root


def test_layout_json_is_the_block_arithmetic(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "t")
    res = run("--layout", "raidz2:6x4T", "--zfs-version", "2.3", "--data", str(tree),
              "--compression", "off", "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    space = doc["space"][0]
    assert space["logical_bytes"] == 200 * 4096 + 300 * K
    # raidz2 of 6 at ashift 12: a 4K block takes 3 sectors (12K); a 128K block 32 data +
    # 16 parity sectors = 192K; the big file is 3 whole records with compression off
    assert space["data_alloc_bytes"] == 200 * 12 * K + 3 * 192 * K
    assert doc["data"]["files"] == 201
    rs = {(r["recordsize"], r["ashift"]) for r in doc["recordsize_advice"]}
    assert rs == {(16 * K, 12), (128 * K, 12), (1024 * K, 12)}
    assert [lv["special_small_blocks"] for lv in doc["special"][0]["levels"]] == [
        0, 4 * K, 8 * K, 16 * K, 32 * K, 64 * K, 128 * K,
    ]  # fmt: skip


def test_saved_histogram_gives_the_same_plan(tmp_path: Path) -> None:
    tree, db = _tree(tmp_path / "t"), str(tmp_path / "db" / "results.db")
    first = run("--layout", "mirror:2x1TB", "--data", str(tree), "--save-data", "mine",
                "--db", db, "--json")  # fmt: skip
    assert first.exit_code == 0, (first.output, first.exception)
    assert (tmp_path / "db" / "histograms" / "mine.json").is_file()
    again = run("--layout", "mirror:2x1TB", "--data", "@mine", "--db", db, "--json")
    assert again.exit_code == 0, again.output
    # the runner mixes stderr ("saved the histogram as @mine ...") into its output
    a = json.loads(first.stdout[first.stdout.index("{") :])
    b = json.loads(again.stdout)
    assert a["space"] == b["space"] and a["special"] == b["special"]


def test_bad_input_is_one_paragraph(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "results.db")
    cases = [
        (["--data", str(tmp_path / "nope")], "no such directory or file"),
        (["--data", "@missing", "--db", db], "No saved histogram named 'missing'"),
        (["--data", str(tmp_path), "--save-data", "a b"], "is not a histogram name"),
        (["--data", str(tmp_path), "--recordsize", "1M", "--zfs-version", "v23"],
         "largest block"),
    ]  # fmt: skip
    cases += [
        (["--save-data", "x"], "--save-data describes the data of --data"),
        (["--recordsize", "16K"], "--recordsize describes the data of --data"),
        (["--data", str(tmp_path), "--expand-to", "4"], "two different plans"),
    ]
    (tmp_path / "notes.txt").write_text("hello\n")
    cases.append((["--data", str(tmp_path / "notes.txt")], "neither a saved histogram"))
    for args, words in cases:
        try:
            main(["plan", "--layout", "mirror:2x1TB", *args])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        text = out.out + out.err
        assert code in (EXIT_USAGE, EXIT_INPUT), (args, text)  # the exit-code table
        assert words in " ".join(text.split()) and "Traceback" not in text


def test_zdb_block_statistics() -> None:
    assert parse_nicenum("3.91M") == round(3.91 * (1 << 20))
    assert parse_nicenum("1.00K") == 1024 and parse_nicenum("-") == 0
    h = parse_zdb(ZDB_SAMPLE, "sample")
    assert h.kind == "blocks"
    # bins at their mean psize: 3.91M / 1024 → 4004 B → 8 units; 400K / 50 = 8K; 12.5M /
    # 100 = 128K
    assert h.counts == {8: 1024, 8 * 2: 50, 256: 100}
    assert h.measured_metadata_fraction is not None
    assert abs(h.measured_metadata_fraction - (16.8 - 16.4) / 16.8) < 1e-6


def test_zdb_file_as_data(tmp_path: Path) -> None:
    f = tmp_path / "pool-blocks.txt"
    f.write_text(ZDB_SAMPLE)
    res = run("--layout", "mirror:2x1TB", "--data", str(f), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["recordsize_advice"] == []  # blocks, not files: no recordsize to change
    # on a mirror at ashift 12 every block rounds to 4K sectors: 1024 × 4K + 50 × 8K + 100
    # × 128K; zdb's blocks include the metadata, so none is added
    assert doc["space"][0]["alloc_bytes"] == 1024 * 4 * K + 50 * 8 * K + 100 * 128 * K


def test_search_ranks_by_what_the_data_needs(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "t")
    res = run("--disks", "6x4TB", "--data", str(tree), "--compression", "off", "--json")
    assert res.exit_code == 0, res.output
    cands = json.loads(res.stdout)["candidates"]
    holds = [c["holds_bytes"] for c in cands]
    assert holds == sorted(holds, reverse=True)
    for c in cands[:5]:
        if len(c["data"]) == 1:
            d = c["data"][0]
            assert c["holds_bytes"] == int(
                d["usable_bytes"] * d["logical_bytes"] / d["charged_bytes"]
            )
    # 4K files are 3 sectors on raidz2 but 1 per side on a mirror: for this data a stripe
    # of mirrors is not last, as it is by usable space alone
    names = [c["name"] for c in cands]
    assert any("mirror" in n for n in names[: len(names) // 2])
