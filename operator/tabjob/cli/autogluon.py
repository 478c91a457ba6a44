"""Turn an AutoGluon ``TabularPredictor(...).fit(...)`` keyword set into a TabularJob manifest.

Pure: a dict in, ``(manifest, notes)`` out, where notes say what could not be carried over and why.
"""

from __future__ import annotations

from typing import Any

from tabjob.api import API_VERSION, KIND
from tabjob.contracts.pod import DATA_DIR, OUTPUT_DIR
from tabjob.families import FAMILIES

# AutoGluon's hyperparameters keys tabjob trains, with the common aliases people write for them -> the family's key.
AUTOGLUON_KEYS = {name: f.key for f in FAMILIES.values() for name in f.autogluon_names}
_FAMILY_NAMES = " and ".join(f"{f.key} ({f.library})" for f in FAMILIES.values())
HANDLED = {
    "num_cpus", "num_gpus", "hyperparameters", "ag_args_fit", "num_bag_folds", "num_bag_sets",
    "ag_args_ensemble", "hyperparameter_tune_kwargs", "time_limit", "label", "eval_metric",
    "problem_type", "train_data", "tuning_data", "test_data", "path", "name", "presets", "num_stack_levels",
    "dynamic_stacking",
}  # fmt: skip
# AutoGluon's presets -> spec.preset (its quality presets; the others change what AutoGluon optimises for).
PRESET_NAMES = {
    "best_quality": "best", "best": "best", "extreme_quality": "best", "extreme": "best",
    "high_quality": "high", "high": "high", "good_quality": "high", "good": "high",
    "medium_quality": "medium", "medium": "medium",
}  # fmt: skip
METRIC_ALIASES = {"root_mean_squared_error": "rmse", "mean_absolute_error": "mae", "accuracy": "accuracy"}


def _resources(args: dict[str, Any], where: str, notes: list[str]) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    for src, dst in (("num_cpus", "cpus"), ("num_gpus", "gpus")):
        value = args.get(src)
        if value is None or value == "auto":
            continue
        out[dst] = int(value) if dst == "cpus" else value
    for key in sorted(set(args) - {"num_cpus", "num_gpus"}):
        notes.append(f"{where}.{key}: not carried over (tabjob reads only num_cpus and num_gpus there)")
    return out or None


def _model_configs(key: str, value: Any, fit_defaults: dict[str, Any] | None, notes: list[str]) -> list[dict]:
    configs = value if isinstance(value, list) else [value]
    out = []
    for i, cfg in enumerate(configs):
        cfg = dict(cfg or {})
        entry: dict[str, Any] = {}
        res = dict(fit_defaults or {})
        fit_args = cfg.pop("ag_args_fit", None)
        if fit_args:
            res.update(_resources(fit_args, f"hyperparameters.{key}[{i}].ag_args_fit", notes) or {})
        ag_args = cfg.pop("ag_args", None)
        if ag_args and "name_suffix" in ag_args:
            entry["name"] = f"{AUTOGLUON_KEYS[key]}{ag_args['name_suffix']}".replace(" ", "_")
        elif ag_args:
            notes.append(f"hyperparameters.{key}[{i}].ag_args: not carried over")
        if cfg.pop("ag_args_ensemble", None):
            notes.append(f"hyperparameters.{key}[{i}].ag_args_ensemble: per-model ensemble args not carried over")
        family = FAMILIES[AUTOGLUON_KEYS[key]]
        for theirs, ours in family.autogluon_renames:
            if theirs in cfg:
                cfg[ours] = cfg.pop(theirs)
        if family.settings is not None:  # tabjob's own networks: a name or a value they do not read is refused
            for name in sorted(cfg):
                where = f"hyperparameters.{key}[{i}].{name}"
                setting = family.settings.get(name)
                if setting is None:
                    cfg.pop(name)
                    notes.append(f"{where}: tabjob's {family.library} has no such setting; dropped")
                elif setting.problem(cfg[name]):
                    value = cfg.pop(name)  # AutoGluon's "auto" (its own choice) above all: tabjob's default applies
                    notes.append(f"{where}={value!r}: tabjob's {name} takes {setting.describe()}; its default applies")
        if cfg:
            entry["hyperparameters"] = cfg
        if res:
            entry["resources"] = res
        out.append(entry)
    return out


def _tuning(kwargs: Any, notes: list[str]) -> dict[str, Any] | None:
    if kwargs in (None, False):
        return None
    if isinstance(kwargs, str):
        if kwargs not in ("auto", "random"):
            notes.append(f"hyperparameter_tune_kwargs={kwargs!r}: tabjob searches randomly; using random")
        return {"searcher": "random", "scheduler": "local", "trials": 10}
    out: dict[str, Any] = {"searcher": "random", "scheduler": "local"}
    if kwargs.get("searcher") not in (None, "random", "auto"):
        notes.append(f"hyperparameter_tune_kwargs.searcher={kwargs['searcher']!r}: tabjob uses random search")
    if kwargs.get("scheduler") not in (None, "local"):
        notes.append(f"hyperparameter_tune_kwargs.scheduler={kwargs['scheduler']!r}: tabjob schedules locally")
    out["trials"] = int(kwargs.get("num_trials", 1))
    return out


def _preset(presets: Any, notes: list[str]) -> str | None:
    """AutoGluon's presets (a name or a list, later ones winning) -> spec.preset."""
    names = [presets] if isinstance(presets, str) else list(presets or [])
    chosen = None
    for given in names:
        if given in PRESET_NAMES:
            chosen = PRESET_NAMES[given]
            if given.startswith(("extreme", "good")):
                notes.append(f"presets={given!r}: tabjob's nearest is preset: {chosen}")
        else:
            notes.append(f"presets={given!r}: no tabjob equivalent (presets: {', '.join(sorted(set(PRESET_NAMES)))})")
    return chosen


def _stacking(fit: dict[str, Any], notes: list[str]) -> dict[str, Any] | None:
    """num_stack_levels -> spec.stacking.levels (one layer at most); tabjob's stack always has its holdout guard."""
    if fit.get("dynamic_stacking") is False:
        notes.append("dynamic_stacking=False: tabjob always guards its stack layer with a holdout")
    levels = fit.get("num_stack_levels")
    if levels is None:
        return None
    if not isinstance(levels, int) or levels < 0:
        notes.append(f"num_stack_levels={levels!r}: not a level count; the preset decides (spec.stacking left out)")
        return None
    if levels > 1:
        notes.append(f"num_stack_levels={levels}: tabjob stacks one layer; spec.stacking.levels is 1")
    return {"levels": min(levels, 1)}


def convert(fit: dict[str, Any], name: str = "from-autogluon") -> tuple[dict[str, Any], list[str]]:
    notes: list[str] = []
    for key in sorted(set(fit) - HANDLED):
        notes.append(f"{key}: not carried over (no TabularJob equivalent)")

    label = fit.get("label")
    if not label:
        notes.append("label: missing; set spec.data.label to the column to predict")
    train = fit.get("train_data")
    if not isinstance(train, str):
        notes.append("train_data: not a path; set spec.data.train to a CSV/Parquet path or URI")
        train = f"{DATA_DIR}/train.parquet"
    data: dict[str, Any] = {"train": train, "label": label or "label"}
    test = fit.get("test_data")
    if isinstance(test, str):
        data["test"] = test
    if fit.get("problem_type"):
        data["problemType"] = fit["problem_type"]
    if fit.get("eval_metric"):
        data["evalMetric"] = METRIC_ALIASES.get(fit["eval_metric"], fit["eval_metric"])

    budget: dict[str, Any] = {}
    if isinstance(fit.get("num_cpus"), int):
        budget["cpus"] = fit["num_cpus"]
    else:
        budget["cpus"] = 8
        notes.append("num_cpus: not given (or auto); the manifest asks for 8 CPUs, adjust spec.resources.cpus")
    if fit.get("num_gpus") not in (None, "auto"):
        budget["gpus"] = fit["num_gpus"]

    fit_defaults = _resources(fit.get("ag_args_fit") or {}, "ag_args_fit", notes)
    hyper = fit.get("hyperparameters") or {}
    if isinstance(hyper, str):
        notes.append(f"hyperparameters={hyper!r}: AutoGluon's named portfolio; tabjob trains its preset's instead")
        hyper = {}
    if not hyper and fit_defaults:
        notes.append("ag_args_fit: applies to named hyperparameters only; the preset's portfolio uses the budget")
    models: dict[str, list[dict]] = {}
    for key, value in hyper.items():
        if key not in AUTOGLUON_KEYS:
            notes.append(f"hyperparameters.{key}: tabjob trains {_FAMILY_NAMES} only; dropped")
            continue
        models.setdefault(AUTOGLUON_KEYS[key], []).extend(_model_configs(key, value, fit_defaults, notes))

    spec: dict[str, Any] = {"data": data, "output": {"path": f"{OUTPUT_DIR}/{name}"}, "resources": budget}
    if models:
        spec["models"] = models  # without: the preset's portfolio, as AutoGluon trains its own without them
    preset = _preset(fit.get("presets"), notes)
    if preset:
        spec["preset"] = preset
    if fit.get("num_bag_folds"):
        bagging: dict[str, Any] = {"folds": int(fit["num_bag_folds"])}
        if fit.get("num_bag_sets"):
            bagging["sets"] = int(fit["num_bag_sets"])
        ens = (fit.get("ag_args_ensemble") or {}).get("ag_args_fit")
        if ens:
            bag_res = _resources(ens, "ag_args_ensemble.ag_args_fit", notes)
            if bag_res:
                bagging["resources"] = bag_res
        spec["bagging"] = bagging
    elif fit.get("ag_args_ensemble"):
        notes.append("ag_args_ensemble: ignored because num_bag_folds is not set (no bagged models)")
    stacking = _stacking(fit, notes)
    if stacking is not None:
        spec["stacking"] = stacking
    tuning = _tuning(fit.get("hyperparameter_tune_kwargs"), notes)
    if tuning:
        spec["tuning"] = tuning
    if fit.get("time_limit"):
        spec["timeLimitSeconds"] = int(fit["time_limit"])
    manifest = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": spec}
    return manifest, notes
