#!/usr/bin/env bash
# Install poolbench for use on this machine (Debian, Ubuntu, Proxmox; run as root), from this
# checkout or a wheel (docs/install.md):
#   1. the system packages: fio, and each optional part asked for with --with;
#   2. poolbench in a virtualenv of its own (default /opt/poolbench), linked as
#      /usr/local/bin/poolbench;
#   3. `poolbench doctor`: what this machine can and cannot do, and how to add the rest.
#
# The ZFS is the host's own: this script never installs or changes it, never removes,
# replaces or downgrades a package (apt-get --no-remove, after apt's own simulation), and
# installs zfs-fuse only when asked (--zfs-fuse) on a machine with no ZFS at all.
#
#   sudo scripts/install.sh                          fio + poolbench
#   sudo scripts/install.sh --with fs-compare,database   and the optional parts named
#   sudo scripts/install.sh --dry-run --with all     apt's simulation and the plan; changes nothing
# Parts: database (PostgreSQL: study database), record (blktrace: poolbench record),
# fs-compare (btrfs-progs, xfsprogs, e2fsprogs, mdadm), untar (linux-source-6.1: the untar
# workload's default tree), all.
# Uninstall: rm -rf /opt/poolbench /usr/local/bin/poolbench (the result store stays in
# ~/.local/share/poolbench).
set -euo pipefail
PB_REPO=$(cd "$(dirname "$0")/.." && pwd)
PARTS="" ZFS_FUSE=0 PREFIX=/opt/poolbench BIN=/usr/local/bin WHEEL=""
usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  echo "options: --with PART[,PART...] --zfs-fuse --prefix DIR --bin DIR --wheel FILE --dry-run" >&2
  exit 2
}
while (($#)); do
  case $1 in
    --with) PARTS="${PARTS:+$PARTS,}${2:?--with needs a part}"; shift ;;
    --with=*) PARTS="${PARTS:+$PARTS,}${1#--with=}" ;;
    --zfs-fuse) ZFS_FUSE=1 ;;
    --prefix) PREFIX=${2:?--prefix needs a directory}; shift ;;
    --bin) BIN=${2:?--bin needs a directory}; shift ;;
    --wheel) WHEEL=${2:?--wheel needs a file}; shift ;;
    --dry-run) PB_SIMULATE=1 ;;
    -h|--help) usage ;;
    *) echo "install.sh: unknown option $1" >&2; usage ;;
  esac
  shift
done
# shellcheck source=scripts/lib/packages.sh
. "$PB_REPO/scripts/lib/packages.sh"
pb_require_python
if ! command -v apt-get >/dev/null || ! command -v dpkg-query >/dev/null; then
  say "install.sh knows apt only. Install fio 3.27 or newer with this system's package" \
      "manager, then poolbench with pipx (pipx install $PB_REPO) or pip in a virtualenv;" \
      "\`poolbench doctor\` then lists the optional parts." >&2
  exit 3
fi
if [[ $PB_SIMULATE != 1 && $(id -u) != 0 ]]; then
  say "install.sh installs system packages: run it as root (sudo), or see --dry-run." >&2
  exit 3
fi

packages=(fio)
python3 -c 'import ensurepip' 2>/dev/null || packages+=(python3-venv)  # Debian splits venv out
if [[ -n $PARTS ]]; then
  # the parts' packages, from the one capability list (src/poolbench/capabilities.py)
  more=$(PYTHONPATH="$PB_REPO/src" python3 -m poolbench.capabilities packages ${PARTS//,/ }) \
    || exit 2
  read -r -a more <<<"$more"
  packages+=("${more[@]}")
fi

flavour=$(pb_zfs_flavour)
case $flavour in
  openzfs)
    say "ZFS: this machine's OpenZFS; poolbench uses it as it is."
    if ((ZFS_FUSE)); then
      say "Skipped zfs-fuse (--zfs-fuse): this machine has OpenZFS, and Debian's" \
          "zfsutils-linux declares Conflicts: zfs-fuse (apt would remove the host's ZFS). Found:"
      pb_openzfs_traces | sed 's/^/  - /'
    fi ;;
  zfs-fuse) say "ZFS: zfs-fuse (pool version 23), already here." ;;
  none)
    if ((ZFS_FUSE)); then
      say "ZFS: none on this machine; zfs-fuse (pool version 23, user space) as asked."
      packages+=(zfs-fuse)
    else
      say "ZFS: none on this machine. poolbench benches directories, btrfs and md without it." \
          "Install the host's OpenZFS (Debian: zfsutils-linux and zfs-dkms from contrib;" \
          "Ubuntu: zfsutils-linux), or where the kernel cannot load it, rerun with --zfs-fuse."
    fi ;;
esac

mapfile -t missing < <(pb_missing "${packages[@]}")
if ((${#missing[@]})); then
  say "System packages to install: ${missing[*]}"
  pb_apt_install "${missing[@]}"
else
  say "System packages: all there (${packages[*]})."
fi

source_=${WHEEL:-$PB_REPO}
link=$BIN/poolbench
if [[ -e $link || -L $link ]] && [[ $(readlink -f "$link") != "$(readlink -f "$PREFIX")"/bin/poolbench ]]; then
  say "$link exists and is not this install's: it is left alone; poolbench is at" \
      "$PREFIX/bin/poolbench." >&2
  link=""
fi
if [[ $PB_SIMULATE == 1 ]]; then
  say "Dry run: would run python3 -m venv $PREFIX; $PREFIX/bin/pip install $source_;" \
      "${link:+ln -s $PREFIX/bin/poolbench $link; }poolbench doctor. Nothing was changed."
  exit 0
fi
[[ -x $PREFIX/bin/python ]] || python3 -m venv "$PREFIX"
"$PREFIX/bin/pip" install -q --upgrade "$source_"
[[ -n $link ]] && ln -sfn "$PREFIX/bin/poolbench" "$link"
say "Installed $("$PREFIX/bin/poolbench" --version) in $PREFIX${link:+, linked as $link}."
exec "$PREFIX/bin/poolbench" doctor  # its exit code: non-zero only if the core is missing
