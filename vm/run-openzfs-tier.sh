#!/usr/bin/env bash
# vm/run-openzfs-tier.sh [--ci | PYTEST ARGS...]
#
# poolbench's OpenZFS guest tier: builds the guest image if needed (cached), boots a fresh
# copy-on-write guest with real OpenZFS 2.3 and 12 scratch disks, copies this repository into
# it and runs pytest there (default: `-m openzfs`, the full tier; `--ci` runs the CI subset,
# CI_TESTS below; any other arguments replace `-m openzfs`, e.g. `tests/test_backend_zfs.py
# -x`). Exits with pytest's exit code (125: the guest never reported one). Needs root,
# qemu-system-x86 and debootstrap (installed on first build).
#
# A guest that never got as far as starting pytest (boot failure, or no sign of life within
# OZVM_BOOT_TIMEOUT seconds) is booted once more; a guest that started the tests is never
# re-run, whatever its result.
set -euo pipefail
HERE=$(dirname "$(readlink -f "$0")")
# 6 disks of 2 GiB, one of 3 GiB, one of 5 GiB, four of 300 MiB (sparse files: they cost
# nothing). The small ones are where a whole disk's partition costs whole metaslabs, so the
# capacity study can tell the planner's whole-disk rule from the plain one.
export OZVM_DISKS=${OZVM_DISKS:-12}
export OZVM_DISK_SIZE=${OZVM_DISK_SIZE:-2G,2G,2G,2G,2G,2G,3G,5G,300M,300M,300M,300M}
BOOT_TIMEOUT=${OZVM_BOOT_TIMEOUT:-600}
# The CI subset (docs/openzfs-tier.md, "CI" says why these): the backend and planner checks,
# md fs-compare through the CLI, a built-in study end to end on whole disks twice in a row
# with no override, the user's whole path from the wheel (doctor, disks, study, report), and
# a pool suspended by a disk that died (30 s in the guest).
# The rest of `-m openzfs` (md through the backend, the five-disk parity study, the capacity
# study on the small disks) runs by hand: under emulation it would not fit CI's time.
CI_TESTS=(
  tests/guest/test_openzfs_backend.py
  tests/guest/test_openzfs_planner.py
  tests/guest/test_md_guest.py::test_md_fs_compare_through_the_cli[ci]
  tests/guest/test_openzfs_studies.py::test_a_study_follows_a_study_on_the_same_disks
  tests/guest/test_openzfs_user_path.py
  tests/guest/test_openzfs_suspended.py
)
if [[ ${1:-} == --ci ]]; then
  shift
  set -- "${CI_TESTS[@]}" "$@"
fi
"$HERE/ozvm.sh" build
(($#)) || set -- -m openzfs
base=${POOLBENCH_OZVM_DIR:-/var/tmp/poolbench-ozvm}
# This run's own directory, as ozvm.sh names it (not the last-run link, which a second guest
# started meanwhile would re-point).
dir_file=$(mktemp)
trap 'rm -f "$dir_file"' EXIT
dir=$base/last-run

# One boot of the guest; stopped if it shows no sign of life (the init writes
# share/ready-uptime just before it starts the script) within BOOT_TIMEOUT seconds.
run_once() {
  local pid waited=0
  : >"$dir_file"
  OZVM_RUN_DIR_FILE=$dir_file "$HERE/ozvm.sh" run "$HERE/guest/pytest.sh" "$@" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    [[ -s $dir_file ]] && dir=$(<"$dir_file")
    [[ -s $dir_file && -e $dir/share/ready-uptime ]] && break
    if ((waited >= BOOT_TIMEOUT)); then
      echo "[ozvm] no sign of life from the guest after ${BOOT_TIMEOUT}s: stopping it" >&2
      kill -TERM "$pid" 2>/dev/null || true
      break
    fi
    sleep 1
    waited=$((waited + 1))
  done
  wait "$pid"
  local rc=$?
  [[ -s $dir_file ]] && dir=$(<"$dir_file")
  return "$rc"
}

for attempt in 1 2; do
  rc=0
  run_once "$@" || rc=$?
  # ready-uptime is written by the guest's init just before it starts the script
  if [[ -e $dir/share/ready-uptime || $rc == 0 ]]; then break; fi
  rc=125  # never started the tests: a boot failure, whatever qemu's own exit was
  [[ $attempt == 2 ]] && break
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
