"""families/ is the one place on the control side that names a model family, and everything derives from it."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from tabjob import families
from tabjob.api import ModelsSpec, TabularJobSpec
from tabjob.cli import autogluon
from tabjob.contracts.plan import ConfigPlan, FitPlan
from tabjob.planner import plan
from tabjob.planner.search_space import DEFAULT_SPACES

CONTROL_SIDE = Path(families.__file__).parents[1]  # operator/tabjob; families/__init__.py declares the families


def test_no_control_side_file_but_families_names_a_model_family() -> None:
    # Derived lists cannot drift: a family added to families/ reaches the spec, the CRD, the plan and the
    # planner's checks; a key written anywhere else would be a second declaration of it.
    keys = re.compile(r"\b(" + "|".join(map(re.escape, families.MODEL_KEYS)) + r")\b")
    named = [
        f"{path.relative_to(CONTROL_SIDE)}:{n}: {line.strip()}"
        for path in sorted(CONTROL_SIDE.rglob("*"))
        if path.is_file() and path.suffix in (".py", ".yaml", ".md", ".txt") and path != Path(families.__file__)
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if keys.search(line)
    ]
    assert named == []
    assert {"GBM", "NN_TORCH"} <= set(families.MODEL_KEYS)  # the pattern above is not vacuous


def test_every_control_side_list_comes_from_families() -> None:
    assert tuple(ModelsSpec.model_fields) == families.MODEL_KEYS
    for model in (ConfigPlan, FitPlan):
        assert typing.get_args(model.model_fields["key"].annotation) == families.MODEL_KEYS
    assert tuple(DEFAULT_SPACES) == families.MODEL_KEYS
    for key, fam in families.FAMILIES.items():
        assert {p: d.model_dump(by_alias=True, exclude_none=True) for p, d in DEFAULT_SPACES[key].items()} == dict(
            fam.search_space
        )
        assert all(autogluon.AUTOGLUON_KEYS[name] == key for name in fam.autogluon_names)


def test_the_defaults_portfolios_and_spaces_take_names_and_values_the_planner_accepts() -> None:
    # What tabjob itself trains must pass the checks a user's config gets: a network's defaults name exactly its
    # settings, each value one it takes; a tree family's defaults use its library's names.
    for key, facts in families.FAMILIES.items():
        names = facts.hyperparameter_names
        assert names is None or set(facts.defaults) <= names, key
        assert facts.effective({}) == dict(facts.defaults) and facts.effective(facts.defaults) == dict(facts.defaults)
        settings = facts.settings
        if settings is None:
            continue
        assert set(settings) == set(facts.defaults), key
        configs = [facts.defaults, *(cfg for _, cfg in facts.portfolio)]
        for name, value in ((n, v) for cfg in configs for n, v in cfg.items()):
            assert settings[name].problem(value) is None, (key, name, value)
        for name, dimension in facts.search_space.items():
            (values,) = dimension.values()
            assert all(settings[name].problem(v) is None for v in values), (key, name, values)


def test_every_fit_of_the_plan_carries_its_family_s_defaults_under_its_own_values() -> None:
    # The trainer fits with the plan's hyperparameters, so what `tabjob plan` shows is what trains.
    doc = {"data": {"train": "sklearn://iris", "label": "target"}, "resources": {"cpus": 2},
           "models": {"GBM": [{}, {"hyperparameters": {"num_leaves": 7}}], "TABM": [{"hyperparameters": {"k": 4}}]},
           "tuning": {"trials": 2}}  # fmt: skip
    p = plan(TabularJobSpec.model_validate(doc), "j")
    own = {("GBM", 0): {}, ("GBM_2", 0): {"num_leaves": 7}, ("TABM", 0): {"k": 4}}
    for fit in p.fits:
        facts = families.FAMILIES[fit.key]
        assert fit.hyperparameters.keys() >= facts.defaults.keys()
        if fit.trial == 0:
            assert fit.hyperparameters == facts.effective(own[(fit.model, 0)])
        else:  # a trial draws from the space; every other name keeps the config's value or the default
            kept = facts.effective(own[(fit.model, 0)])
            for name, value in fit.hyperparameters.items():
                assert name in facts.search_space or value == kept[name], (fit.id, name)


def test_from_autogluon_drops_the_network_settings_tabjob_lacks_and_says_so() -> None:
    """AutoGluon's MLP and TabM take settings tabjob's networks do not have; carried over, the planner would refuse
    the manifest, so they are dropped with a note and the rest is kept, under tabjob's name where it differs."""
    manifest, notes = autogluon.convert({
        "label": "y",
        "hyperparameters": {"NN_TORCH": {"num_epochs": 50, "activation": "relu"},
                            "TABM": {"tabm_k": 8, "lr": 0.001, "arch_type": "tabm-mini", "n_blocks": "auto",
                                     "num_emb_type": "pwl", "share_training_batches": False,
                                     "gradient_clipping_norm": "none"},
                            "GBM": {"extra_trees": True}, "XGB": {"n_estimators": 300, "max_depth": 8}},
    })  # fmt: skip
    models = manifest["spec"]["models"]
    assert models["NN_TORCH"] == [{"hyperparameters": {"num_epochs": 50}}]
    assert models["TABM"] == [
        {"hyperparameters": {"k": 8, "learning_rate": 0.001, "arch_type": "tabm-mini", "share_batches": False}}
    ]  # AutoGluon's names, renamed
    assert models["XGB"] == [{"hyperparameters": {"num_boost_round": 300, "max_depth": 8}}]  # its sklearn name
    assert models["GBM"] == [{"hyperparameters": {"extra_trees": True}}]  # LightGBM's own parameter: LightGBM's call
    assert "hyperparameters.NN_TORCH[0].activation: tabjob's PyTorch MLP has no such setting; dropped" in notes
    assert "hyperparameters.TABM[0].num_emb_type: tabjob's TabM (PyTorch) has no such setting; dropped" in notes
    assert (
        "hyperparameters.TABM[0].gradient_clip='none': tabjob's gradient_clip takes a number >= 0; its default applies"
    ) in notes
    # AutoGluon's "auto" leaves the choice to the model: tabjob's default is that choice (int("auto") fails a fit).
    assert (
        "hyperparameters.TABM[0].n_blocks='auto': tabjob's n_blocks takes a whole number >= 1; its default applies"
    ) in notes
