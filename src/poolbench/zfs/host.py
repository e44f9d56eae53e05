"""Which ZFS this host has, loaded or installed: what `poolbench doctor` reports, and what the
install scripts ask before they go near apt (`python3 -m poolbench.zfs.host --flavour`).

OpenZFS counts as present on any one trace: its kernel module loaded (/sys/module/zfs), a
`zpool version` that answers as OpenZFS (a build from source has no package), or one of its
packages on the machine (dpkg). Debian's zfsutils-linux declares `Conflicts: zfs-fuse`: where
any trace is found, installing zfs-fuse would make apt remove the host's ZFS, so nothing may
install it here. zfs-fuse is the fallback of a machine with no ZFS at all.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

from poolbench.system.distro import DPKG_STATUS, installed_packages
from poolbench.system.runner import LocalRunner, Runner
from poolbench.system.watchdog import CommandTimedOut
from poolbench.zfs import ops

SYS_MODULE = Path("/sys/module")
# OpenZFS's packages in Debian, Ubuntu and Proxmox (the libraries carry their soname:
# libzfs4linux, libzfs6linux, libzpool5linux, ...); zfs-fuse is none of these.
OPENZFS_PACKAGES = ("zfsutils-linux", "zfs-dkms", "zfs-zed", "zfs-initramfs", "zfs-dracut",
                    "zfs-modules", "zfs-test")  # fmt: skip
OPENZFS_LIBRARIES = ("libzfs", "libzpool", "libnvpair", "libuutil")

OPENZFS, ZFS_FUSE, NONE = "openzfs", "zfs-fuse", "none"


@dataclass(frozen=True)
class HostZfs:
    module: str = ""  # the loaded zfs module's version ("loaded" without one), "" if none
    userland: str = ""  # `zpool version`'s first line when it answers as OpenZFS
    packages: dict[str, str] = field(default_factory=dict)  # OpenZFS packages: name -> version
    fuse: str = ""  # how zfs-fuse is here: "package 0.7.0-25+b1", "program", or ""

    @property
    def openzfs(self) -> bool:
        return bool(self.module or self.userland or self.packages)

    @property
    def flavour(self) -> str:
        return OPENZFS if self.openzfs else ZFS_FUSE if self.fuse else NONE

    def traces(self) -> list[str]:
        """Each trace of OpenZFS found, in words (empty: none)."""
        out = []
        if self.module:
            out.append(f"the zfs kernel module is loaded (/sys/module/zfs: {self.module})")
        if self.userland:
            out.append(f"`zpool version` answers {self.userland}")
        out += [f"dpkg has {name} {version}" for name, version in sorted(self.packages.items())]
        return out


def _is_openzfs_package(name: str) -> bool:
    return name in OPENZFS_PACKAGES or (
        name.startswith(OPENZFS_LIBRARIES) and name.endswith("linux")
    )


def _module_version(sys_module: Path) -> str:
    node = sys_module / "zfs"
    if not node.is_dir():
        return ""
    try:
        return (node / "version").read_text().strip() or "loaded"
    except OSError:
        return "loaded"


def probe(
    runner: Runner,
    sys_module: Path = SYS_MODULE,
    dpkg_status: Path = DPKG_STATUS,
    userland: str | None = None,
) -> HostZfs:
    """What this host has of ZFS (read-only: /sys, dpkg's status file, `zpool version`).
    `userland`: `zpool version`'s answer when the caller already has it ("" if it was not
    OpenZFS's, or did not come), so a zpool that hangs is waited for once, not twice."""
    packages = installed_packages(dpkg_status)
    if userland is None:
        userland = _userland(runner)
    fuse = ""
    if "zfs-fuse" in packages:
        fuse = f"package {packages['zfs-fuse']}".strip()
    elif runner.which("zfs-fuse") is not None:
        fuse = "program"
    return HostZfs(
        module=_module_version(sys_module),
        userland=userland,
        packages={n: v for n, v in packages.items() if _is_openzfs_package(n)},
        fuse=fuse,
    )


def _userland(runner: Runner) -> str:
    """`zpool version`'s first line on OpenZFS; "" elsewhere, and where it does not answer
    within its limit (a hung pool can hold every zpool command: the module and the packages
    still tell the flavour, and the install scripts must not die on it)."""
    if not ops.installed(runner):
        return ""
    try:
        return ops.openzfs_version(runner) or ""
    except CommandTimedOut:
        return ""


def _main(argv: list[str]) -> int:
    """For scripts/setup.sh and scripts/install.sh: the flavour (--flavour: one word), or
    each trace of OpenZFS, one a line."""
    parser = argparse.ArgumentParser(prog="python3 -m poolbench.zfs.host")
    parser.add_argument("--sys-module", type=Path, default=SYS_MODULE)
    parser.add_argument("--dpkg-status", type=Path, default=DPKG_STATUS)
    parser.add_argument("--flavour", action="store_true", help="print openzfs|zfs-fuse|none")
    args = parser.parse_args(argv)
    host = probe(LocalRunner(), args.sys_module, args.dpkg_status)
    print(host.flavour if args.flavour else "\n".join(host.traces()))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
