"""``tabjob operator``: run the operator against the current kubeconfig or the in-cluster service account."""

from __future__ import annotations

import argparse
from typing import Any

from tabjob.controller.config import Settings

# Flags that override a Settings field of the same meaning: flag destination -> field.
_SETTINGS_FLAGS = {
    "image": "default_image",
    "retry_base_delay": "retry_base_delay",
    "progress_interval": "progress_interval",
    "qps": "api_qps",
    "image_pull_timeout": "image_pull_timeout",
    "lost_pod_timeout": "lost_pod_timeout",
    "unschedulable_grace": "unschedulable_grace",
    "leader_elect": "leader_election",
    "lease_name": "lease_name",
    "lease_namespace": "lease_namespace",
    "lease_duration": "lease_duration",
    "renew_deadline": "renew_deadline",
    "retry_period": "retry_period",
    "policy_dir": "policy_dir",
}


def add_parser(sub: Any) -> None:
    p = sub.add_parser("operator", help="run the TabularJob operator (kopf) against the current cluster")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=[],
        metavar="NS",
        help="watch this namespace (repeat for more; default: all namespaces)",
    )
    scope.add_argument("--all-namespaces", "-A", action="store_true", help="watch every namespace (the default)")
    p.add_argument("--metrics-port", type=int, default=8080, help="Prometheus metrics on :PORT/metrics (0: off)")
    p.add_argument("--health-port", type=int, default=8081, help="liveness probe on :PORT/healthz (0: off)")
    p.add_argument("--image", default=None, help="default trainer image (env TABJOB_TRAINER_IMAGE)")
    p.add_argument("--retry-base-delay", type=float, default=None, help="first retry delay in seconds")
    p.add_argument("--progress-interval", type=float, default=None, help="seconds between progress reads")
    p.add_argument("--qps", type=float, default=None, help="API requests per second the reconciler may make")
    p.add_argument(
        "--image-pull-timeout", type=float, default=None, help="seconds a pod may fail to pull its image before the "
        "job fails (env TABJOB_IMAGE_PULL_TIMEOUT, default 300)",
    )  # fmt: skip
    p.add_argument(
        "--lost-pod-timeout", type=float, default=None, help="seconds past its grace period a Terminating pod counts "
        "as lost with its node (env TABJOB_LOST_POD_TIMEOUT, default 300)",
    )  # fmt: skip
    p.add_argument(
        "--unschedulable-grace", type=float, default=None, help="seconds an unschedulable pod may wait (for an "
        "autoscaler) before the job is Stalled (env TABJOB_UNSCHEDULABLE_GRACE, default 60)",
    )  # fmt: skip
    elect = p.add_argument_group(
        "leader election",
        "a coordination.k8s.io Lease, as controller-runtime does it: only the holder reconciles, so several replicas "
        "can run; one that cannot renew within --renew-deadline stops all its work and campaigns again",
    )
    # Unset flags keep the Settings value (the environment's, else the default): Settings reads the environment.
    elect.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="take part in leader election (env TABJOB_LEADER_ELECTION; default: off, a single operator)",
    )
    elect.add_argument("--lease-name", default=None, help="the Lease's name (env TABJOB_LEASE_NAME)")
    elect.add_argument(
        "--lease-namespace",
        default=None,
        help="the Lease's namespace (env TABJOB_LEASE_NAMESPACE, else POD_NAMESPACE, else default)",
    )
    elect.add_argument("--lease-duration", type=float, default=None, help="env TABJOB_LEASE_DURATION, default 15")
    elect.add_argument("--renew-deadline", type=float, default=None, help="env TABJOB_RENEW_DEADLINE, default 10")
    elect.add_argument("--retry-period", type=float, default=None, help="env TABJOB_RETRY_PERIOD, default 2")
    p.add_argument(
        "--policy-dir", default=None, help="the platform's policy: a directory holding the chart's policy ConfigMap's "
        "keys (env TABJOB_POLICY_DIR; default: the chart's default policy)",
    )  # fmt: skip
    p.add_argument("--verbose", "-v", action="store_true")
    p.set_defaults(func=run)


def settings_from(args: argparse.Namespace) -> Settings:
    """The Settings (environment and defaults) with the flags given on the command line applied."""
    flags = {field: getattr(args, flag) for flag, field in _SETTINGS_FLAGS.items() if getattr(args, flag) is not None}
    return Settings(**flags)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    import kopf
    from kubernetes import client, config
    from prometheus_client import start_http_server

    from tabjob.controller.runtime import handlers
    from tabjob.controller.runtime.reconciler import Reconciler

    _limit_malloc_arenas()
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if not args.verbose:
        logging.getLogger("kopf").setLevel(logging.WARNING)  # kopf logs every handled event at INFO
    settings = settings_from(args)

    try:
        config.load_incluster_config()
        api_config = client.Configuration.get_default_copy()
    except config.ConfigException:
        api_config = client.Configuration()
        config.load_kube_config(client_configuration=api_config)
    api_config.connection_pool_maxsize = 32
    api_client = client.ApiClient(api_config)
    from tabjob.api.platform_policy import PolicyError

    try:
        reconciler = Reconciler(settings, api_client)
    except (OSError, PolicyError) as exc:  # a policy that cannot be read: refuse to start rather than allow all
        raise SystemExit(f"tabjob operator: --policy-dir {settings.policy_dir}: {exc}") from None
    from tabjob.controller.runtime.predictions import PredictionReconciler

    predictions = PredictionReconciler(settings, reconciler.kube, reconciler.cache.jobs)

    def start_all() -> None:
        reconciler.start()
        predictions.start()

    async def stop_all() -> None:
        await reconciler.stop()
        await predictions.stop()

    elector = None
    if settings.leader_election:
        import uuid

        from tabjob.controller.runtime.election import LeaderElector, LeaseConfig

        s = settings
        identity = f"{s.identity}_{uuid.uuid4().hex[:8]}"
        lease = LeaseConfig(
            s.lease_name, s.lease_namespace, identity, s.lease_duration, s.renew_deadline, s.retry_period
        )
        try:
            elector = LeaderElector(api_client, lease, start_all, stop_all)
        except ValueError as exc:
            raise SystemExit(f"tabjob operator: --retry-period, --renew-deadline, --lease-duration: {exc}") from None
    memo = handlers.memo(reconciler, elector, predictions)
    if args.metrics_port:
        start_http_server(args.metrics_port)

    liveness = f"http://0.0.0.0:{args.health_port}/healthz" if args.health_port else None
    kopf_settings = kopf.OperatorSettings()
    # With exact namespaces there is nothing to discover: scanning namespaces and CRDs would need cluster-wide
    # rights that a namespaced install does not grant, and kopf waits out the refusals before serving.
    kopf_settings.scanning.disabled = bool(args.namespace) and not any("*" in ns for ns in args.namespace)
    asyncio.run(
        kopf.operator(
            settings=kopf_settings,
            # kopf's peering would pause the watches but not the reconciler's own work; the Lease does both.
            standalone=True,
            clusterwide=not args.namespace,
            namespaces=args.namespace,
            liveness_endpoint=liveness,
            memo=memo,
        )
    )
    return 0


def _limit_malloc_arenas() -> None:
    """glibc gives each API thread its own malloc arena; two keep the resident set flat with many jobs."""
    import contextlib
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name:
        with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to tune
            ctypes.CDLL(name).mallopt(-8, 2)  # M_ARENA_MAX
