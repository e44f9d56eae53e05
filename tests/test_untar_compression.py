"""untar on a compressing pool: the disks write less than the files' bytes, and the warning
says it is the pool's compression (read back from ZFS), not a cache or an fsync not honoured.

Real zfs-fuse pools on a loop device, a real tarball of Python's standard library (text), the
real CLI; compression=gzip (zfs-fuse has no lz4) beside compression=off on the same disk."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from tests.conftest import poolbench, stored_rows


def _text_tarball(tmp: Path) -> Path:
    lib = Path(json.__file__).resolve().parent.parent
    out = tmp / "stdlib.tar"
    with tarfile.open(out, "w") as tf:
        for sub in ("json", "email", "asyncio"):
            tf.add(lib / sub, arcname=f"stdlib/{sub}")
    return out


def test_untar_shortfall_on_a_compressing_pool_names_its_compression(
    zfs_fuse: None, tmp_path: Path
) -> None:
    study = tmp_path / "untar.toml"
    study.write_text(f"""
name = "untar-compression"
replicates = 2
max_replicates = 2

[disks]
count = 1
size = "256M"
source = "loop"

[factors]
backend = ["zfs"]
layout = ["stripe"]
compression = ["off", "gzip"]

[workloads]
names = ["untar"]
size = "16M"
tarball = "{_text_tarball(tmp_path)}"
""")
    p = poolbench("run", str(study), "--db", str(tmp_path / "r.db"),
                  "--scratch-dir", str(tmp_path / "scratch"))  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    rows = stored_rows(tmp_path / "r.db", "untar")
    by = {c: [r for r in rows if f"compression={c}" in r["config"]] for c in ("off", "gzip")}
    assert len(by["off"]) == len(by["gzip"]) == 2
    named = "the pool stores files compressed (compression=gzip)"
    for r in by["gzip"]:
        assert r["guards"]["untar"]["compression"] == "compression=gzip"
        # Python source under gzip stores in well under half its bytes (about 0.2-0.4x on a
        # single disk here, metadata included): the disks cannot have written every byte.
        amp = r["guards"]["device"]["amplification"]["amplification"]
        assert amp < 0.6, amp
        short = [w for w in r["warnings"] if "did not reach the disks" in w]
        assert short and all(named in w for w in short), r["warnings"]
        assert "or compression or deduplication" not in " ".join(short)
    for r in by["off"]:
        assert r["guards"]["untar"]["compression"] == "none"
        assert not any("stores files compressed" in w for w in r["warnings"]), r["warnings"]
