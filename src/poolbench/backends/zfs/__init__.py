"""ZFS through `zpool` and `zfs`, in the two dialects found in the wild.

* **OpenZFS 2.x** (what users run): `zpool version` answers; output is read with `-H -p`
  (tabs, exact numbers); dRAID from 2.1; recordsize up to 16M from 2.2 (1M before).
* **zfs-fuse** (pool version 23, the ZFS this kind of machine has): no `version` command, no
  `-p` for `zpool list`, no `-H` for `zpool get`, no `sync` property, no lz4/zstd, recordsize
  at most 128K, ashift 9..13 (`-o ashift=` is a Debian patch). `zfs get -Hp` works.

One module per job, every command run through `poolbench.zfs.ops`:

* `validate`: what this ZFS can build, refused before anything exists;
* `backend`: `ZfsBackend`, the backend protocol and its capabilities (base.py), building the
  `zpool create` request and linking the members for import;
* `readback`: the pool read back after `zpool create` (vdev tree, ashift of every top-level
  vdev from `zdb -C`, dataset properties, the mount) and every difference from the request;
* `coldcache`: the ARC emptied by `zpool export` + `zpool import -d DIR`, where DIR holds only
  links to this pool's own members (never a scan of /dev);
* `operations`: offline, replace, resilver and scrub waits, RAIDZ expansion, the pool's
  accounting after a measurement.
"""

from poolbench.backends.zfs.backend import ZfsBackend
from poolbench.backends.zfs.operations import expansion_supported
from poolbench.backends.zfs.readback import expected_shape
from poolbench.zfs.dialect import OPENZFS, ZFS_FUSE

__all__ = [
    "OPENZFS", "ZFS_FUSE", "ZfsBackend", "expansion_supported", "expected_shape",
]  # fmt: skip
