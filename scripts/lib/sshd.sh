# shellcheck shell=bash
# OpenSSH's server for the fleet tests' hosts, unpacked into a private tree and never installed:
# installing openssh-server would enable and start a service on the developer's machine, and
# poolbench never starts a service it did not start. The .deb files (the server and any library
# it needs that the machine lacks) are fetched with `apt-get download` into a cache and
# unpacked with `dpkg-deb -x`; nothing in dpkg's database, /etc or systemd changes.
# Called by scripts/setup.sh (which CI runs); nothing a user runs calls it.
#
#   pb_fetch_sshd DIR   leaves DIR/root/usr/sbin/sshd and DIR/lib-path (its LD_LIBRARY_PATH)
pb_fetch_sshd() {
  local dir=$1 cache=$1/debs root=$1/root
  if [[ -x $root/usr/sbin/sshd ]]; then
    return 0
  fi
  mkdir -p "$cache" "$root"
  # apt's _apt user cannot write into a private dir under a checkout: fetch as root, quietly.
  (cd "$cache" && timeout 300 apt-get download -q openssh-server 2>&1 | grep -v 'unsandboxed' || true)
  local deb
  for deb in "$cache"/openssh-server_*.deb; do
    [[ -f $deb ]] || { echo "setup: apt-get download openssh-server fetched nothing" >&2; return 1; }
    dpkg-deb -x "$deb" "$root"
  done
  local libdir=$root/usr/lib/x86_64-linux-gnu missing lib pkg
  # Each library the server needs and the machine lacks comes the same way, once.
  missing=$(LD_LIBRARY_PATH=$libdir ldd "$root/usr/sbin/sshd" | awk '/not found/ {print $1}')
  for lib in $missing; do
    case $lib in
      libwrap.so.*) pkg=libwrap0 ;;
      *) echo "setup: sshd needs $lib, which no rule here fetches" >&2; return 1 ;;
    esac
    (cd "$cache" && timeout 300 apt-get download -q "$pkg" 2>&1 | grep -v 'unsandboxed' || true)
    for deb in "$cache/${pkg}"_*.deb; do dpkg-deb -x "$deb" "$root"; done
  done
  if LD_LIBRARY_PATH=$libdir ldd "$root/usr/sbin/sshd" | grep -q 'not found'; then
    echo "setup: the unpacked sshd still lacks a library:" >&2
    LD_LIBRARY_PATH=$libdir ldd "$root/usr/sbin/sshd" | grep 'not found' >&2
    return 1
  fi
  printf '%s\n' "$libdir" >"$dir/lib-path"
}
