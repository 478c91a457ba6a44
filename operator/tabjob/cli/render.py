"""``tabjob render FILE``: the ConfigMap, headless Service and pods the operator would create, as YAML (for a
TabularPrediction, its scoring pods).

For review and GitOps diffs. The job's uid is not known before the API server assigns one, so owner references
carry a placeholder unless ``--uid`` is given.
"""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("render", help="print the Kubernetes objects the operator creates for a manifest")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--namespace", "-n", default=None, help="namespace (default: the manifest's, else 'default')")
    p.add_argument("--uid", default="00000000-0000-0000-0000-000000000000", help="the TabularJob's uid")
    p.add_argument("--attempt", type=int, default=0, help="retry attempt whose pods to render (0: the first)")
    p.add_argument("--image", default=None, help="trainer image when spec.image is empty")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import dataclasses

    import yaml

    from tabjob.api import load_documents, load_manifest
    from tabjob.api.manifest_yaml import KubectlDumper
    from tabjob.api.prediction_parse import is_prediction, parse_prediction
    from tabjob.controller.config import Settings
    from tabjob.controller.policy.builders import JobRef, build_children
    from tabjob.controller.policy.scoring_builders import build_scoring_pods
    from tabjob.planner import plan_job

    settings = Settings()
    if args.image:
        settings = dataclasses.replace(settings, default_image=args.image)
    docs = load_documents(args.file)
    objects: list[dict[str, Any]]
    if len(docs) == 1 and is_prediction(docs[0]):
        tp = parse_prediction(docs[0])
        ref = JobRef(tp.metadata.name, args.namespace or tp.metadata.namespace or "default", args.uid)
        # The operator takes a job's run from its status (outputUri) once it Succeeded.
        model = tp.spec.model.uri or f"<status.outputUri of TabularJob {tp.spec.model.job}>"
        objects = build_scoring_pods(tp, ref, model, settings)
    else:
        job = load_manifest(args.file)
        plan = plan_job(job)
        ref = JobRef(
            name=job.metadata.name,
            namespace=args.namespace or job.metadata.namespace or "default",
            uid=args.uid,
            generation=1,
        )
        objects = build_children(job, plan, ref, args.attempt, settings).all()

    class _Dumper(KubectlDumper):
        pass

    def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        # The ConfigMap's JSON files read far better as literal blocks than as escaped one-liners.
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, _str)
    print(yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, default_flow_style=False), end="")
    return 0
