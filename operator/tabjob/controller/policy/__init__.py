"""Pure decisions: an `Observed` job in, a `Decision` out (decide.py), one module per run policy (retry, deadline,
ttl, suspend, admission through Kueue), and the child objects (builders.py). Nothing here calls the API server,
sleeps or reads the clock; it imports only config.py from outside this folder."""
