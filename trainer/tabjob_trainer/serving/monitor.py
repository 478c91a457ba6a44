"""How Prometheus finds a served model: the conventions of the chart's own monitors, applied to MLServer.

The chart's PodMonitor (charts/tabjob/templates/podmonitor.yaml) selects trainer pods by a ``tabjob.dev/`` label and
scrapes the container port named ``metrics`` on ``/metrics``; its ServiceMonitor does the same for the operator's
Service. A served model follows suit: its pods carry ``tabjob.dev/model: NAME``, MLServer's metrics port (8082) is
named ``metrics``, and a PodMonitor selects those pods by that label. A PodMonitor rather than a ServiceMonitor:
KServe makes the predictor's Service itself, with the inference port only, while the pods are labelled from the
InferenceService (``spec.predictor.labels``), which the export writes.

Pure builders: no file, no cluster.
"""

from __future__ import annotations

from typing import Any

MODEL_LABEL = "tabjob.dev/model"
METRICS_PORT_NAME = "metrics"  # the name the chart's PodMonitor and ServiceMonitor scrape
METRICS_PATH = "/metrics"  # MLServer's default metrics_endpoint, and the chart's path
# The chart's metrics.podMonitor defaults, so a served model is scraped as often as the trainers.
INTERVAL, SCRAPE_TIMEOUT = "30s", "10s"
MANAGED_BY = {"app.kubernetes.io/managed-by": "tabjob"}


def model_labels(name: str) -> dict[str, str]:
    """The labels a served model's pods carry, which its PodMonitor selects."""
    return {MODEL_LABEL: name}


def metrics_port(port: int) -> dict[str, Any]:
    """MLServer's metrics port as a container port, named as the monitors expect."""
    return {"containerPort": port, "name": METRICS_PORT_NAME, "protocol": "TCP"}


def pod_monitor(name: str, namespace: str | None) -> dict[str, Any]:
    """A prometheus-operator PodMonitor (monitoring.coreos.com/v1) scraping the pods that serve model ``name``.

    Without a namespace it is applied where its pods run (``kubectl apply -n``): a PodMonitor with no
    namespaceSelector selects pods of its own namespace only.
    """
    metadata: dict[str, Any] = {"name": name, "labels": {**MANAGED_BY, **model_labels(name)}}
    spec: dict[str, Any] = {
        "selector": {"matchLabels": model_labels(name)},
        "podMetricsEndpoints": [
            {"port": METRICS_PORT_NAME, "path": METRICS_PATH, "interval": INTERVAL, "scrapeTimeout": SCRAPE_TIMEOUT}
        ],
    }
    if namespace:
        metadata["namespace"] = namespace
        spec["namespaceSelector"] = {"matchNames": [namespace]}
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor", "metadata": metadata, "spec": spec}
