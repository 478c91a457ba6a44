"""``tabjob export RUN_DIR --format mlserver|kserve --output DIR [--name NAME] [--model NAME]``.

``mlserver``: an MLServer model repository (model-settings.json with the tabjob runtime and the V2 metadata, plus
exactly the files inference needs); ``mlserver start DIR`` serves it. ``kserve``: a ServingRuntime and an
InferenceService that serve such an export from where the job wrote it (docs/serving.md).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("export", help="a finished run as an MLServer model repository or KServe manifests")
    p.add_argument(
        "run_dir",
        metavar="RUN",
        help="a run: output directory of `tabjob run`, a job's output, or its s3:// or gs:// URI",
    )
    p.add_argument("--format", "-f", required=True, choices=["mlserver", "kserve"], help="what to write")
    p.add_argument("--output", "-o", required=True, help="directory to write (created; an earlier export is replaced)")
    p.add_argument("--name", help="the model's name in /v2/models/NAME (default: the job's name)")
    p.add_argument("--model", help="mlserver: a leaderboard model instead of the best one")
    p.add_argument(
        "--job", metavar="MANIFEST", help="kserve: the TabularJob that wrote RUN_DIR (default RUN_DIR/spec.json)"
    )
    p.add_argument(
        "--storage-uri",
        help="kserve: where the MLServer export is (default from the job: spec.output.uri + /mlserver, or "
        "pvc://CLAIM/PATH/mlserver)",
    )
    p.add_argument(
        "--service-account",
        help="kserve: the ServiceAccount the predictor runs as, e.g. one with workload identity to the bucket",
    )
    p.add_argument(
        "--s3-secret",
        metavar="SECRET",
        help="kserve: a Secret with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; writes a ServiceAccount listing it "
        "(KServe's S3 credential convention; annotate the Secret with serving.kserve.io/s3-endpoint etc.)",
    )
    p.add_argument("--image", help="kserve: the trainer image that serves (default the operator's trainer image)")
    p.add_argument("--namespace", help="kserve: the namespace of the objects (default the job's)")
    p.add_argument(
        "--pod-monitor",
        action="store_true",
        help="kserve: also write a prometheus-operator PodMonitor and serve in RawDeployment mode (docs/serving.md)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # The trainer package holds the models; imported here so `import tabjob.cli` stays free of torch.
    from tabjob_trainer.errors import DataError
    from tabjob_trainer.serving.export import write_mlserver
    from tabjob_trainer.serving.kserve import write_kserve
    from tabjob_trainer.storage.run_reader import open_run

    if args.pod_monitor and args.format != "kserve":
        print(
            "error: --pod-monitor: only with --format kserve (it monitors the InferenceService's pods)", file=sys.stderr
        )
        return 1
    if (args.service_account or args.s3_secret) and args.format != "kserve":
        print("error: --service-account, --s3-secret: only with --format kserve", file=sys.stderr)
        return 1
    if args.service_account and args.s3_secret:
        print("error: --s3-secret writes the predictor's ServiceAccount; give it or --service-account", file=sys.stderr)
        return 1
    try:
        run_dir = open_run(args.run_dir)
        if args.format == "mlserver":
            target = write_mlserver(run_dir, args.output, args.name, args.model)
            print(f"wrote an MLServer model repository to {target}; serve it with: mlserver start {target}")
            return 0
        written = write_kserve(
            run_dir, args.output, args.name, args.job, args.storage_uri, args.image, args.namespace,
            monitor=args.pod_monitor, service_account=args.service_account, s3_secret=args.s3_secret,
        )  # fmt: skip
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {', '.join(str(p) for p in written)}; apply them with: kubectl apply -f {args.output}")
    if args.s3_secret:
        print(
            "KServe reads the S3 endpoint from the Secret's annotations, e.g.: "
            f"kubectl annotate secret {args.s3_secret} serving.kserve.io/s3-endpoint=HOST:PORT "
            "serving.kserve.io/s3-usehttps=1 serving.kserve.io/s3-region=REGION"
        )
    return 0
