"""Emulated disks with a head (docs/emulated-disks.md).

`model` is the pure model of one spinning disk: the service time of a request from the seek
distance, the rotation and the zone's transfer rate. `clock` gives each request its start and
end on the disk, one at a time in arrival order, and tallies what it did. `server` is the
process that serves a disk image through FUSE with those service times (run as
`python -m poolbench.emulate.server`); `process` starts it through the Runner, checks it and
stops it, for the safety journal.
"""
