"""``python -m bench.sharded_alone TRAIN FAMILY ROUNDS``: one fit in one process on the rows a sharded job's holdout
split gives, read by the sharded reader (bench/sharded_memory.py compares the sharded fit with it); prints its score,
rows per second and the process's peak memory (VmHWM)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tabjob_trainer.memory_probe import vm_hwm
from tabjob_trainer.metrics import score
from tabjob_trainer.models.base import FitContext
from tabjob_trainer.models.registry import family
from tabjob_trainer.sharded import rows
from tabjob_trainer.sharded.load import Alone
from tabjob_trainer.sharded.prepare import prepare_sharded
from tabjob_trainer.storage.datasets import open_dataset


def main(train: Path, key: str, rounds: int) -> dict[str, float]:
    data = prepare_sharded(open_dataset(str(train)), "label", "auto", "roc_auc", None, Alone())
    assert data.shard is not None
    fit_rows, val_rows = rows.split(data.shard.keys, 0, 0, None)
    ctx = FitContext(
        fit_id="alone",
        hyperparameters={"num_boost_round": rounds, "early_stopping_rounds": 0, "learning_rate": 0.1},
        seed=0,
        threads=1,
        device="cpu",
        problem=data.label.problem_type,
        n_classes=data.n_classes,
        metric=data.metric,
        feature_names=data.pre.feature_names,
        cardinalities=data.pre.cardinalities,
    )
    started = time.perf_counter()
    trained = family(key).fit(ctx, data.x.take(fit_rows), data.y[fit_rows], data.x.take(val_rows), data.y[val_rows])
    seconds = time.perf_counter() - started
    assert trained is not None
    pred = trained.model.predict(data.x.take(val_rows))
    value = score(data.metric, data.label.problem_type, data.y[val_rows], pred, data.n_classes)
    peak = vm_hwm() or 0
    return {
        "score": value,
        "fit_s": seconds,
        "rows_per_second": len(fit_rows) * rounds / seconds,
        "vmhwm_mib": peak / 2**20,
    }


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]))))
