"""Record and replay: a workload's block trace recorded (record, through the kernel's blk
tracer: blkftrace) and a replayed trace's figures checked against what it asked (check)."""
