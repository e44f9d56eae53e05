#!/usr/bin/env bash
# Install what poolbench needs on a Debian machine (run as root): system packages and a
# virtualenv in .venv with poolbench and its test tools. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  fio                 # the I/O engine
  zfs-fuse            # ZFS (pool v23) in user space: the ZFS this kind of machine can run
  btrfs-progs xfsprogs e2fsprogs   # the other filesystems
  bonnie++            # peer workload
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
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
"$PY" -c 'import sys; assert sys.version_info >= (3, 11), "poolbench needs Python >= 3.11"'
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -e '.[test,emulate]'
echo "setup done: $(.venv/bin/poolbench --version)"
