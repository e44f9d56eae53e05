#!/usr/bin/env bash
# vm/run-openzfs-tier.sh [PYTEST ARGS...]
#
# poolbench's OpenZFS guest tier: builds the guest image if needed (cached), boots a fresh
# copy-on-write guest with real OpenZFS 2.3 and 8 scratch disks, copies this repository into
# it and runs pytest there (default: `-m openzfs`; any arguments replace that, e.g.
# `tests/test_backend_zfs.py -x`). Exits with pytest's exit code (125: the guest never
# reported one). Needs root, qemu-system-x86 and debootstrap (installed on first build).
#
# A guest that never got as far as starting pytest (boot failure) is booted once more; a
# guest that started the tests is never re-run, whatever its result.
set -euo pipefail
HERE=$(dirname "$(readlink -f "$0")")
# 6 disks of 2 GiB, one of 3 GiB, one of 5 GiB, four of 300 MiB (sparse files: they cost
# nothing). The small ones are where a whole disk's partition costs whole metaslabs, so the
# capacity study can tell the planner's whole-disk rule from the plain one.
export OZVM_DISKS=${OZVM_DISKS:-12}
export OZVM_DISK_SIZE=${OZVM_DISK_SIZE:-2G,2G,2G,2G,2G,2G,3G,5G,300M,300M,300M,300M}
"$HERE/ozvm.sh" build
(($#)) || set -- -m openzfs
dir=${POOLBENCH_OZVM_DIR:-/var/tmp/poolbench-ozvm}/last-run
for attempt in 1 2; do
  rc=0
  "$HERE/ozvm.sh" run "$HERE/guest/pytest.sh" "$@" || rc=$?
  # ready-uptime is written by the guest's init just before it starts the script
  if [[ $rc != 125 || -e $dir/share/ready-uptime || $attempt == 2 ]]; then break; fi
  echo "[ozvm] the guest did not boot (attempt $attempt); booting it once more" >&2
done
summary=$(grep -E '^=+ .*(passed|failed|error|skipped|deselected|no tests ran).* in [0-9.]+s' \
            "$dir/output.log" 2>/dev/null | tail -1 || true)
if [[ $rc == 125 ]]; then
  echo "[ozvm] FAILED: the guest never reported an exit code (boot failure, timeout or panic)" >&2
fi
echo "[ozvm] guest tier pytest summary: ${summary:-none (pytest did not finish)}" >&2
echo "[ozvm] pytest exit $rc; output: $dir/output.log; junit and other results: $dir/share/out/" >&2
exit "$rc"
