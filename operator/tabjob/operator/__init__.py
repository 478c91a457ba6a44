"""The operator: kopf's watches (handlers.py) feed a cache (cache.py); a work queue (workqueue.py) runs one pass
per job (reconciler.py): observe, decide (decide.py, pure, with one module per run policy), then execute in a
crash-safe order. Pure builders (builders.py) turn a spec and its plan into the child objects."""
