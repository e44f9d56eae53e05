"""Many hosts through fio's own client/server mode (`fio --server` on each host, one controller).

poolbench runs no agent of its own: each host runs `fio --server=ADDRESS` bound to a management
address, and one controller process `fio --client=H1 job1 --client=H2 job2 ...` starts the same
workload on all of them together. See docs/fleet.md.
"""
