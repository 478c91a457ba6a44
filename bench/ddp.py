"""DDP: a 2-rank gloo MLP fit against one process with 2 threads, in training samples per second.

Both through `tabjob run`: NN_TORCH with processes: 2 (DistributedDataParallel over gloo, 1 thread per rank)
against processes: 1 with 2 threads. A fixed number of epochs (patience = epochs) so both do the same work;
samples/s = training rows x epochs run / fit seconds (includes the per-epoch validation on the leader).
"""

from __future__ import annotations

from pathlib import Path

from bench.common import job, records, save, synthetic, tabjob_run

ROWS, COLS, EPOCHS, REPEATS = 100_000, 30, 4, 2


def main() -> None:
    work = Path("/tmp/tabjob-bench/ddp")
    work.mkdir(parents=True, exist_ok=True)
    data = work / "train.parquet"
    if not data.exists():
        synthetic(ROWS, COLS, seed=2).to_parquet(data)
    hp = {"num_epochs": EPOCHS, "patience": EPOCHS, "batch_size": 512, "hidden_size": 256, "lr_scaling": "sqrt"}
    result: dict[str, object] = {"rows": ROWS, "cols": COLS, "epochs": EPOCHS, "batch_size_per_rank": 512}
    for _ in range(REPEATS):  # alternate, so drift in machine load hits both alike; keep each one's best
        variants = (("one_process_2threads", 1, 2), ("ddp_2ranks_gloo", 2, 2), ("one_process_1thread", 1, 1))
        for name, processes, cpus in variants:
            # The 1-thread run shows what a second thread buys inside one process, to explain the ratio.
            doc = job(
                str(data), {"NN_TORCH": [{"processes": processes, "hyperparameters": hp}]}, resources={"cpus": cpus}
            )
            wall, out = tabjob_run(doc, work, name)
            (rec,) = records(out)
            epochs = len(rec.curve["val"])
            assert rec.rows_train is not None, rec
            run = {
                "wall_seconds": wall,
                "fit_seconds": rec.fit_time,
                "samples_per_second": rec.rows_train * epochs / rec.fit_time,
                "score_val": rec.score_val,
                "ranks": rec.ranks,
            }
            best = result.get(name)
            if best is None or run["samples_per_second"] > best["samples_per_second"]:  # type: ignore[index]
                result[name] = run
    one = result["one_process_2threads"]["samples_per_second"]  # type: ignore[index]
    two = result["ddp_2ranks_gloo"]["samples_per_second"]  # type: ignore[index]
    result["ratio"] = two / one
    result["threads_speedup_in_one_process"] = one / result["one_process_1thread"]["samples_per_second"]  # type: ignore[index]
    save("ddp", result)


if __name__ == "__main__":
    main()
