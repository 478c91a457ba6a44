"""`tabjob validate` on a local Parquet dataset: it reads the row groups' footers (never the rows), prints the
sharded reading and its memory estimate, and refuses a pod too small with both numbers. The planner's side of the
same check is tests/unit/test_sharding_plan.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tests.trainer.helpers import tabjob


def test_validate_reads_a_local_tables_footers_and_refuses_with_the_numbers(tmp_path: Path) -> None:
    table = tmp_path / "table"
    table.mkdir()
    rng = np.random.default_rng(0)
    for part in range(3):
        columns: dict[str, np.ndarray] = {f"x{j}": rng.normal(size=20_000) for j in range(20)}
        columns["target"] = rng.integers(0, 2, size=20_000)
        pq.write_table(pa.table(columns), table / f"part-{part}.parquet", row_group_size=5_000)
    manifest = tmp_path / "job.yaml"
    manifest.write_text(
        "apiVersion: tabjob.dev/v1alpha1\nkind: TabularJob\nmetadata: {name: big}\nspec:\n"
        f"  data: {{train: {table}, label: target}}\n"
        "  resources: {cpus: 3, cpusPerPod: 1, memory: 6Gi}\n"
        "  bagging: {folds: 3}\n"
        "  models: {GBM: [{processes: 3, resources: {cpus: 3}}]}\n"
    )
    ok = tabjob("validate", str(manifest))
    assert ok.returncode == 0, ok.stderr
    assert "reads sharded; estimated peak per pod:" in ok.stdout and "of 2,048 MiB" in ok.stdout
    manifest.write_text(manifest.read_text().replace("memory: 6Gi", "memory: 1200Mi"))
    refused = tabjob("validate", str(manifest))
    assert refused.returncode == 1
    assert "spec.resources.memory: the table (60,000 rows x 21 columns" in refused.stderr
    assert "above its memory limit of 400 MiB" in refused.stderr
    skipped = tabjob("validate", "--no-data", str(manifest))
    assert skipped.returncode == 0 and "memory not checked: --no-data" in skipped.stdout
