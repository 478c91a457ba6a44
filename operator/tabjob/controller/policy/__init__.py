"""Pure decisions: an `Observed` job in, a `Decision` out (decide.py), one module per run policy (retry, deadline,
ttl, suspend, admission through Kueue), and the child objects (builders.py). Nothing here calls the API server,
sleeps or reads the clock; beyond this folder it imports config.py, the api, the planner and the contracts, never
runtime/ (docs/architecture.md's table, held by tests/unit/test_import_boundaries.py)."""
