#!/bin/bash
# "Mirrors or raidz?" on emulated disks that seek, on zfs-fuse (docs/planner.md, "Mirrors or
# raidz on disks that seek"). Run as root, inside the machine lock, with no zfs-fuse running:
#
#   flock /var/lock/poolbench-suite.lock bash bench/seekdisk_geometry.sh RESULTS.db
#   .venv/bin/poolbench report latest --db RESULTS.db
#
# zfs-fuse is started here as bench/seekdisk_random.py starts it: without its vdev cache
# (pool v23 reads 64K for every read under 16K and keeps them; OpenZFS 2.x has none) and
# without the host's page cache of the loop devices (--disable-block-cache), so with
# primarycache=metadata every data read reaches an emulated disk. `poolbench run` uses the
# daemon it finds and leaves it; it is stopped here on the way out, whatever happened.
set -euo pipefail
db=${1:?usage: seekdisk_geometry.sh RESULTS.db}
here=$(cd "$(dirname "$0")/.." && pwd)
if timeout 30 zpool list -H >/dev/null 2>&1; then
    echo "a zfs-fuse daemon is running (someone else's?): this bench starts its own with the" \
         "vdev cache off; run it when none is" >&2
    exit 1
fi
piddir=$(mktemp -d /tmp/seekdisk-geometry.XXXXXX)
pidfile=$piddir/zfs-fuse.pid
stop() {
    local pid
    pid=$(cat "$pidfile" 2>/dev/null || true)
    if [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    fi
    rm -rf "$piddir"
}
trap stop EXIT
trap 'exit 130' INT TERM HUP
timeout 30 zfs-fuse --pidfile "$pidfile" --disable-block-cache --vdev-cache-size 0
for _ in $(seq 150); do timeout 30 zpool list -H >/dev/null 2>&1 && break; sleep 0.2; done
timeout 30 zpool list -H >/dev/null
timeout 3600 "$here/.venv/bin/poolbench" run "$here/bench/seekdisk_geometry.toml" --db "$db"
