"""Study files: TOML → validated Study → the matrix of trials (pure, no I/O but reading)."""
