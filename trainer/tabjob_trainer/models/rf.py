"""RF: scikit-learn's random forest (and, for XT, extremely randomized trees: ``models/xt.py`` reuses this).

String columns enter as their category codes (missing and unseen ones as NaN, which scikit-learn's trees route
on their own), as AutoGluon's forests take them. A saved forest is its trees' node arrays in one ``.npz`` and a JSON
file: loading it rebuilds scikit-learn's ``Tree`` objects from plain arrays, so no pickle is ever read.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.ensemble import ExtraTreesClassifier, ExtraTreesRegressor, RandomForestClassifier, RandomForestRegressor
from sklearn.tree._tree import Tree

from tabjob import families
from tabjob.families import ModelFamily
from tabjob_trainer.models.base import Family, FitContext, Trained
from tabjob_trainer.models.gbm import to_matrix
from tabjob_trainer.preprocess import Encoded
from tabjob_trainer.problem import ProblemType

_STATE = ("max_depth", "node_count", "nodes", "values")
_ESTIMATORS = {
    ("RF", False): RandomForestClassifier,
    ("RF", True): RandomForestRegressor,
    ("XT", False): ExtraTreesClassifier,
    ("XT", True): ExtraTreesRegressor,
}


class ForestModel:
    """The trees' own arrays: predictions are the mean of every tree's, as scikit-learn's forests predict."""

    def __init__(self, trees: list[Tree], classes: list[int], n_classes: int, problem: str, n_features: int) -> None:
        self.trees, self.classes, self.n_classes = trees, classes, n_classes
        self.problem, self.n_features = problem, n_features

    def predict(self, x: Encoded) -> np.ndarray:
        matrix = np.ascontiguousarray(to_matrix(x), dtype=np.float32)
        if self.problem == "regression":
            return np.asarray(np.mean([t.predict(matrix)[:, 0] for t in self.trees], axis=0), dtype=np.float64)
        proba = np.zeros((len(matrix), len(self.classes)))
        for tree in self.trees:
            leaf = tree.predict(matrix)
            proba += leaf / np.maximum(leaf.sum(axis=1, keepdims=True), 1e-300)
        proba /= len(self.trees)
        full = np.zeros((len(matrix), self.n_classes))
        full[:, self.classes] = proba  # a class missing from the fit's rows gets no probability
        return full[:, 1] if self.problem == "binary" else full

    def save(self, directory: Path) -> None:
        arrays = {f"{i}.{k}": np.asarray(v) for i, t in enumerate(self.trees) for k, v in t.__getstate__().items()}
        buf = io.BytesIO()
        np.savez(buf, **arrays)  # type: ignore[arg-type]
        (directory / "forest.npz").write_bytes(buf.getvalue())
        meta = {"trees": len(self.trees), "classes": self.classes, "n_classes": self.n_classes,
                "n_features": self.n_features}  # fmt: skip
        (directory / "forest.json").write_text(json.dumps(meta))

    @classmethod
    def load(cls, directory: Path, problem: ProblemType) -> ForestModel:
        meta = json.loads((directory / "forest.json").read_text())
        outputs = np.array([len(meta["classes"]) if problem != "regression" else 1], dtype=np.intp)
        trees = []
        with np.load(directory / "forest.npz", allow_pickle=False) as arrays:
            for i in range(int(meta["trees"])):
                tree = Tree(int(meta["n_features"]), outputs, 1)
                state = {k: arrays[f"{i}.{k}"] for k in _STATE}
                tree.__setstate__(
                    {**state, "max_depth": int(state["max_depth"]), "node_count": int(state["node_count"])}
                )
                trees.append(tree)
        return cls(trees, [int(c) for c in meta["classes"]], int(meta["n_classes"]), problem, int(meta["n_features"]))


def fit_forest(
    facts: ModelFamily, ctx: FitContext, train: Encoded, y_train: np.ndarray, val: Encoded, y_val: np.ndarray
) -> Trained | None:
    if ctx.distributed:
        raise ValueError(f"{facts.key} trains one fit per process: its trees use the fit's threads")
    note = None
    if ctx.device != "cpu":
        note = ctx.cpu_instead(f"{facts.library} trains on the CPU only")
    hp = facts.effective(ctx.hyperparameters)
    regression = ctx.problem == "regression"
    estimator: Any = _ESTIMATORS[(facts.key, regression)](
        **hp, n_jobs=max(1, ctx.threads), random_state=ctx.seed % (2**32)
    )
    matrix = to_matrix(train)
    estimator.fit(matrix, y_train)
    classes = [] if regression else [int(c) for c in estimator.classes_]
    trees = [e.tree_ for e in estimator.estimators_]
    model = ForestModel(trees, classes, ctx.n_classes, ctx.problem, matrix.shape[1])
    importance = estimator.feature_importances_
    return Trained(
        model=model,
        device="cpu",
        fallback=note is not None,
        note=note,
        importance={n: float(g) for n, g in zip(ctx.feature_names, importance, strict=False)},
        best_iteration=len(trees),
    )


def fit(ctx: FitContext, train: Encoded, y_train: np.ndarray, val: Encoded, y_val: np.ndarray) -> Trained | None:
    return fit_forest(families.RF, ctx, train, y_train, val, y_val)


FAMILY = Family(facts=families.RF, fit=fit, load=ForestModel.load)
