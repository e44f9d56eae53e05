"""Who may touch which device: inventory, claims, confirmation, teardown journal."""
