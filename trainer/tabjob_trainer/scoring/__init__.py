"""Batch scoring: a dataset scored by a finished run's `Predictor`, sharded, one committed Parquet part per shard.

`tabjob score RUN DATA --output OUT` runs it on this machine (`score`), and a TabularPrediction's pods run it as
`python -m tabjob_trainer.scoring` (``__main__``), one share of the shards each. The pieces:

- ``shards``: pure: a dataset's pieces (row groups, CSV files) -> shards balanced by rows, assigned round-robin;
- ``store``: the output prefix, its plan and success marker, and the commit protocol;
- ``preflight``: the checks that fail the whole prediction before any row is scored, and pod 0's claim;
- ``worker``: one pod's share, scored with the Predictor loaded once, committed shard by shard;
- ``server``: the pod's progress endpoint (a ``ScoringProgress``) for the operator;
- ``local``: ``score``, every shard on this machine.

This package's own module imports nothing: ``python -m tabjob_trainer.scoring`` imports it before ``__main__``
runs itself again with LightGBM's library preloaded (preload.py), and numpy, pandas and pyarrow loaded here would
load twice in every scoring pod. Import ``score`` from ``local`` and ``Request`` from ``preflight``.
"""
