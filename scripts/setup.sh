#!/usr/bin/env bash
# Development and CI set-up on a Debian machine (run as root): every system package the test
# suite needs, and a virtualenv in .venv with poolbench (editable) and its test tools. Safe to
# run again. A user who only wants to run poolbench installs it with scripts/install.sh
# (docs/install.md) instead.
#
# It never removes, replaces or downgrades a package (apt-get --no-remove, after apt's own
# simulation), and never installs zfs-fuse on a machine that has OpenZFS loaded or installed:
# Debian's zfsutils-linux declares `Conflicts: zfs-fuse`, so apt would remove the host's ZFS.
# There the suite's zfs-fuse tests skip, saying why, and OpenZFS is tested in the guest tier
# (docs/openzfs-tier.md).
#
#   scripts/setup.sh            install what is missing, build .venv
#   scripts/setup.sh --dry-run  apt's simulation of what it would install; nothing changes
set -euo pipefail
PB_REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$PB_REPO"
case ${1:-} in
  --dry-run) PB_SIMULATE=1 ;;
  "") ;;
  *) echo "usage: scripts/setup.sh [--dry-run]" >&2; exit 2 ;;
esac
# shellcheck source=scripts/lib/packages.sh
. scripts/lib/packages.sh
pb_require_python

PACKAGES=(
  fio                 # the I/O engine
  btrfs-progs xfsprogs e2fsprogs   # the other filesystems
  util-linux          # losetup, lsblk, blkid, wipefs, fincore
  libfuse2            # the emulated disks' FUSE library (poolbench[emulate]: mfusepy)
  blktrace            # blktrace, blkparse: `poolbench record`
  fdisk               # sfdisk: partition tables (vdev sources, safety tests)
  lvm2                # LVM signatures in the safety tests
  iproute2            # network namespaces: the fleet tests' hosts
  postgresql postgresql-contrib   # the pgbench workloads: initdb, pg_ctl, pgbench, psql
  chromium            # headless: the HTML report tests open the page for real (driven over
                      # its DevTools pipe by the standard library: no chromedriver needed)
  python3-venv
)
# ZFS (pool v23) in user space, the ZFS this suite's real-pool tests run on, only where the
# machine has no OpenZFS: on an OpenZFS host it is skipped, and the host's ZFS is left alone.
flavour=$(pb_zfs_flavour)
if [[ $flavour == openzfs ]]; then
  say "setup: skipped zfs-fuse: this machine has OpenZFS, and Debian's zfsutils-linux" \
      "declares Conflicts: zfs-fuse (apt would remove the host's ZFS to install it). Found:"
  pb_openzfs_traces | sed 's/^/  - /'
  say "  The suite's zfs-fuse tests skip here; the OpenZFS guest tier (vm/run-openzfs-tier.sh)" \
      "tests OpenZFS without touching this machine's."
else
  PACKAGES+=(zfs-fuse)
fi

mapfile -t missing < <(pb_missing "${PACKAGES[@]}")
if ((${#missing[@]})); then
  pb_apt_install "${missing[@]}"
elif [[ $PB_SIMULATE == 1 ]]; then
  say "setup: every system package is installed already"
fi
if [[ $PB_SIMULATE == 1 ]]; then
  say "setup: dry run: would create .venv and pip install -e '.[test,emulate]'; nothing was changed"
  exit 0
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -e '.[test,emulate]'
# tests/test_wheel.py installs the built wheel into a fresh virtualenv with no index, as on
# a machine without a checkout: the pinned runtime dependencies' wheels are kept here.
.venv/bin/python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' >.venv/runtime-requirements.txt
.venv/bin/pip download -q --only-binary=:all: -d .venv/wheelhouse -r .venv/runtime-requirements.txt
# OpenSSH's server for the fleet tests' hosts, unpacked, never installed (scripts/lib/sshd.sh).
# shellcheck source=scripts/lib/sshd.sh
. scripts/lib/sshd.sh
pb_fetch_sshd .venv/sshd
echo "setup done: $(.venv/bin/poolbench --version)"
