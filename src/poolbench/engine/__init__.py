"""The trial loop: a study run (study_run), one trial's pool steps (pool_ops), the measurement
session on one mounted filesystem (session), the run lifecycle shared by run/bench/fleet
(lifecycle), typed records (records), crash recovery (cleanup) and scratch space (scratch)."""
