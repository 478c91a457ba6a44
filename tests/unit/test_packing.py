"""runtime/packing.py: what the operator keeps per job, compressed against a dictionary of what jobs share."""

from __future__ import annotations

import json
import zlib
from typing import Any

from tabjob.api import parse_manifest
from tabjob.controller.config import Settings
from tabjob.controller.policy.builders import JobRef, build_children
from tabjob.controller.runtime import packing
from tabjob.planner import plan_job


def _children(name: str, uid: str, pods: int) -> list[Any]:
    doc = {
        "apiVersion": "tabjob.dev/v1alpha1",
        "kind": "TabularJob",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "data": {"train": "s3://bucket/train.parquet", "label": "y"},
            "output": {"path": f"/output/{name}"},
            "resources": {"cpus": 2 * pods, "cpusPerPod": 2, "memory": "4Gi"},
            "models": {"GBM": [{}], "NN_TORCH": [{}]},
            "bagging": {"folds": 4},
        },
    }
    job = parse_manifest(doc)
    kids = build_children(job, plan_job(job), JobRef(name, "team-a", uid, 3), 1, Settings())
    return [kids.configmap, kids.service, kids.pods]


def test_round_trip_is_exact() -> None:
    obj = [_children("churn-model", "6f1c0d7e-0a8b-4c4e-9a51-3d2f1e0b9c77", 2), {"fits": 8}, ["a line", None, 1.5]]
    assert packing.unpack(packing.pack(obj)) == json.loads(json.dumps(obj))
    assert packing.unpack(packing.pack({})) == {}


def test_the_dictionary_fits_zlibs_window() -> None:
    assert 4096 < len(packing.dictionary()) <= 32768


def test_another_jobs_children_pack_to_a_fraction_of_plain_zlib() -> None:
    # A job unlike the dictionary's sample (other names, families, pods, volume): still mostly shared text.
    obj = _children("fraud-detector-v2", "0b7f3c2e-1111-2222-3333-444455556666", 3)
    plain = zlib.compress(json.dumps(obj, separators=(",", ":")).encode(), 1)
    assert len(packing.pack(obj)) < len(plain) / 2
