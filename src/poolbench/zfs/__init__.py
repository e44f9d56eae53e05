"""The one place that speaks ZFS (zrepl's `internal/zfs` is the model).

* `commands` builds every `zpool`/`zfs`/`zdb` argument list, for both dialects (OpenZFS 2.x and
  zfs-fuse, pool version 23);
* `parse` reads their output: the one `zpool status` parser, the one `zpool list` parser,
  `zfs get -Hp`, `zdb -C`, the resilver line;
* `errors` turns the stderr of a failed command into a typed error (`PoolBusy`, `NoSuchPool`,
  `PoolExists`, `DeviceInUse`, `ActivePoolMember`) that callers catch by type;
* `pools` runs them through the Runner (GUID of a pool, its members, busy-retried destroy);
* `ops`: every other operation as one call (create, import, offline, replace, attach, status,
  `zdb -C`, dataset and pool properties, iostat), so no caller outside this package builds a
  command line or reads its output;
* `label` reads ZFS labels straight from a device; `labelclear` removes what a pool poolbench
  created left on its members (labels, and the GPT `zpool create` wrote on whole disks);
* `fusedaemon` starts and stops the zfs-fuse daemon; `dialect` names the two dialects
  (OPENZFS, ZFS_FUSE) for callers outside this package.

It imports only `poolbench.system` (the Runner) and `poolbench.errors`.
"""
