# Sourced by scripts/setup.sh and scripts/install.sh: system packages installed without ever
# removing, replacing or downgrading one, and the host's ZFS asked before zfs-fuse is named.
#
# Environment (tests point these at another machine's state; users leave them alone):
#   POOLBENCH_DPKG_ADMINDIR  dpkg's directory (default /var/lib/dpkg): its `status` is what
#                            apt, dpkg-query and the ZFS probe read
#   POOLBENCH_SYS_MODULE     the kernel's module directory (default /sys/module)
#   PB_SIMULATE=1            (--dry-run) apt-get -s only: apt's own simulation, nothing installed
# Needs PB_REPO (the checkout) set by the caller.

PB_ADMINDIR=${POOLBENCH_DPKG_ADMINDIR:-/var/lib/dpkg}
PB_SYS_MODULE=${POOLBENCH_SYS_MODULE:-/sys/module}
PB_SIMULATE=${PB_SIMULATE:-0}

say() { printf '%s\n' "$*"; }

# apt and dpkg read the status file of PB_ADMINDIR (the machine's own unless a test says so)
pb_apt_opts() {
  if [[ $PB_ADMINDIR != /var/lib/dpkg ]]; then
    printf '%s\n' -o "Dir::State::status=$PB_ADMINDIR/status"
  fi
}

# The packages of "$@" that dpkg does not have installed.
pb_missing() {
  local p
  for p in "$@"; do
    dpkg-query --admindir="$PB_ADMINDIR" -W -f='${Status}' "$p" 2>/dev/null \
      | grep -q "install ok installed" || printf '%s\n' "$p"
  done
}

# openzfs | zfs-fuse | none: the ZFS this host has loaded or installed (src/poolbench/zfs/host.py,
# the same probe `poolbench doctor` reports), read from the checkout before anything is installed.
pb_zfs_flavour() {
  PYTHONPATH="$PB_REPO/src" python3 -m poolbench.zfs.host --flavour \
    --sys-module "$PB_SYS_MODULE" --dpkg-status "$PB_ADMINDIR/status"
}

# Each trace of OpenZFS found, one a line.
pb_openzfs_traces() {
  PYTHONPATH="$PB_REPO/src" python3 -m poolbench.zfs.host \
    --sys-module "$PB_SYS_MODULE" --dpkg-status "$PB_ADMINDIR/status"
}

# Install "$@" with apt, never removing a package: apt's simulation first (--no-remove makes
# apt refuse a plan that removes anything; a "Remv" line is refused here too), then the real
# install with the same flags (a plan that would downgrade is refused too). With PB_SIMULATE=1,
# only the simulation runs and is printed.
pb_apt_install() {
  (($#)) || return 0
  local opts plan rc=0
  mapfile -t opts < <(pb_apt_opts)
  export DEBIAN_FRONTEND=noninteractive
  if [[ $PB_SIMULATE != 1 ]]; then
    apt-get update -qq
  fi
  plan=$(apt-get -s --no-remove --no-install-recommends "${opts[@]}" install "$@" 2>&1) || rc=$?
  if ((rc != 0)) || grep -qE '^Remv |will be DOWNGRADED' <<<"$plan"; then
    say "$plan" >&2
    say "Refused: apt would have to remove or downgrade packages, or could not install: $*." \
        "Nothing was installed. Install what you need by hand, or leave it out." >&2
    return 1
  fi
  if [[ $PB_SIMULATE == 1 ]]; then
    say "apt's simulation of: apt-get install --no-remove --no-install-recommends $*"
    say "$plan"
    return 0
  fi
  apt-get install -y -qq --no-remove --no-install-recommends "${opts[@]}" "$@" >/dev/null
}

pb_require_python() {
  python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || {
    say "poolbench needs Python 3.11 or newer as python3 (Debian 12, Ubuntu 24.04);" \
        "this python3 is $(python3 --version 2>&1 || echo missing)." >&2
    return 1
  }
}
