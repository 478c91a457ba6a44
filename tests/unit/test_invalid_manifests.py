"""A catalogue of invalid manifests: each must be rejected with an error that names the field."""

from __future__ import annotations

from typing import Any

import pytest

from tabjob.api import parse_manifest
from tabjob.api.errors import SpecError
from tabjob.planner import plan_job
from tests.unit.manifests import base, merge, spec

GPU = {"cpus": 8, "gpus": 2}

CATALOGUE: list[tuple[str, Any, str]] = [
    # (case, manifest, field the error must name)
    ("not a mapping", ["a", "list"], "(document)"),
    ("wrong apiVersion", merge(base(), {"apiVersion": "tabjob.dev/v1"}), "apiVersion"),
    ("wrong kind", merge(base(), {"kind": "PyTorchJob"}), "kind"),
    ("typo at spec level", spec(bagginng={"folds": 2}), "spec.bagginng"),
    ("typo in data", spec(data={"lable": "y"}), "spec.data.lable"),
    ("missing label", merge(base(), {"spec": {"data": {"label": None}}}), "spec.data.label"),
    ("missing train", merge(base(), {"spec": {"data": {"train": None}}}), "spec.data.train"),
    ("unknown problem type", spec(data={"problemType": "ranking"}), "spec.data.problemType"),
    ("unknown metric", spec(data={"evalMetric": "auc"}), "spec.data.evalMetric"),
    ("no models", spec(models={}), "spec"),
    ("unknown model key", spec(models={"FASTAI": [{}]}), "spec.models.FASTAI"),
    ("model config not a list", spec(models={"GBM": {}}), "spec.models.GBM"),
    ("typo in model config", spec(models={"GBM": [{"hyperparams": {}}]}), "spec.models.GBM[0].hyperparams"),
    ("bad model name", spec(models={"GBM": [{"name": "1st model"}]}), "spec.models.GBM[0].name"),
    ("duplicate model name", spec(models={"GBM": [{"name": "A"}, {"name": "A"}]}), "spec.models.GBM[1].name"),
    ("zero cpus budget", spec(resources={"cpus": 0}), "spec.resources.cpus"),
    ("fractional cpus budget", spec(resources={"cpus": 1.5}), "spec.resources.cpus"),
    ("negative gpus", spec(resources={"gpus": -1}), "spec.resources.gpus"),
    ("budget gpus 0.3", spec(resources={"gpus": 0.3}), "spec.resources.gpus"),
    ("bad memory quantity", spec(resources={"memory": "64GB"}), "spec.resources.memory"),
    ("bad gpu resource name", spec(resources={"gpuResource": "gpu"}), "spec.resources.gpuResource"),
    ("gpusPerPod 0", spec(resources={"gpusPerPod": 0}), "spec.resources.gpusPerPod"),
    ("fit gpus 0.3", spec(resources=GPU, models={"NN_TORCH": [{"resources": {"gpus": 0.3}}]}),
     "spec.models.NN_TORCH[0].resources.gpus"),
    ("fit gpus 1.5", spec(resources=GPU, models={"NN_TORCH": [{"resources": {"gpus": 1.5}}]}),
     "spec.models.NN_TORCH[0].resources.gpus"),
    ("fit cpus 0", spec(models={"GBM": [{"resources": {"cpus": 0}}]}), "spec.models.GBM[0].resources.cpus"),
    ("GPU with no GPU budget", spec(models={"GBM": [{}, {"resources": {"gpus": 1}}]}),
     "spec.models.GBM[1].resources.gpus"),
    ("GBM on two GPUs", spec(resources=GPU, models={"GBM": [{"resources": {"gpus": 2}}]}),
     "spec.models.GBM[0].resources.gpus"),
    ("one process, two GPUs", spec(resources=GPU, models={"NN_TORCH": [{"resources": {"gpus": 2}}]}),
     "spec.models.NN_TORCH[0].resources.gpus"),
    ("fit cpus above budget", spec(models={"GBM": [{"resources": {"cpus": 9}}]}),
     "spec.models.GBM[0].resources.cpus"),
    ("fit gpus above bagged model", spec(resources={"cpus": 8, "gpus": 4},
     bagging={"folds": 2, "resources": {"gpus": 1}},
     models={"NN_TORCH": [{"resources": {"gpus": 2, "cpus": 2}, "processes": 2}]}),
     "spec.models.NN_TORCH[0].resources.gpus"),
    ("bagged cpus above budget", spec(bagging={"folds": 2, "resources": {"cpus": 16}}), "spec.bagging.resources.cpus"),
    ("bagged gpus above budget", spec(resources=GPU, bagging={"folds": 2, "resources": {"gpus": 4}}),
     "spec.bagging.resources.gpus"),
    ("one fold", spec(bagging={"folds": 1}), "spec.bagging"),
    ("zero sets", spec(bagging={"folds": 2, "sets": 0}), "spec.bagging.sets"),
    ("DDP GBM on GPU", spec(resources=GPU, models={"GBM": [{"processes": 2, "resources": {"gpus": 1}}]}),
     "spec.models.GBM[0].processes"),
    ("DDP with a GPU fraction", spec(resources=GPU, models={"NN_TORCH": [{"processes": 2, "resources": {"gpus": 1}}]}),
     "spec.models.NN_TORCH[0].resources.gpus"),
    ("DDP without CPUs for each process", spec(models={"NN_TORCH": [{"processes": 4, "resources": {"cpus": 2}}]}),
     "spec.models.NN_TORCH[0].resources.cpus"),
    ("processes 0", spec(models={"NN_TORCH": [{"processes": 0}]}), "spec.models.NN_TORCH[0].processes"),
    ("unknown searcher", spec(tuning={"searcher": "bayes"}), "spec.tuning.searcher"),
    ("zero trials", spec(tuning={"trials": 0}), "spec.tuning.trials"),
    ("search dimension with two kinds", spec(tuning={"searchSpace": {"GBM": {"num_leaves": {"int": [1, 2],
     "uniform": [0, 1]}}}}), "spec.tuning.searchSpace.GBM.num_leaves"),
    ("search bounds reversed", spec(tuning={"searchSpace": {"GBM": {"lr": {"logUniform": [0.3, 0.01]}}}}),
     "spec.tuning.searchSpace.GBM.lr"),
    ("search space for an unknown model", spec(tuning={"searchSpace": {"FASTAI": {"depth": {"int": [2, 8]}}}}),
     "spec.tuning.searchSpace.FASTAI"),
    ("misspelt LightGBM parameter", spec(models={"GBM": [{"hyperparameters": {"num_leafs": 40}}]}),
     "spec.models.GBM[0].hyperparameters.num_leafs"),
    ("misspelt XGBoost parameter", spec(models={"XGB": [{"hyperparameters": {"colsample_by_tree": 0.8}}]}),
     "spec.models.XGB[0].hyperparameters.colsample_by_tree"),
    ("scikit-learn's XGBoost round count", spec(models={"XGB": [{"hyperparameters": {"n_estimators": 500}}]}),
     "spec.models.XGB[0].hyperparameters.n_estimators"),
    ("misspelt MLP setting", spec(models={"NN_TORCH": [{"hyperparameters": {"lr": 0.01}}]}),
     "spec.models.NN_TORCH[0].hyperparameters.lr"),
    ("AutoGluon's TabM name", spec(models={"GBM": [{}], "TABM": [{"hyperparameters": {"tabm_k": 8}}]}),
     "spec.models.TABM[0].hyperparameters.tabm_k"),
    ("AutoGluon's 'auto' for a TabM size", spec(models={"TABM": [{"hyperparameters": {"n_blocks": "auto"}}]}),
     "spec.models.TABM[0].hyperparameters.n_blocks"),
    ("negative tree patience rate", spec(models={"GBM": [{"hyperparameters": {"adaptive_patience": -0.3}}]}),
     "spec.models.GBM[0].hyperparameters.adaptive_patience"),
    ("CatBoost patience as a word", spec(models={"CAT": [{"hyperparameters": {"early_stopping_rounds": "auto"}}]}),
     "spec.models.CAT[0].hyperparameters.early_stopping_rounds"),
    ("XGB level limit as a word", spec(models={"XGB": [{"hyperparameters": {"max_native_levels": "many"}}]}),
     "spec.models.XGB[0].hyperparameters.max_native_levels"),
    ("negative GBM level limit", spec(models={"GBM": [{"hyperparameters": {"max_native_levels": -1}}]}),
     "spec.models.GBM[0].hyperparameters.max_native_levels"),
    ("GBM comparing ways as a word", spec(models={"GBM": [{"hyperparameters": {"compare_native_levels": "no"}}]}),
     "spec.models.GBM[0].hyperparameters.compare_native_levels"),
    ("MLP's AMP as a string", spec(models={"NN_TORCH": [{"hyperparameters": {"amp": "yes"}}]}),
     "spec.models.NN_TORCH[0].hyperparameters.amp"),
    ("MLP search space choosing a loss it lacks", spec(tuning={"searchSpace": {"NN_TORCH": {"regression_loss":
     {"choice": ["mse", "quantile"]}}}}), "spec.tuning.searchSpace.NN_TORCH.regression_loss"),
    ("TabM dropout range reaching 1", spec(models={"TABM": [{}]}, tuning={"searchSpace": {"TABM": {"dropout_prob":
     {"uniform": [0.1, 1.0]}}}}), "spec.tuning.searchSpace.TABM.dropout_prob"),
    ("MLP search space over a name it lacks", spec(tuning={"searchSpace": {"NN_TORCH": {"epochs": {"int": [5, 9]}}}}),
     "spec.tuning.searchSpace.NN_TORCH.epochs"),
    ("config's search space over a name it lacks", spec(models={"TABM": [{"name": "T"}]},
     tuning={"searchSpace": {"T": {"num_leaves": {"int": [8, 64]}}}}), "spec.tuning.searchSpace.T.num_leaves"),
    ("negative ensemble", spec(ensemble={"size": -1}), "spec.ensemble.size"),
    ("zero time limit", spec(timeLimitSeconds=0), "spec.timeLimitSeconds"),
    ("unknown gpu policy", spec(onGpuUnavailable="Ignore"), "spec.onGpuUnavailable"),
    ("negative backoff", spec(runPolicy={"backoffLimit": -1}), "spec.runPolicy.backoffLimit"),
    ("bad toleration effect", spec(scheduling={"tolerations": [{"effect": "Never"}]}),
     "spec.scheduling.tolerations[0].effect"),
    ("CPU DDP wider than GPU ranks", spec(resources={"cpus": 8, "gpus": 1}, models={"GBM": [{"resources": {"gpus": 1}}],
     "NN_TORCH": [{"processes": 4, "resources": {"cpus": 4, "gpus": 0}}]}), "spec.models.NN_TORCH[0].processes"),
    ("rank wider than cpusPerPod", spec(resources={"cpus": 8, "cpusPerPod": 2}, models={"GBM": [{}]}),
     "spec.resources.cpusPerPod"),
    ("bad job name", merge(base(), {"metadata": {"name": "Big_Name"}}), "metadata.name"),
    ("env names tabjob's rendezvous", spec(env=[{"name": "MASTER_ADDR", "value": "x"}]), "spec.env[0].name"),
    ("env under TABJOB_", spec(env=[{"name": "TABJOB_OUTPUT", "value": "/tmp"}]), "spec.env[0].name"),
    ("env from the downward API", spec(env=[{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]),
     "spec.env[0].valueFrom.fieldRef"),
    ("envFrom prefix under PET_", spec(envFrom=[{"prefix": "PET_", "secretRef": {"name": "s"}}]),
     "spec.envFrom[0].prefix"),
    ("service account not a name", spec(serviceAccountName="s3 reader"), "spec.serviceAccountName"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "doc", "field"), CATALOGUE, ids=[c[0] for c in CATALOGUE])
def test_invalid_manifest_names_its_field(case: str, doc: Any, field: str) -> None:
    with pytest.raises(SpecError) as info:
        plan_job(parse_manifest(doc))
    paths = [p for p, _ in info.value.problems]
    assert field in paths, f"{case}: expected an error at {field}, got {info.value.problems}"
    assert all(msg for _, msg in info.value.problems), "every problem says what would be valid"


def test_catalogue_is_large_enough() -> None:
    assert len(CATALOGUE) >= 30


def test_every_problem_is_reported_not_just_the_first() -> None:
    doc = spec(resources={"cpus": 0, "gpus": 0.3}, bagginng={})
    with pytest.raises(SpecError) as info:
        parse_manifest(doc)
    assert {p for p, _ in info.value.problems} >= {"spec.resources.cpus", "spec.resources.gpus", "spec.bagginng"}


# What must stay accepted: strictness refuses coercion, never the forms kubectl itself sends.
ACCEPTED: list[tuple[str, Any]] = [
    ("no output: defaults to /output", merge(base(), {"spec": {"output": None}})),
    ("output at the mount itself", spec(output={"path": "/output"})),
    ("a whole float is an integer, as in JSON", spec(resources={"cpus": 2.0})),
    ("an integer where a number goes", spec(resources={"cpus": 8, "gpus": 1})),
    ("empty queue and priority class mean none", spec(scheduling={"queueName": "", "priorityClassName": ""})),
    ("a key-less toleration with Exists", spec(scheduling={"tolerations": [{"operator": "Exists"}]})),
    ("NoExecute with seconds", spec(scheduling={"tolerations": [{"key": "a/b", "operator": "Exists",
     "effect": "NoExecute", "tolerationSeconds": 60}]})),
    ("a 50-character name", merge(base(), {"metadata": {"name": "a" * 50}})),
    ("the trees' fixed patience of before", spec(models={"GBM": [{"hyperparameters": {"early_stopping_rounds": 50,
     "adaptive_patience": 0}}], "CAT": [{"hyperparameters": {"early_stopping_rounds": 50, "adaptive_patience": 0}}]})),
    ("64 configs without an ensemble", spec(models={"GBM": [{"name": f"G{i}"} for i in range(64)]},
     ensemble={"size": 0})),
    ("a builtin split with a fitting metric", spec(data={"train": "sklearn://diabetes?split=train",
     "test": "sklearn://diabetes?split=test", "label": "target", "evalMetric": "r2"})),
    ("each allowed data volume", spec(data={"volume": {"csi": {"driver": "s3.csi.example", "volumeAttributes":
     {"bucket": "b"}}}})),
    ("a null field is absent, as the API server stores it", {**base(), "spec": {**base()["spec"],
     "bagging": {"folds": None, "sets": None}, "image": None, "output": None}}),
    ("an nfs output", spec(output={"volume": {"nfs": {"server": "nfs.example", "path": "/exports"}}})),
]  # fmt: skip


@pytest.mark.parametrize(("case", "doc"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_accepted(case: str, doc: Any) -> None:
    plan_job(parse_manifest(doc))


def test_plan_without_output(tmp_path: Any) -> None:
    import subprocess
    import sys

    from tabjob.api.manifest_yaml import dump_yaml

    f = tmp_path / "no-output.yaml"
    f.write_text(dump_yaml(merge(base(), {"spec": {"output": None}})))  # label "y" stays a string
    for verb in ("validate", "plan"):
        out = subprocess.run([sys.executable, "-m", "tabjob", verb, str(f)], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr


def test_an_unknown_hyperparameter_names_what_would_be_valid() -> None:
    """tabjob's networks ignore a name they do not read and LightGBM only warns: a misspelt one would train the
    defaults without a word. A network's few settings are listed; LightGBM's 300 names give the closest."""
    doc = spec(models={"NN_TORCH": [{"hyperparameters": {"lr": 0.01, "num_layers": 3}}],
                       "GBM": [{"hyperparameters": {"num_leafs": 40, "lambda_l1": 0.5, "min_child_samples": 5}}],
                       "XGB": [{"hyperparameters": {"n_estimators": 500, "reg_lambda": 1.0, "colsample_by_tree": 1}}],
                       "TABM": [{"hyperparameters": {"lr": 0.01}}],
                       "CAT": [{"hyperparameters": {"depth": 6}}]})  # fmt: skip
    with pytest.raises(SpecError) as info:
        plan_job(parse_manifest(doc))
    assert sorted(info.value.problems) == [
        ("spec.models.GBM[0].hyperparameters.num_leafs",
         "LightGBM has no such parameter; did you mean num_leaf or num_leaves?"),
        ("spec.models.NN_TORCH[0].hyperparameters.lr",
         "PyTorch MLP has no such setting; use one of adaptive_patience, amp, batch_size, dropout_prob, gradient_clip, "
         "hidden_size, learning_rate, lr_plateau, lr_scaling, max_embedding_dim, num_epochs, num_layers, patience, "
         "regression_loss, skew_threshold, weight_decay"),
        ("spec.models.TABM[0].hyperparameters.lr", "AutoGluon's name; tabjob's TabM (PyTorch) calls it learning_rate"),
        ("spec.models.XGB[0].hyperparameters.colsample_by_tree",
         "XGBoost has no such parameter; did you mean colsample_bytree or colsample_bylevel?"),
        ("spec.models.XGB[0].hyperparameters.n_estimators",
         "AutoGluon's name; tabjob's XGBoost calls it num_boost_round"),
    ]  # fmt: skip


def test_a_network_setting_names_the_values_it_takes() -> None:
    """A value the network cannot read fails the first fit in a pod otherwise (int("auto")); the planner refuses it
    with what the setting takes, and a continuous range over a whole-number setting is fine (read truncated)."""
    doc = spec(models={"TABM": [{"hyperparameters": {"n_blocks": "auto", "batch_size": "auto", "k": 8.0,
                                                     "arch_type": "tabm-packed", "share_batches": "no"}}],
                       "NN_TORCH": [{"hyperparameters": {"lr_scaling": "cube", "dropout_prob": 0.2}}]},
               tuning={"searchSpace": {"TABM": {"d_block": {"uniform": [64.5, 300.2]},
                                                "n_bins": {"int": [1, 16]}}}})  # fmt: skip
    with pytest.raises(SpecError) as info:
        plan_job(parse_manifest(doc))
    assert sorted(info.value.problems) == [
        ("spec.models.NN_TORCH[0].hyperparameters.lr_scaling",
         "'cube' is not one of linear, sqrt, none; lr_scaling takes one of linear, sqrt, none"),
        ("spec.models.TABM[0].hyperparameters.arch_type",
         "'tabm-packed' is not one of tabm, tabm-mini; arch_type takes one of tabm, tabm-mini"),
        ("spec.models.TABM[0].hyperparameters.n_blocks",
         "'auto' is not a whole number; n_blocks takes a whole number >= 1"),
        ("spec.models.TABM[0].hyperparameters.share_batches",
         "'no' is not true or false; share_batches takes true or false"),
        ("spec.tuning.searchSpace.TABM.n_bins", "1 is below 2; n_bins takes a whole number >= 2"),
    ]  # fmt: skip
