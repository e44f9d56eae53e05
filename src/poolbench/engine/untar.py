"""The `untar` workload: `tar -x` of a plain tarball into a fresh directory, then syncfs, both
timed. The tarball is read once beforehand (untimed) so its source disk is not measured."""

from __future__ import annotations

import shutil
import tarfile
import time
from pathlib import Path

from poolbench.engine.device_window import DeviceWindow
from poolbench.engine.hooks import OpResult
from poolbench.guards.devices import Target
from poolbench.guards.geometry import Found
from poolbench.records.findings import Findings
from poolbench.system import watchdog
from poolbench.system.runner import Runner

MiB = 1024 * 1024


class Untar:
    def __init__(self, runner: Runner, tarball: Path) -> None:
        self.runner = runner
        self.tarball = tarball
        self._content: tuple[int, int] | None = None

    def content(self) -> tuple[int, int]:
        """(bytes of regular file data, number of entries); the read also warms the cache."""
        if self._content is None:
            total = entries = 0
            with tarfile.open(self.tarball) as tf:
                for member in tf:
                    entries += 1
                    if member.isfile():
                        total += member.size
            self._content = (total, entries)
        with open(
            self.tarball, "rb"
        ) as fh:  # warm the page cache: measure the pool, not the source
            while fh.read(8 << 20):
                pass
        return self._content

    def measure(
        self,
        workdir: Path,
        target: Target,
        compressibility: int,
        findings: Findings,
        write_model: Found | None = None,
        compression: str | None = None,
    ) -> OpResult:
        """Extract under `workdir`; fills in the device, durability and untar findings. The
        devices are judged against the layout's `write_model` (a mirror must write every
        file twice); without it, against one copy. `compression` is what the pool applies
        ("compression=lz4"): source text shrinks under it, which explains a shortfall."""
        dest = workdir / "untar"
        dry = self.runner.dry_run  # its commands printed: nothing made, nothing read
        shutil.rmtree(dest, ignore_errors=True)
        if not dry:
            dest.mkdir()
        self.runner.run(["sync", "--file-system", str(workdir)])  # settle, untimed
        app_bytes, files = (0, 0) if dry else self.content()
        window = DeviceWindow(target, *(write_model or (None, "")))
        t0 = time.monotonic()
        try:
            self.runner.run(["tar", "-x", "--no-same-owner", "-f", str(self.tarball), "-C",
                             str(dest)], timeout=watchdog.work_limit(moved=app_bytes,
                                                                     files=files))  # fmt: skip
            self.runner.run(["sync", "--file-system", str(dest)])
        except BaseException:
            window.abandon()
            raise
        seconds = max(time.monotonic() - t0, 1e-9)
        why = (f"untar also writes the inodes and directory entries of {files:,} files and "
               "the filesystem's journal or log, which the file bytes do not count")  # fmt: skip
        dev = window.close(
            "write", app_bytes, seconds, compressibility=compressibility, excess_why=why,
            short_why=_compressed_why(compression),
        )  # fmt: skip
        findings.device = dev.finding
        findings.durability = "syncfs after tar -x, inside the timed window"
        findings.other["untar"] = {
            "tarball": str(self.tarball),
            "files": files,
            "file_bytes": app_bytes,
            "compression": compression or "none",
        }
        shutil.rmtree(dest, ignore_errors=True)
        return OpResult(app_bytes / seconds / MiB, app_bytes, seconds, files, dev.device_bytes,
                        warnings=dev.warnings)  # fmt: skip


def _compressed_why(compression: str | None) -> str:
    """The shortfall's cause when the pool compresses: a source tree is text, which lz4 and
    zstd store in about half its bytes or less (2.2-2.4x measured on OpenZFS 2.3, lz4)."""
    if not compression or not compression.startswith("compression="):
        return ""  # none, or not known (a directory on someone else's filesystem)
    return (
        f"the pool stores files compressed ({compression}) and a source tree is text that "
        "compresses well; the figure counts the files' uncompressed bytes"
    )
