"""`tabjob validate`, `tabjob plan` and `tabjob from-autogluon` as a user runs them (real subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def tabjob(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tabjob", *args], capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_every_example_validates_and_plans() -> None:
    assert len(EXAMPLES) >= 6
    out = tabjob("validate", *map(str, EXAMPLES))
    assert out.returncode == 0, out.stderr
    assert out.stdout.count(": valid: ") == len(EXAMPLES)
    for example in EXAMPLES:
        plan = tabjob("plan", str(example), "--output", "json")
        assert plan.returncode == 0, plan.stderr
        data = json.loads(plan.stdout)
        assert {"pods", "worldSize", "concurrency", "peak", "requested", "fits", "warnings"} <= set(data)
        assert {"name", "cpus", "gpus", "memory", "procs"} <= set(data["pods"][0])
        assert {"model", "trial", "fold", "cpus", "gpus", "rank", "device"} <= set(data["fits"][0])
        assert set(data["concurrency"]) == {"trials", "folds", "fits"}


def test_plan_table_tells_the_story() -> None:
    out = tabjob("plan", str(ROOT / "examples" / "autogluon-tutorial.yaml"))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "1 pod(s), 2 torchrun rank(s)" in text
    assert "4 fit(s) at once (2 trial(s) x 2 fold(s))" in text
    assert "unused budget 16 CPU / 2 GPU" in text
    assert "warning:" in text


def test_plan_shows_each_config_s_share_of_a_time_limit(tmp_path: Path) -> None:
    doc = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    doc["spec"]["models"] = {"GBM": [{}], "CAT": [{}, {"name": "C2"}, {"name": "C3"}, {"name": "C4"}]}
    doc["spec"].pop("timeLimitSeconds", None)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert "may use of the time left" not in tabjob("plan", str(path)).stdout  # no time limit, nothing to share
    doc["spec"]["timeLimitSeconds"] = 120
    path.write_text(yaml.safe_dump(doc))
    out = tabjob("plan", str(path))
    assert out.returncode == 0, out.stderr
    rows = {line.split("│")[2].strip(): line.split("│")[-2].strip() for line in out.stdout.splitlines()
            if line.count("│") > 8}  # fmt: skip
    # Three folds on two slots: configs pair into rounds. GBM's round ends with CAT, the last family's first config,
    # so it has it all; after it a turn's worth each (two families: a round of two has it all), and the last config
    # all that is left.
    assert rows == {
        "GBM": "all, with #1", "CAT": "with #0", "C2 (CAT)": "all, with #3", "C3 (CAT)": "with #2", "C4 (CAT)": "all"
    }, out.stdout  # fmt: skip
    # Two folds on two slots leave no slot idle: every config is its own round, with its own share.
    doc["spec"]["bagging"] = {"folds": 2}
    path.write_text(yaml.safe_dump(doc))
    out = tabjob("plan", str(path))
    rows = {line.split("│")[2].strip(): line.split("│")[-2].strip() for line in out.stdout.splitlines()
            if line.count("│") > 8}  # fmt: skip
    # GBM shares with CAT, the last family's first config, which has it all; after it a turn's worth (two families),
    # and the last config all that is left.
    assert rows == {"GBM": "1/2", "CAT": "all", "C2 (CAT)": "1/2", "C3 (CAT)": "1/2", "C4 (CAT)": "all"}, out.stdout


def test_plan_shows_what_every_fit_trains_with_defaults_included(tmp_path: Path) -> None:
    # A config that names no hyperparameters trains its family's defaults, and `tabjob plan` says which: before,
    # the plan showed {} while the pod trained LightGBM with learning rate 0.05 and 1,000 rounds.
    doc = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    doc["spec"]["models"] = {"GBM": [{}, {"name": "fast", "hyperparameters": {"learning_rate": 0.2}}]}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(doc))
    data = json.loads(tabjob("plan", str(path), "--output", "json").stdout)
    defaults = {"learning_rate": 0.05, "num_leaves": 31, "feature_fraction": 0.9, "min_data_in_leaf": 20,
                "num_boost_round": 1000, "early_stopping_rounds": 300, "adaptive_patience": 0.3,
                "max_native_levels": 32, "compare_native_levels": True}  # fmt: skip
    assert {f["model"]: f["hyperparameters"] for f in data["fits"]} == {
        "GBM": defaults,
        "fast": {**defaults, "learning_rate": 0.2},
    }
    table = tabjob("plan", str(path)).stdout
    assert "learning_rate=0.05, num_leaves=31, feature_fraction=0.9" in table
    assert "learning_rate=0.2, num_leaves=31" in table


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("- just\n- a list\n", "a TabularJob manifest is a mapping"),
        ("apiVersion: v1\nkind: TabularJob\nspec: {}\n", "apiVersion: must be tabjob.dev/v1alpha1"),
        ("apiVersion: tabjob.dev/v1alpha1\nkind: Job\n", "kind: must be TabularJob"),
        ("spec: [unclosed\n", "not valid YAML at line"),
        ("", "holds no YAML document"),
    ],
)
def test_validate_reports_without_traceback(tmp_path: Path, content: str, says: str) -> None:
    f = tmp_path / "job.yaml"
    f.write_text(content)
    out = tabjob("validate", str(f))
    assert out.returncode == 1
    assert says in out.stderr
    assert "Traceback" not in out.stderr + out.stdout


def test_validate_names_every_field_and_the_file(tmp_path: Path) -> None:
    doc = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    doc["spec"]["bagginng"] = {"folds": 2}
    doc["spec"]["resources"]["gpus"] = 0.3
    f = tmp_path / "typo.yaml"
    f.write_text(yaml.safe_dump(doc))
    out = tabjob("validate", str(f), str(ROOT / "examples" / "quickstart.yaml"))
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert any(line.startswith(f"{f}: spec.bagginng: unknown field") for line in lines)
    assert any(line.startswith(f"{f}: spec.resources.gpus:") for line in lines)
    assert "quickstart.yaml: valid" in out.stdout  # the good file is still checked


def test_unreadable_file(tmp_path: Path) -> None:
    out = tabjob("validate", str(tmp_path / "missing.yaml"))
    assert out.returncode == 1 and "cannot read the file" in out.stderr and "Traceback" not in out.stderr
    out = tabjob("plan", str(tmp_path / "missing.yaml"))
    assert out.returncode == 1 and "cannot read the file" in out.stderr and "Traceback" not in out.stderr


def test_planner_errors_in_plan_verb(tmp_path: Path) -> None:
    doc = yaml.safe_load((ROOT / "examples" / "gbm-cpu-and-gpu.yaml").read_text())
    doc["spec"]["models"]["GBM"][1]["resources"]["gpus"] = 2
    f = tmp_path / "two-gpu-gbm.yaml"
    f.write_text(yaml.safe_dump(doc))
    out = tabjob("plan", str(f))
    assert out.returncode == 1
    assert "spec.models.GBM[1].resources.gpus: GBM (LightGBM) trains on one device" in out.stderr


def test_from_autogluon_tutorial_round_trip(tmp_path: Path) -> None:
    fit = {
        "label": "class",
        "train_data": "/data/adult/train.parquet",
        "num_cpus": 32,
        "num_gpus": 4,
        "hyperparameters": {"NN_TORCH": {}, "CAT": {}},
        "num_bag_folds": 2,
        "ag_args_ensemble": {"ag_args_fit": {"num_cpus": 10, "num_gpus": 2}},
        "ag_args_fit": {"num_cpus": 4, "num_gpus": 0.5},
        "hyperparameter_tune_kwargs": {"searcher": "random", "scheduler": "local", "num_trials": 2},
        "presets": "best_quality",
    }
    src = tmp_path / "fit.json"
    src.write_text(json.dumps(fit))
    out = tabjob("from-autogluon", str(src), "--name", "adult")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""  # CAT, NN_TORCH and the preset all carried over
    doc = yaml.safe_load(out.stdout)
    assert doc["spec"]["preset"] == "best" and list(doc["spec"]["models"]) == ["NN_TORCH", "CAT"]
    manifest = tmp_path / "adult.yaml"
    manifest.write_text(out.stdout)
    plan = json.loads(tabjob("plan", str(manifest), "-o", "json").stdout)
    assert plan["concurrency"] == {"trials": 2, "folds": 2, "fits": 4}
    assert plan["peak"] == {"cpus": 16, "gpus": 2.0}


def test_from_autogluon_gbm_side_by_side(tmp_path: Path) -> None:
    fit = {
        "label": "y",
        "num_cpus": 8,
        "num_gpus": 1,
        "hyperparameters": {"GBM": [{"ag_args_fit": {"num_gpus": 0}}, {"ag_args_fit": {"num_gpus": 1}}]},
    }
    src = tmp_path / "fit.yaml"
    src.write_text(yaml.safe_dump(fit))
    out = tabjob("from-autogluon", str(src))
    assert out.returncode == 0, out.stderr
    doc = yaml.safe_load(out.stdout)
    assert doc["spec"]["models"]["GBM"] == [{"resources": {"gpus": 0}}, {"resources": {"gpus": 1}}]
    assert "train_data: not a path" in out.stderr
