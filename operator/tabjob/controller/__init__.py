"""The controller, in two layers with one direction: runtime -> policy -> config, and no arrow back up.

runtime/ talks to the world: kopf's watches (handlers.py) feed a cache (cache.py); a work queue (workqueue.py) runs
one pass per job (reconciler.py): observe, decide, then execute in a crash-safe order through kube.py.
policy/ does the thinking, as pure functions: decide.py turns what was observed into a Decision, with one module per
run policy, and builders.py turns a spec and its plan into the child objects. config.py is the one Settings."""
