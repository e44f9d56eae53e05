#!/usr/bin/env bash
# vm/run-openzfs-tier.sh [PYTEST ARGS...]
#
# poolbench's OpenZFS guest tier: builds the guest image if needed (cached), boots a fresh
# copy-on-write guest with real OpenZFS 2.3 and 8 scratch disks, copies this repository into
# it and runs pytest there (default: `-m openzfs`; any arguments replace that, e.g.
# `tests/test_backend_zfs.py -x`). Exits with pytest's exit code (125: the guest never
# reported one). Needs root, qemu-system-x86 and debootstrap (installed on first build).
set -euo pipefail
HERE=$(dirname "$(readlink -f "$0")")
# 6 disks of 2 GiB, one of 3 GiB, one of 5 GiB (sparse files: they cost nothing)
export OZVM_DISKS=${OZVM_DISKS:-8}
export OZVM_DISK_SIZE=${OZVM_DISK_SIZE:-2G,2G,2G,2G,2G,2G,3G,5G}
"$HERE/ozvm.sh" build
(($#)) || set -- -m openzfs
rc=0
"$HERE/ozvm.sh" run "$HERE/guest/pytest.sh" "$@" || rc=$?
dir=${POOLBENCH_OZVM_DIR:-/var/tmp/poolbench-ozvm}/last-run
echo "[ozvm] pytest exit $rc; output: $dir/output.log; junit and other results: $dir/share/out/" >&2
exit "$rc"
