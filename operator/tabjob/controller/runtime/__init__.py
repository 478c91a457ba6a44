"""The controller's contact with the world: kopf's watches, the watch cache, the work queue, the pass that executes
a Decision through rate-limited API calls, leader election, the progress probe and the Prometheus metrics. It calls
policy/ for every decision and holds none of its own."""
