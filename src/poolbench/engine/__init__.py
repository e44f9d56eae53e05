"""The trial loop: a study's lifecycle (study_lifecycle), its trials (trial_loop), one trial's
pool steps (pool_ops), the measurement session on one mounted filesystem (session), the run
lifecycle shared by run/bench/fleet (lifecycle), typed records (records), crash recovery
(cleanup) and scratch space (scratch); the disk screen (screen/) and record and replay
(replay/) beside it."""
