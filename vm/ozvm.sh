#!/usr/bin/env bash
# vm/ozvm.sh - poolbench's own throw-away QEMU guest with real OpenZFS 2.3 (Debian bookworm,
# zfs-dkms from bookworm-backports), and a Python venv with poolbench's pinned dependencies.
# Adapted from the team's shared ozvm tool; see vm/README.md.
#
#   vm/ozvm.sh build [--until S]  build (or reuse) the cached guest image in $POOLBENCH_OZVM_DIR
#                                 (--until: stop after stage S, e.g. zfs)
#   vm/ozvm.sh run SCRIPT [ARGS]  boot a fresh copy-on-write guest with $OZVM_DISKS scratch disks
#                                 and this repository shared read-only at /mnt/repo, run SCRIPT as
#                                 root, stream its output, power off, exit with SCRIPT's exit code
#   vm/ozvm.sh shell              same VM, interactive root shell on the serial console (Ctrl-A x)
#   vm/ozvm.sh info               what is built
#   vm/ozvm.sh clean              remove the whole cache
set -euo pipefail

OZVM_DIR=${POOLBENCH_OZVM_DIR:-/var/tmp/poolbench-ozvm}
OZVM_MIRROR=${OZVM_MIRROR:-http://deb.debian.org/debian}
OZVM_SECURITY_MIRROR=${OZVM_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
OZVM_MEM=${OZVM_MEM:-2048}                     # guest RAM, MiB
OZVM_CPUS=${OZVM_CPUS:-2}
OZVM_DISKS=${OZVM_DISKS:-6}                    # scratch disks per run (virtio, /dev/vdb ...)
OZVM_DISK_SIZE=${OZVM_DISK_SIZE:-2G}           # size of each (sparse file on the host); a comma
                                               # list gives one per disk, the last one repeats
OZVM_DISK_OPTS=${OZVM_DISK_OPTS:-cache=unsafe,discard=unmap}
OZVM_ACCEL=${OZVM_ACCEL:-auto}                 # auto (kvm if hardware-assisted, else tcg) | kvm | tcg
OZVM_TIMEOUT=${OZVM_TIMEOUT:-3600}             # seconds before the VM is killed (exit 125)
OZVM_ROOT_FREE_MB=${OZVM_ROOT_FREE_MB:-3072}   # free space in the guest root fs (build time)
OZVM_KEEP=${OZVM_KEEP:-0}                      # 1: keep the run dir, scratch disks included

SELF=$(readlink -f "$0")
REPO=$(dirname "$(dirname "$SELF")")           # the repository this script lives in
ROOTFS=$OZVM_DIR/rootfs
IMG=$OZVM_DIR/root.img
BOOT=$OZVM_DIR/boot
LOG=$OZVM_DIR/build.log
TIMES=$OZVM_DIR/build-times.txt
VENV=/opt/poolbench-venv                       # inside the guest
WHEELS=/opt/poolbench-wheels                   # inside the guest: the runtime dependencies' wheels
STAGES=(debootstrap packages zfs tools venv configure image)
# Debian packages of the guest, besides the kernel and ZFS
GUEST_PKGS=systemd-sysv,udev,kmod,procps,e2fsprogs,initramfs-tools,zstd,less,fio,fdisk,util-linux,ca-certificates,python3,python3-venv,python3-pip
# The other stacks poolbench compares with ZFS (md + ext3/ext4/xfs, btrfs), and a real source
# tree for the `untar` workload: xorg-server-source ships /usr/src/xorg-server.tar.xz (5 MB,
# 1834 files, 36 MB unpacked). linux-source-6.1 (139 MB, about 80k files, 1.4 GB unpacked) would
# make every untar take minutes under TCG, so the guest's fs-compare passes --tarball.
# postgresql: the pgbench workloads and `study database` (its cluster is never started here:
# the packages stage's policy-rc.d refuses service starts in the chroot).
TOOLS_PKGS="mdadm xfsprogs btrfs-progs e2fsprogs xorg-server-source postgresql"

log() { printf '[ozvm] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
need_root() { [[ $(id -u) == 0 ]] || die "must run as root"; }

# ---------------------------------------------------------------- chroot helpers
# Chroot stages run under `unshare -m`: their mounts vanish when the stage ends, even on failure.
chroot_setup() {
  mount -t proc proc "$ROOTFS/proc"
  mount -t sysfs sys "$ROOTFS/sys"
  mount --bind /dev "$ROOTFS/dev"
  mount --bind /dev/pts "$ROOTFS/dev/pts"
  mount -t tmpfs tmpfs "$ROOTFS/run"
  mount -t tmpfs tmpfs "$ROOTFS/tmp"
  cp -L /etc/resolv.conf "$ROOTFS/etc/resolv.conf"
}
in_chroot() {
  chroot "$ROOTFS" /usr/bin/env -i HOME=/root TERM=dumb LC_ALL=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 \
    /bin/bash -euo pipefail -c "$1"
}
guest_kver() { ls "$ROOTFS/lib/modules" | sort -V | tail -1; }

# The requirements baked into the guest venv: pyproject's pinned runtime dependencies and the
# test extras (without the linters, which the guest does not run). A change re-runs `venv`.
requirements() {
  python3 - "$REPO/pyproject.toml" "$WHEELS" <<'PY'
import sys, tomllib
p = tomllib.load(open(sys.argv[1], "rb"))["project"]
reqs = list(p["dependencies"]) + list(p.get("optional-dependencies", {}).get("test", []))
# The guest never runs zfs-fuse, so it has no crashed daemon to retry a test for.
skip = ("ruff", "mypy", "pytest-rerunfailures")
print("\n".join(r for r in reqs if not r.split("=")[0].split(">")[0].strip().startswith(skip)))
# (a line of its own, so that an image built before the wheelhouse rebuilds its venv)
print(f"# and a wheelhouse of the runtime dependencies in {sys.argv[2]}")
PY
}
# pyproject's runtime dependencies alone: the wheels a user's install of the poolbench wheel
# needs, kept in the image (WHEELS) for the guest's user-path test (no network at run time).
runtime_requirements() {
  python3 -c 'import sys, tomllib; print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))' "$REPO/pyproject.toml"
}

# ---------------------------------------------------------------- build stages
_hostdeps() {
  local missing=()
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
  command -v mkfs.ext4 >/dev/null || missing+=(e2fsprogs)
  [[ -x /usr/bin/time ]] || missing+=(time)
  if ((${#missing[@]})); then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

_debootstrap() {
  rm -rf "$ROOTFS.partial"
  debootstrap --variant=minbase --include="$GUEST_PKGS" bookworm "$ROOTFS.partial" "$OZVM_MIRROR"
  rm -rf "$ROOTFS"
  mv "$ROOTFS.partial" "$ROOTFS"
}

_packages() {
  cat >"$ROOTFS/etc/apt/sources.list" <<EOF
deb $OZVM_MIRROR bookworm main contrib
deb $OZVM_MIRROR bookworm-updates main contrib
deb $OZVM_SECURITY_MIRROR bookworm-security main contrib
deb $OZVM_MIRROR bookworm-backports main contrib
EOF
  printf '#!/bin/sh\nexit 101\n' >"$ROOTFS/usr/sbin/policy-rc.d"; chmod +x "$ROOTFS/usr/sbin/policy-rc.d"
  printf 'APT::Install-Recommends "0";\nAPT::Install-Suggests "0";\n' >"$ROOTFS/etc/apt/apt.conf.d/90ozvm"
  chroot_setup
  in_chroot "apt-get update -q && apt-get install -y -q linux-image-amd64 linux-headers-amd64"
}

_zfs() {
  chroot_setup
  local kver; kver=$(guest_kver)
  # zfs-dkms' postinst builds for the newest installed kernel; `dkms autoinstall -k` makes sure
  # it was built for the guest kernel, not for the host's (what `uname -r` says in the chroot).
  in_chroot "apt-get install -y -q -t bookworm-backports zfs-dkms zfsutils-linux"
  in_chroot "dkms autoinstall -k $kver && dkms status"
  [[ -n $(find "$ROOTFS/lib/modules/$kver" -name 'zfs.ko*' | head -1) ]] || die "zfs.ko not built for $kver"
  in_chroot "apt-get clean; rm -rf /var/lib/dkms/zfs/*/build /var/lib/apt/lists/*"
}

_tools() {
  chroot_setup
  in_chroot "apt-get update -q && apt-get install -y -q $TOOLS_PKGS
             test -s /usr/src/xorg-server.tar.xz
             apt-get clean; rm -rf /var/lib/apt/lists/*"
  echo "$TOOLS_PKGS" >"$OZVM_DIR/.tools-packages"
}

# The venv is built in the chroot with the guest's own Python (bookworm: 3.11), so compiled
# wheels (numpy, scipy, pydantic-core) match it; pip reaches PyPI through the host's network
# here, at build time. At run time the guest has no network at all.
_venv() {
  chroot_setup
  requirements >"$ROOTFS/tmp/requirements.txt"
  runtime_requirements >"$ROOTFS/tmp/runtime.txt"
  # pip trusts the host's CA bundle (a TLS-inspecting proxy's CA may only be there)
  cp -L "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" "$ROOTFS/tmp/host-ca.crt"
  in_chroot "rm -rf $VENV $WHEELS && python3 -m venv $VENV
             PIP_CERT=/tmp/host-ca.crt $VENV/bin/pip download -q --no-cache-dir --only-binary=:all: -d $WHEELS -r /tmp/runtime.txt
             PIP_CERT=/tmp/host-ca.crt $VENV/bin/pip install -q --no-cache-dir -r /tmp/requirements.txt
             $VENV/bin/python -c 'import click, rich, pydantic, numpy, scipy, pytest, hypothesis'
             $VENV/bin/python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])' >/tmp/purelib
             echo /root/poolbench/src >\$(cat /tmp/purelib)/poolbench-src.pth
             printf '#!$VENV/bin/python\nimport sys\nfrom poolbench.cli.main import main\nsys.exit(main())\n' >$VENV/bin/poolbench
             chmod +x $VENV/bin/poolbench
             $VENV/bin/pip freeze >$VENV/requirements.frozen"
  requirements >"$OZVM_DIR/.venv-requirements"
}

_configure() {
  local R=$ROOTFS kver; kver=$(guest_kver)
  echo ozvm >"$R/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 ozvm\n' >"$R/etc/hosts"
  echo 'LABEL=ozvmroot / ext4 rw,noatime,errors=remount-ro 0 0' >"$R/etc/fstab"
  : >"$R/etc/resolv.conf"
  rm -f "$R/usr/sbin/policy-rc.d"
  mkdir -p "$R/mnt/ozvm" "$R/mnt/repo"
  # PID 1 (init=): bring up only what ZFS needs (udev: libzfs waits for udev to have processed
  # a whole disk's partitions in `zpool create`), mount the shares, run the script, power off.
  install -m 0755 /dev/stdin "$R/usr/local/sbin/ozvm-init" <<'EOF'
#!/bin/bash
export PATH=/opt/poolbench-venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8
up() { cut -d' ' -f1 /proc/uptime; }
say() { echo "[ozvm-guest] $(up)s: $*" >/dev/console; }
off() { sync; echo o >/proc/sysrq-trigger; sleep 10; }
mountpoint -q /proc || mount -t proc proc /proc
mountpoint -q /sys || mount -t sysfs sys /sys
mountpoint -q /dev || mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620 devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm; mount -t tmpfs -o mode=755 tmpfs /run; mount -t tmpfs tmpfs /tmp
mkdir -p /run/lock /run/udev
hostname ozvm
modprobe -a virtio_console 9pnet_virtio 9p loop  # loop: no systemd to load it on demand
modprobe -a md_mod raid0 raid1 raid10 raid456 xfs btrfs  # md, xfs, btrfs: loaded up front
/lib/systemd/systemd-udevd --daemon
udevadm trigger --action=add --subsystem-match=block --subsystem-match=virtio-ports
udevadm settle -t 60
m9p() { mount -t 9p -o "trans=virtio,version=9p2000.L,msize=262144,$3" "$1" "$2"; }
m9p ozvm /mnt/ozvm rw || { say "9p mount failed"; off; }
m9p ozvmrepo /mnt/repo ro || say "repo share mount failed"
OUT=/dev/virtio-ports/ozvm.out
for _ in $(seq 100); do [[ -e $OUT ]] && break; sleep 0.1; done
[[ -e $OUT ]] || OUT=/dev/console
modprobe zfs || say "modprobe zfs failed"
disks=()
for l in $(ls /dev/disk/by-id/ | grep -E '^virtio-ozvm-d[0-9]+$' | sort -V); do
  disks+=("$(readlink -f "/dev/disk/by-id/$l")")
done
args=()
[[ -s /mnt/ozvm/args ]] && mapfile -d '' -t args </mnt/ozvm/args
mkdir -p /mnt/ozvm/out
up >/mnt/ozvm/ready-uptime
say "ready; disks: ${disks[*]}"
cd /root
OZVM_DISKS="${disks[*]}" OZVM_OUT=/mnt/ozvm/out POOLBENCH_OPENZFS_GUEST=1 \
  /bin/bash /mnt/ozvm/script.sh "${args[@]}" >"$OUT" 2>&1 </dev/null
rc=$?
echo "$rc" >/mnt/ozvm/rc
say "script exited with $rc; powering off"
sync; umount /mnt/repo; umount /mnt/ozvm
off
EOF
  printf 'blacklist %s\n' kvm kvm_amd kvm_intel iTCO_wdt pcspkr >"$R/etc/modprobe.d/ozvm-blacklist.conf"
  passwd -R "$R" -d root >/dev/null
  # small initramfs: only what is needed to mount an ext4 root on virtio-blk
  sed -i 's/^MODULES=.*/MODULES=list/' "$R/etc/initramfs-tools/initramfs.conf"
  printf 'virtio_pci\nvirtio_blk\next4\n' >"$R/etc/initramfs-tools/modules"
  chroot_setup
  in_chroot "update-initramfs -c -k $kver 2>&1 | grep -v '^W: Possible missing firmware' || true; test -s /boot/initrd.img-$kver"
  mkdir -p "$BOOT"
  cp "$R/boot/vmlinuz-$kver" "$BOOT/vmlinuz.new" && mv "$BOOT/vmlinuz.new" "$BOOT/vmlinuz"
  cp "$R/boot/initrd.img-$kver" "$BOOT/initrd.img.new" && mv "$BOOT/initrd.img.new" "$BOOT/initrd.img"
  in_chroot "{ echo kernel=$kver; dpkg-query -W -f='zfs=\${Version}\n' zfsutils-linux
              modinfo -k $kver -F version zfs | sed 's/^/zfs_kmod=/'
              echo python=\$($VENV/bin/python -c 'import platform; print(platform.python_version())'); }" >"$OZVM_DIR/versions.txt"
}

_image() {
  local kb; kb=$(du -sk --one-file-system "$ROOTFS" | cut -f1)
  local mb=$(( kb * 11 / 10 / 1024 + OZVM_ROOT_FREE_MB ))   # sparse: free space costs ~nothing
  rm -f "$IMG.partial"
  truncate -s "${mb}M" "$IMG.partial"
  mkfs.ext4 -q -F -L ozvmroot -E lazy_itable_init=0,lazy_journal_init=0 -d "$ROOTFS" "$IMG.partial"
  mv "$IMG.partial" "$IMG"
}

cmd_build() {
  need_root
  # --until STAGE: stop after that stage (CI builds the long, CPU-bound stages while its
  # default suite runs, and the disk-heavy last ones, about 2 min, after it)
  local until=""
  if [[ ${1:-} == --until ]]; then
    until=${2:-}
    [[ " ${STAGES[*]} " == *" $until "* ]] || die "--until needs one of: ${STAGES[*]}"
  fi
  mkdir -p "$OZVM_DIR"
  _hostdeps
  # pyproject's pins changed since the venv was built: rebuild it (and the stages after it)
  if [[ -e $OZVM_DIR/.stamp-venv ]] && ! requirements | cmp -s - "$OZVM_DIR/.venv-requirements"; then
    log "pyproject dependencies changed: rebuilding the guest venv"
    rm -f "$OZVM_DIR/.stamp-venv"
  fi
  # the list of tool packages changed: install them again (and the stages after it)
  if [[ -e $OZVM_DIR/.stamp-tools && $(cat "$OZVM_DIR/.tools-packages" 2>/dev/null) != "$TOOLS_PKGS" ]]; then
    log "the guest's tool packages changed: re-running the tools stage"
    rm -f "$OZVM_DIR/.stamp-tools"
  fi
  # this script changed since the image was built (e.g. the guest init): configure + image again
  local sum; sum=$(sha256sum "$SELF" | cut -d' ' -f1)
  if [[ -e $OZVM_DIR/.stamp-configure && $(cat "$OZVM_DIR/.script-sha256" 2>/dev/null) != "$sum" ]]; then
    log "vm/ozvm.sh changed since the last build: re-running the configure stage"
    rm -f "$OZVM_DIR/.stamp-configure"
  fi
  local s rerun=0 t0 t1
  for s in "${STAGES[@]}"; do
    if [[ -e $OZVM_DIR/.stamp-$s && $rerun == 0 ]]; then
      [[ $s == "$until" ]] && return 0
      continue
    fi
    rerun=1
    log "stage $s: running (log: $LOG)"
    rm -f "$OZVM_DIR/.stamp-$s"
    t0=$(date +%s.%N)
    local cmd=("$SELF" "_$s")
    [[ $s == image ]] || cmd=(unshare -m --propagation private "${cmd[@]}")
    if ! nice -n 10 "${cmd[@]}" >>"$LOG" 2>&1; then
      tail -40 "$LOG" >&2
      die "stage $s failed (full log: $LOG)"
    fi
    t1=$(date +%s.%N)
    printf '%-12s %8.1f s  (%s)\n' "$s" "$(awk "BEGIN{print $t1 - $t0}")" "$(date -Is)" | tee -a "$TIMES" >&2
    touch "$OZVM_DIR/.stamp-$s"
    if [[ $s == "$until" ]]; then
      log "stopped after stage $s (--until); the next build runs the rest"
      return 0
    fi
  done
  echo "$sum" >"$OZVM_DIR/.script-sha256"
  ((rerun)) || log "image is up to date ($IMG)"
}

cmd_info() {
  [[ -e $OZVM_DIR/.stamp-image ]] || { log "not built (run: $0 build)"; return 1; }
  cat "$OZVM_DIR/versions.txt"
  echo "image=$IMG apparent=$(du -h --apparent-size "$IMG" | cut -f1) allocated=$(du -h "$IMG" | cut -f1)"
  echo "cache-total=$(du -sh "$OZVM_DIR" | cut -f1)"
}

cmd_clean() {
  if findmnt -rn -o TARGET | grep -q "^$ROOTFS"; then die "something is mounted under $ROOTFS"; fi
  rm -rf "$OZVM_DIR"
}

# ---------------------------------------------------------------- running
# Hardware-assisted KVM needs vmx/svm in the host CPU flags. A /dev/kvm backed by PVM (kvm_pvm)
# only runs PVM guest kernels (a stock kernel just spins): treat that as no KVM -> TCG.
kvm_usable() {
  [[ -r /dev/kvm && -w /dev/kvm ]] && grep -qwE 'vmx|svm' /proc/cpuinfo && [[ ! -d /sys/module/kvm_pvm ]]
}

accel_args() {
  local a=$OZVM_ACCEL
  if [[ $a == auto ]]; then if kvm_usable; then a=kvm; else a=tcg; fi; fi
  case $a in
    kvm) echo "-accel kvm -cpu ${OZVM_CPU:-host,-arch-capabilities}";;
    tcg) echo "-accel tcg,thread=multi -cpu ${OZVM_CPU:-max}";;
    *) die "OZVM_ACCEL must be auto, kvm or tcg";;
  esac
}

vm_cmdline() {  # vm_cmdline MODE RUNDIR   (MODE = run | shell)
  local mode=$1 w=$2 i append
  append="root=LABEL=ozvmroot rw console=ttyS0,115200 panic=-1 quiet loglevel=4"
  append+=" mitigations=off apparmor=0 selinux=0 audit=0 nowatchdog"
  [[ $mode == run ]] && append+=" init=/usr/local/sbin/ozvm-init"
  Q=(qemu-system-x86_64 $(accel_args) -machine q35 -smp "$OZVM_CPUS" -m "$OZVM_MEM"
     -nodefaults -no-user-config -nographic -no-reboot
     -kernel "$BOOT/vmlinuz" -initrd "$BOOT/initrd.img" -append "$append"
     -drive "if=none,id=root,file=$IMG,format=raw,snapshot=on,cache=unsafe"
     -device virtio-blk-pci,drive=root,serial=ozvm-root
     -device virtio-rng-pci
     -fsdev "local,id=fs0,path=$w/share,security_model=none"
     -device virtio-9p-pci,fsdev=fs0,mount_tag=ozvm
     -fsdev "local,id=fs1,path=$REPO,security_model=none,readonly=on"
     -device virtio-9p-pci,fsdev=fs1,mount_tag=ozvmrepo)
  local sizes; IFS=, read -ra sizes <<<"$OZVM_DISK_SIZE"
  for ((i = 0; i < OZVM_DISKS; i++)); do
    truncate -s "${sizes[i < ${#sizes[@]} ? i : ${#sizes[@]} - 1]}" "$w/disk$i.raw"
    Q+=(-drive "if=none,id=d$i,file=$w/disk$i.raw,format=raw,$OZVM_DISK_OPTS"
        -device "virtio-blk-pci,drive=d$i,serial=ozvm-d$i")
  done
  if [[ $mode == run ]]; then
    Q+=(-monitor none -serial "file:$w/console.log"
        -device virtio-serial-pci -chardev "file,id=out,path=$w/output.log,append=on"
        -device virtserialport,chardev=out,name=ozvm.out)
  else
    Q+=(-serial mon:stdio)
  fi
}

new_rundir() {
  [[ -e $OZVM_DIR/.stamp-image ]] || die "no image; run: $0 build"
  mkdir -p "$OZVM_DIR/runs"
  local w; w=$(mktemp -d "$OZVM_DIR/runs/$(date +%Y%m%d-%H%M%S).XXXX")
  mkdir -p "$w/share"
  echo "$w"
}

cmd_run() {
  need_root
  [[ $# -ge 1 && -f $1 ]] || die "usage: $0 run SCRIPT [ARGS...]"
  local script=$1; shift
  local w; w=$(new_rundir)
  ln -sfn "$w" "$OZVM_DIR/last-run"
  # A caller that must find this run's files while another guest may start (last-run then
  # points there) names a file to receive this run's directory.
  if [[ -n ${OZVM_RUN_DIR_FILE:-} ]]; then echo "$w" >"$OZVM_RUN_DIR_FILE"; fi
  cp "$script" "$w/share/script.sh"
  if (($#)); then printf '%s\0' "$@" >"$w/share/args"; fi
  : >"$w/output.log"
  vm_cmdline run "$w"
  printf '%q ' "${Q[@]}" >"$w/qemu-cmdline"
  log "run dir $w; booting ($(accel_args | cut -d' ' -f2), ${OZVM_MEM}M, $OZVM_CPUS cpus, $OZVM_DISKS x $OZVM_DISK_SIZE disks)"
  local t0 t1 qpid tpid qrc=0 rc
  t0=$(date +%s.%N)
  # TMPDIR: where qemu puts the (deleted-on-exit) overlay that snapshot=on writes go to.
  # The VM always ends: by the guest's power-off, by the timeout, or by our signal trap.
  TMPDIR=$w timeout -k 10 "$OZVM_TIMEOUT" "${Q[@]}" </dev/null >"$w/qemu.log" 2>&1 &
  qpid=$!
  trap 'kill -TERM $qpid 2>/dev/null; wait $qpid 2>/dev/null; rm -f "$w"/disk*.raw; log "interrupted"; exit 130' INT TERM HUP
  tail -n +1 -s 0.2 -f --pid="$qpid" "$w/output.log" &
  tpid=$!
  wait "$qpid" || qrc=$?
  wait "$tpid" 2>/dev/null || true
  trap - INT TERM HUP
  t1=$(date +%s.%N)
  if [[ -f $w/share/rc ]]; then
    rc=$(cat "$w/share/rc")
  else
    rc=125
    log "guest did not report an exit code (qemu exit $qrc); console tail:"
    tail -25 "$w/console.log" >&2 || true
    cat "$w/qemu.log" >&2 || true
  fi
  log "$(printf 'exit %s; wall %.1f s; guest ready at uptime %ss' "$rc" "$(awk "BEGIN{print $t1 - $t0}")" "$(cat "$w/share/ready-uptime" 2>/dev/null || echo '?')")"
  if [[ $OZVM_KEEP == 1 ]]; then
    log "kept $w"
  else
    rm -f "$w"/disk*.raw
    log "logs: $w/{output.log,console.log}; files from \$OZVM_OUT: $w/share/out"
    # keep the 10 newest run dirs (logs only)
    ls -1d "$OZVM_DIR"/runs/*/ 2>/dev/null | sort | head -n -10 | while read -r d; do rm -rf "$d"; done
  fi
  return "$rc"
}

cmd_shell() {
  need_root
  local w; w=$(new_rundir)
  vm_cmdline shell "$w"
  log "interactive VM (Ctrl-A x quits qemu); the repo is shared as 9p tag ozvmrepo"
  TMPDIR=$w "${Q[@]}" || true
  [[ $OZVM_KEEP == 1 ]] || rm -rf "$w"
}

main() {
  case ${1:-} in
    build) shift; cmd_build "$@";;
    run) shift; cmd_run "$@";;
    shell) shift; cmd_shell "$@";;
    info) cmd_info;;
    clean) cmd_clean;;
    _debootstrap|_packages|_zfs|_tools|_venv|_configure|_image) s=$1; shift; "$s" "$@";;
    *) sed -n '2,13p' "$SELF" | sed 's/^# \{0,1\}//'; exit 2;;
  esac
}
# on one line, so bash never reads past it (safe to replace this file while it runs)
main "$@"; exit $?
